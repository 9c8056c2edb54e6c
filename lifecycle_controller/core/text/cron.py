"""``restart-cron``: the reference's cron grammar, evaluated with croniter under our DST policy.

Three jobs, kept together because they only make sense together:

* **Grammar.** The reference parses with robfig/cron v3 (fields Minute, Hour, Dom, Month, Dow;
  no descriptors, no seconds). ``parse_cron`` reproduces that parser, including its quirks
  (``?`` means ``*`` in any field, ``N/step`` means ``N-max/step``, empty list items are
  ignored, ``+5`` is 5, weekday 7 is out of range) and its error texts, which users see in
  ``InvalidAnnotation`` Events. ``L``, ``W``, ``#``, ``H`` and ``R`` are rejected because they
  are not numbers.
* **Calendar.** croniter finds the next wall-clock minute that matches. It is only ever given
  a canonical expression built from the parsed sets (plain lists or ``*``, with the day-of-month
  / day-of-week rule already decided), never the user's text, and only naive wall-clock
  times, so its own DST handling is never involved.
* **DST policy** (docs/annotations.md#cron-and-daylight-saving-time). A cron expression
  matches wall-clock minutes in its zone, and each matching wall-clock minute fires once:
  in a fall-back overlap only its first instance (``fold=0``); a matching minute inside a
  spring-forward gap fires at the first instant after the gap, and several gap minutes
  that land on that instant fire once.
"""

from __future__ import annotations

import functools
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta, tzinfo
from typing import Final
from zoneinfo import ZoneInfo

from lifecycle_controller.core.text.durations import NS_PER_SECOND
from lifecycle_controller.core.text.gotext import GoNumError, go_atoi, go_fields, go_trim_space

__all__ = [
    "HORIZON_YEARS",
    "CronError",
    "CronSpec",
    "ZoneError",
    "cron_next",
    "load_zone",
    "parse_cron",
    "wall_instant_ns",
]

HORIZON_YEARS: Final = 5  # robfig gives up after five years and returns the zero time

_MONTH_NAMES: Final = {
    name: number
    for number, name in enumerate(
        ("jan", "feb", "mar", "apr", "may", "jun", "jul", "aug", "sep", "oct", "nov", "dec"),
        start=1,
    )
}
_DOW_NAMES: Final = {
    name: number for number, name in enumerate(("sun", "mon", "tue", "wed", "thu", "fri", "sat"))
}


class CronError(ValueError):
    """An expression the reference rejects; ``str()`` is robfig/cron's error text."""


class ZoneError(ValueError):
    """A ``cron-timezone`` value Go's time.LoadLocation would reject."""


@dataclass(frozen=True, slots=True)
class _Bounds:
    low: int
    high: int
    names: dict[str, int] | None = None


_MINUTES = _Bounds(0, 59)
_HOURS = _Bounds(0, 23)
_DOM = _Bounds(1, 31)
_MONTHS = _Bounds(1, 12, _MONTH_NAMES)
_DOW = _Bounds(0, 6, _DOW_NAMES)


@dataclass(frozen=True, slots=True)
class CronSpec:
    """A parsed expression: the matching values of each field.

    ``dom_star`` / ``dow_star`` record robfig's "star bit": when either day field was written
    as ``*`` or ``?`` (without a step above 1) a day must match both fields; when both are
    restricted, either may match.
    """

    expression: str
    minutes: frozenset[int]
    hours: frozenset[int]
    days_of_month: frozenset[int]
    months: frozenset[int]
    days_of_week: frozenset[int]
    dom_star: bool
    dow_star: bool

    def matches(self, wall: datetime) -> bool:
        """Whether a wall-clock minute matches (the robfig rule, for any datetime)."""
        if not (
            wall.minute in self.minutes and wall.hour in self.hours and wall.month in self.months
        ):
            return False
        dom_match = wall.day in self.days_of_month
        dow_match = (wall.weekday() + 1) % 7 in self.days_of_week
        if self.dom_star or self.dow_star:
            return dom_match and dow_match
        return dom_match or dow_match


def _int_or_name(text: str, names: dict[str, int] | None) -> int:
    if names is not None and text.lower() in names:
        return names[text.lower()]
    return _must_parse_int(text)


def _must_parse_int(text: str) -> int:
    try:
        number = go_atoi(text)
    except GoNumError as error:
        raise CronError(f"failed to parse int from {text}: {error}") from None
    if number < 0:
        raise CronError(f"negative number ({number}) not allowed: {text}")
    return number


