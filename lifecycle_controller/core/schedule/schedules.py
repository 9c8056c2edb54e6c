"""Recurring schedules (``restart-every`` and ``restart-cron``) and their planning rules.

Both kinds answer the same three questions (docs/behaviour.md#recurring-restarts): when is the next
occurrence after an anchor, where does the anchor move when one or more occurrences are
due (coalescing: one restart however many were missed), and which recent occurrence, if
any, falls inside a catch-up window.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import tzinfo
from typing import Protocol

from lifecycle_controller.core.text.cron import CronSpec, cron_next
from lifecycle_controller.core.text.timestamps import GO_ZERO_TIME_NS

__all__ = [
    "CronSchedule",
    "IntervalSchedule",
    "RecurringPlan",
    "Schedule",
    "next_occurrences",
    "plan_recurring",
    "requeue_after",
]


class Schedule(Protocol):
    """A recurring schedule over instants in integer nanoseconds."""

    def next_after(self, instant_ns: int) -> int | None:
        """The first occurrence strictly after the instant; None if there is none."""
        ...  # pragma: no cover

    def coalesced_anchor(self, last_ns: int, now_ns: int) -> int:
        """The anchor to store once due: the latest point that keeps the cadence."""
        ...  # pragma: no cover

    def recent_occurrence(self, last_ns: int, now_ns: int, window_ns: int) -> tuple[int, bool]:
        """A due occurrence no older than the window, and whether it qualifies."""
        ...  # pragma: no cover


@dataclass(frozen=True, slots=True)
class IntervalSchedule:
    """``restart-every``: the anchor plus whole multiples of the interval."""

    interval_ns: int

    def next_after(self, instant_ns: int) -> int:
        return instant_ns + self.interval_ns

    def coalesced_anchor(self, last_ns: int, now_ns: int) -> int:
        # The latest grid point last + k*interval <= now. Exact integer arithmetic, so
        # anchors centuries old (the reference tests year 1) keep the cadence.
        if now_ns <= last_ns:
            return now_ns
        return now_ns - (now_ns - last_ns) % self.interval_ns

    def recent_occurrence(self, last_ns: int, now_ns: int, window_ns: int) -> tuple[int, bool]:
        latest = self.coalesced_anchor(last_ns, now_ns)
        return latest, latest > last_ns and latest >= now_ns - window_ns


@dataclass(frozen=True, slots=True)
class CronSchedule:
    """``restart-cron`` in a zone, under the DST policy of :mod:`..text.cron`."""

    spec: CronSpec
    zone: tzinfo

    def next_after(self, instant_ns: int) -> int | None:
        return cron_next(self.spec, self.zone, instant_ns)

    def coalesced_anchor(self, last_ns: int, now_ns: int) -> int:
        del last_ns  # a cron anchor moves to the evaluation time
        return now_ns

    def recent_occurrence(self, last_ns: int, now_ns: int, window_ns: int) -> tuple[int, bool]:
        # Search from just before the window opens (the boundary is inclusive), but never
        # before the anchor, so history is not replayed.
        lower = max(last_ns, now_ns - window_ns - 1)
        occurrence = self.next_after(lower)
        if occurrence is None:
            return GO_ZERO_TIME_NS, False
        return occurrence, occurrence <= now_ns


@dataclass(frozen=True, slots=True)
class RecurringPlan:
    """Where a recurring schedule stands at ``now`` (docs/behaviour.md#recurring-restarts).

    ``scheduled_ns`` is the first occurrence after the anchor (the first missed one when
    due). When nothing follows the anchor, it is Go's zero time and the plan is due, as in
    the reference. ``anchor_ns`` is the coalesced anchor when due, else the old anchor.
    """

    scheduled_ns: int
    due: bool
    anchor_ns: int


def plan_recurring(schedule: Schedule, last_ns: int, now_ns: int) -> RecurringPlan:
    """Is an occurrence due, and where would the anchor move?"""
    scheduled = schedule.next_after(last_ns)
    if scheduled is None:
        scheduled = GO_ZERO_TIME_NS
    if now_ns < scheduled:
        return RecurringPlan(scheduled_ns=scheduled, due=False, anchor_ns=last_ns)
    return RecurringPlan(
        scheduled_ns=scheduled, due=True, anchor_ns=schedule.coalesced_anchor(last_ns, now_ns)
    )


def requeue_after(target_ns: int, now_ns: int) -> int:
    """Delay until ``target``, never below 1 ns (a zero delay would drop the timer)."""
    return max(target_ns - now_ns, 1)


def next_occurrences(schedule: Schedule, after_ns: int, count: int) -> list[int]:
    """Up to ``count`` successive occurrences after an instant (for ``plan``)."""
    occurrences: list[int] = []
    cursor = after_ns
    while len(occurrences) < count:
        following = schedule.next_after(cursor)
        if following is None:
            break
        occurrences.append(following)
        cursor = following
    return occurrences
