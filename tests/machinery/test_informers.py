"""Informer loop logic against a scripted in-process source, on a fake clock.

These tests pin down the reflector protocol step by step (which resourceVersion each request
carries, what is delivered, when the loop backs off) without a network. The same behaviours
are exercised against the real API server in ``tests/integration/test_informers.py``.
"""

from __future__ import annotations

import asyncio
import json
import random
from collections import deque
from collections.abc import AsyncIterator, Awaitable, Callable
from dataclasses import dataclass, field
from typing import Any

import pytest

from lifecycle_controller.controller.watch.cache import CachedObject, MetadataCache
from lifecycle_controller.controller.watch.cache_writer import CacheWriter
from lifecycle_controller.controller.watch.informers import (
    ChangeKind,
    InformerSet,
    InformerSettings,
)
from lifecycle_controller.controller.watch.projection import FieldProjection, MetadataProjection
from lifecycle_controller.controller.watch.reflector import Informer, WatchEnd
from lifecycle_controller.core.objects.resources import ObjectKey
from lifecycle_controller.kube import (
    NAMESPACES,
    EventFilter,
    Forbidden,
    Gone,
    NotFound,
    ResourceType,
    TooManyRequests,
    TransportError,
    Unprocessable,
)
from lifecycle_controller.machinery.backoff import Backoff
from tests.doubles.fakeclock import FakeClock

CONFIGMAPS = ResourceType("", "v1", "configmaps", "ConfigMap", namespaced=True)
SECRETS = ResourceType("", "v1", "secrets", "Secret", namespaced=True)
ANNOTATION = "lifecycle.cezary.dev/delete-after"

Script = dict[str, Any] | list[dict[str, Any] | Exception] | Exception


def meta(
    name: str, rv: str, *, uid: str | None = None, ns: str = "ns", **ann: str
) -> dict[str, Any]:
    return {
        "name": name,
        "namespace": ns,
        "uid": uid or f"uid-{name}",
        "resourceVersion": rv,
        "creationTimestamp": "2026-01-01T00:00:00Z",
        "annotations": ann,
        "managedFields": [{"manager": "test"}],
    }


def page(rv: str, *items: dict[str, Any], cont: str | None = None) -> dict[str, Any]:
    list_meta: dict[str, Any] = {"resourceVersion": rv}
    if cont:
        list_meta["continue"] = cont
    return {
        "kind": "PartialObjectMetadataList",
        "metadata": list_meta,
        "items": [{"metadata": m} for m in items],
    }


def event(kind: str, metadata: dict[str, Any]) -> dict[str, Any]:
    return {"type": kind, "object": {"kind": "PartialObjectMetadata", "metadata": metadata}}


def bookmark(rv: str) -> dict[str, Any]:
    return {"type": "BOOKMARK", "object": {"metadata": {"resourceVersion": rv}}}


def error(code: int) -> dict[str, Any]:
    return {"type": "ERROR", "object": {"kind": "Status", "code": code, "message": "m"}}