def _parse_range(expr: str, bounds: _Bounds) -> tuple[frozenset[int], bool]:
    range_and_step = expr.split("/")
    low_and_high = range_and_step[0].split("-")
    single = len(low_and_high) == 1
    star = False
    if low_and_high[0] in ("*", "?"):
        start, end, star = bounds.low, bounds.high, True
    else:
        start = _int_or_name(low_and_high[0], bounds.names)
        if len(low_and_high) == 1:
            end = start
        elif len(low_and_high) == 2:
            end = _int_or_name(low_and_high[1], bounds.names)
        else:
            raise CronError(f"too many hyphens: {expr}")
    if len(range_and_step) == 1:
        step = 1
    elif len(range_and_step) == 2:
        step = _must_parse_int(range_and_step[1])
        if single:
            end = bounds.high
        if step > 1:
            star = False
    else:
        raise CronError(f"too many slashes: {expr}")
    if start < bounds.low:
        raise CronError(f"beginning of range ({start}) below minimum ({bounds.low}): {expr}")
    if end > bounds.high:
        raise CronError(f"end of range ({end}) above maximum ({bounds.high}): {expr}")
    if start > end:
        raise CronError(f"beginning of range ({start}) beyond end of range ({end}): {expr}")
    if step == 0:
        raise CronError(f"step of range should be a positive number: {expr}")
    return frozenset(range(start, end + 1, step)), star


def _parse_field(field: str, bounds: _Bounds) -> tuple[frozenset[int], bool]:
    values: set[int] = set()
    star = False
    for item in field.split(","):
        if item:  # strings.FieldsFunc drops empty items: "1,,2" is "1,2", "," is nothing
            item_values, item_star = _parse_range(item, bounds)
            values |= item_values
            star = star or item_star
    return frozenset(values), star


@functools.lru_cache(maxsize=1024)
def parse_cron(expression: str) -> CronSpec:
    """Parse like the reference (robfig/cron v3 with five fields); raise CronError.

    The reference prefixes ``CRON_TZ=<zone> `` before parsing, so the expression is
    effectively trimmed and a user's own ``TZ=`` prefix becomes a sixth field.
    """
    spec = go_trim_space(expression)
    if spec.startswith("@"):
        raise CronError(f"parser does not accept descriptors: {spec}")
    fields = go_fields(spec)
    if len(fields) != 5:
        raise CronError(f"expected exactly 5 fields, found {len(fields)}: [{' '.join(fields)}]")
    minutes, _ = _parse_field(fields[0], _MINUTES)
    hours, _ = _parse_field(fields[1], _HOURS)
    days_of_month, dom_star = _parse_field(fields[2], _DOM)
    months, _ = _parse_field(fields[3], _MONTHS)
    days_of_week, dow_star = _parse_field(fields[4], _DOW)
    return CronSpec(
        expression=expression,
        minutes=minutes,
        hours=hours,
        days_of_month=days_of_month,
        months=months,
        days_of_week=days_of_week,
        dom_star=dom_star,
        dow_star=dow_star,
    )


def load_zone(name: str, *, local_zone: tzinfo) -> tzinfo:
    """Resolve ``cron-timezone`` like Go's time.LoadLocation; raise ZoneError.

    Empty and ``UTC`` mean UTC, ``Local`` is the process zone (given by the caller, since
    core reads no system state), anything else must be an IANA name.
    """
    if name in ("", "UTC"):
        return UTC
    if name == "Local":
        return local_zone
    if ".." in name or name.startswith(("/", "\\")):
        raise ZoneError(name)
    try:
        return ZoneInfo(name)
    except Exception as error:  # ZoneInfoNotFoundError, ValueError, OSError, ...
        raise ZoneError(name) from error


# --- calendar search (croniter) ----------------------------------------------------------


def _list(values: frozenset[int], bounds: _Bounds) -> str:
    if len(values) == bounds.high - bounds.low + 1:
        return "*"
    return ",".join(str(value) for value in sorted(values))


_ALL_DOM: Final = frozenset(range(_DOM.low, _DOM.high + 1))
_ALL_DOW: Final = frozenset(range(_DOW.low, _DOW.high + 1))


def _day_rule(spec: CronSpec) -> tuple[frozenset[int], frozenset[int], bool] | None:
    """Day-of-month and day-of-week sets for croniter, and whether they are OR-ed.

    robfig: if either field carries the star bit a day must match both (AND), otherwise
    either (OR). An OR with an empty side reduces to the other side; an OR with a full side
    matches every day. None when no day can ever match.
    """
    doms, dows = spec.days_of_month, spec.days_of_week
    if spec.dom_star or spec.dow_star:
        return (doms, dows, False) if doms and dows else None
    if not doms and not dows:
        return None
    if not doms:
        return _ALL_DOM, dows, False
    if not dows:
        return doms, _ALL_DOW, False
    if doms == _ALL_DOM or dows == _ALL_DOW:
        return _ALL_DOM, _ALL_DOW, False
    return doms, dows, True


