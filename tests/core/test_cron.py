"""restart-cron: the grammar (docs/annotations.md#cron-expressions) and our DST policy.

The DST tables list expected firing instants as UTC literals worked out by hand from the
policy (docs/annotations.md#cron-and-daylight-saving-time: "each matching wall-clock
minute fires once: the first instance in a fall-back overlap, the first instant after the
gap in a spring-forward gap"), using the tzdata transitions of 2026-2027:

* America/New_York: gaps 2026-03-08 and 2027-03-14 (02:00 EST -> 03:00 EDT at 07:00Z);
  overlaps 2026-11-01 and 2027-11-07 (02:00 EDT -> 01:00 EST at 06:00Z).
* Europe/London: gaps 2026-03-29 and 2027-03-28 (01:00 GMT -> 02:00 BST at 01:00Z);
  overlaps 2026-10-25 and 2027-10-31 (02:00 BST -> 01:00 GMT at 01:00Z).
* Australia/Lord_Howe (a 30-minute shift, +10:30 / +11:00): overlap on 2026-04-05 local
  (02:00 -> 01:30 at 2026-04-04T15:00Z) and 2027-04-04 (at 2027-04-03T15:00Z); gap on
  2026-10-04 local (02:00 -> 02:30 at 2026-10-03T15:30Z) and 2027-10-03.
* Asia/Kolkata: +05:30 all year (the control).
"""

from __future__ import annotations

import datetime as dt
from zoneinfo import ZoneInfo

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from lifecycle_controller.core import (
    CronError,
    CronSpec,
    ZoneError,
    format_rfc3339_seconds,
    load_zone,
    parse_cron,
)
from lifecycle_controller.core.text.cron import cron_next

from .support import MINUTE, SECOND, ts


def fires(expression: str, zone: str, after: str, count: int) -> list[str]:
    spec, tz = parse_cron(expression), load_zone(zone, local_zone=dt.UTC)
    out: list[str] = []
    cursor: int | None = ts(after)
    for _ in range(count):
        assert cursor is not None
        cursor = cron_next(spec, tz, cursor)
        if cursor is None:
            break
        out.append(format_rfc3339_seconds(cursor))
    return out


