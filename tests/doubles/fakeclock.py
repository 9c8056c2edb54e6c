"""A hand-driven :class:`~lifecycle_controller.machinery.clock.Clock` for asyncio tests.

Time stands still until the test calls :meth:`FakeClock.advance`. ``sleep()`` blocks until
fake monotonic time passes its deadline; ``advance()`` moves time forward *in steps*, waking
sleepers in deadline order and letting the woken tasks run (and re-arm their timers) before
moving on, the way a real clock would. So a loop that sleeps 10 s at a time, advanced by
100 s, runs ten times, each one observing the right ``monotonic()``.

Typical use::

    clock = FakeClock()
    async with WorkQueue(clock=clock) as q:
        q.add_after("k", 5)
        await clock.advance(5)
        assert len(q) == 1
"""

from __future__ import annotations

import asyncio
import heapq
import itertools
from dataclasses import dataclass, field

__all__ = ["DEFAULT_START_MONOTONIC", "DEFAULT_START_NS", "FakeClock"]

#: 2026-01-01T00:00:00Z: a fixed, recognisable wall-clock start.
DEFAULT_START_NS = 1_767_225_600 * 1_000_000_000
#: Deliberately not 0, so code that treats 0 as "unset" is caught.
DEFAULT_START_MONOTONIC = 1000.0

# Deadlines within this many seconds of the target count as reached: ``now + (t - now)`` is
# not always exactly ``t`` in floating point, and a sleeper one ulp late must still wake.
_EPSILON = 1e-9
# Upper bound on event-loop iterations one settle() may take (guards against busy loops).
_MAX_SETTLE_ROUNDS = 10_000


@dataclass(order=True)
class _Sleeper:
    deadline: float
    seq: int
    future: asyncio.Future[None] = field(compare=False)


class FakeClock:
    """A fake clock: frozen until advanced; wall and monotonic time move together.

    ``jump_wall()`` moves only the wall clock, to simulate an NTP step.
    """

    def __init__(
        self,
        *,
        start_ns: int = DEFAULT_START_NS,
        start_monotonic: float = DEFAULT_START_MONOTONIC,
    ) -> None:
        self._mono_base = start_monotonic
        self._mono = start_monotonic
        self._wall_base_ns = start_ns
        self._sleepers: list[_Sleeper] = []
        self._seq = itertools.count()

    # --- the Clock protocol -------------------------------------------------------------

    def now_ns(self) -> int:
        """Return fake wall-clock UTC nanoseconds since the epoch."""
        return self._wall_base_ns + round((self._mono - self._mono_base) * 1e9)

    def monotonic(self) -> float:
        """Return fake monotonic seconds."""
        return self._mono

    async def sleep(self, seconds: float) -> None:
        """Block until :meth:`advance` moves time to ``monotonic() + seconds``.

        ``seconds <= 0`` yields to the event loop once and returns, like ``asyncio.sleep(0)``.
        Cancelling the sleeping task removes the sleeper.
        """
        if seconds <= 0:
            await asyncio.sleep(0)
            return
        future: asyncio.Future[None] = asyncio.get_running_loop().create_future()
        heapq.heappush(self._sleepers, _Sleeper(self._mono + seconds, next(self._seq), future))
        try:
            await future
        finally:
            if not future.done():
                future.cancel()

    # --- driving time -------------------------------------------------------------------

    async def advance(self, seconds: float) -> None:
        """Move time forward by ``seconds``, waking sleepers in deadline order.

        Settles the event loop first (so tasks that are about to sleep register), then for
        each sleeper due within the window: sets time to its deadline, wakes every sleeper due
        by then and settles again. Finally sets time to the target and settles once more.
        """
        if seconds < 0:
            raise ValueError(f"cannot advance a clock backwards ({seconds} s)")
        target = self._mono + seconds
        await self.settle()
        while (head := self._next_live()) is not None and head.deadline <= target + _EPSILON:
            self._mono = max(self._mono, head.deadline)
            self._wake_due()
            await self.settle()
        self._mono = max(self._mono, target)
        await self.settle()

    async def advance_to_next(self) -> float | None:
        """Advance exactly to the earliest pending deadline; return it (``None`` if none)."""
        await self.settle()
        head = self._next_live()
        if head is None:
            return None
        await self.advance(max(0.0, head.deadline - self._mono))
        return head.deadline

    def jump_wall(self, seconds: float) -> None:
        """Step only the wall clock by ``seconds`` (may be negative); sleepers are unaffected."""
        self._wall_base_ns += round(seconds * 1e9)

    async def settle(self) -> None:
        """Let every runnable task run until the event loop has nothing ready to do.

        Uses the default loop's ready queue when it can see it; otherwise yields a fixed
        number of times. Tasks blocked on fake sleeps stay blocked, by design.
        """
        loop = asyncio.get_running_loop()
        ready = getattr(loop, "_ready", None)
        if ready is None:
            for _ in range(100):
                await asyncio.sleep(0)
            return
        for _ in range(_MAX_SETTLE_ROUNDS):
            await asyncio.sleep(0)
            if not ready:
                # One extra round: callbacks scheduled by the last handle run next iteration.
                await asyncio.sleep(0)
                if not ready:
                    return
        raise RuntimeError("event loop did not settle: a task is busy-looping")

    # --- introspection ------------------------------------------------------------------

    def sleeper_deadlines(self) -> list[float]:
        """Return the sorted monotonic deadlines of every task currently sleeping."""
        return sorted(s.deadline for s in self._sleepers if not s.future.done())

    def next_deadline(self) -> float | None:
        """Return the earliest pending sleep deadline, or ``None`` when nobody sleeps."""
        head = self._next_live()
        return None if head is None else head.deadline

    # --- internals ----------------------------------------------------------------------

    def _next_live(self) -> _Sleeper | None:
        while self._sleepers and self._sleepers[0].future.done():
            heapq.heappop(self._sleepers)
        return self._sleepers[0] if self._sleepers else None

    def _wake_due(self) -> None:
        while (head := self._next_live()) is not None and head.deadline <= self._mono + _EPSILON:
            heapq.heappop(self._sleepers)
            head.future.set_result(None)

    def __repr__(self) -> str:
        return f"FakeClock(monotonic={self._mono!r}, now_ns={self.now_ns()!r})"