@dataclass
class FakeSource:
    """Answers lists and watches from scripts; an exhausted watch script blocks forever."""

    lists: deque[Script] = field(default_factory=deque)
    watches: deque[Script] = field(default_factory=deque)
    list_calls: list[dict[str, Any]] = field(default_factory=list)
    watch_calls: list[dict[str, Any]] = field(default_factory=list)
    #: Scripts of streaming lists (initial events, then watch events); none left: 422.
    streams: deque[Script] = field(default_factory=deque)
    stream_calls: list[dict[str, Any]] = field(default_factory=list)
    #: Lines the streaming list's ``decode_if`` refused (as the API server would encode them).
    undecoded: list[bytes] = field(default_factory=list)

    async def list_metadata(
        self,
        resource: ResourceType,
        *,
        namespace: str | None = None,
        limit: int = 500,
        continue_token: str | None = None,
        resource_version: str | None = None,
        field_selector: str | None = None,
        resource_version_match: str | None = None,
    ) -> dict[str, Any]:
        self.list_calls.append(
            {"ns": namespace, "limit": limit, "continue": continue_token, "rv": resource_version}
        )
        answer = self.lists.popleft() if self.lists else page("1")
        if isinstance(answer, Exception):
            raise answer
        assert isinstance(answer, dict)
        return answer

    def watch_metadata(
        self,
        resource: ResourceType,
        *,
        namespace: str | None = None,
        resource_version: str,
        timeout_seconds: int,
        field_selector: str | None = None,
        decode_if: EventFilter | None = None,
    ) -> AsyncIterator[dict[str, Any]]:
        self.watch_calls.append({"ns": namespace, "rv": resource_version, "t": timeout_seconds})
        events = self._stream(self.watches.popleft() if self.watches else None)
        return self._filtered(events, decode_if)

    def watch_list_metadata(
        self,
        resource: ResourceType,
        *,
        namespace: str | None = None,
        timeout_seconds: int,
        field_selector: str | None = None,
        decode_if: EventFilter | None = None,
        before_reading: Callable[[], Awaitable[None]] | None = None,
    ) -> AsyncIterator[dict[str, Any]]:
        self.stream_calls.append({"ns": namespace, "t": timeout_seconds})
        assert before_reading is None, "no list of these tests is gated"
        if not self.streams:
            refused = Unprocessable(422, {"message": "sendInitialEvents is forbidden"})
            return self._stream(refused)
        return self._filtered(self._stream(self.streams.popleft()), decode_if)

    async def _filtered(
        self, events: AsyncIterator[dict[str, Any]], decode_if: EventFilter | None
    ) -> AsyncIterator[dict[str, Any]]:
        """Offer each event to ``decode_if`` as the line Go's encoder would send."""
        async for item in events:
            line = json.dumps(item, separators=(",", ":")).encode()
            if decode_if is not None and not decode_if(line, 0, len(line)):
                self.undecoded.append(line)
                continue
            yield item

    async def _stream(self, answer: Script | None) -> AsyncIterator[dict[str, Any]]:
        if isinstance(answer, Exception):
            raise answer
        if answer is None:
            await asyncio.Event().wait()
            return
        assert isinstance(answer, list)
        for item in answer:
            await asyncio.sleep(0)
            if isinstance(item, Exception):
                raise item
            yield item


Delivered = tuple[ChangeKind, str, CachedObject | None, CachedObject | None]


@dataclass
class Recorder:
    events: list[Delivered] = field(default_factory=list)

    def __call__(
        self, kind: ChangeKind, key: ObjectKey, old: CachedObject | None, new: CachedObject | None
    ) -> None:
        self.events.append((kind, key.name, old, new))

    def summary(self) -> list[tuple[str, str, str | None, str | None]]:
        return [
            (
                kind,
                name,
                old.resource_version if old else None,
                new.resource_version if new else None,
            )
            for kind, name, old, new in self.events
        ]


@dataclass
class CountingMetrics:
    restarts: list[str] = field(default_factory=list)
    relists: int = 0
    events: list[str] = field(default_factory=list)
    objects: dict[ResourceType, int] = field(default_factory=dict)

    def watch_restarted(self, resource: ResourceType, reason: str) -> None:
        self.restarts.append(reason)

    def relisted(self, resource: ResourceType) -> None:
        self.relists += 1

    def event_received(self, resource: ResourceType, event_type: str) -> None:
        self.events.append(event_type)

    def cache_objects(self, resource: ResourceType, count: int) -> None:
        self.objects[resource] = count


SETTINGS = InformerSettings(page_size=2, streaming_list=False)


@dataclass
class Harness:
    clock: FakeClock
    source: FakeSource = field(default_factory=FakeSource)
    cache: MetadataCache = field(default_factory=MetadataCache)
    recorder: Recorder = field(default_factory=Recorder)
    metrics: CountingMetrics = field(default_factory=CountingMetrics)
    gone: list[ResourceType] = field(default_factory=list)

    def informer_set(self, **extra: Any) -> InformerSet:
        """An informer set on this harness's source, cache, recorder and clock."""
        return InformerSet(
            source=self.source,
            cache=self.cache,
            on_object_change=self.recorder,
            clock=self.clock,
            settings=SETTINGS,
            **extra,
        )

    def informer(
        self, namespace: str | None = None, settings: InformerSettings = SETTINGS
    ) -> Informer:
        return Informer(
            resource=CONFIGMAPS,
            namespace=namespace,
            projection=MetadataProjection(self.source),
            keeper=CacheWriter(CONFIGMAPS, namespace, self.cache, self.recorder),
            clock=self.clock,
            metrics=self.metrics,
            settings=settings,
            on_resource_gone=self.gone.append,
            rng=random.Random(1),
        )


