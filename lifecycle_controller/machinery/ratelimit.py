"""Retry delays for failed work items, ported from client-go ``default_rate_limiters.go``.

A rate limiter answers "how long should this item wait before it is retried?". The work
queue's ``add_rate_limited(key)`` is ``add_after(key, limiter.when(key))``; a successful
reconcile calls ``forget(key)`` so the next failure starts again from the smallest delay.

The controller default (:func:`default_controller_rate_limiter`) is client-go's classic
``DefaultControllerRateLimiter``: the maximum of a per-item exponential backoff (5 ms doubling
to 1000 s) and an overall token bucket (10 qps, burst 100) that protects the API server when
many items fail at once. We deliberately keep the bucket (controller-runtime's newer priority
queue drops it): a mass failure then retries at no more than 10 items per second overall.
"""

from __future__ import annotations

import math
from collections.abc import Hashable
from typing import Protocol, runtime_checkable

from lifecycle_controller.core.text.units import NS_PER_SECOND
from lifecycle_controller.machinery.clock import Clock

__all__ = [
    "BucketRateLimiter",
    "ItemExponentialFailureRateLimiter",
    "MaxOfRateLimiter",
    "RateLimiter",
    "default_controller_rate_limiter",
]

_MAX_INT64 = 2**63 - 1


@runtime_checkable
class RateLimiter(Protocol):
    """How long an item waits before its next retry (client-go ``RateLimiter``)."""

    def when(self, item: Hashable) -> float:
        """Record one more retry of ``item`` and return how many seconds it must wait."""
        ...

    def forget(self, item: Hashable) -> None:
        """Stop tracking ``item``: its retry history is cleared (it is not dequeued)."""
        ...

    def num_requeues(self, item: Hashable) -> int:
        """Return how many times ``item`` has been retried since it was last forgotten."""
        ...


class ItemExponentialFailureRateLimiter:
    """Per-item exponential backoff: ``base_delay * 2**failures``, capped at ``max_delay``.

    ``failures`` is read *before* it is incremented, so with the defaults the delays are
    5 ms, 10 ms, 20 ms, ... 655.36 s (the 18th call), then 1000 s from the 19th call on.
    """

    def __init__(self, base_delay: float = 0.005, max_delay: float = 1000.0) -> None:
        if not (base_delay > 0 and math.isfinite(base_delay)):
            raise ValueError(f"base_delay must be a positive number of seconds, got {base_delay}")
        if not (max_delay >= base_delay and math.isfinite(max_delay)):
            raise ValueError(f"max_delay must be >= base_delay ({base_delay}), got {max_delay}")
        self._base_delay = base_delay
        self._max_delay = max_delay
        self._failures: dict[Hashable, int] = {}

    def when(self, item: Hashable) -> float:
        """Count one failure of ``item``; return ``base * 2**previous_failures`` (capped)."""
        exp = self._failures.get(item, 0)
        self._failures[item] = exp + 1
        # Like client-go, compute in nanoseconds and fall back to the cap when the value
        # would not fit in an int64 (or does not fit in a float at all).
        try:
            backoff_ns = self._base_delay * NS_PER_SECOND * math.pow(2, exp)
        except OverflowError:
            return self._max_delay
        if backoff_ns > _MAX_INT64:
            return self._max_delay
        return min(backoff_ns / NS_PER_SECOND, self._max_delay)

    def forget(self, item: Hashable) -> None:
        """Reset ``item``'s failure count to zero."""
        self._failures.pop(item, None)

    def num_requeues(self, item: Hashable) -> int:
        """Return ``item``'s failure count."""
        return self._failures.get(item, 0)


class BucketRateLimiter:
    """An overall token bucket shared by all items (client-go ``BucketRateLimiter``).

    The bucket holds up to ``burst`` tokens, starts full and refills at ``qps`` tokens per
    second of the clock's monotonic time. Every ``when()`` *reserves* one token, even if it
    does not exist yet; the delay is the time until that token will exist (``golang.org/x/time
    /rate`` ``Reserve().Delay()``). With the defaults, 100 calls at one instant return 0, then
    0.1 s, 0.2 s, ... It does not track items: ``forget`` is a no-op and ``num_requeues`` is 0.
    """

    def __init__(self, clock: Clock, *, qps: float = 10.0, burst: int = 100) -> None:
        if not (qps > 0 and math.isfinite(qps)):
            raise ValueError(f"qps must be a positive number, got {qps}")
        if burst < 1:
            raise ValueError(f"burst must be >= 1, got {burst}")
        self._clock = clock
        self._qps = qps
        self._burst = float(burst)
        self._tokens = float(burst)
        self._last = clock.monotonic()

    def when(self, item: Hashable) -> float:
        """Reserve one token; return the seconds until it exists (0 if one is available)."""
        now = self._clock.monotonic()
        elapsed = max(0.0, now - self._last)
        self._tokens = min(self._burst, self._tokens + elapsed * self._qps)
        self._last = max(self._last, now)
        self._tokens -= 1.0
        return max(0.0, -self._tokens / self._qps)

    def forget(self, item: Hashable) -> None:
        """Do nothing: the bucket is not per item."""

    def num_requeues(self, item: Hashable) -> int:
        """Return 0: the bucket is not per item."""
        return 0


class MaxOfRateLimiter:
    """Combine limiters: the delay is the largest any of them asks for.

    Every limiter's ``when()`` is called on every call (so each keeps its own accounting, e.g.
    the bucket spends a token even when the backoff is longer). ``forget`` is passed to all;
    ``num_requeues`` is the largest count any of them reports.
    """

    def __init__(self, *limiters: RateLimiter) -> None:
        if not limiters:
            raise ValueError("MaxOfRateLimiter needs at least one limiter")
        self._limiters = limiters

    def when(self, item: Hashable) -> float:
        """Call ``when(item)`` on every limiter; return the maximum."""
        return max([limiter.when(item) for limiter in self._limiters])

    def forget(self, item: Hashable) -> None:
        """Call ``forget(item)`` on every limiter."""
        for limiter in self._limiters:
            limiter.forget(item)

    def num_requeues(self, item: Hashable) -> int:
        """Return the largest ``num_requeues(item)`` of all limiters."""
        return max(limiter.num_requeues(item) for limiter in self._limiters)


def default_controller_rate_limiter(clock: Clock) -> MaxOfRateLimiter:
    """Return client-go's default: max(exponential 5 ms..1000 s per item, bucket 10 qps/100)."""
    return MaxOfRateLimiter(
        ItemExponentialFailureRateLimiter(0.005, 1000.0),
        BucketRateLimiter(clock, qps=10.0, burst=100),
    )
