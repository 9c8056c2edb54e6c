"""Maintenance windows (core/schedule/windows.py): grammar, openings across DST, midnight
crossing."""

from __future__ import annotations

import pytest

from lifecycle_controller.core.schedule.windows import WindowError, defer, parse_windows
from lifecycle_controller.core.text.timestamps import format_rfc3339_seconds

from .support import MINUTE, ts

WARSAW_NIGHTS = "Mon-Fri 01:00-05:00 Europe/Warsaw, Sat-Sun 00:00-24:00 Europe/Warsaw"


def utc(instant_ns: int | None) -> str | None:
    return None if instant_ns is None else format_rfc3339_seconds(instant_ns)


@pytest.mark.parametrize(
    ("value", "detail"),
    [
        ("", "expected at least one window"),
        (" , ", "expected at least one window"),
        ("Mon-Fri 01:00-05:00 UTC,", "empty window"),
        ("Mon-Fri 01:00-05:00", "expected <Weekday>-<Weekday>"),
        ("Mon-Fri 01:00-05:00 UTC extra", "expected <Weekday>-<Weekday>"),
        ("Mon 01:00-05:00 UTC", "expected a weekday range"),
        ("mon-fri 01:00-05:00 UTC", 'unknown weekday "mon"'),
        ("Mon-Fry 01:00-05:00 UTC", 'unknown weekday "Fry"'),
        ("Mon-Fri 01:00 UTC", "expected a time range"),
        ("Mon-Fri 1:00-05:00 UTC", 'expected a time HH:MM, got "1:00"'),
        ("Mon-Fri 01:00-05:0 UTC", "expected a time HH:MM"),
        ("Mon-Fri 24:00-05:00 UTC", 'time "24:00" out of range'),
        ("Mon-Fri 01:60-05:00 UTC", "out of range"),
        ("Mon-Fri 01:00-24:01 UTC", "out of range"),
        ("Mon-Fri 03:00-03:00 UTC", "is empty"),
        ("Mon-Fri 00:00-00:00 UTC", "is empty"),
        ("Mon-Fri 01:00-05:00 Europe/Nowhere", 'unknown time zone "Europe/Nowhere"'),
        ("Mon-Fri 01:00-05:00 Local", 'unknown time zone "Local"'),
        ("Mon-Fri 01:00-05:00 ../etc", "unknown time zone"),
    ],
)
def test_invalid_values_are_rejected_with_a_reason(value: str, detail: str) -> None:
    with pytest.raises(WindowError, match=None) as raised:
        parse_windows(value)
    assert detail in str(raised.value)


def test_valid_grammar() -> None:
    windows = parse_windows(" " + WARSAW_NIGHTS + " ")
    assert windows.text == WARSAW_NIGHTS
    assert [w.text for w in windows.windows] == [
        "Mon-Fri 01:00-05:00 Europe/Warsaw",
        "Sat-Sun 00:00-24:00 Europe/Warsaw",
    ]
    first, second = windows.windows
    assert first.days == frozenset(range(5))
    assert (first.start_minute, first.end_minute) == (60, 300)
    assert second.days == frozenset({5, 6})
    assert (second.start_minute, second.end_minute) == (0, 1440)
    # A wrapping weekday range and a midnight-crossing time range.
    wrapped = parse_windows("Fri-Mon 22:00-02:00 UTC").windows[0]
    assert wrapped.days == frozenset({4, 5, 6, 0})
    assert parse_windows("Sun-Sun 00:00-23:59 UTC").windows[0].days == frozenset({6})