@pytest.fixture
def h(clock: FakeClock) -> Harness:
    return Harness(clock)


async def run_until_parked(h: Harness, informer: Informer) -> asyncio.Task[None]:
    task = asyncio.create_task(informer.run())
    await h.clock.settle()
    return task


async def stop(task: asyncio.Task[None]) -> None:
    task.cancel()
    with pytest.raises(asyncio.CancelledError):
        await task


# ---------------------------------------------------------------------------- backoff


async def test_backoff_doubles_to_the_cap_with_jitter_and_resets(clock: FakeClock) -> None:
    backoff = Backoff(clock, initial=0.8, maximum=30, jitter=0.0)
    assert [backoff.next_delay() for _ in range(8)] == [0.8, 1.6, 3.2, 6.4, 12.8, 25.6, 30, 30]
    await clock.advance(120)
    assert backoff.next_delay() == 30  # exactly 2 min is not "more than"
    await clock.advance(121)
    assert backoff.next_delay() == 0.8
    jittered = Backoff(clock, initial=1, maximum=1, jitter=1.0, rng=random.Random(3))
    delays = [jittered.next_delay() for _ in range(50)]
    assert all(1 <= d < 2 for d in delays)
    assert len(set(delays)) == 50


def test_settings_are_validated() -> None:
    with pytest.raises(ValueError, match="page_size"):
        InformerSettings(page_size=0)
    with pytest.raises(ValueError, match="watch timeouts"):
        InformerSettings(watch_timeout_min=600, watch_timeout_max=300)
    with pytest.raises(ValueError, match="backoff"):
        InformerSettings(backoff_initial=0)


# ---------------------------------------------------------------------------- list


async def test_first_list_from_cache_then_consistent_paginated_relists(h: Harness) -> None:
    informer = h.informer()
    h.source.lists.extend(
        [
            page("10", meta("a", "5", **{ANNOTATION: "1h"}), meta("b", "6"), cont="c1"),
            page("10", meta("c", "7", **{ANNOTATION: "2h"})),
            page("12", meta("a", "5", **{ANNOTATION: "1h"}), cont="c2"),
            page("12", meta("c", "11", **{ANNOTATION: "3h"})),
        ]
    )
    assert await informer.list_once() == "10"
    assert informer.synced
    assert informer.resource_version == "10"
    assert h.recorder.summary() == [("add", "a", None, "5"), ("add", "c", None, "7")]
    assert await informer.list_once() == "12"
    assert [(c["rv"], c["continue"], c["limit"]) for c in h.source.list_calls] == [
        ("0", None, 2),
        ("0", "c1", 2),
        (None, None, 2),
        (None, "c2", 2),
    ]
    # Unchanged "a" is not re-delivered; "c" changed.
    assert h.recorder.summary()[2:] == [("update", "c", "7", "11")]
    assert h.metrics.relists == 1
    assert h.metrics.objects[CONFIGMAPS] == 2
    cached = h.cache.get(ObjectKey(CONFIGMAPS, "ns", "a"))
    assert cached is not None
    assert dict(cached.annotations) == {ANNOTATION: "1h"}


async def test_relist_synthesises_deletes_and_replacements(h: Harness) -> None:
    informer = h.informer()
    h.source.lists.extend(
        [
            page(
                "10",
                meta("gone", "1", **{ANNOTATION: "1h"}),
                meta("recreated", "2", **{ANNOTATION: "1h"}),
            ),
            page("20", meta("recreated", "15", uid="uid-2", **{ANNOTATION: "1h"})),
        ]
    )
    await informer.list_once()
    await informer.list_once()
    assert sorted(h.recorder.summary()[2:], key=str) == sorted(
        [
            ("delete", "gone", "1", None),
            ("delete", "recreated", "2", None),
            ("add", "recreated", None, "15"),
        ],
        key=str,
    )
    assert h.cache.keys(CONFIGMAPS) == [ObjectKey(CONFIGMAPS, "ns", "recreated")]


