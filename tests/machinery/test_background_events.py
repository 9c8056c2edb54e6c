"""Events written beside the reconcile (controller.events.background).

A scripted inner recorder whose writes finish when the test says: record() returns before
the write, Events of one object keep their order while other objects' go ahead, the slot
limit holds a worker back, flush() waits for all, a failing write is logged and dropped.
"""

from __future__ import annotations

import asyncio
import dataclasses
from dataclasses import dataclass, field

import pytest

from lifecycle_controller.controller.events.background import BackgroundRecorder
from lifecycle_controller.controller.events.recorder import Recorded
from lifecycle_controller.core.decision.events import Event, EventType
from lifecycle_controller.core.objects.resources import ObjectKey, ObjectRef
from tests.doubles.fakeapi import CONFIGMAPS
from tests.doubles.fakeclock import FakeClock


def ref(name: str) -> ObjectRef:
    return ObjectRef(ObjectKey(CONFIGMAPS, "team", name), uid=f"uid-{name}")


def event(reason: str) -> Event:
    return Event(EventType.NORMAL, reason, f"{reason} happened")


@dataclass
class Gated:
    """Each write waits for its gate (opened by the test); remembers the order of writes."""

    gates: dict[str, asyncio.Event] = field(default_factory=dict)
    started: list[str] = field(default_factory=list)
    written: list[str] = field(default_factory=list)
    times: list[int | None] = field(default_factory=list)
    events: list[Event] = field(default_factory=list)
    failing: set[str] = field(default_factory=set)

    def gate(self, reason: str) -> asyncio.Event:
        return self.gates.setdefault(reason, asyncio.Event())

    async def record(self, ref: ObjectRef, event: Event) -> Recorded | None:
        self.started.append(event.reason)
        await self.gate(event.reason).wait()
        if event.reason in self.failing:
            raise RuntimeError("the API is down")
        self.written.append(event.reason)
        self.times.append(event.at_ns)
        self.events.append(event)
        return Recorded.CREATED


async def settle() -> None:
    for _ in range(10):
        await asyncio.sleep(0)


async def test_record_returns_before_the_write_and_flush_waits_for_it() -> None:
    inner = Gated()
    events = BackgroundRecorder(inner, clock=FakeClock())
    assert await events.record(ref("a"), event("Deleted")) is None
    await settle()
    assert inner.started == ["Deleted"]
    assert inner.written == []
    assert events.pending == 1
    flushing = asyncio.create_task(events.flush())
    await settle()
    assert not flushing.done()
    inner.gate("Deleted").set()
    await flushing
    assert inner.written == ["Deleted"]
    assert events.pending == 0


async def test_one_objects_events_keep_their_order_others_go_ahead() -> None:
    inner = Gated()
    events = BackgroundRecorder(inner, clock=FakeClock())
    await events.record(ref("a"), event("UpcomingDeletion"))
    await events.record(ref("a"), event("Deleted"))
    await events.record(ref("b"), event("Restarted"))
    await settle()
    # "Deleted" waits for the Event before it about the same object; "b" does not.
    assert inner.started == ["UpcomingDeletion", "Restarted"]
    inner.gate("Restarted").set()
    inner.gate("Deleted").set()
    await settle()
    assert inner.written == ["Restarted"]
    inner.gate("UpcomingDeletion").set()
    await events.flush()
    assert inner.written == ["Restarted", "UpcomingDeletion", "Deleted"]


async def test_each_event_carries_the_time_it_was_recorded_not_written() -> None:
    inner = Gated()
    clock = FakeClock()
    events = BackgroundRecorder(inner, clock=clock)
    recorded_at = clock.now_ns()
    await events.record(ref("a"), event("Deleted"))
    await clock.advance(5)
    stamped = Event(EventType.NORMAL, "Restarted", "restarted", at_ns=recorded_at - 7)
    await events.record(ref("b"), stamped)  # a time it already has is kept
    await clock.advance(5)
    inner.gate("Deleted").set()
    inner.gate("Restarted").set()
    await events.flush()
    assert inner.times == [recorded_at, recorded_at - 7]


async def test_the_time_stamp_is_all_that_changes_on_a_queued_event() -> None:
    inner = Gated()
    clock = FakeClock()
    events = BackgroundRecorder(inner, clock=clock)
    full = Event(EventType.WARNING, "Upcoming", "soon", "once", "n.1", "delete", 42, True)
    await events.record(ref("a"), full)
    inner.gate("Upcoming").set()
    await events.flush()
    (written,) = inner.events
    expected = dataclasses.replace(full, at_ns=clock.now_ns())
    assert [getattr(written, f.name) for f in dataclasses.fields(Event)] == [
        getattr(expected, f.name) for f in dataclasses.fields(Event)
    ]


async def test_a_worker_waits_while_the_limit_is_in_flight() -> None:
    inner = Gated()
    events = BackgroundRecorder(inner, clock=FakeClock(), limit=2)
    await events.record(ref("a"), event("E1"))
    await events.record(ref("b"), event("E2"))
    third = asyncio.create_task(events.record(ref("c"), event("E3")))
    await settle()
    assert not third.done()
    inner.gate("E1").set()
    await settle()
    assert third.done()
    for reason in ("E2", "E3"):
        inner.gate(reason).set()
    await events.flush()
    assert sorted(inner.written) == ["E1", "E2", "E3"]


async def test_a_failed_write_is_dropped_and_the_next_one_still_goes() -> None:
    inner = Gated(failing={"E1"})
    events = BackgroundRecorder(inner, clock=FakeClock(), limit=1)
    await events.record(ref("a"), event("E1"))
    inner.gate("E1").set()
    inner.gate("E2").set()
    await events.record(ref("a"), event("E2"))  # the failed one gave its slot back
    await events.flush()
    assert inner.written == ["E2"]


async def test_aclose_cancels_what_is_pending() -> None:
    inner = Gated()
    events = BackgroundRecorder(inner, clock=FakeClock(), limit=1)
    await events.record(ref("a"), event("E1"))
    await settle()
    await events.aclose()
    assert events.pending == 0
    assert inner.written == []
    # The cancelled write released its slot.
    async with asyncio.timeout(1):
        await events.record(ref("a"), event("E2"))
    await events.aclose()


def test_the_limit_is_validated() -> None:
    with pytest.raises(ValueError, match="at least 1"):
        BackgroundRecorder(Gated(), clock=FakeClock(), limit=0)