# (zone, expression, search from, expected firing instants in UTC)
DST_TABLE = [
    # --- America/New_York ------------------------------------------------------------
    # spring 2026: 02:30 does not exist on 03-08 and runs at 03:00 EDT.
    ("America/New_York", "30 2 * * *", "2026-03-07T00:00:00Z",
     ["2026-03-07T07:30:00Z", "2026-03-08T07:00:00Z", "2026-03-09T06:30:00Z"]),
    ("America/New_York", "0 3 * * *", "2026-03-07T00:00:00Z",
     ["2026-03-07T08:00:00Z", "2026-03-08T07:00:00Z", "2026-03-09T07:00:00Z"]),
    ("America/New_York", "*/15 1 * * *", "2026-03-08T05:00:00Z",
     ["2026-03-08T06:00:00Z", "2026-03-08T06:15:00Z", "2026-03-08T06:30:00Z",
      "2026-03-08T06:45:00Z", "2026-03-09T05:00:00Z"]),
    ("America/New_York", "0 0 * * 0", "2026-03-01T06:00:00Z",
     ["2026-03-08T05:00:00Z", "2026-03-15T04:00:00Z"]),
    # fall 2026: 01:xx happens twice; only the first (EDT) instance fires.
    ("America/New_York", "30 2 * * *", "2026-10-31T00:00:00Z",
     ["2026-10-31T06:30:00Z", "2026-11-01T07:30:00Z", "2026-11-02T07:30:00Z"]),
    ("America/New_York", "0 3 * * *", "2026-10-31T00:00:00Z",
     ["2026-10-31T07:00:00Z", "2026-11-01T08:00:00Z", "2026-11-02T08:00:00Z"]),
    ("America/New_York", "*/15 1 * * *", "2026-11-01T04:00:00Z",
     ["2026-11-01T05:00:00Z", "2026-11-01T05:15:00Z", "2026-11-01T05:30:00Z",
      "2026-11-01T05:45:00Z", "2026-11-02T06:00:00Z"]),
    ("America/New_York", "0 0 * * 0", "2026-10-26T00:00:00Z",
     ["2026-11-01T04:00:00Z", "2026-11-08T05:00:00Z"]),
    # 2027
    ("America/New_York", "30 2 * * *", "2027-03-13T00:00:00Z",
     ["2027-03-13T07:30:00Z", "2027-03-14T07:00:00Z", "2027-03-15T06:30:00Z"]),
    ("America/New_York", "*/15 1 * * *", "2027-11-07T04:50:00Z",
     ["2027-11-07T05:00:00Z", "2027-11-07T05:15:00Z", "2027-11-07T05:30:00Z",
      "2027-11-07T05:45:00Z", "2027-11-08T06:00:00Z"]),
    ("America/New_York", "0 3 * * *", "2027-11-06T00:00:00Z",
     ["2027-11-06T07:00:00Z", "2027-11-07T08:00:00Z"]),
    # --- Europe/London -----------------------------------------------------------------
    # spring 2026: the whole 01:xx hour is missing on 03-29; its four minutes fire once.
    ("Europe/London", "*/15 1 * * *", "2026-03-28T23:00:00Z",
     ["2026-03-29T01:00:00Z", "2026-03-30T00:00:00Z", "2026-03-30T00:15:00Z"]),
    ("Europe/London", "30 2 * * *", "2026-03-28T00:00:00Z",
     ["2026-03-28T02:30:00Z", "2026-03-29T01:30:00Z", "2026-03-30T01:30:00Z"]),
    ("Europe/London", "0 3 * * *", "2026-03-28T00:00:00Z",
     ["2026-03-28T03:00:00Z", "2026-03-29T02:00:00Z"]),
    ("Europe/London", "0 0 * * 0", "2026-03-28T00:00:00Z",
     ["2026-03-29T00:00:00Z", "2026-04-04T23:00:00Z"]),
    # fall 2026: 01:xx twice; the BST instance fires.
    ("Europe/London", "*/15 1 * * *", "2026-10-24T23:30:00Z",
     ["2026-10-25T00:00:00Z", "2026-10-25T00:15:00Z", "2026-10-25T00:30:00Z",
      "2026-10-25T00:45:00Z", "2026-10-26T01:00:00Z"]),
    ("Europe/London", "30 2 * * *", "2026-10-24T00:00:00Z",
     ["2026-10-24T01:30:00Z", "2026-10-25T02:30:00Z", "2026-10-26T02:30:00Z"]),
    ("Europe/London", "0 3 * * *", "2026-10-24T00:00:00Z",
     ["2026-10-24T02:00:00Z", "2026-10-25T03:00:00Z"]),
    ("Europe/London", "0 0 * * 0", "2026-10-20T00:00:00Z",
     ["2026-10-24T23:00:00Z", "2026-11-01T00:00:00Z"]),
    ("Europe/London", "*/15 1 * * *", "2027-03-27T23:59:00Z",
     ["2027-03-28T01:00:00Z", "2027-03-29T00:00:00Z"]),
    ("Europe/London", "30 2 * * *", "2027-10-30T00:00:00Z",
     ["2027-10-30T01:30:00Z", "2027-10-31T02:30:00Z"]),
    # --- Australia/Lord_Howe (30-minute shift) ---------------------------------------
    # DST ends 2026-04-05 local: walls 01:30-01:59 repeat (+11:00 first, then +10:30).
    ("Australia/Lord_Howe", "*/15 1 * * *", "2026-04-04T13:50:00Z",
     ["2026-04-04T14:00:00Z", "2026-04-04T14:15:00Z", "2026-04-04T14:30:00Z",
      "2026-04-04T14:45:00Z", "2026-04-05T14:30:00Z"]),
    ("Australia/Lord_Howe", "30 2 * * *", "2026-04-03T00:00:00Z",
     ["2026-04-03T15:30:00Z", "2026-04-04T16:00:00Z", "2026-04-05T16:00:00Z"]),
    ("Australia/Lord_Howe", "0 3 * * *", "2026-04-03T00:00:00Z",
     ["2026-04-03T16:00:00Z", "2026-04-04T16:30:00Z"]),
    ("Australia/Lord_Howe", "0 0 * * 0", "2026-04-01T00:00:00Z",
     ["2026-04-04T13:00:00Z", "2026-04-11T13:30:00Z"]),
    # DST starts 2026-10-04 local: walls 02:00-02:29 do not exist.
    ("Australia/Lord_Howe", "30 2 * * *", "2026-10-02T00:00:00Z",
     ["2026-10-02T16:00:00Z", "2026-10-03T15:30:00Z", "2026-10-04T15:30:00Z"]),
    ("Australia/Lord_Howe", "*/15 2 * * *", "2026-10-03T00:00:00Z",
     # 02:00, 02:15 and 02:30 all land on 02:30 (+11:00) = 15:30Z, which fires once.
     ["2026-10-03T15:30:00Z", "2026-10-03T15:45:00Z", "2026-10-04T15:00:00Z"]),
    ("Australia/Lord_Howe", "*/15 1 * * *", "2026-10-03T14:20:00Z",
     ["2026-10-03T14:30:00Z", "2026-10-03T14:45:00Z", "2026-10-03T15:00:00Z",
      "2026-10-03T15:15:00Z", "2026-10-04T14:00:00Z"]),
    ("Australia/Lord_Howe", "0 3 * * *", "2026-10-02T00:00:00Z",
     ["2026-10-02T16:30:00Z", "2026-10-03T16:00:00Z"]),
    ("Australia/Lord_Howe", "0 0 * * 0", "2026-10-01T00:00:00Z",
     ["2026-10-03T13:30:00Z", "2026-10-10T13:00:00Z"]),
    ("Australia/Lord_Howe", "30 1 * * *", "2027-04-03T00:00:00Z",
     ["2027-04-03T14:30:00Z", "2027-04-04T15:00:00Z"]),
    ("Australia/Lord_Howe", "15 2 * * *", "2027-10-01T00:00:00Z",
     # 10-02 02:15 (+10:30); 10-03 02:15 is in the gap -> 02:30 (+11:00); 10-04 (+11:00).
     ["2027-10-01T15:45:00Z", "2027-10-02T15:30:00Z", "2027-10-03T15:15:00Z"]),
    # --- Asia/Kolkata (no DST) -----------------------------------------------------------
    ("Asia/Kolkata", "30 2 * * *", "2026-03-07T00:00:00Z",
     ["2026-03-07T21:00:00Z", "2026-03-08T21:00:00Z"]),
    ("Asia/Kolkata", "0 3 * * *", "2026-10-24T00:00:00Z",
     ["2026-10-24T21:30:00Z", "2026-10-25T21:30:00Z"]),
    ("Asia/Kolkata", "*/15 1 * * *", "2026-11-01T19:00:00Z",
     ["2026-11-01T19:30:00Z", "2026-11-01T19:45:00Z", "2026-11-01T20:00:00Z",
      "2026-11-01T20:15:00Z", "2026-11-02T19:30:00Z"]),
    ("Asia/Kolkata", "0 0 * * 0", "2026-03-01T00:00:00Z",
     ["2026-03-07T18:30:00Z", "2026-03-14T18:30:00Z"]),
]  # fmt: skip


