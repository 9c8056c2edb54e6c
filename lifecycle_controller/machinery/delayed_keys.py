"""The work queue's delayed keys: a min-heap of (time, key) with one live entry per key.

``WorkQueue.add_after`` puts keys here and its timer task moves the ready ones into the
queue. A key may carry an ``order``: keys that come due together (within
:data:`ORDERED_GRACE`) leave by it, smaller first, which is how actions deferred to one
maintenance-window opening run in due-time order (docs/behaviour.md).
"""

from __future__ import annotations

import heapq
import itertools
from collections.abc import Hashable
from dataclasses import dataclass, field
from typing import Generic, TypeVar

__all__ = ["ORDERED_GRACE", "DelayedKeys"]

K = TypeVar("K", bound=Hashable)

#: How long an ordered delayed key waits for others due with it (``add_after(order=...)``).
ORDERED_GRACE = 0.005


@dataclass(order=True)
class _Waiting(Generic[K]):
    ready_at: float
    seq: int
    key: K = field(compare=False)
    order: int = field(default=0, compare=False)


class DelayedKeys(Generic[K]):
    """Keys waiting for a future time: a min-heap plus a dict, earliest time wins per key.

    Superseded heap entries are left in place and skipped when they surface (lazy deletion),
    so every operation is O(log n).
    """

    def __init__(self) -> None:
        self._heap: list[_Waiting[K]] = []
        self._by_key: dict[K, _Waiting[K]] = {}
        self._seq = itertools.count()

    def __len__(self) -> int:
        return len(self._by_key)

    def offer(self, key: K, ready_at: float, order: int = 0) -> bool:
        """Schedule ``key`` at ``ready_at`` unless it already waits for an earlier time.

        Returns True when the earliest time of the whole set moved earlier (the timer must
        re-arm).
        """
        current = self._by_key.get(key)
        if current is not None and current.ready_at <= ready_at:
            return False
        head = self.next_ready_at()
        entry = _Waiting(ready_at, next(self._seq), key, order)
        self._by_key[key] = entry
        heapq.heappush(self._heap, entry)
        return head is None or ready_at < head

    def pop_ready(self, now: float) -> list[K]:
        """Remove and return every key whose time is ``<= now``: by ``order``, then earliest."""
        ready: list[_Waiting[K]] = []
        while (head := self._live_head()) is not None and head.ready_at <= now:
            heapq.heappop(self._heap)
            del self._by_key[head.key]
            ready.append(head)
        ready.sort(key=lambda entry: entry.order)  # stable: earliest first within an order
        return [entry.key for entry in ready]

    def next_ready_at(self) -> float | None:
        """When the timer must move keys next (None: nothing waits). An ordered key waits
        :data:`ORDERED_GRACE` more, so the keys due within that span of it leave together,
        by ``order``."""
        head = self._live_head()
        if head is None:
            return None
        return head.ready_at + (ORDERED_GRACE if head.order else 0.0)

    def clear(self) -> None:
        """Drop every waiting key."""
        self._heap.clear()
        self._by_key.clear()

    def _live_head(self) -> _Waiting[K] | None:
        while self._heap and self._by_key.get(self._heap[0].key) is not self._heap[0]:
            heapq.heappop(self._heap)
        return self._heap[0] if self._heap else None
