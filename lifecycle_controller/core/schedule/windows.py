"""Maintenance windows: the ``maintenance-window`` grammar and when a due action may run.

The contract: docs/annotations.md#maintenance-windows.

* **Grammar.** One or more comma-separated windows ``<Weekday>-<Weekday> <HH:MM>-<HH:MM>
  <IANA zone>``, e.g. ``Mon-Fri 01:00-05:00 Europe/Warsaw``. Weekdays are ``Mon`` ... ``Sun``
  (a range may wrap: ``Fri-Mon``); times are two-digit ``HH:MM`` from ``00:00`` to ``23:59``
  (an end may also be ``24:00``); an end before the start runs past midnight, into the next
  day. The weekday range names the days a window *opens* on.
* **DST.** Window times are wall-clock times in their zone, with the rule of
  ``restart-cron`` (:func:`~lifecycle_controller.core.text.cron.wall_instant_ns`): a repeated wall
  time means its first instance, a wall time inside a spring-forward gap means the first
  instant after the gap. A window entirely inside a gap is empty that day.
* **Deferral.** A due action runs at once if the instant is inside some window; otherwise it
  waits for the next opening (:func:`defer`). Catch-up lateness is measured from the first
  instant at or after the scheduled time that lies inside a window (the *opening*).

Pure: instants are integer nanoseconds since the epoch; nothing reads the clock.
"""

from __future__ import annotations

import functools
import re
from dataclasses import dataclass
from datetime import UTC, date, datetime, time, timedelta, tzinfo
from typing import Final

from lifecycle_controller.core.text.cron import ZoneError, load_zone, wall_instant_ns
from lifecycle_controller.core.text.durations import NS_PER_SECOND
from lifecycle_controller.core.text.gotext import go_quote, go_trim_space

__all__ = [
    "WEEKDAYS",
    "Deferral",
    "MaintenanceWindow",
    "MaintenanceWindows",
    "WindowError",
    "defer",
    "parse_windows",
]

WEEKDAYS: Final = ("Mon", "Tue", "Wed", "Thu", "Fri", "Sat", "Sun")
_MINUTES_PER_DAY: Final = 24 * 60
_TIME = re.compile(r"([0-9]{2}):([0-9]{2})")
# A week and a bit either side always holds an opening of every non-empty window.
_SCAN_BACK_DAYS: Final = 2
_SCAN_AHEAD_DAYS: Final = 16
_EPOCH_UTC: Final = datetime(1970, 1, 1, tzinfo=UTC)


class WindowError(ValueError):
    """An invalid ``maintenance-window`` value; ``str()`` is the text users see."""


@dataclass(frozen=True, slots=True)
class MaintenanceWindow:
    """One window: the weekdays it opens on (0 = Monday), minutes of the day, its zone."""

    text: str
    days: frozenset[int]
    start_minute: int  # 0 .. 1439
    end_minute: int  # 1 .. 1440; at or before start_minute: the next day
    zone: tzinfo

    def intervals(self, around: date) -> list[tuple[int, int]]:
        """[open, close) instants of the openings on days near ``around`` (in its zone)."""
        spans: list[tuple[int, int]] = []
        for offset in range(-_SCAN_BACK_DAYS, _SCAN_AHEAD_DAYS + 1):
            day = around + timedelta(days=offset)
            if day.weekday() not in self.days:
                continue
            start = datetime.combine(day, time()) + timedelta(minutes=self.start_minute)
            end_day = day if self.end_minute > self.start_minute else day + timedelta(days=1)
            end = datetime.combine(end_day, time()) + timedelta(minutes=self.end_minute)
            opens = wall_instant_ns(start, self.zone)
            closes = wall_instant_ns(end, self.zone)
            if opens < closes:
                spans.append((opens, closes))
        return spans


@dataclass(frozen=True, slots=True)
class MaintenanceWindows:
    """A parsed ``maintenance-window`` value: when it is open, and when it opens next."""

    text: str
    windows: tuple[MaintenanceWindow, ...]

    def _spans(self, instant_ns: int) -> list[tuple[int, int]]:
        spans: list[tuple[int, int]] = []
        for window in self.windows:
            around = _local_date(instant_ns, window.zone)
            spans.extend(window.intervals(around))
        return spans

    def is_open(self, instant_ns: int) -> bool:
        """Whether the instant lies inside some window (open inclusive, close exclusive)."""
        return any(opens <= instant_ns < closes for opens, closes in self._spans(instant_ns))

    def next_opening(self, after_ns: int) -> int | None:
        """The first opening strictly after the instant (None only for empty windows)."""
        openings = [opens for opens, _ in self._spans(after_ns) if opens > after_ns]
        return min(openings, default=None)

    def first_open(self, instant_ns: int) -> int:
        """The instant itself if a window is open then, otherwise the next opening."""
        if self.is_open(instant_ns):
            return instant_ns
        following = self.next_opening(instant_ns)
        return instant_ns if following is None else following


