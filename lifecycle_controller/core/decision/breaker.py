"""The circuit breaker's pure rules: counting actions in a sliding window, and its latch.

docs/behaviour.md#circuit-breaker. With a limit of N actions per window W, the breaker
**trips** before the (N+1)th deletion or restart that would fall within any window of
length W; the tripped state is latched (in a ConfigMap beside the Lease, see
:class:`BreakerState`) until an operator resets it. Time is injected (nanoseconds).
"""

from __future__ import annotations

from collections import deque
from collections.abc import Mapping
from dataclasses import dataclass, replace

__all__ = ["HELD_NAMED", "ActionWindow", "BreakerState"]

#: How many held objects the latched state names (``heldObjects``); ``held`` counts them all.
HELD_NAMED = 10


class ActionWindow:
    """The instants of the actions carried out within the last ``window_ns``.

    :meth:`admit` reserves a place for one more action at ``now_ns`` if fewer than ``limit``
    actions fell within ``(now_ns - window_ns, now_ns]``; :meth:`refund` gives back the most
    recent reservation (the write failed, so nothing was carried out). Admitted actions
    therefore never number more than ``limit`` within any window of length ``window_ns``.
    """

    def __init__(self, limit: int, window_ns: int) -> None:
        if limit < 0 or window_ns <= 0:
            raise ValueError(f"need limit >= 0 and window_ns > 0, got {limit}, {window_ns}")
        self.limit = limit
        self.window_ns = window_ns
        self._times: deque[int] = deque()

    def _prune(self, now_ns: int) -> None:
        while self._times and self._times[0] <= now_ns - self.window_ns:
            self._times.popleft()

    def count(self, now_ns: int) -> int:
        """Admitted actions within the window ending at ``now_ns``."""
        self._prune(now_ns)
        return len(self._times)

    def admit(self, now_ns: int) -> bool:
        """Reserve one action at ``now_ns``; False (nothing reserved) when it would exceed."""
        if self.count(now_ns) >= self.limit:
            return False
        if self._times and now_ns < self._times[-1]:
            now_ns = self._times[-1]  # a clock that stepped back must not reorder the deque
        self._times.append(now_ns)
        return True

    def refund(self) -> None:
        """Give back the most recent reservation."""
        if self._times:
            self._times.pop()

    def clear(self) -> None:
        """Forget every action (the breaker was reset)."""
        self._times.clear()


@dataclass(frozen=True, slots=True)
class BreakerState:
    """The latched state as stored in the breaker ConfigMap's ``data``.

    ``tripped_at`` (RFC 3339) identifies one trip: each held object is told once per trip.
    ``held`` counts the actions held by the open breaker, ``held_objects`` names the first
    :data:`HELD_NAMED` of them (``kind/namespace/name``); a reset lets every one of them go.
    """

    open: bool = False
    tripped_at: str = ""
    actions: int = 0
    window: str = ""
    trips: int = 0
    reset_at: str = ""
    held: int = 0
    held_objects: tuple[str, ...] = ()

    @classmethod
    def from_data(cls, data: Mapping[str, str] | None) -> BreakerState:
        """Parse ``data``; missing or unreadable fields take their closed defaults."""
        data = data or {}

        def number(key: str) -> int:
            try:
                return max(0, int(str(data.get(key, "0"))))
            except ValueError:
                return 0

        return cls(
            open=str(data.get("state", "")).strip().lower() == "open",
            tripped_at=str(data.get("trippedAt", "")),
            actions=number("actions"),
            window=str(data.get("window", "")),
            trips=number("trips"),
            reset_at=str(data.get("resetAt", "")),
            held=number("held"),
            held_objects=tuple(
                name for name in str(data.get("heldObjects", "")).split(",") if name.strip()
            ),
        )

    def to_data(self) -> dict[str, str]:
        return {
            "state": "open" if self.open else "closed",
            "trippedAt": self.tripped_at,
            "actions": str(self.actions),
            "window": self.window,
            "trips": str(self.trips),
            "resetAt": self.reset_at,
            **self.held_data(),
        }

    def held_data(self) -> dict[str, str]:
        """The two keys that say what the open breaker holds."""
        return {"held": str(self.held), "heldObjects": ",".join(self.held_objects)}

    def tripped(self, *, at: str, actions: int, window: str) -> BreakerState:
        """This state after one more trip."""
        return BreakerState(True, at, actions, window, self.trips + 1, self.reset_at)

    def holding(self, held: int, names: tuple[str, ...] | list[str]) -> BreakerState:
        """This state holding ``held`` actions, the first of them named."""
        return replace(self, held=held, held_objects=tuple(names)[:HELD_NAMED])

    def reset(self, *, at: str) -> BreakerState:
        """This state after a reset (the trip's facts stay for the record; nothing is held)."""
        return BreakerState(False, self.tripped_at, self.actions, self.window, self.trips, at)
