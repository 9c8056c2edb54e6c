"""When the lag probe samples fast (app.loop_activity): the pipeline's busy test follows its
first list, its queued and in-flight keys and its pending Events, and ends with its queue."""

from __future__ import annotations

import asyncio

from lifecycle_controller.app.loop_activity import LoopActivity
from lifecycle_controller.controller.events.background import BackgroundRecorder
from lifecycle_controller.controller.events.recorder import Recorded
from lifecycle_controller.core.decision.events import Event, EventType
from lifecycle_controller.core.objects.resources import ObjectKey, ObjectRef
from lifecycle_controller.machinery.ratelimit import ItemExponentialFailureRateLimiter
from lifecycle_controller.machinery.workqueue import NoopQueueMetrics, WorkQueue
from tests.doubles.fakeapi import CONFIGMAPS
from tests.doubles.fakeclock import FakeClock


class _Held:
    """An inner recorder whose writes wait until ``release`` is set."""

    def __init__(self) -> None:
        self.release = asyncio.Event()

    async def record(self, ref: ObjectRef, event: Event) -> Recorded | None:
        await self.release.wait()
        return Recorded.CREATED


async def test_busy_follows_the_pipelines_work() -> None:
    clock = FakeClock()
    activity = LoopActivity()
    assert not activity.busy()  # no pipeline: a follower, or before the first term
    metrics = activity.queue_metrics(NoopQueueMetrics())
    queue = WorkQueue[str](
        rate_limiter=ItemExponentialFailureRateLimiter(), clock=clock, metrics=metrics
    )
    inner = _Held()
    events = BackgroundRecorder(inner, clock=clock)
    listed = False
    activity.follow(queue, events, lambda: listed)
    assert activity.arrived.is_set()  # the first lists begin
    assert activity.busy()  # listing
    listed = True
    assert not activity.busy()
    activity.arrived.clear()
    async with queue:
        queue.add("k")
        assert activity.arrived.is_set()
        assert activity.busy()  # queued
        key = await queue.get()
        assert activity.busy()  # in flight
        queue.done(key)
        assert not activity.busy()
        ref = ObjectRef(ObjectKey(CONFIGMAPS, "team", "k"), uid="uid-k")
        await events.record(ref, Event(EventType.NORMAL, "Deleted", "deleted"))
        assert activity.busy()  # an Event pending
        inner.release.set()
        await events.flush()
        assert not activity.busy()
        queue.add("left")
        queue.shutdown()
        assert not activity.busy()  # the term ended: what is left is the next leader's
