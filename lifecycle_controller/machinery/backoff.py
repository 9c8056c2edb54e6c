"""The one retry backoff of the package: exponential, with jitter and a cap, reset when quiet.

client-go's reflector backoff (``wait.Backoff`` with a reset): the n-th delay is
``min(initial * factor**n, maximum) * (1 + jitter * U[0, 1))``. After ``reset_after`` seconds
(monotonic) without a failure, or after :meth:`Backoff.reset`, it starts again from
``initial``. Waiting uses the injected clock, so tests drive it with a fake one.

A caller may cap one delay lower than ``maximum`` (``cap=``): the informers do so for
connection errors, so that they notice within about two seconds that an API server which
was down answers again, while still retrying no more than about once a second. A caller
may also pass an event that cuts one wait short (``wake=``): the Namespace-defaults informers,
which take the full curve, retry at once when another informer finds the server back.
"""

from __future__ import annotations

import asyncio
import random

from lifecycle_controller.machinery.clock import Clock
from lifecycle_controller.machinery.tasks import sleep_or_wake

__all__ = ["Backoff"]


class Backoff:
    """Exponential backoff with jitter that resets after a quiet period (client-go style).

    ``next_delay()`` returns ``base * (1 + jitter * U[0, 1))`` where ``base`` starts at
    ``initial`` and is multiplied by ``factor`` after each call, up to ``maximum``. When more
    than ``reset_after`` seconds (monotonic) passed since the previous call, ``base`` starts
    again from ``initial``; ``reset_after=None`` never resets by itself.
    """

    def __init__(
        self,
        clock: Clock,
        *,
        initial: float = 0.8,
        maximum: float = 30.0,
        factor: float = 2.0,
        jitter: float = 1.0,
        reset_after: float | None = 120.0,
        rng: random.Random | None = None,
    ) -> None:
        if not 0 < initial <= maximum:
            raise ValueError("backoff needs 0 < initial <= maximum")
        if factor < 1 or jitter < 0:
            raise ValueError("backoff needs factor >= 1 and jitter >= 0")
        self._clock = clock
        self._initial = initial
        self._maximum = maximum
        self._factor = factor
        self._jitter = jitter
        self._reset_after = reset_after
        self._rng = random.Random() if rng is None else rng
        self._base = initial
        self._last: float | None = None

    def next_delay(self, *, cap: float | None = None) -> float:
        """The next delay in seconds (and one step further up the curve).

        ``cap`` bounds this one delay's base (before jitter) below ``maximum``; the curve
        itself still climbs, so a later uncapped failure waits as long as it would have.
        """
        now = self._clock.monotonic()
        quiet = self._last is not None and now - self._last > (
            self._reset_after if self._reset_after is not None else float("inf")
        )
        if quiet:
            self._base = self._initial
        self._last = now
        base = self._base if cap is None else min(self._base, max(cap, 0.0))
        self._base = min(self._base * self._factor, self._maximum)
        return base * (1.0 + self._jitter * self._rng.random())

    def reset(self) -> None:
        """Start again from ``initial`` (after a success that proves the failure is over)."""
        self._base = self._initial
        self._last = None

    async def wait(
        self,
        *,
        at_least: float = 0.0,
        cap: float | None = None,
        wake: asyncio.Event | None = None,
    ) -> float:
        """Sleep for the next delay (or ``at_least``, if longer) on the clock; return it.

        A ``wake`` event that is set during the sleep ends it early (the delay returned is
        still the one drawn): a caller that learns the failure is over need not wait it out.
        """
        delay = max(self.next_delay(cap=cap), at_least)
        if wake is None:
            await self._clock.sleep(delay)
            return delay
        await sleep_or_wake(self._clock, delay, wake)
        return delay