# (windows, instant, open?, next opening strictly after the instant). 2026-03-27 is a Friday.
OPENINGS = [
    # Plain weekday windows in Warsaw (CET, +01:00, before 2026-03-29).
    (WARSAW_NIGHTS, "2026-03-26T23:59:59Z", False, "2026-03-27T00:00:00Z"),
    (WARSAW_NIGHTS, "2026-03-27T00:00:00Z", True, "2026-03-27T23:00:00Z"),  # open inclusive
    (WARSAW_NIGHTS, "2026-03-27T03:59:59Z", True, "2026-03-27T23:00:00Z"),
    (WARSAW_NIGHTS, "2026-03-27T04:00:00Z", False, "2026-03-27T23:00:00Z"),  # close exclusive
    (WARSAW_NIGHTS, "2026-03-27T12:00:00Z", False, "2026-03-27T23:00:00Z"),  # Sat 00:00 CET
    (WARSAW_NIGHTS, "2026-03-28T12:00:00Z", True, "2026-03-28T23:00:00Z"),
    # Spring forward in Warsaw (2026-03-29 02:00 CET -> 03:00 CEST): Sunday is 23 hours
    # long, so the weekend window closes at Monday 00:00 CEST = 22:00 UTC; Monday's
    # 01:00 CEST is 23:00 UTC.
    (WARSAW_NIGHTS, "2026-03-29T21:59:59Z", True, "2026-03-29T23:00:00Z"),
    (WARSAW_NIGHTS, "2026-03-29T22:00:00Z", False, "2026-03-29T23:00:00Z"),
    # A window that starts inside the gap opens at the first instant after it (03:00 CEST).
    ("Sun-Sun 02:00-04:00 Europe/Warsaw", "2026-03-28T12:00:00Z", False, "2026-03-29T01:00:00Z"),
    ("Sun-Sun 02:00-04:00 Europe/Warsaw", "2026-03-29T00:59:59Z", False, "2026-03-29T01:00:00Z"),
    ("Sun-Sun 02:00-04:00 Europe/Warsaw", "2026-03-29T01:30:00Z", True, "2026-04-05T00:00:00Z"),
    ("Sun-Sun 02:00-04:00 Europe/Warsaw", "2026-03-29T02:00:00Z", False, "2026-04-05T00:00:00Z"),
    # A window entirely inside the gap is empty that day: next week instead.
    ("Sun-Sun 02:00-02:30 Europe/Warsaw", "2026-03-28T12:00:00Z", False, "2026-04-05T00:00:00Z"),
    ("Sun-Sun 02:00-02:30 Europe/Warsaw", "2026-03-29T01:00:00Z", False, "2026-04-05T00:00:00Z"),
    # Fall back in Warsaw (2026-10-25 03:00 CEST -> 02:00 CET): 02:30 happens twice; a window
    # opening then opens at the first 02:30 (00:30 UTC) and a 02:30 end is the first too.
    ("Sun-Sun 02:30-04:00 Europe/Warsaw", "2026-10-24T12:00:00Z", False, "2026-10-25T00:30:00Z"),
    ("Sun-Sun 02:30-04:00 Europe/Warsaw", "2026-10-25T02:59:59Z", True, "2026-11-01T01:30:00Z"),
    ("Sun-Sun 02:30-04:00 Europe/Warsaw", "2026-10-25T03:00:00Z", False, "2026-11-01T01:30:00Z"),
    ("Sun-Sun 01:00-02:30 Europe/Warsaw", "2026-10-25T00:29:59Z", True, "2026-11-01T00:00:00Z"),
    ("Sun-Sun 01:00-02:30 Europe/Warsaw", "2026-10-25T00:30:00Z", False, "2026-11-01T00:00:00Z"),
    ("Sun-Sun 01:00-02:30 Europe/Warsaw", "2026-10-25T01:30:00Z", False, "2026-11-01T00:00:00Z"),
    # America/New_York, spring forward 2026-03-08 02:00 EST -> 03:00 EDT.
    ("Sun-Sun 02:30-03:30 America/New_York", "2026-03-08T06:00:00Z", False, "2026-03-08T07:00:00Z"),
    ("Sun-Sun 02:30-03:30 America/New_York", "2026-03-08T07:00:00Z", True, "2026-03-15T06:30:00Z"),
    ("Sun-Sun 02:30-03:30 America/New_York", "2026-03-08T07:30:00Z", False, "2026-03-15T06:30:00Z"),
    ("Sat-Sun 00:00-24:00 America/New_York", "2026-03-09T03:59:59Z", True, "2026-03-14T04:00:00Z"),
    ("Sat-Sun 00:00-24:00 America/New_York", "2026-03-09T04:00:00Z", False, "2026-03-14T04:00:00Z"),
    # Fall back 2026-11-01 02:00 EDT -> 01:00 EST: 01:30 EDT (05:30 UTC) is the instant.
    ("Sun-Sun 01:30-03:00 America/New_York", "2026-10-31T12:00:00Z", False, "2026-11-01T05:30:00Z"),
    ("Sun-Sun 01:30-03:00 America/New_York", "2026-11-01T06:30:00Z", True, "2026-11-08T06:30:00Z"),
    ("Sun-Sun 01:30-03:00 America/New_York", "2026-11-01T07:59:59Z", True, "2026-11-08T06:30:00Z"),
    ("Sun-Sun 01:30-03:00 America/New_York", "2026-11-01T08:00:00Z", False, "2026-11-08T06:30:00Z"),
    # Past midnight: opens on Friday 22:00 and on Saturday 22:00 only, each until 02:00.
    ("Fri-Sat 22:00-02:00 UTC", "2026-03-27T21:59:59Z", False, "2026-03-27T22:00:00Z"),
    ("Fri-Sat 22:00-02:00 UTC", "2026-03-28T01:59:59Z", True, "2026-03-28T22:00:00Z"),
    ("Fri-Sat 22:00-02:00 UTC", "2026-03-28T02:00:00Z", False, "2026-03-28T22:00:00Z"),
    ("Fri-Sat 22:00-02:00 UTC", "2026-03-29T01:00:00Z", True, "2026-04-03T22:00:00Z"),
    ("Fri-Sat 22:00-02:00 UTC", "2026-03-29T22:30:00Z", False, "2026-04-03T22:00:00Z"),
    # An end of 00:00 is the next midnight.
    ("Mon-Mon 23:00-00:00 UTC", "2026-03-30T23:30:00Z", True, "2026-04-06T23:00:00Z"),
    ("Mon-Mon 23:00-00:00 UTC", "2026-03-31T00:00:00Z", False, "2026-04-06T23:00:00Z"),
    # A midnight-crossing window across Warsaw's spring-forward night (Sat 23:00 CET to
    # Sun 03:00 CEST is 3 real hours: 22:00-01:00 UTC).
    ("Sat-Sat 23:00-03:00 Europe/Warsaw", "2026-03-29T00:59:59Z", True, "2026-04-04T21:00:00Z"),
    ("Sat-Sat 23:00-03:00 Europe/Warsaw", "2026-03-29T01:00:00Z", False, "2026-04-04T21:00:00Z"),
    # Several windows in different zones: the earliest opening wins.
    (
        "Mon-Mon 09:00-10:00 America/New_York, Mon-Mon 09:00-10:00 Europe/Warsaw",
        "2026-03-30T00:00:00Z",
        False,
        "2026-03-30T07:00:00Z",
    ),
    (
        "Mon-Mon 09:00-10:00 America/New_York, Mon-Mon 09:00-10:00 Europe/Warsaw",
        "2026-03-30T07:30:00Z",
        True,
        "2026-03-30T13:00:00Z",
    ),
]


