"""Events sent beside the reconcile, not in its way (client-go's recorder is asynchronous too).

A worker that has carried out an action used to wait for the action's Event to be written:
for a deletion that was half of the worker's time, so a burst of due actions went half as
fast as the API server allowed. :class:`BackgroundRecorder` hands each Event to a task and
returns at once, stamped with the time it was recorded (``Event.at_ns``: its ``eventTime``
is the action's, not the write's); a worker waits only while ``limit`` Events are in flight
already, so a burst cannot pile up unbounded work. Events about one object are written in
the order they were recorded (each waits for the one before it), which keeps series folding
and the order a user reads them in as before. :meth:`BackgroundRecorder.flush` waits for
every pending Event (a graceful shutdown: actions done get their Events);
:meth:`BackgroundRecorder.aclose` cancels what is left.
"""

from __future__ import annotations

import asyncio

import structlog

from lifecycle_controller.controller.events.recorder import EventRecorder, Recorded
from lifecycle_controller.core.decision.events import Event, about
from lifecycle_controller.core.objects.resources import ObjectKey, ObjectRef
from lifecycle_controller.machinery.clock import Clock

__all__ = ["DEFAULT_LIMIT", "BackgroundRecorder"]

#: Events in flight at most before :meth:`BackgroundRecorder.record` waits for a free slot.
DEFAULT_LIMIT = 64

_log = structlog.get_logger(__name__)


class BackgroundRecorder:
    """An :class:`EventRecorder` that writes through ``inner`` in background tasks."""

    def __init__(self, inner: EventRecorder, *, clock: Clock, limit: int = DEFAULT_LIMIT) -> None:
        if limit < 1:
            raise ValueError(f"limit must be at least 1, got {limit}")
        self._inner = inner
        self._clock = clock
        self._slots = asyncio.Semaphore(limit)
        self._pending: set[asyncio.Task[None]] = set()
        self._last: dict[ObjectKey, asyncio.Task[None]] = {}

    @property
    def pending(self) -> int:
        """Events recorded and not yet written (or dropped)."""
        return len(self._pending)

    async def record(self, ref: ObjectRef, event: Event) -> Recorded | None:
        """Queue the Event; returns None (what became of it is not known yet)."""
        if event.at_ns is None:
            now_ns = self._clock.now_ns()
            event = about(event, action=None, due_ns=None, dry_run=False, at_ns=now_ns)
        await self._slots.acquire()
        key = ref.key
        task = asyncio.create_task(self._write(self._last.get(key), ref, event))
        self._last[key] = task
        self._pending.add(task)
        task.add_done_callback(lambda done: self._finished(key, done))
        return None

    async def _write(
        self, previous: asyncio.Task[None] | None, ref: ObjectRef, event: Event
    ) -> None:
        if previous is not None:
            await asyncio.wait([previous])  # its outcome is its own: only the order matters
        try:
            await self._inner.record(ref, event)
        except Exception:
            _log.exception("writing an Event failed", reason=event.reason, **ref.key.log_context())

    def _finished(self, key: ObjectKey, task: asyncio.Task[None]) -> None:
        self._slots.release()
        self._pending.discard(task)
        if self._last.get(key) is task:
            del self._last[key]

    async def flush(self) -> None:
        """Wait until every Event recorded so far (and any recorded meanwhile) is written."""
        while self._pending:
            await asyncio.wait(set(self._pending))

    async def aclose(self) -> None:
        """Cancel the Events still pending and wait for their tasks to end."""
        tasks = list(self._pending)
        for task in tasks:
            task.cancel()
        await asyncio.gather(*tasks, return_exceptions=True)
