"""The work queue between event sources and reconcile workers (client-go semantics).

Informers and timers call :meth:`WorkQueue.add` with *keys* (any hashable value, e.g. a frozen
object reference); workers call :meth:`WorkQueue.get`, reconcile the key, then
:meth:`WorkQueue.done`. The queue is what makes a controller correct under bursts of events:

* **dedupe**: a key waiting in the queue is there at most once, however often it is added;
* **one at a time**: a key handed to a worker is not handed to another until ``done``;
* **nothing lost**: a key added while it is being processed runs exactly once more, after
  ``done``.

On top of that sit the *delaying* queue (``add_after``: one timer task and a min-heap for every
future wake-up, keeping the EARLIEST requested time per key) and the *rate-limiting* queue
(``add_rate_limited`` / ``forget`` / ``num_requeues``, delegated to an injected
:class:`RateLimiter`, normally
:func:`lifecycle_controller.machinery.ratelimit.default_controller_rate_limiter`). This is a port of
client-go's ``util/workqueue`` ``queue.go``, ``delaying_queue.go`` and
``rate_limiting_queue.go`` to a single asyncio event loop (no locks needed: every method
except ``get`` and ``shutdown_with_drain`` is synchronous and atomic with respect to other
tasks).

Shutdown is reported to consumers by :class:`QueueShutDown` raised from ``get()``.
"""

from __future__ import annotations

import asyncio
import contextlib
import math
from collections import deque
from collections.abc import Hashable
from types import TracebackType
from typing import Generic, Protocol, Self, TypeVar

import structlog

from lifecycle_controller.machinery.clock import Clock, RealClock
from lifecycle_controller.machinery.delayed_keys import DelayedKeys
from lifecycle_controller.machinery.ratelimit import RateLimiter
from lifecycle_controller.machinery.tasks import sleep_or_wake

__all__ = [
    "DEFAULT_HEARTBEAT",
    "NoopQueueMetrics",
    "QueueMetrics",
    "QueueShutDown",
    "WorkQueue",
]

K = TypeVar("K", bound=Hashable)

#: The delaying queue re-checks its heap at least this often (client-go ``maxWait``).
DEFAULT_HEARTBEAT = 10.0

_log = structlog.get_logger(__name__)


class QueueShutDown(Exception):
    """Raised by :meth:`WorkQueue.get` once the queue is shut down and has nothing left.

    Named after ``asyncio.QueueShutDown`` (Python 3.13), which plays the same role.
    """


class QueueMetrics(Protocol):
    """Hooks a metrics backend implements to observe one queue (client-go names in brackets).

    Unfinished and longest-running work are not pushed: read them on demand from
    :meth:`WorkQueue.unfinished_work_seconds` and
    :meth:`WorkQueue.longest_running_processor_seconds`.
    """

    def add(self) -> None:
        """A key became pending (it was not already waiting) [workqueue_adds_total]."""
        ...

    def depth(self, n: int) -> None:
        """The number of pending keys is now ``n`` [workqueue_depth]."""
        ...

    def get(self, key: Hashable, queued_for_s: float) -> None:
        """``key`` was handed to a worker after waiting ``queued_for_s`` seconds
        [workqueue_queue_duration_seconds]."""
        ...

    def done(self, key: Hashable, worked_for_s: float) -> None:
        """A worker finished ``key`` after ``worked_for_s`` seconds
        [workqueue_work_duration_seconds]."""
        ...

    def retry(self) -> None:
        """``add_after`` (and so ``add_rate_limited``) was called [workqueue_retries_total]."""
        ...


class NoopQueueMetrics:
    """The default :class:`QueueMetrics`: records nothing."""

    __slots__ = ()

    def add(self) -> None:
        """Ignore."""

    def depth(self, n: int) -> None:
        """Ignore."""

    def get(self, key: Hashable, queued_for_s: float) -> None:
        """Ignore."""

    def done(self, key: Hashable, worked_for_s: float) -> None:
        """Ignore."""

    def retry(self) -> None:
        """Ignore."""