@pytest.mark.parametrize(("value", "instant", "is_open", "opening"), OPENINGS)
def test_open_and_next_opening(value: str, instant: str, is_open: bool, opening: str) -> None:
    windows = parse_windows(value)
    assert windows.is_open(ts(instant)) is is_open
    assert utc(windows.next_opening(ts(instant))) == opening
    expected_first = instant if is_open else opening
    assert utc(windows.first_open(ts(instant))) == expected_first


# (scheduled, now, opening measured from, may run at).
DEFERRALS = [
    # Due inside a window: nothing changes.
    (
        "2026-03-27T02:00:00Z",
        "2026-03-27T02:00:00Z",
        "2026-03-27T02:00:00Z",
        "2026-03-27T02:00:00Z",
    ),
    # Due outside: waits for the opening, whether seen before or after the due time.
    (
        "2026-03-27T12:00:00Z",
        "2026-03-27T11:00:00Z",
        "2026-03-27T23:00:00Z",
        "2026-03-27T23:00:00Z",
    ),
    (
        "2026-03-27T12:00:00Z",
        "2026-03-27T12:00:00Z",
        "2026-03-27T23:00:00Z",
        "2026-03-27T23:00:00Z",
    ),
    # At or after the opening, inside the window: runs now; lateness from the opening.
    (
        "2026-03-27T12:00:00Z",
        "2026-03-27T23:00:00Z",
        "2026-03-27T23:00:00Z",
        "2026-03-27T23:00:00Z",
    ),
    (
        "2026-03-27T12:00:00Z",
        "2026-03-28T05:00:00Z",
        "2026-03-27T23:00:00Z",
        "2026-03-28T05:00:00Z",
    ),
    # Missed the whole window (controller down): the next opening, lateness still from the
    # first one.
    (
        "2026-03-26T12:00:00Z",
        "2026-03-27T12:00:00Z",
        "2026-03-27T00:00:00Z",
        "2026-03-27T23:00:00Z",
    ),
]

WEEKDAY_NIGHTS = "Mon-Fri 01:00-05:00 Europe/Warsaw, Sat-Sun 00:00-24:00 Europe/Warsaw"


@pytest.mark.parametrize(("scheduled", "now", "opening", "run_at"), DEFERRALS)
def test_defer(scheduled: str, now: str, opening: str, run_at: str) -> None:
    deferral = defer(parse_windows(WEEKDAY_NIGHTS), ts(scheduled), ts(now))
    assert utc(deferral.opening_ns) == opening
    assert utc(deferral.run_at_ns) == run_at
    assert deferral.deferred is (opening != scheduled)


def test_defer_keeps_sub_second_due_times() -> None:
    windows = parse_windows("Mon-Sun 00:00-24:00 UTC")
    due = ts("2026-03-27T12:00:00Z") + 5
    assert defer(windows, due, due - MINUTE).run_at_ns == due
