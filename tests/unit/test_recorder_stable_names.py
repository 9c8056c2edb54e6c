"""Events with a stable name (the warnings before acting): created once, never a series."""

from __future__ import annotations

from lifecycle_controller.controller.events.recorder import KubeEventRecorder
from lifecycle_controller.core.decision.events import Event, EventType
from lifecycle_controller.core.objects.resources import ObjectKey, ObjectRef
from lifecycle_controller.kube import EVENTS, KubeClient
from tests.doubles.fakeapi import CONFIGMAPS, FakeApiServer
from tests.doubles.fakeclock import FakeClock

REF = ObjectRef(ObjectKey(CONFIGMAPS, "team", "cm"), uid="uid-1", resource_version="42")
UPCOMING = Event(
    EventType.NORMAL, "UpcomingDeletion", "The deletion is due.", name="upcoming-0123456789abcdef"
)


def recorder(kube: KubeClient, clock: FakeClock) -> KubeEventRecorder:
    return KubeEventRecorder(kube, clock=clock, reporting_instance="pod-a")


async def test_a_stable_name_is_created_once_and_not_folded_into_a_series(
    api: FakeApiServer, kube: KubeClient, clock: FakeClock
) -> None:
    events = recorder(kube, clock)
    await events.record(REF, UPCOMING)
    await clock.advance(5)
    await events.record(REF, UPCOMING)
    (event,) = api.store.objects(EVENTS)
    assert event["metadata"]["name"] == "cm.upcoming-0123456789abcdef"
    assert (event["reason"], event["note"]) == ("UpcomingDeletion", "The deletion is due.")
    assert "series" not in event
    assert len(api.requests_to("POST", "/events")) == 1  # the second one is remembered
    assert api.requests_to("PATCH", "/events") == []


async def test_after_a_restart_already_exists_means_already_posted(
    api: FakeApiServer, kube: KubeClient, clock: FakeClock
) -> None:
    await recorder(kube, clock).record(REF, UPCOMING)
    restarted = recorder(kube, clock)  # a new process or leader: nothing remembered
    await restarted.record(REF, UPCOMING)
    await restarted.record(REF, UPCOMING)
    assert len(api.store.objects(EVENTS)) == 1
    assert len(api.requests_to("POST", "/events")) == 2  # one create answered 409, then quiet


async def test_a_long_object_name_keeps_the_whole_suffix(
    api: FakeApiServer, kube: KubeClient, clock: FakeClock
) -> None:
    ref = ObjectRef(ObjectKey(CONFIGMAPS, "team", "x" * 253), uid="uid-2")
    await recorder(kube, clock).record(ref, UPCOMING)
    (event,) = api.store.objects(EVENTS)
    name = event["metadata"]["name"]
    assert len(name) <= 253
    assert name.endswith(".upcoming-0123456789abcdef")