@pytest.mark.parametrize(
    ("zone", "expression", "after", "expected"),
    DST_TABLE,
    ids=[f"{z}|{e}|{a}" for z, e, a, _ in DST_TABLE],
)
def test_dst_policy_next_occurrences(
    zone: str, expression: str, after: str, expected: list[str]
) -> None:
    assert fires(expression, zone, after, len(expected)) == expected


def test_as_33_warsaw_spring_forward_runs_at_three_and_fall_back_runs_once() -> None:
    # Our DST policy changes AS-33: the reference skips the spring-forward day and runs twice on
    # the fall-back day; we run at 03:00 local (01:00Z) and once, at the first 02:30.
    assert fires("30 2 * * *", "Europe/Warsaw", "2026-03-28T02:00:00Z", 2) == [
        "2026-03-29T01:00:00Z",
        "2026-03-30T00:30:00Z",
    ]
    assert fires("30 2 * * *", "Europe/Warsaw", "2026-10-24T02:00:00Z", 2) == [
        "2026-10-25T00:30:00Z",
        "2026-10-26T01:30:00Z",
    ]


def test_next_from_inside_the_second_pass_of_an_overlap_skips_the_repeated_hour() -> None:
    # 01:10 EST (second pass) on 2026-11-01: 01:15/01:30/01:45 already fired as EDT.
    assert fires("*/15 1 * * *", "America/New_York", "2026-11-01T06:10:00Z", 1) == [
        "2026-11-02T06:00:00Z"
    ]
    # A wildcard hour follows the same rule: nothing fires until the wall clock passes 02:00.
    assert fires("*/30 * * * *", "America/New_York", "2026-11-01T05:40:00Z", 3) == [
        "2026-11-01T07:00:00Z",
        "2026-11-01T07:30:00Z",
        "2026-11-01T08:00:00Z",
    ]