@dataclass(frozen=True, slots=True)
class Deferral:
    """When a due occurrence may run under the windows.

    ``opening_ns``: the first instant at or after the scheduled time inside a window (the
    scheduled time itself when it is inside one); catch-up lateness is measured from it.
    ``run_at_ns``: the earliest instant from ``now`` on at which it may run (``now`` itself
    when a window is open now).
    """

    scheduled_ns: int
    opening_ns: int
    run_at_ns: int

    @property
    def deferred(self) -> bool:
        """Whether the scheduled time lies outside every window."""
        return self.opening_ns != self.scheduled_ns


def defer(windows: MaintenanceWindows, scheduled_ns: int, now_ns: int) -> Deferral:
    """The deferral of an occurrence scheduled at ``scheduled_ns``, seen at ``now_ns``."""
    opening = windows.first_open(scheduled_ns)
    run_at = opening if now_ns < opening else windows.first_open(now_ns)
    return Deferral(scheduled_ns=scheduled_ns, opening_ns=opening, run_at_ns=run_at)


def _local_date(instant_ns: int, zone: tzinfo) -> date:
    seconds = instant_ns // NS_PER_SECOND
    return (_EPOCH_UTC + timedelta(seconds=seconds)).astimezone(zone).date()


# --- grammar -----------------------------------------------------------------------------------


def _weekday(text: str) -> int:
    if text not in WEEKDAYS:
        raise WindowError(
            f"unknown weekday {go_quote(text)}: expected one of {', '.join(WEEKDAYS)}"
        )
    return WEEKDAYS.index(text)


def _days(text: str) -> frozenset[int]:
    first, separator, last = text.partition("-")
    if not separator:
        raise WindowError(f"expected a weekday range such as Mon-Fri, got {go_quote(text)}")
    start, end = _weekday(first), _weekday(last)
    span = (end - start) % 7
    return frozenset((start + step) % 7 for step in range(span + 1))


def _minute(text: str, *, end: bool) -> int:
    match = _TIME.fullmatch(text)
    if match is None:
        raise WindowError(f"expected a time HH:MM, got {go_quote(text)}")
    hours, minutes = int(match[1]), int(match[2])
    if end and (hours, minutes) == (24, 0):
        return _MINUTES_PER_DAY
    if hours > 23 or minutes > 59:
        raise WindowError(
            f"time {go_quote(text)} out of range (00:00 to 23:59, or 24:00 as an end)"
        )
    return hours * 60 + minutes


def _window(text: str) -> MaintenanceWindow:
    fields = text.split()
    if len(fields) != 3:
        raise WindowError(
            f"window {go_quote(text)}: expected <Weekday>-<Weekday> <HH:MM>-<HH:MM> <zone>"
        )
    days_text, times_text, zone_name = fields
    days = _days(days_text)
    start_text, separator, end_text = times_text.partition("-")
    if not separator:
        raise WindowError(f"expected a time range such as 01:00-05:00, got {go_quote(times_text)}")
    start, end = _minute(start_text, end=False), _minute(end_text, end=True)
    if start == end:
        raise WindowError(f"window {go_quote(text)} is empty: its start equals its end")
    if zone_name == "Local":
        raise WindowError(f"unknown time zone {go_quote(zone_name)}: expected an IANA name")
    try:
        zone = load_zone(zone_name, local_zone=UTC)
    except ZoneError:
        raise WindowError(
            f"unknown time zone {go_quote(zone_name)}: expected an IANA name"
        ) from None
    return MaintenanceWindow(text=text, days=days, start_minute=start, end_minute=end, zone=zone)


@functools.lru_cache(maxsize=1024)
def parse_windows(value: str) -> MaintenanceWindows:
    """Parse a ``maintenance-window`` value (annotation or flag); raise WindowError."""
    items = [go_trim_space(item) for item in value.split(",")]
    if not any(items):
        raise WindowError("expected at least one window")
    windows = []
    for item in items:
        if not item:
            raise WindowError(f"empty window in {go_quote(value)}")
        windows.append(_window(item))
    return MaintenanceWindows(text=go_trim_space(value), windows=tuple(windows))