async def test_expired_continue_token_restarts_the_list(h: Harness) -> None:
    informer = h.informer()
    h.source.lists.extend(
        [
            page("10", meta("a", "5", **{ANNOTATION: "1h"}), cont="c1"),
            Gone(410, {"reason": "Expired", "message": "continue too old"}),
            page("11", meta("a", "5", **{ANNOTATION: "1h"}), meta("b", "11", **{ANNOTATION: "x"})),
        ]
    )
    assert await informer.list_once() == "11"
    assert [(c["rv"], c["continue"]) for c in h.source.list_calls] == [
        ("0", None),
        ("0", "c1"),
        (None, None),
    ]
    assert h.recorder.summary() == [("add", "a", None, "5"), ("add", "b", None, "11")]
    assert h.metrics.relists == 0  # still the first list


# ---------------------------------------------------------------------------- watch


async def test_watch_delivers_old_and_new_and_tracks_bookmarks(h: Harness) -> None:
    informer = h.informer()
    h.source.lists.append(page("10", meta("a", "5", **{ANNOTATION: "1h"}), meta("plain", "6")))
    h.source.watches.append(
        [
            event("MODIFIED", meta("a", "11", **{ANNOTATION: "2h"})),
            event("MODIFIED", meta("plain", "12", other="x")),  # never annotated: nothing
            event("MODIFIED", meta("plain", "13", **{ANNOTATION: "1h"})),  # gains one
            event("MODIFIED", meta("a", "14")),  # loses its annotations
            event("ADDED", meta("new", "15", **{ANNOTATION: "1h"})),
            event("ADDED", meta("new-plain", "16")),
            event("DELETED", meta("new", "17", **{ANNOTATION: "1h"})),
            event("DELETED", meta("new-plain", "18")),
            bookmark("30"),
        ]
    )
    await informer.list_once()
    assert await informer.watch_once() is WatchEnd.CLOSED
    assert h.source.watch_calls[0]["rv"] == "10"
    assert 300 <= h.source.watch_calls[0]["t"] <= 600
    assert h.recorder.summary() == [
        ("add", "a", None, "5"),
        ("update", "a", "5", "11"),
        ("update", "plain", None, "13"),
        ("update", "a", "11", "14"),
        ("add", "new", None, "15"),
        ("delete", "new", "15", "17"),
    ]
    lost = h.recorder.events[3][3]
    assert lost is not None
    assert not lost.annotated
    assert informer.resource_version == "30"
    assert [k.name for k in h.cache.keys(CONFIGMAPS)] == ["plain"]
    assert h.metrics.events.count("BOOKMARK") == 1


@pytest.mark.parametrize(
    ("code", "end"),
    [(410, WatchEnd.EXPIRED), (504, WatchEnd.TOO_LARGE), (500, WatchEnd.ERROR)],
)
async def test_watch_error_events(h: Harness, code: int, end: WatchEnd) -> None:
    informer = h.informer()
    h.source.watches.append([bookmark("20"), error(code), bookmark("99")])
    await informer.list_once()
    assert await informer.watch_once() is end
    assert informer.resource_version == "20"


async def test_watch_needs_a_list_first(h: Harness) -> None:
    with pytest.raises(RuntimeError, match="list_once"):
        await h.informer().watch_once()


# ---------------------------------------------------------------------------- the loop