def test_next_is_strictly_after_and_ignores_sub_minute_parts() -> None:
    spec = parse_cron("* * * * *")
    start = ts("2026-10-05T03:00:00Z")
    assert cron_next(spec, dt.UTC, start) == start + MINUTE
    assert cron_next(spec, dt.UTC, start - 1) == start
    assert cron_next(spec, dt.UTC, start + 59 * SECOND + 999_999_999) == start + MINUTE


# --- grammar ------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("expression", "message"),
    [
        ("@daily", "parser does not accept descriptors: @daily"),
        ("@hourly", "parser does not accept descriptors: @hourly"),
        ("@every 1s", "parser does not accept descriptors: @every 1s"),
        ("  @daily", "parser does not accept descriptors: @daily"),
        ("0 0 * * * *", "expected exactly 5 fields, found 6: [0 0 * * * *]"),
        ("0 0 * * * 2027", "expected exactly 5 fields, found 6: [0 0 * * * 2027]"),
        ("TZ=UTC 0 * * * *", "expected exactly 5 fields, found 6: [TZ=UTC 0 * * * *]"),
        ("CRON_TZ=UTC 0 * * * *", "expected exactly 5 fields, found 6: [CRON_TZ=UTC 0 * * * *]"),
        ("* * * *", "expected exactly 5 fields, found 4: [* * * *]"),
        ("   ", "expected exactly 5 fields, found 0: []"),
        ("60 * * * *", "end of range (60) above maximum (59): 60"),
        ("* 24 * * *", "end of range (24) above maximum (23): 24"),
        ("* * 0 * *", "beginning of range (0) below minimum (1): 0"),
        ("* * 32 * *", "end of range (32) above maximum (31): 32"),
        ("* * * 13 *", "end of range (13) above maximum (12): 13"),
        ("* * * * 7", "end of range (7) above maximum (6): 7"),
        ("5-1 * * * *", "beginning of range (5) beyond end of range (1): 5-1"),
        ("*/0 * * * *", "step of range should be a positive number: */0"),
        ("1-2-3 * * * *", "too many hyphens: 1-2-3"),
        ("1/2/3 * * * *", "too many slashes: 1/2/3"),
        ("L * * * *", 'failed to parse int from L: strconv.Atoi: parsing "L": invalid syntax'),
        ("* * L * *", 'failed to parse int from L: strconv.Atoi: parsing "L": invalid syntax'),
        ("* * 15W * *", 'failed to parse int from 15W: '
         'strconv.Atoi: parsing "15W": invalid syntax'),
        ("* * * * 5#3", 'failed to parse int from 5#3: '
         'strconv.Atoi: parsing "5#3": invalid syntax'),
        ("H * * * *", 'failed to parse int from H: strconv.Atoi: parsing "H": invalid syntax'),
        ("R R * * *", 'failed to parse int from R: strconv.Atoi: parsing "R": invalid syntax'),
        ("-5 * * * *", 'failed to parse int from : strconv.Atoi: parsing "": invalid syntax'),
        ("*/-5 * * * *", "negative number (-5) not allowed: -5"),
        ("* * * January *",
         'failed to parse int from January: strconv.Atoi: parsing "January": invalid syntax'),
        ("99999999999999999999 * * * *",
         "failed to parse int from 99999999999999999999: "
         'strconv.Atoi: parsing "99999999999999999999": value out of range'),
        ("1.5 * * * *", 'failed to parse int from 1.5: '
         'strconv.Atoi: parsing "1.5": invalid syntax'),
        # The first bad field wins (minute before hour).
        ("60 24 * * *", "end of range (60) above maximum (59): 60"),
    ],
)  # fmt: skip
def test_as_04_invalid_expressions_carry_robfig_texts(expression: str, message: str) -> None:
    with pytest.raises(CronError) as caught:
        parse_cron(expression)
    assert str(caught.value) == message


