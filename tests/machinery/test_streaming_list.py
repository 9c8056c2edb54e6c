"""The streaming list (``sendInitialEvents``): one watch that lists, then keeps watching.

Scripted source on a fake clock: initial ADDED events up to the ``initial-events-end``
bookmark are a list (synced there, stale keys deleted), later events a watch on the same
stream; unannotated initial objects are dropped undecoded only while nothing of the scope
is cached; a server that refuses the request (422) makes the informer list in pages from
then on; a stream cut before its bookmark is a failed list, one cut after it a failed watch.
"""

from __future__ import annotations

import json
from typing import Any

import pytest

from lifecycle_controller.controller.watch.informers import InformerSettings
from lifecycle_controller.controller.watch.reflector import Informer, WatchEnd
from lifecycle_controller.kube import ApiError, Forbidden, TransportError
from tests.doubles.fakeclock import FakeClock
from tests.machinery.test_informers import (
    ANNOTATION,
    Harness,
    bookmark,
    error,
    event,
    meta,
    page,
    run_until_parked,
    stop,
)

STREAMING = InformerSettings(page_size=2, streaming_list=True)


def end_of_initial_events(rv: str) -> dict[str, Any]:
    metadata = {"resourceVersion": rv, "annotations": {"k8s.io/initial-events-end": "true"}}
    return {"type": "BOOKMARK", "object": {"kind": "ConfigMap", "metadata": metadata}}


@pytest.fixture
def h(clock: FakeClock) -> Harness:
    return Harness(clock)


def streaming(h: Harness) -> Informer:
    return h.informer(settings=STREAMING)


async def test_initial_events_are_the_list_and_the_stream_goes_on_as_the_watch(
    h: Harness,
) -> None:
    informer = streaming(h)
    h.source.streams.append(
        [
            event("ADDED", meta("a", "5", **{ANNOTATION: "1h"})),
            event("ADDED", meta("plain", "6")),
            bookmark("7"),  # an ordinary bookmark is not the end of the list
            event("ADDED", meta("c", "7", **{ANNOTATION: "2h"})),
            end_of_initial_events("10"),
            event("MODIFIED", meta("a", "11", **{ANNOTATION: "3h"})),
            event("ADDED", meta("d", "12", **{ANNOTATION: "4h"})),
        ]
    )
    assert await informer.stream_once() is WatchEnd.CLOSED
    assert informer.synced
    assert informer.resource_version == "12"
    assert h.recorder.summary() == [
        ("add", "a", None, "5"),
        ("add", "c", None, "7"),
        ("update", "a", "5", "11"),
        ("add", "d", None, "12"),
    ]
    assert h.source.list_calls == []
    assert h.source.watch_calls == []
    assert h.metrics.relists == 0
    assert h.metrics.events == ["MODIFIED", "ADDED"]  # initial events are a list, not events
    # The unannotated initial object was never decoded; everything after the list was.
    assert [json.loads(line)["object"]["metadata"]["name"] for line in h.source.undecoded] == [
        "plain"
    ]


async def test_a_streaming_relist_deletes_what_is_gone_and_decodes_every_line(
    h: Harness,
) -> None:
    informer = streaming(h)
    h.source.streams.extend(
        [
            [
                event("ADDED", meta("a", "5", **{ANNOTATION: "1h"})),
                event("ADDED", meta("b", "6", **{ANNOTATION: "1h"})),
                end_of_initial_events("10"),
            ],
            [
                # "a" lost its annotation while nobody watched; "b" is gone.
                event("ADDED", meta("a", "15")),
                end_of_initial_events("20"),
            ],
        ]
    )
    await informer.stream_once()
    h.recorder.events.clear()
    await informer.stream_once()
    assert sorted(h.recorder.summary()) == [("delete", "b", "6", None), ("update", "a", "5", "15")]
    assert h.cache.count(informer.resource) == 0
    assert h.metrics.relists == 1
    assert h.source.undecoded == []  # the scope had cached keys: every line mattered


async def test_a_server_without_streaming_lists_is_listed_in_pages_from_then_on(
    h: Harness,
) -> None:
    h.source.lists.extend([page("10", meta("a", "5", **{ANNOTATION: "1h"})), page("12")])
    h.source.watches.append([error(410)])  # the history is gone: relist (in pages again)
    task = await run_until_parked(h, streaming(h))
    assert len(h.source.stream_calls) == 1  # refused (422) once, never asked again
    assert [c["rv"] for c in h.source.list_calls] == ["0", None]
    assert [c["rv"] for c in h.source.watch_calls] == ["10", "12"]
    assert h.recorder.summary() == [("add", "a", None, "5"), ("delete", "a", "5", None)]
    await stop(task)


async def test_refusals_other_than_400_and_422_are_failures_not_a_fallback(
    h: Harness,
) -> None:
    informer = streaming(h)
    h.source.streams.append(Forbidden(403, {"message": "no"}))
    with pytest.raises(ApiError):
        await informer._stream_or_fall_back()
    assert informer._streaming  # still streaming next time


async def test_a_stream_cut_before_its_initial_events_end_is_a_failed_list(
    h: Harness,
) -> None:
    h.source.streams.extend(
        [
            [event("ADDED", meta("a", "5", **{ANNOTATION: "1h"}))],  # ends without bookmark
            [event("ADDED", meta("a", "5", **{ANNOTATION: "1h"})), end_of_initial_events("9")],
        ]
    )
    informer = streaming(h)
    with pytest.raises(TransportError, match="before its initial events"):
        await informer.stream_once()
    assert not informer.synced
    task = await run_until_parked(h, informer)
    assert informer.synced  # the next try was a streaming list again
    assert len(h.source.stream_calls) == 2
    await stop(task)


async def test_a_stream_cut_after_its_list_resumes_as_a_watch_from_the_bookmark(
    h: Harness,
) -> None:
    h.source.streams.append(
        [
            event("ADDED", meta("a", "5", **{ANNOTATION: "1h"})),
            end_of_initial_events("9"),
            event("MODIFIED", meta("a", "10", **{ANNOTATION: "2h"})),
            TransportError("cut"),
        ]
    )
    informer = streaming(h)
    task = await run_until_parked(h, informer)
    await h.clock.advance(5)  # the short backoff after a connection error
    assert [c["rv"] for c in h.source.watch_calls] == ["10"]  # a watch, not a relist
    assert h.source.list_calls == []
    assert len(h.source.stream_calls) == 1
    assert h.metrics.restarts == ["transport"]
    await stop(task)


async def test_an_error_event_during_the_initial_events_relists(h: Harness) -> None:
    h.source.streams.extend(
        [
            [event("ADDED", meta("a", "5", **{ANNOTATION: "1h"})), error(410)],
            [end_of_initial_events("9")],
        ]
    )
    informer = streaming(h)
    task = await run_until_parked(h, informer)
    assert informer.synced
    assert h.metrics.restarts == ["expired", "closed"]
    # "a" was listed by the stream that failed and is not in the one that completed.
    assert h.recorder.summary() == [("add", "a", None, "5"), ("delete", "a", "5", None)]
    await stop(task)
