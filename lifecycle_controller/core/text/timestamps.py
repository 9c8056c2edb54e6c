"""RFC 3339 timestamps as integer nanoseconds since the Unix epoch (UTC).

Instants are plain ints so that ``last-restart-timestamp`` round-trips nanoseconds (Python's
datetime stops at microseconds) and so that anchors as old as year 1 are ordinary numbers.

Parsing is a port of Go's ``time.Parse(time.RFC3339, value)`` for that one layout, because the
reference accepted exactly what Go accepts and its error texts reach users in Events. That is
stricter than ``datetime.fromisoformat`` (uppercase ``T``, seconds and an explicit zone are
required, the calendar is checked) and, like Go, it also takes a few forms strict RFC 3339
does not: a one-digit hour, a comma before the fraction, more than nine fractional digits
(the rest are dropped) and zone offsets up to ``±24:60``.

Formatting writes what the reference writes: whole seconds in UTC for ``*-at`` values, and
Go's RFC3339Nano (trailing zeros trimmed) for anchors and Event messages.

Every reconcile parses the object's ``creationTimestamp`` and its due times again, and the
values rarely change, so the instants of the last few thousand valid values are remembered
(an invalid value is parsed again each time: its error is built anew).
"""

from __future__ import annotations

import functools

from lifecycle_controller.core.text.durations import NS_PER_SECOND
from lifecycle_controller.core.text.gotext import go_time_quote

__all__ = [
    "GO_ZERO_TIME_NS",
    "RFC3339_LAYOUT",
    "TimestampError",
    "days_from_civil",
    "format_rfc3339_nano",
    "format_rfc3339_seconds",
    "instant_ns",
    "parse_rfc3339",
    "parse_rfc3339_or_none",
]

RFC3339_LAYOUT = "2006-01-02T15:04:05Z07:00"
_SECONDS_PER_DAY = 86_400


class TimestampError(ValueError):
    """A value Go's time.Parse rejects; ``str()`` is Go's ParseError text."""


def _is_leap(year: int) -> bool:
    return year % 4 == 0 and (year % 100 != 0 or year % 400 == 0)


def _days_in_month(month: int, year: int) -> int:
    if month == 2:
        return 29 if _is_leap(year) else 28
    return 30 if month in (4, 6, 9, 11) else 31


def days_from_civil(year: int, month: int, day: int) -> int:
    """Days since 1970-01-01 of a proleptic Gregorian date (any year)."""
    year -= month <= 2
    era = year // 400
    year_of_era = year - era * 400
    day_of_year = (153 * (month + (-3 if month > 2 else 9)) + 2) // 5 + day - 1
    day_of_era = year_of_era * 365 + year_of_era // 4 - year_of_era // 100 + day_of_year
    return era * 146_097 + day_of_era - 719_468