def test_ref_051_descriptors_are_rejected() -> None:
    with pytest.raises(CronError, match="descriptors"):
        parse_cron("@every 1s")


def test_ref_052_impossible_dates_have_no_future_occurrence() -> None:
    spec = parse_cron("0 0 31 2 *")
    assert cron_next(spec, dt.UTC, ts("2026-10-05T03:00:00Z")) is None
    assert cron_next(parse_cron("0 0 30 2 *"), dt.UTC, ts("2026-10-05T03:00:00Z")) is None


@pytest.mark.parametrize(
    ("expression", "minutes", "hours", "doms", "months", "dows", "dom_star", "dow_star"),
    [
        ("* * * * *", range(60), range(24), range(1, 32), range(1, 13), range(7), True, True),
        ("? ? ? ? ?", range(60), range(24), range(1, 32), range(1, 13), range(7), True, True),
        ("5/20 */6 1,,15 JAN-mar/2 MON-fri",
         [5, 25, 45], [0, 6, 12, 18], [1, 15], [1, 3], [1, 2, 3, 4, 5], False, False),
        ("+5 0 * * sun,SAT", [5], [0], range(1, 32), range(1, 13), [0, 6], True, False),
        ("0 0 */1 * *", [0], [0], range(1, 32), range(1, 13), range(7), True, True),
        ("0 0 */2 * *", [0], [0], range(1, 32, 2), range(1, 13), range(7), False, True),
        ("0 0 *-5 * *", [0], [0], range(1, 32), range(1, 13), range(7), True, True),
        ("0 0 , * *", [0], [0], [], range(1, 13), range(7), False, True),
        ("0\t0  1\u3000* *", [0], [0], [1], range(1, 13), range(7), False, True),
    ],
)  # fmt: skip
def test_grammar_quirks_of_the_reference_parser(
    expression: str,
    minutes: range | list[int],
    hours: range | list[int],
    doms: range | list[int],
    months: range | list[int],
    dows: range | list[int],
    dom_star: bool,
    dow_star: bool,
) -> None:
    assert parse_cron(expression) == CronSpec(
        expression=expression,
        minutes=frozenset(minutes),
        hours=frozenset(hours),
        days_of_month=frozenset(doms),
        months=frozenset(months),
        days_of_week=frozenset(dows),
        dom_star=dom_star,
        dow_star=dow_star,
    )


