"""Timestamps in the forms the controller reads and writes, and conversions for assertions.

``*-at`` values are whole-second UTC RFC3339 with ``Z``
(:data:`SECONDS`); ``last-restart-timestamp`` and the restart marker are Go's RFC3339Nano in
UTC (:data:`NANO_FORMAT`).
"""

from __future__ import annotations

import calendar
import math
import re
import time
from datetime import UTC, datetime, timedelta

#: A deadline long past: due on first sight.
PAST = "2020-01-01T00:00:00Z"
#: A deadline that never comes due while a test runs.
FAR = "2999-01-01T00:00:00Z"
HOUR = 3600

SECONDS = re.compile(r"\d{4}-\d\d-\d\dT\d\d:\d\d:\d\dZ")
NANO_FORMAT = re.compile(r"^\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d(\.\d{0,8}[1-9])?Z$")


def epoch(value: str) -> int:
    """A written ``*-at`` value (whole-second UTC with ``Z``, strictly) as Unix seconds."""
    assert SECONDS.fullmatch(value), f"not a whole-second UTC RFC3339 value: {value!r}"
    return calendar.timegm(time.strptime(value, "%Y-%m-%dT%H:%M:%SZ"))


def on_time(happened: float, due: float, created_by: float) -> bool:
    """Whether an action at ``happened`` (Unix seconds) kept its ``due`` time within a second.

    ``created_by`` is when the test's create call returned: a loaded API server can answer it
    after ``due``, and the controller then acts as soon as it sees the object, not before.
    """
    return due - 1.0 <= happened <= max(due, created_by) + 1.0


def deadline_in(seconds: int) -> int:
    """A whole-second deadline (Unix seconds) a full ``seconds`` from now at least: counted
    from the next whole second, so the lead is never up to a second short, as it is with
    ``int(time.time()) + seconds``. Take it right before the object that carries it is
    written, so the setup before it does not eat the lead."""
    return math.ceil(time.time()) + seconds


def stamp(seconds: float) -> str:
    """Unix seconds in the whole-second UTC ``Z`` form (the fraction is cut)."""
    return time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime(seconds))


def rfc3339(moment: datetime) -> str:
    """Whole-second UTC ``Z`` form, as the controller writes ``*-at`` and the marker."""
    return moment.astimezone(UTC).strftime("%Y-%m-%dT%H:%M:%SZ")


def rfc3339_nano(ns: int) -> str:
    """Go RFC3339Nano in UTC: trailing zeros of the fraction trimmed, no fraction if whole."""
    seconds, fraction = divmod(ns, 1_000_000_000)
    text = datetime.fromtimestamp(seconds, UTC).strftime("%Y-%m-%dT%H:%M:%S")
    digits = f"{fraction:09d}".rstrip("0")
    return f"{text}.{digits}Z" if digits else f"{text}Z"


def parse_utc(value: str) -> datetime:
    """Parse a ``…Z`` timestamp written by the controller (fraction cut to microseconds)."""
    match = re.fullmatch(r"(.{19})(?:\.(\d+))?Z", value)
    assert match is not None, value
    whole = datetime.strptime(match.group(1), "%Y-%m-%dT%H:%M:%S").replace(tzinfo=UTC)
    micros = int((match.group(2) or "0")[:6].ljust(6, "0"))
    return whole + timedelta(microseconds=micros)


def from_now(seconds: float) -> datetime:
    return datetime.now(UTC) + timedelta(seconds=seconds)


def now_ns() -> int:
    return time.time_ns()