def _civil_from_days(days: int) -> tuple[int, int, int]:
    days += 719_468
    era = days // 146_097
    day_of_era = days - era * 146_097
    year_of_era = (
        day_of_era - day_of_era // 1460 + day_of_era // 36_524 - day_of_era // 146_096
    ) // 365
    day_of_year = day_of_era - (365 * year_of_era + year_of_era // 4 - year_of_era // 100)
    mp = (5 * day_of_year + 2) // 153
    day = day_of_year - (153 * mp + 2) // 5 + 1
    month = mp + (3 if mp < 10 else -9)
    year = year_of_era + era * 400 + (month <= 2)
    return year, month, day


def instant_ns(
    year: int, month: int, day: int, hour: int = 0, minute: int = 0, second: int = 0, nanos: int = 0
) -> int:
    """The UTC instant of a calendar date and time, in nanoseconds since the epoch."""
    seconds = days_from_civil(year, month, day) * _SECONDS_PER_DAY
    seconds += hour * 3600 + minute * 60 + second
    return seconds * NS_PER_SECOND + nanos


# The zero value of Go's time.Time (0001-01-01T00:00:00Z): what robfig/cron's Next returns
# when it finds nothing, and what the reference then compares against.
GO_ZERO_TIME_NS = instant_ns(1, 1, 1)


# --- parsing ---------------------------------------------------------------------------


class _Reject(Exception):
    """Internal: one layout element failed; carries the ParseError pieces."""

    def __init__(self, value_elem: str, layout_elem: str) -> None:
        super().__init__(value_elem)
        self.value_elem = value_elem
        self.layout_elem = layout_elem


class _OutOfRange(Exception):
    """Internal: a field parsed but is out of range ("month out of range")."""


def _digit(text: str, index: int) -> bool:
    return index < len(text) and "0" <= text[index] <= "9"


def _getnum(text: str, fixed: bool, layout_elem: str) -> tuple[int, str]:
    """Go's getnum: one or two digits (exactly two when fixed)."""
    if not _digit(text, 0):
        raise _Reject(text, layout_elem)
    if not _digit(text, 1):
        if fixed:
            raise _Reject(text, layout_elem)
        return int(text[0]), text[1:]
    return int(text[:2]), text[2:]


def _skip(text: str, literal: str) -> str:
    if not text.startswith(literal):
        raise _Reject(text, literal)
    return text[len(literal) :]


def _parse_fraction(text: str) -> tuple[int, str]:
    """The fractional second Go accepts after the seconds even though the layout lacks it."""
    if len(text) >= 2 and text[0] in ".," and _digit(text, 1):
        end = 2
        while _digit(text, end):
            end += 1
        digits = text[1:end][:9]
        return int(digits.ljust(9, "0")), text[end:]
    return 0, text


def _parse_zone(text: str) -> tuple[int, str]:
    """``Z`` or ``±hh:mm``; returns the offset in seconds east of UTC."""
    layout_elem = "Z07:00"
    if text[:1] == "Z":
        return 0, text[1:]
    if len(text) < 6 or text[3] != ":":
        raise _Reject(text, layout_elem)
    try:
        hours, _ = _getnum(text[1:3], True, layout_elem)
        minutes, _ = _getnum(text[4:6], True, layout_elem)
    except _Reject:
        raise _Reject(text, layout_elem) from None
    # Go tests the hour first and the minute second, so an out-of-range minute wins.
    if minutes > 60:
        raise _OutOfRange("time zone offset minute")
    if hours > 24:
        raise _OutOfRange("time zone offset hour")
    if text[0] not in ("+", "-"):
        raise _Reject(text, layout_elem)
    offset = (hours * 60 + minutes) * 60
    return (-offset if text[0] == "-" else offset), text[6:]


#: Valid values whose instant is remembered (a value is under 40 bytes: about 0.5 MB).
PARSED_CACHE_SIZE = 4096


def _parse_fields(value: str) -> int:
    rest = value
    if len(rest) < 4 or not _digit(rest, 0) or not rest[:4].isascii() or not rest[:4].isdigit():
        raise _Reject(rest, "2006")
    year, rest = int(rest[:4]), rest[4:]
    rest = _skip(rest, "-")
    month, rest = _getnum(rest, True, "01")
    if not 1 <= month <= 12:
        raise _OutOfRange("month")
    rest = _skip(rest, "-")
    day, rest = _getnum(rest, True, "02")
    rest = _skip(rest, "T")
    hour, rest = _getnum(rest, False, "15")
    if hour >= 24:
        raise _OutOfRange("hour")
    rest = _skip(rest, ":")
    minute, rest = _getnum(rest, True, "04")
    if minute >= 60:
        raise _OutOfRange("minute")
    rest = _skip(rest, ":")
    second, rest = _getnum(rest, True, "05")
    if second >= 60:
        raise _OutOfRange("second")
    nanos, rest = _parse_fraction(rest)
    offset, rest = _parse_zone(rest)
    if rest:
        raise _OutOfRange(f"extra text: {go_time_quote(rest)}")
    if not 1 <= day <= _days_in_month(month, year):
        raise _OutOfRange("day")
    return instant_ns(year, month, day, hour, minute, second, nanos) - offset * NS_PER_SECOND


_parse_remembered = functools.lru_cache(maxsize=PARSED_CACHE_SIZE)(_parse_fields)


def parse_rfc3339(value: str) -> int:
    """Parse like Go's ``time.Parse(time.RFC3339, value)``; nanoseconds since the epoch.

    Raises TimestampError with Go's message, e.g.
    ``parsing time "x" as "2006-01-02T15:04:05Z07:00": cannot parse "x" as "2006"``.
    """
    try:
        return _parse_remembered(value)
    except _Reject as reject:
        raise TimestampError(
            f"parsing time {go_time_quote(value)} as {go_time_quote(RFC3339_LAYOUT)}: "
            f"cannot parse {go_time_quote(reject.value_elem)} as "
            f"{go_time_quote(reject.layout_elem)}"
        ) from None
    except _OutOfRange as out_of_range:
        message = str(out_of_range)
        suffix = message if message.startswith("extra text") else f"{message} out of range"
        raise TimestampError(f"parsing time {go_time_quote(value)}: {suffix}") from None


# --- formatting ------------------------------------------------------------------------


def _split(instant: int) -> tuple[int, int, int, int, int, int, int]:
    seconds, nanos = divmod(instant, NS_PER_SECOND)
    days, second_of_day = divmod(seconds, _SECONDS_PER_DAY)
    year, month, day = _civil_from_days(days)
    hour, rem = divmod(second_of_day, 3600)
    minute, second = divmod(rem, 60)
    return year, month, day, hour, minute, second, nanos


def _format_year(year: int) -> str:
    return f"-{-year:04d}" if year < 0 else f"{year:04d}"


def format_rfc3339_seconds(instant: int) -> str:
    """Go ``t.UTC().Format(time.RFC3339)``: whole seconds (truncated), ``Z``."""
    year, month, day, hour, minute, second, _ = _split(instant)
    return f"{_format_year(year)}-{month:02d}-{day:02d}T{hour:02d}:{minute:02d}:{second:02d}Z"


def format_rfc3339_nano(instant: int) -> str:
    """Go ``t.UTC().Format(time.RFC3339Nano)``: up to nine digits, trailing zeros trimmed."""
    year, month, day, hour, minute, second, nanos = _split(instant)
    fraction = f".{nanos:09d}".rstrip("0") if nanos else ""
    return (
        f"{_format_year(year)}-{month:02d}-{day:02d}T{hour:02d}:{minute:02d}:{second:02d}"
        f"{fraction}Z"
    )


def parse_rfc3339_or_none(value: str | None) -> int | None:
    """:func:`parse_rfc3339`, or None for an empty or unreadable value (a marker or an
    anchor this process did not write is simply not known)."""
    if not value:
        return None
    try:
        return parse_rfc3339(value)
    except TimestampError:
        return None
