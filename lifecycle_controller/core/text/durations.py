"""The strict relative-duration grammar shared by every duration the user writes.

``delete-after``, ``restart-after``, ``restart-every``, a ``catch-up`` window and the
``--*-catch-up`` / ``--max-delete-ttl`` flags all accept exactly one unsigned integer and one
unit out of ``s``, ``m``, ``h``, ``d`` (docs/annotations.md#durations). The reference stores
durations as Go ``time.Duration`` (int64 nanoseconds), so values that overflow int64 are
rejected with the same texts Go produces; durations here are Python ints of nanoseconds.
"""

from __future__ import annotations

import re

from lifecycle_controller.core.text.gotext import format_go_duration, go_quote, go_time_quote
from lifecycle_controller.core.text.units import (
    NS_PER_DAY,
    NS_PER_HOUR,
    NS_PER_MINUTE,
    NS_PER_SECOND,
)

__all__ = [
    "MAX_DURATION_NS",
    "MINIMUM_RESTART_EVERY_NS",
    "NS_PER_DAY",
    "NS_PER_HOUR",
    "NS_PER_MINUTE",
    "NS_PER_SECOND",
    "DurationError",
    "parse_duration",
    "parse_max_delete_ttl",
    "parse_restart_every",
]

MAX_DURATION_NS = (1 << 63) - 1
MINIMUM_RESTART_EVERY_NS = NS_PER_MINUTE

_UNITS = {"s": NS_PER_SECOND, "m": NS_PER_MINUTE, "h": NS_PER_HOUR}
# Go's regexp `^[0-9]+[smhd]$`: `$` without the multiline flag matches only at the very end.
_PATTERN = re.compile(r"[0-9]+[smhd]")


class DurationError(ValueError):
    """An invalid duration; ``str()`` is the reference's error text."""


def _significant_digits(digits: str) -> str:
    stripped = digits.lstrip("0")
    return stripped or "0"


def parse_duration(value: str) -> int:
    """Parse the strict grammar into positive nanoseconds, or raise DurationError."""
    if "+" in value or "-" in value:
        raise DurationError("duration must be positive and unsigned")
    if _PATTERN.fullmatch(value) is None:
        raise DurationError(f"invalid duration format: {go_quote(value)}")
    digits, unit = _significant_digits(value[:-1]), value[-1]
    if unit == "d":
        # strconv.ParseInt(.., 10, 64) overflows past 19 digits; either way "too large".
        if len(digits) > 19 or int(digits) > MAX_DURATION_NS // NS_PER_DAY:
            raise DurationError(f"number of days is too large: {value}")
        duration = int(digits) * NS_PER_DAY
    else:
        # time.ParseDuration: overflow when the count exceeds (1<<63)/unit.
        scale = _UNITS[unit]
        if len(digits) > 19 or int(digits) > (1 << 63) // scale:
            raise DurationError(f"time: invalid duration {go_time_quote(value)}")
        duration = int(digits) * scale
    if duration <= 0:
        raise DurationError("duration must be positive")
    return duration


def parse_restart_every(value: str) -> int:
    """``restart-every``: the strict grammar plus a one-minute minimum."""
    duration = parse_duration(value)
    if duration < MINIMUM_RESTART_EVERY_NS:
        raise DurationError(
            f"duration must be at least {format_go_duration(MINIMUM_RESTART_EVERY_NS)}"
        )
    return duration


def parse_max_delete_ttl(value: str) -> int | None:
    """``--max-delete-ttl``: the strict grammar; empty or zero disables it (None).

    A signed value (``-1h``) or any other invalid text raises DurationError, so the
    process refuses to start (docs/behaviour.md#max-delete-ttl).
    """
    if value in ("", "0"):
        return None
    if _PATTERN.fullmatch(value) and set(value[:-1]) == {"0"}:
        return None
    return parse_duration(value)