async def test_loop_rewatches_from_last_rv_and_relists_after_410(h: Harness) -> None:
    h.source.lists.extend(
        [
            page("10", meta("a", "5", **{ANNOTATION: "1h"}), meta("b", "6", **{ANNOTATION: "1h"})),
            page("40", meta("a", "5", **{ANNOTATION: "1h"})),
        ]
    )
    h.source.watches.extend(
        [
            [bookmark("20")],  # normal end: re-watch at once from 20
            [error(410)],  # expired: relist with no RV, then watch from 40
        ]
    )
    task = await run_until_parked(h, h.informer())
    assert [c["rv"] for c in h.source.watch_calls] == ["10", "20", "40"]
    assert [c["rv"] for c in h.source.list_calls] == ["0", None]
    assert h.recorder.summary()[2:] == [("delete", "b", "6", None)]
    assert h.metrics.restarts == ["closed", "expired"]
    assert h.clock.sleeper_deadlines() == []  # no backoff on either path
    await stop(task)


async def test_loop_backs_off_on_errors_and_recovers(h: Harness) -> None:
    h.source.lists.extend([Forbidden(403, {"message": "no"}), page("10")])
    h.source.watches.extend(
        [
            TransportError("idle"),  # re-watch from the same RV after a backoff
            [error(500)],  # relist after a backoff
            [],  # closed at once, empty: backoff, re-watch
        ]
    )
    task = await run_until_parked(h, h.informer())
    assert h.metrics.restarts == ["forbidden"]
    assert not h.cache.is_synced(CONFIGMAPS, None)
    await h.clock.advance(1.6)  # the first delay is 0.8 s plus up to 100 % jitter
    assert h.cache.is_synced(CONFIGMAPS, None)
    await h.clock.advance(30)
    await h.clock.advance(30)
    await h.clock.advance(30)
    assert h.metrics.restarts == ["forbidden", "transport", "error", "closed_early"]
    assert [c["rv"] for c in h.source.list_calls] == ["0", "0", None]
    assert [c["rv"] for c in h.source.watch_calls] == ["10", "10", "1", "1"]
    await stop(task)


async def test_loop_stops_politely_when_the_type_is_gone(h: Harness) -> None:
    h.source.lists.append(NotFound(404, {"message": "the server could not find"}))
    await asyncio.wait_for(h.informer().run(), 5)
    assert h.gone == [CONFIGMAPS]
    assert h.metrics.restarts == ["not_found"]


async def test_a_failing_handler_does_not_stop_the_informer(h: Harness) -> None:
    def explode(*args: object) -> None:
        raise RuntimeError("handler bug")

    informer = Informer(
        resource=CONFIGMAPS,
        namespace=None,
        projection=MetadataProjection(h.source),
        keeper=CacheWriter(CONFIGMAPS, None, h.cache, explode),
        clock=h.clock,
        settings=SETTINGS,
    )
    h.source.lists.append(page("10", meta("a", "5", **{ANNOTATION: "1h"})))
    h.source.watches.append([event("ADDED", meta("b", "11", **{ANNOTATION: "1h"}))])
    task = await run_until_parked(h, informer)
    assert len(h.cache.keys(CONFIGMAPS)) == 2
    assert [c["rv"] for c in h.source.watch_calls] == ["10", "11"]
    await stop(task)


# ---------------------------------------------------------------------------- the set


async def test_set_scopes_per_namespace_and_cluster_wide(h: Harness, no_leaked_tasks: None) -> None:
    informers = InformerSet(
        source=h.source,
        cache=h.cache,
        on_object_change=h.recorder,
        clock=h.clock,
        namespaces=["b", "a", "a"],
        settings=SETTINGS,
    )
    async with informers:
        assert await informers.ensure([CONFIGMAPS, NAMESPACES]) == [CONFIGMAPS, NAMESPACES]
        assert await informers.ensure([CONFIGMAPS]) == []
        await h.clock.settle()
        assert sorted((c["ns"] or "*") for c in h.source.list_calls) == ["*", "a", "b"]
        assert informers.synced()
        assert informers.running() == {CONFIGMAPS, NAMESPACES}
        await informers.stop(CONFIGMAPS)
        assert informers.running() == {NAMESPACES}
        assert not h.cache.is_synced(CONFIGMAPS, "a")