@pytest.mark.parametrize(
    ("expression", "expected"),
    [
        # Both day fields restricted: either may match (OR).
        ("0 0 1,15 * 1", ["2026-03-09", "2026-03-15", "2026-03-16", "2026-03-23"]),
        # A step above 1 is "restricted" too, so */10 OR Monday.
        ("0 0 */10 * 1", ["2026-03-09", "2026-03-11", "2026-03-16", "2026-03-21"]),
        # One day field is * or ?: both must match (AND).
        ("0 0 1,15 * *", ["2026-03-15", "2026-04-01", "2026-04-15", "2026-05-01"]),
        ("0 0 ? * 1", ["2026-03-09", "2026-03-16", "2026-03-23", "2026-03-30"]),
        ("0 0 13 * ?", ["2026-03-13", "2026-04-13", "2026-05-13", "2026-06-13"]),
        # An explicit full range is not a star: 1-31 OR Monday is every day.
        ("0 0 1-31 * 1", ["2026-03-09", "2026-03-10", "2026-03-11", "2026-03-12"]),
        # An empty list item matches nothing; OR with nothing is the other field.
        ("0 0 , * 5", ["2026-03-13", "2026-03-20", "2026-03-27", "2026-04-03"]),
        ("0 0 13 * ,", ["2026-03-13", "2026-04-13", "2026-05-13", "2026-06-13"]),
        ("0 0 31 * *", ["2026-03-31", "2026-05-31", "2026-07-31", "2026-08-31"]),
        ("0 0 29 2 *", ["2028-02-29", "2032-02-29"]),
    ],
)
def test_day_of_month_and_day_of_week_rule(expression: str, expected: list[str]) -> None:
    got = fires(expression, "UTC", "2026-03-08T12:00:00Z", len(expected))
    assert [value[:10] for value in got] == expected


@pytest.mark.parametrize(
    "expression", ["0 0 , * ,", ", * * * *", "* , * * *", "* * * , *", "0 0 30 2 *", "0 0 31 4 *"]
)
def test_expressions_that_never_match_have_no_occurrence(expression: str) -> None:
    assert cron_next(parse_cron(expression), dt.UTC, ts("2026-03-08T12:00:00Z")) is None


def test_horizon_is_about_five_years() -> None:
    # 2096-03-01: the next Feb 29 is in 2104 (2100 is not a leap year): beyond the horizon.
    assert cron_next(parse_cron("0 0 29 2 *"), dt.UTC, ts("2096-03-01T00:00:00Z")) is None
    assert fires("0 0 29 2 *", "UTC", "2095-03-01T00:00:00Z", 1) == ["2096-02-29T00:00:00Z"]
    # From 2098 the next Feb 29 (2104) is six calendar years away: also too far.
    assert cron_next(parse_cron("0 0 29 2 *"), dt.UTC, ts("2098-01-01T00:00:00Z")) is None


def test_search_from_year_one_and_from_the_far_future() -> None:
    spec = parse_cron("0 * * * *")
    assert fires("0 * * * *", "UTC", "0001-01-01T00:00:00Z", 1) == ["0001-01-02T01:00:00Z"]
    assert cron_next(spec, dt.UTC, ts("9999-12-31T00:00:00Z")) is None
    assert fires("0 * * * *", "UTC", "9999-12-28T22:30:00Z", 1) == ["9999-12-28T23:00:00Z"]


# --- zones ----------------------------------------------------------------------------------


def test_zone_names_resolve_like_go_load_location() -> None:
    local = ZoneInfo("Asia/Tokyo")
    assert load_zone("", local_zone=local) is dt.UTC
    assert load_zone("UTC", local_zone=local) is dt.UTC
    assert load_zone("Local", local_zone=local) is local
    assert load_zone("Europe/Warsaw", local_zone=local) == ZoneInfo("Europe/Warsaw")


@pytest.mark.parametrize(
    "name",
    ["Invalid/Timezone", "utc", "local", "Europe/warsaw", "America", "../etc/passwd",
     "/etc/localtime",
     "\\x", "a\x00b", "Europe/Warsaw ", "CET..", "zone.tab"],
)  # fmt: skip
def test_as_05_invalid_zone_names_are_rejected(name: str) -> None:
    with pytest.raises(ZoneError):
        load_zone(name, local_zone=dt.UTC)


# --- properties -----------------------------------------------------------------------------

ZONES = [
    "UTC",
    "America/New_York",
    "Europe/London",
    "Australia/Lord_Howe",
    "Asia/Kolkata",
    "America/Santiago",  # transitions at midnight
    "Australia/Sydney",
]

# Instants within a few days of the 2026-2027 transitions (and some arbitrary ones).
TRANSITIONS = [
    ts(value)
    for value in (
        "2026-03-08T07:00:00Z",
        "2026-11-01T06:00:00Z",
        "2026-03-29T01:00:00Z",
        "2026-10-25T01:00:00Z",
        "2026-04-04T15:00:00Z",
        "2026-10-03T15:30:00Z",
        "2026-04-05T03:00:00Z",
        "2026-09-06T04:00:00Z",
        "2027-04-04T16:00:00Z",
        "2027-10-03T16:00:00Z",
    )
]

