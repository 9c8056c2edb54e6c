"""Action budgets (``--max-deletes-per-minute``, ``--max-restarts-per-minute``).

A guardrail against mass actions, for example a manifest applied to hundreds of objects with
a past ``delete-at``: each action takes one token from a bucket that holds at most the
per-minute budget and refills continuously. An action that finds the bucket empty is not
dropped; the caller waits (requeues) for the time this module says and tries again.
"""

from __future__ import annotations

from lifecycle_controller.machinery.clock import Clock


class ActionBudget:
    """A token bucket of ``per_minute`` tokens refilled at ``per_minute / 60`` per second.

    ``per_minute == 0`` means unlimited: :meth:`take` always succeeds.
    """

    def __init__(self, per_minute: int, *, clock: Clock) -> None:
        if per_minute < 0:
            raise ValueError("per_minute must be >= 0")
        self._capacity = float(per_minute)
        self._rate = per_minute / 60.0
        self._clock = clock
        self._tokens = self._capacity
        self._last = clock.monotonic()

    @property
    def unlimited(self) -> bool:
        return self._capacity == 0

    def _refill(self) -> None:
        now = self._clock.monotonic()
        self._tokens = min(self._capacity, self._tokens + (now - self._last) * self._rate)
        self._last = now

    def wait(self) -> float:
        """Seconds until a token is available (0.0: one is, now); nothing is taken."""
        if self.unlimited:
            return 0.0
        self._refill()
        if self._tokens >= 1.0:
            return 0.0
        return (1.0 - self._tokens) / self._rate

    def take(self) -> float:
        """Take one token and return 0.0, or return the seconds until one will be available.

        Nothing is taken when the answer is positive, so a waiting caller competes fairly
        with the others when it comes back.
        """
        if self.unlimited:
            return 0.0
        self._refill()
        if self._tokens >= 1.0:
            self._tokens -= 1.0
            return 0.0
        return (1.0 - self._tokens) / self._rate