@dataclass
class WholeSource:
    """Whole objects: every list is empty, every watch blocks."""

    lists: int = 0

    async def list_objects(self, resource: ResourceType, **kwargs: Any) -> dict[str, Any]:
        self.lists += 1
        return page("1")

    async def watch_objects(self, resource: ResourceType, **kwargs: Any) -> AsyncIterator[Any]:
        await asyncio.Event().wait()
        yield {}  # pragma: no cover - never reached


async def test_gated_lists_read_once_released_with_the_projection_chosen_then(
    h: Harness, no_leaked_tasks: None
) -> None:
    """At start the informers are gated while the policies load: no list reads. A type whose
    policies turn out to read beyond its metadata starts over with those paths before it
    reads (not counted as a relist); once released, every list reads, each as chosen."""
    reads: dict[ResourceType, frozenset[tuple[str, ...]]] = {}
    objects, metrics = WholeSource(), CountingMetrics()
    informers = h.informer_set(
        metrics=metrics,
        objects=objects,
        reads=lambda resource: reads.get(resource, frozenset()),
        gated=True,
    )
    async with informers:
        await informers.ensure([CONFIGMAPS, NAMESPACES])
        await h.clock.settle()
        assert (h.source.list_calls, objects.lists, informers.synced()) == ([], 0, False)
        reads[CONFIGMAPS] = frozenset({("data",)})  # the policies are in
        await informers.reproject()
        kinds = {i.resource: i.projection for i in informers.informers()}
        configmaps = kinds[CONFIGMAPS]
        assert isinstance(configmaps, FieldProjection)
        assert configmaps.paths == {("data",)}
        assert isinstance(kinds[NAMESPACES], MetadataProjection)
        await h.clock.settle()
        assert (h.source.list_calls, objects.lists) == ([], 0)
        informers.release()
        await h.clock.settle()
        assert (len(h.source.list_calls), objects.lists) == (1, 1)  # Namespaces; ConfigMaps
        assert informers.synced()
        assert metrics.relists == 0
        await informers.ensure([SECRETS])  # started after the release: not gated
        await h.clock.settle()
        assert len(h.source.list_calls) == 2


async def test_the_set_is_not_synced_before_its_initial_watch_set(
    h: Harness, no_leaked_tasks: None
) -> None:
    """Before the first ensure() no informer exists, so "all have listed" would hold of none
    and /readyz would report ready while the first lists have not even begun."""
    informers = InformerSet(
        source=h.source, cache=h.cache, on_object_change=h.recorder, clock=h.clock
    )
    async with informers:
        assert not informers.synced()
        await informers.ensure([])  # an empty watch set is a valid one
        assert informers.synced()


async def test_set_keeps_other_informers_running_and_restarts_gone_ones(
    h: Harness, no_leaked_tasks: None
) -> None:
    h.source.lists.append(NotFound(404, {}))
    gone: list[ResourceType] = []
    informers = h.informer_set(on_resource_gone=gone.append)
    async with informers:
        await informers.ensure([CONFIGMAPS, NAMESPACES])
        await h.clock.settle()
        assert len(gone) == 1
        assert not informers.synced()
        assert await informers.ensure([CONFIGMAPS, NAMESPACES]) == gone
        await h.clock.settle()
        assert informers.synced()


async def test_a_cancel_turned_into_an_error_still_stops_the_loop(h: Harness) -> None:
    class Swallowing(FakeSource):
        async def _stream(self, answer: Script | None) -> AsyncIterator[dict[str, Any]]:
            try:
                await asyncio.Event().wait()
            except asyncio.CancelledError:
                raise RuntimeError("cleanup failed") from None
            yield {}  # pragma: no cover - never reached

    h.source = Swallowing()
    task = await run_until_parked(h, h.informer())
    await stop(task)
    assert h.metrics.restarts == []


async def test_throttling_waits_at_least_retry_after(h: Harness) -> None:
    h.source.lists.append(TooManyRequests(429, {}, retry_after=20))
    task = await run_until_parked(h, h.informer())
    assert h.clock.sleeper_deadlines() == [h.clock.monotonic() + 20]
    await h.clock.advance(20)
    assert h.cache.is_synced(CONFIGMAPS, None)
    assert h.metrics.restarts == ["throttled"]
    await stop(task)