minute_items = st.lists(st.integers(0, 59), min_size=1, max_size=4, unique=True)
hour_items = st.lists(st.integers(0, 23), min_size=1, max_size=4, unique=True)
hour_field = st.one_of(st.just("*"), hour_items.map(lambda hs: ",".join(map(str, hs))))
minute_field = st.one_of(
    st.just("*/15"), st.just("*/7"), minute_items.map(lambda ms: ",".join(map(str, ms)))
)
near_transition = st.builds(
    lambda base, offset: base + offset,
    st.sampled_from(TRANSITIONS),
    st.integers(-3 * 24 * 60, 3 * 24 * 60).map(lambda minutes: minutes * MINUTE + 17),
)


def oracle(spec: CronSpec, zone: dt.tzinfo, after: int, count: int) -> list[int]:
    """Independent model of the policy: walk UTC minute by minute, watching the wall clock.

    A minute fires when its wall time has not been seen before (the second pass of an
    overlap repeats walls) and a matching wall minute lies between the previous wall time
    and this one (several, after a gap).
    """
    start = after // SECOND // 60 * 60 - 3 * 3600  # learn the recent wall history first
    latest: dt.datetime | None = None
    result: list[int] = []
    seconds = start
    while len(result) < count and seconds < start + 3 * 86400:
        wall = dt.datetime.fromtimestamp(seconds, zone).replace(tzinfo=None)
        if latest is None:
            latest = wall
        elif wall > latest:
            probe, hit = latest + dt.timedelta(minutes=1), False
            while probe <= wall:
                hit = hit or spec.matches(probe)
                probe += dt.timedelta(minutes=1)
            latest = wall
            if hit and seconds * SECOND > after:
                result.append(seconds * SECOND)
        seconds += 60
    return result


@settings(max_examples=120, deadline=None)
@given(minute_field, hour_field, st.sampled_from(ZONES), near_transition)
def test_policy_matches_an_independent_minute_by_minute_model(
    minutes: str, hours: str, zone_name: str, after: int
) -> None:
    spec = parse_cron(f"{minutes} {hours} * * *")
    zone = load_zone(zone_name, local_zone=dt.UTC)
    expected = oracle(spec, zone, after, 3)
    got: list[int] = []
    cursor = after
    for _ in range(len(expected)):
        following = cron_next(spec, zone, cursor)
        assert following is not None
        got.append(following)
        cursor = following
    assert got == expected


fields = st.tuples(
    st.sampled_from(["*", "0", "*/5", "30", "0,30", "59"]),
    st.sampled_from(["*", "0", "2", "1-3", "*/6", "23"]),
    st.sampled_from(["*", "1", "15", "29", "31", "*/10", "?", "1-7"]),
    st.sampled_from(["*", "2", "1-6", "JAN,JUL", "*/3", "12"]),
    st.sampled_from(["*", "0", "1-5", "SAT", "?", "*/2"]),
)


@settings(max_examples=150, deadline=None)
@given(
    fields,
    st.sampled_from(ZONES),
    st.integers(ts("1990-01-01T00:00:00Z"), ts("2090-01-01T00:00:00Z")),
)
def test_next_is_strictly_after_and_matches_the_expression(
    parts: tuple[str, str, str, str, str], zone_name: str, after: int
) -> None:
    spec = parse_cron(" ".join(parts))
    zone = load_zone(zone_name, local_zone=dt.UTC)
    following = cron_next(spec, zone, after)
    if following is None:
        return
    assert following > after
    wall = dt.datetime.fromtimestamp(following // SECOND, zone).replace(tzinfo=None)
    # Either the wall time itself matches, or it is the first instant after a gap that
    # swallowed a matching minute.
    before = dt.datetime.fromtimestamp(following // SECOND - 60, zone).replace(tzinfo=None)
    gap = wall - before > dt.timedelta(minutes=1)
    assert spec.matches(wall) or gap