def _croniter_form(spec: CronSpec) -> tuple[str, bool] | None:
    """A canonical croniter expression and its ``day_or``; None when nothing can match."""
    days = _day_rule(spec)
    if days is None or not (spec.minutes and spec.hours and spec.months):
        return None
    doms, dows, day_or = days
    fields = (
        _list(spec.minutes, _MINUTES),
        _list(spec.hours, _HOURS),
        _list(doms, _DOM),
        _list(spec.months, _MONTHS),
        _list(dows, _DOW),
    )
    return " ".join(fields), day_or


_EPOCH_UTC: Final = datetime(1970, 1, 1, tzinfo=UTC)
_ONE_SECOND: Final = timedelta(seconds=1)
# Keep a day of margin from datetime's limits so zone conversions cannot overflow.
_LATEST_UTC: Final = datetime(9999, 12, 30, tzinfo=UTC)
_MIN_SECONDS: Final = (datetime(1, 1, 2, tzinfo=UTC) - _EPOCH_UTC) // _ONE_SECOND
_MAX_SECONDS: Final = (_LATEST_UTC - _EPOCH_UTC) // _ONE_SECOND


def _wall(seconds: int, zone: tzinfo) -> datetime:
    """The naive wall-clock time of a UTC instant (whole seconds) in a zone."""
    return (_EPOCH_UTC + timedelta(seconds=seconds)).astimezone(zone).replace(tzinfo=None)


def _first_instant(wall: datetime, zone: tzinfo) -> int:
    """The instant (epoch seconds) at which a wall-clock time fires under the DST policy."""
    candidates = set()
    for fold in (0, 1):
        offset = wall.replace(tzinfo=zone, fold=fold).utcoffset() or timedelta(0)
        # The wall time read as if it were UTC, less the zone's offset: the UTC instant.
        candidates.add((wall.replace(tzinfo=UTC) - offset - _EPOCH_UTC) // _ONE_SECOND)
    existing = [seconds for seconds in candidates if _wall(seconds, zone) == wall]
    if existing:
        return min(existing)  # unique, or the first instance of a repeated wall time
    # A spring-forward gap: the first instant whose wall time is past the missing one.
    low, high = min(candidates), max(candidates)
    while high - low > 1:
        middle = (low + high) // 2
        if _wall(middle, zone) > wall:
            high = middle
        else:
            low = middle
    return high


def wall_instant_ns(wall: datetime, zone: tzinfo) -> int:
    """The instant (ns) a naive wall-clock time stands for under the DST policy.

    The first instance of a repeated wall time; for a wall time inside a spring-forward gap,
    the first instant after the gap. Maintenance windows share this rule with cron.
    """
    return _first_instant(wall.replace(microsecond=0), zone) * NS_PER_SECOND


def cron_next(spec: CronSpec, zone: tzinfo, after_ns: int) -> int | None:
    """The first firing instant strictly after ``after_ns`` (nanoseconds), or None.

    None means nothing fires within about five years (robfig's horizon, which makes
    ``0 0 31 2 *`` invalid), or the search left the years datetime can represent.
    """
    form = _croniter_form(spec)
    if form is None:
        return None
    expression, day_or = form
    after_seconds = after_ns // NS_PER_SECOND
    start_seconds = max(after_seconds, _MIN_SECONDS)
    if start_seconds > _MAX_SECONDS:
        return None
    start = _wall(start_seconds, zone).replace(second=0, microsecond=0)
    horizon_year = start.year + HORIZON_YEARS
    # Imported on first use: croniter (with dateutil) costs about 5 MB and 30 ms at start,
    # and many controllers never see a restart-cron annotation.
    from croniter import croniter

    iterator = croniter(
        expression, start, day_or=day_or, max_years_between_matches=HORIZON_YEARS + 1
    )
    while True:
        try:
            candidate: datetime = iterator.get_next(datetime)
        except (ValueError, OverflowError):  # CroniterBadDateError is a ValueError
            return None
        # croniter answers naive wall-clock times; compare them on one (UTC) footing.
        if candidate.year > horizon_year or candidate.replace(tzinfo=UTC) > _LATEST_UTC:
            return None
        instant = _first_instant(candidate, zone) * NS_PER_SECOND
        if instant > after_ns:
            return instant