class WorkQueue(Generic[K]):
    """A deduplicating, per-key serialising, delaying, rate-limiting queue of keys.

    Use as ``async with WorkQueue(...) as q:`` (or ``q.start()`` ... ``await q.aclose()``):
    starting runs the single add-after timer task; closing shuts the queue down and awaits
    that task. ``add``, ``get`` and ``done`` work without starting; ``add_after`` records
    delayed keys but only the running timer moves them into the queue.
    """

    def __init__(
        self,
        *,
        rate_limiter: RateLimiter,
        clock: Clock | None = None,
        metrics: QueueMetrics | None = None,
        name: str = "",
        heartbeat: float = DEFAULT_HEARTBEAT,
    ) -> None:
        """Build a stopped queue.

        ``rate_limiter`` decides ``add_rate_limited`` delays (the controller passes
        :func:`lifecycle_controller.machinery.ratelimit.default_controller_rate_limiter`). ``clock``
        defaults to :class:`RealClock`; ``metrics`` to no-op. ``name`` labels the queue for
        metrics and logs. ``heartbeat`` (seconds, > 0) bounds how long the timer sleeps
        without re-checking its heap.
        """
        if not (heartbeat > 0 and math.isfinite(heartbeat)):
            raise ValueError(f"heartbeat must be a positive number of seconds, got {heartbeat}")
        self.name = name
        self._clock: Clock = clock if clock is not None else RealClock()
        self._limiter = rate_limiter
        self._metrics: QueueMetrics = metrics if metrics is not None else NoopQueueMetrics()
        self._heartbeat = heartbeat

        self._queue: deque[K] = deque()  # FIFO of keys ready for a worker
        self._dirty: set[K] = set()  # keys that need processing (queued or re-added)
        self._processing: dict[K, float] = {}  # key -> monotonic time it was handed out
        self._enqueued_at: dict[K, float] = {}  # key -> monotonic time it became dirty
        self._getters: deque[asyncio.Future[None]] = deque()
        self._drain_waiters: list[asyncio.Future[None]] = []
        self._shutting_down = False
        self._draining = False

        self._delayed: DelayedKeys[K] = DelayedKeys()
        self._timer: asyncio.Task[None] | None = None
        self._timer_wake = asyncio.Event()

    # --- lifecycle ----------------------------------------------------------------------

    def start(self) -> None:
        """Start the add-after timer task. Must run inside the event loop; call at most once."""
        if self._timer is not None:
            raise RuntimeError("work queue already started")
        if self._shutting_down:
            raise RuntimeError("work queue is shut down")
        self._timer = asyncio.get_running_loop().create_task(
            self._run_timer(), name=f"workqueue-timer[{self.name}]"
        )
        self._timer.add_done_callback(self._on_timer_exit)

    async def aclose(self) -> None:
        """Shut down (see :meth:`shutdown`) and wait for the timer task to end. Idempotent.

        Re-raises the timer's exception if it crashed (a cancelled timer is not an error).
        """
        self.shutdown()
        if self._timer is not None:
            await asyncio.wait((self._timer,))
            if not self._timer.cancelled():
                self._timer.result()

    async def __aenter__(self) -> Self:
        self.start()
        return self

    async def __aexit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        await self.aclose()

    # --- the basic queue ----------------------------------------------------------------

    def add(self, key: K) -> None:
        """Mark ``key`` as needing processing.

        Ignored after shutdown. If the key is already pending, nothing happens (dedupe). If
        it is being processed, it is not queued now but re-queued when ``done(key)`` is
        called, so it runs once more after the current run. Otherwise it goes to the back of
        the FIFO and one waiting ``get()`` wakes.
        """
        if self._shutting_down or key in self._dirty:
            return
        self._dirty.add(key)
        self._enqueued_at.setdefault(key, self._clock.monotonic())
        self._metrics.add()
        self._metrics.depth(len(self._dirty))
        if key in self._processing:
            return
        self._queue.append(key)
        self._wake_one_getter()

    async def get(self) -> K:
        """Wait for a key, mark it as processing and return it.

        The caller owns the key until it calls ``done(key)``; meanwhile no other ``get()``
        returns it. After shutdown, keys still queued are still handed out until the queue is
        empty; then :class:`QueueShutDown` is raised (immediately, and to every waiter).
        """
        while not self._queue:
            if self._shutting_down:
                raise QueueShutDown
            waiter: asyncio.Future[None] = asyncio.get_running_loop().create_future()
            self._getters.append(waiter)
            try:
                await waiter
            except asyncio.CancelledError:
                with contextlib.suppress(ValueError):
                    self._getters.remove(waiter)
                if waiter.done() and not waiter.cancelled():
                    self._wake_one_getter()  # we were woken, then cancelled: pass it on
                raise
        key = self._queue.popleft()
        now = self._clock.monotonic()
        self._dirty.discard(key)
        self._processing[key] = now
        self._metrics.get(key, now - self._enqueued_at.pop(key, now))
        self._metrics.depth(len(self._dirty))
        return key

    def done(self, key: K) -> None:
        """Mark ``key`` as finished by the worker that got it.

        If the key was added again while it was processing, it is queued now (even after
        shutdown: the add happened before). Calling ``done`` for a key that is not being
        processed does nothing.
        """
        started = self._processing.pop(key, None)
        if started is None:
            return
        self._metrics.done(key, self._clock.monotonic() - started)
        if key in self._dirty:
            self._queue.append(key)
            self._wake_one_getter()
        self._check_drained()

    def __len__(self) -> int:
        """Return the number of keys queued for a worker (informational; races by nature)."""
        return len(self._queue)

    @property
    def in_flight(self) -> int:
        """The number of keys handed to workers and not yet ``done``."""
        return len(self._processing)

    @property
    def clock(self) -> Clock:
        """The clock this queue times delays and metrics with."""
        return self._clock

    @property
    def shutting_down(self) -> bool:
        """True once ``shutdown`` or ``shutdown_with_drain`` was called."""
        return self._shutting_down

    def shutdown(self) -> None:
        """Stop accepting keys, wake every ``get()`` and stop the timer. Idempotent.

        New ``add``/``add_after`` calls are ignored; delayed keys that have not fired are
        dropped; keys already queued are still handed out by ``get()`` until it runs dry.
        A concurrent ``shutdown_with_drain()`` stops waiting and returns (a forced
        shutdown, e.g. on a second SIGTERM).
        """
        self._draining = False
        self._begin_shutdown()
        self._check_drained()

    async def shutdown_with_drain(self) -> None:
        """Shut down like :meth:`shutdown`, then wait until every queued and in-flight key
        has been processed and ``done``.

        Workers must keep calling ``get``/``done`` until ``get`` raises, or this waits
        forever; bound it with ``asyncio.timeout``. A later ``shutdown()`` ends the wait.
        """
        self._draining = True
        self._begin_shutdown()
        while self._draining and (self._processing or self._queue):
            waiter: asyncio.Future[None] = asyncio.get_running_loop().create_future()
            self._drain_waiters.append(waiter)
            try:
                await waiter
            finally:
                with contextlib.suppress(ValueError):
                    self._drain_waiters.remove(waiter)

    # --- timing for metrics -------------------------------------------------------------

    def unfinished_work_seconds(self) -> float:
        """Sum of how long every in-flight key has been processing
        [workqueue_unfinished_work_seconds]."""
        now = self._clock.monotonic()
        return sum(now - started for started in self._processing.values())

    def longest_running_processor_seconds(self) -> float:
        """How long the longest in-flight key has been processing, 0 if none
        [workqueue_longest_running_processor_seconds]."""
        if not self._processing:
            return 0.0
        return self._clock.monotonic() - min(self._processing.values())

    def delayed_len(self) -> int:
        """Return the number of keys waiting in the add-after heap."""
        return len(self._delayed)

    # --- the delaying queue -------------------------------------------------------------

    def add_after(self, key: K, seconds: float, *, order: int = 0) -> None:
        """Add ``key`` once ``seconds`` have passed on the monotonic clock.

        Ignored after shutdown. ``seconds <= 0`` adds now. If the key already waits, the
        EARLIER time wins: a later request never postpones a wake-up, an earlier one moves
        it forward. Keys that come due together enter the queue by ``order`` (smaller
        first). Counts as a retry for metrics (as in client-go). Raises ValueError for NaN or
        infinite delays.
        """
        if self._shutting_down:
            return
        if not math.isfinite(seconds):
            raise ValueError(f"add_after delay must be finite, got {seconds}")
        self._metrics.retry()
        if seconds <= 0:
            self.add(key)
            return
        if self._delayed.offer(key, self._clock.monotonic() + seconds, order):
            self._wake_timer()

    # --- the rate-limiting queue --------------------------------------------------------

    def add_rate_limited(self, key: K, *, at_least: float = 0.0) -> None:
        """``add_after(key, rate_limiter.when(key))``: retry with backoff, and not sooner than
        ``at_least`` seconds (a server's ``Retry-After``)."""
        if self._shutting_down:
            return
        self.add_after(key, max(self._limiter.when(key), at_least))

    def forget(self, key: K) -> None:
        """Clear ``key``'s backoff history in the rate limiter. Does not dequeue anything."""
        self._limiter.forget(key)

    def num_requeues(self, key: K) -> int:
        """Return how many times ``key`` was rate-limited since it was last forgotten."""
        return self._limiter.num_requeues(key)

    # --- internals ----------------------------------------------------------------------

    def _begin_shutdown(self) -> None:
        if not self._shutting_down:
            self._shutting_down = True
            self._delayed.clear()
        while self._getters:
            waiter = self._getters.popleft()
            if not waiter.done():
                waiter.set_result(None)
        self._wake_timer()

    def _wake_one_getter(self) -> None:
        while self._getters:
            waiter = self._getters.popleft()
            if not waiter.done():
                waiter.set_result(None)
                return

    def _check_drained(self) -> None:
        if self._draining and (self._processing or self._queue):
            return
        for waiter in self._drain_waiters:
            if not waiter.done():
                waiter.set_result(None)

    def _wake_timer(self) -> None:
        self._timer_wake.set()

    async def _run_timer(self) -> None:
        """Move delayed keys into the queue when due; sleep until the next one or heartbeat."""
        while not self._shutting_down:
            now = self._clock.monotonic()
            for key in self._delayed.pop_ready(now):
                self.add(key)
            wait = self._heartbeat
            next_at = self._delayed.next_ready_at()
            if next_at is not None:
                wait = min(wait, next_at - now)
            await self._sleep_or_wake(wait)

    async def _sleep_or_wake(self, seconds: float) -> None:
        """Sleep on the injected clock until ``seconds`` pass or ``_wake_timer`` is called."""
        await sleep_or_wake(self._clock, seconds, self._timer_wake)
        self._timer_wake.clear()

    def _on_timer_exit(self, task: asyncio.Task[None]) -> None:
        if not task.cancelled() and task.exception() is not None:
            _log.error(
                "workqueue timer crashed; delayed keys will not fire",
                queue=self.name,
                exc_info=task.exception(),
            )
