"""The Event recorder against the fake API server: the Event's shape, series folding, dedupe."""

from __future__ import annotations

import asyncio
import dataclasses
from typing import Any

from lifecycle_controller.controller.events.recorder import KubeEventRecorder, truncate_note
from lifecycle_controller.core.decision.events import Event, EventType
from lifecycle_controller.core.objects.resources import ObjectKey, ObjectRef
from lifecycle_controller.kube import EVENTS, NAMESPACES, KubeClient
from tests.doubles.fakeapi import CONFIGMAPS, FakeApiServer
from tests.doubles.fakeclock import FakeClock
from tests.unit.support import until_done

REF = ObjectRef(ObjectKey(CONFIGMAPS, "team", "cm"), uid="uid-1", resource_version="42")
DELETED = Event(EventType.NORMAL, "Deleted", "Deleted: the TTL expired.")
FAILED = Event(EventType.WARNING, "DeletionFailed", "Deletion failed: boom")


def events(api: FakeApiServer) -> list[dict[str, Any]]:
    return api.store.objects(EVENTS)


def recorder(kube: KubeClient, clock: FakeClock) -> KubeEventRecorder:
    return KubeEventRecorder(kube, clock=clock, reporting_instance="pod-a" * 40)


async def test_an_event_names_the_object_the_controller_and_the_action(
    api: FakeApiServer, kube: KubeClient, clock: FakeClock
) -> None:
    await recorder(kube, clock).record(REF, DELETED)
    (event,) = events(api)
    assert event["metadata"]["namespace"] == "team"
    assert event["metadata"]["name"].startswith("cm.")
    assert event["regarding"] == {
        "apiVersion": "v1",
        "kind": "ConfigMap",
        "name": "cm",
        "namespace": "team",
        "uid": "uid-1",
        "resourceVersion": "42",
    }
    assert event["reportingController"] == "lifecycle-controller"
    assert event["reportingInstance"] == ("pod-a" * 40)[:128]
    assert event["action"] == "Reconcile"
    assert (event["type"], event["reason"], event["note"]) == (
        "Normal",
        "Deleted",
        "Deleted: the TTL expired.",
    )
    assert event["eventTime"] == "2026-01-01T00:00:00.000000Z"
    assert "series" not in event


async def test_an_event_stamped_when_it_happened_keeps_that_time(
    api: FakeApiServer, kube: KubeClient, clock: FakeClock
) -> None:
    """A background write comes after its action: the Event says when the action was."""
    happened = clock.now_ns()
    await clock.advance(2.5)
    await recorder(kube, clock).record(REF, dataclasses.replace(DELETED, at_ns=happened))
    (event,) = events(api)
    assert event["eventTime"] == "2026-01-01T00:00:00.000000Z"


async def test_a_cluster_scoped_object_gets_its_event_in_default(
    api: FakeApiServer, kube: KubeClient, clock: FakeClock
) -> None:
    ref = ObjectRef(ObjectKey(NAMESPACES, None, "ns-1"), uid="")
    await recorder(kube, clock).record(ref, FAILED)
    (event,) = events(api)
    assert event["metadata"]["namespace"] == "default"
    assert event["regarding"] == {"apiVersion": "v1", "kind": "Namespace", "name": "ns-1"}


async def test_repeats_fold_into_a_series_within_the_window(
    api: FakeApiServer, kube: KubeClient, clock: FakeClock
) -> None:
    record = recorder(kube, clock)
    await record.record(REF, FAILED)
    await clock.advance(60)
    await record.record(REF, FAILED)
    await clock.advance(60)
    await record.record(REF, FAILED)
    (event,) = events(api)
    assert event["series"] == {"count": 3, "lastObservedTime": "2026-01-01T00:02:00.000000Z"}
    assert [r.method for r in api.requests] == ["POST", "PATCH", "PATCH"]
    # Another reason, or the same reason with another note, is another Event, even at the
    # same instant (names end in a nanosecond stamp kept unique per recorder).
    await record.record(REF, DELETED)
    await record.record(REF, Event(EventType.WARNING, "DeletionFailed", "Deletion failed: 2"))
    assert len(events(api)) == 3
    # After the 30-minute window a repeat starts a new Event.
    await clock.advance(30 * 60)
    await record.record(REF, FAILED)
    assert len(events(api)) == 4


async def test_a_series_whose_event_is_gone_starts_a_new_event(
    api: FakeApiServer, kube: KubeClient, clock: FakeClock
) -> None:
    record = recorder(kube, clock)
    await record.record(REF, FAILED)
    (first,) = events(api)
    api.store.delete(EVENTS, "team", first["metadata"]["name"])
    await clock.advance(1)
    await record.record(REF, FAILED)
    (second,) = events(api)
    assert second["metadata"]["name"] != first["metadata"]["name"]
    assert [(r.method, r.status) for r in api.requests] == [
        ("POST", 201),
        ("PATCH", 404),
        ("POST", 201),
    ]


async def test_a_dedupe_key_sends_a_warning_once_per_object_and_value(
    api: FakeApiServer, kube: KubeClient, clock: FakeClock
) -> None:
    record = recorder(kube, clock)
    ignored = Event(EventType.WARNING, "IgnoredAnnotation", "ignored", dedupe_key="value-1")
    for _ in range(3):
        await record.record(REF, ignored)
    again = Event(ignored.type, ignored.reason, "ignored: value-2", dedupe_key="value-2")
    await record.record(REF, again)
    other = ObjectRef(REF.key, uid="uid-2")
    await record.record(other, ignored)
    assert [r.status for r in api.requests_to("POST")] == [201, 201, 201]
    assert not api.requests_to("PATCH")


async def test_a_failed_write_is_logged_and_dropped(
    api: FakeApiServer, kube: KubeClient, clock: FakeClock
) -> None:
    api.fail(403, method="POST", path="/events$")
    await recorder(kube, clock).record(REF, DELETED)  # does not raise
    assert events(api) == []
    assert api.requests[0].status == 403


def test_notes_are_cut_to_1024_bytes_on_a_character_boundary() -> None:
    assert truncate_note("short") == "short"
    cut = truncate_note("é" * 600)
    assert cut.endswith("...")
    assert len(cut.encode()) <= 1024
    assert cut[:-3] == "é" * 510


async def test_a_long_note_is_truncated_on_the_wire(
    api: FakeApiServer, kube: KubeClient, clock: FakeClock
) -> None:
    await recorder(kube, clock).record(REF, Event(EventType.WARNING, "R" * 200, "x" * 2000))
    (event,) = events(api)
    assert len(event["note"]) == 1024
    assert event["reason"] == "R" * 128


async def test_transient_failures_are_retried_and_the_event_is_written(
    api: FakeApiServer, kube: KubeClient, clock: FakeClock
) -> None:
    """Regression (issue 8, scenario 4): under 429/5xx an Event was lost at the first error."""
    api.fail(503, method="POST", path="/events$")
    api.fail(429, method="POST", path="/events$", retry_after=3)
    task = asyncio.create_task(recorder(kube, clock).record(REF, DELETED))
    await until_done(task, clock)
    (event,) = events(api)
    assert event["reason"] == "Deleted"
    statuses = [r.status for r in api.requests if r.method == "POST"]
    assert statuses == [503, 429, 201]
    assert clock.monotonic() >= 0.25 + 3  # the first retry delay, then Retry-After
