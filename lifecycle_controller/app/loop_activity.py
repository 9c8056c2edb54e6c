"""When the event-loop lag probe samples fast: while the leader's pipeline has work.

The probe (:mod:`lifecycle_controller.serving.loop_lag`) sleeps long while the controller
is idle, because stalls come with work and ten wake-ups a second were most of an idle
controller's CPU (docs/reliability.md#event-loop). :class:`LoopActivity` tells it when there
is work: ``arrived`` is set by whatever brings some (every watch or list event, through
:class:`~lifecycle_controller.app.informer_metrics.InformerMetricsAdapter`, and every key
that becomes pending in the work queue, through :class:`ActiveQueueMetrics`: a key that
comes due on the queue's own timer arrives with no watch event), and :meth:`busy` holds
while work is under way (a first list, keys queued or being reconciled, Events pending).
Setting an Event already set costs one attribute test: nothing measurable per event.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable, Coroutine, Hashable
from typing import Any

from prometheus_client import Histogram

from lifecycle_controller.controller.events.background import BackgroundRecorder
from lifecycle_controller.machinery.clock import RealClock
from lifecycle_controller.machinery.workqueue import QueueMetrics, WorkQueue
from lifecycle_controller.serving.loop_lag import run_loop_lag_monitor

__all__ = ["ActiveQueueMetrics", "LoopActivity"]


def _idle() -> bool:
    return False


class LoopActivity:
    """Whether there is work, for the lag probe (see the module docstring)."""

    def __init__(self) -> None:
        self.arrived = asyncio.Event()
        self._busy: Callable[[], bool] = _idle

    def probe(self, histogram: Histogram) -> Coroutine[Any, Any, None]:
        """The lag probe on the real event loop (whatever clock the decisions run on)."""
        return run_loop_lag_monitor(histogram, RealClock(), busy=self.busy, activity=self.arrived)

    def follow(
        self, queue: WorkQueue[Any], events: BackgroundRecorder, synced: Callable[[], bool]
    ) -> None:
        """The leader's pipeline started (its first lists begin): busy while it has work,
        until its queue shuts down (leadership lost or shutdown: a follower has none)."""

        def busy() -> bool:
            if queue.shutting_down:
                return False
            return not synced() or len(queue) > 0 or queue.in_flight > 0 or events.pending > 0

        self._busy = busy
        self.arrived.set()

    def busy(self) -> bool:
        return self._busy()

    def queue_metrics(self, inner: QueueMetrics) -> ActiveQueueMetrics:
        """``inner``, also setting :attr:`arrived` whenever a key becomes pending."""
        return ActiveQueueMetrics(inner, self.arrived)


class ActiveQueueMetrics:
    """A ``workqueue.QueueMetrics`` that sets ``activity`` whenever a key becomes pending,
    and passes every call on to ``inner``."""

    __slots__ = ("_activity", "_inner")

    def __init__(self, inner: QueueMetrics, activity: asyncio.Event) -> None:
        self._inner = inner
        self._activity = activity

    def add(self) -> None:
        self._activity.set()
        self._inner.add()

    def depth(self, n: int) -> None:
        self._inner.depth(n)

    def get(self, key: Hashable, queued_for_s: float) -> None:
        self._inner.get(key, queued_for_s)

    def done(self, key: Hashable, worked_for_s: float) -> None:
        self._inner.done(key, worked_for_s)

    def retry(self) -> None:
        self._inner.retry()
