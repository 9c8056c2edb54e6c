"""The controller's only source of time.

Every engine that waits or timestamps (the work queue's add-after timer, the rate limiters,
the leader elector, the scheduler's "now") takes a :class:`Clock` instead of calling
``time`` or ``asyncio.sleep`` directly. Production code passes :class:`RealClock`; tests pass
the ``FakeClock`` of ``tests/doubles/fakeclock.py`` and drive time by hand, so timing tests
are deterministic and never sleep for real.

Two kinds of time are kept apart on purpose:

* ``now_ns()`` is wall-clock UTC (integer nanoseconds since the Unix epoch). Use it for
  due times, cron math and anything shown to humans. It can jump (NTP steps).
* ``monotonic()`` is seconds on a clock that never goes backwards. Use it for delays,
  deadlines, backoff and lease observations. Its origin is arbitrary.

``sleep()`` waits on the monotonic clock.

:func:`thread_cpu_ns` is neither: the CPU time the calling thread has used, what a
computation cost whatever the machine's load (the policies' stopwatch for conditions), less
what the cyclic garbage collector spent in that thread. A collection runs in whichever
allocation happens to trigger it, and a full one over the heap of a controller holding tens of
thousands of objects takes longer than a condition's whole time budget: timed with it, one
innocent evaluation overran and stopped its policy's condition for every object.
"""

from __future__ import annotations

import asyncio
import gc
import threading
import time
from typing import Protocol, runtime_checkable

__all__ = ["Clock", "RealClock", "thread_cpu_ns"]


@runtime_checkable
class Clock(Protocol):
    """Wall time, monotonic time and sleeping, injectable for tests."""

    def now_ns(self) -> int:
        """Return wall-clock UTC time as integer nanoseconds since the Unix epoch."""
        ...

    def monotonic(self) -> float:
        """Return seconds on a monotonic clock (arbitrary origin, never goes backwards)."""
        ...

    async def sleep(self, seconds: float) -> None:
        """Suspend the caller for ``seconds`` of monotonic time (<= 0 just yields once).

        Cancellation propagates as :class:`asyncio.CancelledError`, as with
        :func:`asyncio.sleep`.
        """
        ...


class RealClock:
    """The system clock: ``time.time_ns``, ``time.monotonic`` and ``asyncio.sleep``.

    ``monotonic()`` is ``time.monotonic()``, which is also what the default asyncio event loop
    uses for ``loop.time()``, so deadlines computed here agree with asyncio timers.
    """

    __slots__ = ()

    def now_ns(self) -> int:
        """Return ``time.time_ns()`` (UTC nanoseconds since the epoch)."""
        return time.time_ns()

    def monotonic(self) -> float:
        """Return ``time.monotonic()`` in seconds."""
        return time.monotonic()

    async def sleep(self, seconds: float) -> None:
        """Sleep with :func:`asyncio.sleep`; negative values are treated as 0."""
        await asyncio.sleep(max(0.0, seconds))

    def __repr__(self) -> str:
        return "RealClock()"


class _Collections(threading.local):
    """Per thread: when the running collection started, and the CPU all its collections took."""

    started = 0
    spent = 0


_collections = _Collections()


def _on_collection(phase: str, info: dict[str, int]) -> None:
    """``gc.callbacks`` hook: a collection runs in the thread that triggered it."""
    now = time.thread_time_ns()
    if phase == "start":
        _collections.started = now
    else:
        _collections.spent += now - _collections.started


gc.callbacks.append(_on_collection)


def thread_cpu_ns() -> int:
    """The calling thread's CPU time in nanoseconds (``time.thread_time_ns``), less the cyclic
    garbage collector's passes in it: it does not move while the process waits for a CPU or
    sleeps, nor while the collector runs, so a computation timed with it is blamed neither for
    the machine's load nor for a collection its allocations happened to trigger."""
    return time.thread_time_ns() - _collections.spent
