"""Recurring planning, coalescing and catch-up windows (docs/behaviour.md#recurring-restarts)."""

from __future__ import annotations

import datetime as dt
from zoneinfo import ZoneInfo

import pytest
from hypothesis import given
from hypothesis import strategies as st

from lifecycle_controller.core import (
    CronSchedule,
    IntervalSchedule,
    next_occurrences,
    parse_cron,
    plan_recurring,
    requeue_after,
)
from lifecycle_controller.core.text.timestamps import GO_ZERO_TIME_NS

from .support import DAY, HOUR, MINUTE, SECOND, ts

ANCHOR = ts("2026-07-14T12:00:00Z")
HOURLY = CronSchedule(parse_cron("0 * * * *"), dt.UTC)
EVERY_MINUTE = IntervalSchedule(MINUTE)


def test_ref_054_interval_not_due_before_the_first_occurrence() -> None:
    plan = plan_recurring(EVERY_MINUTE, ANCHOR, ANCHOR + 59 * SECOND)
    assert (plan.due, plan.scheduled_ns, plan.anchor_ns) == (False, ANCHOR + MINUTE, ANCHOR)


def test_ref_054_interval_due_exactly_at_the_occurrence() -> None:
    plan = plan_recurring(EVERY_MINUTE, ANCHOR, ANCHOR + MINUTE)
    assert (plan.due, plan.anchor_ns) == (True, ANCHOR + MINUTE)


def test_ref_054_interval_coalesces_a_day_of_missed_occurrences() -> None:
    now = ANCHOR + DAY + 30 * SECOND
    plan = plan_recurring(EVERY_MINUTE, ANCHOR, now)
    assert (plan.due, plan.scheduled_ns, plan.anchor_ns) == (True, ANCHOR + MINUTE, ANCHOR + DAY)
    assert not plan_recurring(EVERY_MINUTE, plan.anchor_ns, now).due


def test_ref_054_interval_with_a_fractional_period() -> None:
    schedule = IntervalSchedule(60 * SECOND + 500_000_000)
    now = ANCHOR + 2 * MINUTE + 800_000_000
    plan = plan_recurring(schedule, ANCHOR, now)
    assert (plan.due, plan.anchor_ns) == (True, ANCHOR + 60 * SECOND + 500_000_000)
    assert not plan_recurring(schedule, plan.anchor_ns, now).due


def test_ref_054_interval_anchor_in_year_one() -> None:
    year_one = ts("0001-01-01T00:00:00Z")
    now = ANCHOR + 17 * SECOND
    plan = plan_recurring(IntervalSchedule(HOUR), year_one, now)
    assert plan.due
    assert now - HOUR < plan.anchor_ns <= now
    assert (plan.anchor_ns - year_one) % HOUR == 0
    assert not plan_recurring(IntervalSchedule(HOUR), plan.anchor_ns, now).due


def test_ref_054_cron_not_due_half_way() -> None:
    plan = plan_recurring(HOURLY, ANCHOR, ANCHOR + 30 * MINUTE)
    assert (plan.due, plan.scheduled_ns) == (False, ANCHOR + HOUR)


@pytest.mark.parametrize("late", [HOUR, 3 * HOUR + 30 * MINUTE])
def test_ref_054_cron_due_moves_the_anchor_to_now(late: int) -> None:
    plan = plan_recurring(HOURLY, ANCHOR, ANCHOR + late)
    assert (plan.due, plan.scheduled_ns, plan.anchor_ns) == (True, ANCHOR + HOUR, ANCHOR + late)


def test_cron_with_nothing_after_the_anchor_is_due_at_go_zero_time() -> None:
    # robfig returns the zero time when nothing follows within five years; the reference
    # then treats the schedule as due (now is never before year 1).
    leap_day = CronSchedule(parse_cron("0 0 29 2 *"), dt.UTC)
    plan = plan_recurring(leap_day, ts("2096-03-01T00:00:00Z"), ts("2104-01-01T00:00:00Z"))
    assert (plan.due, plan.scheduled_ns) == (True, GO_ZERO_TIME_NS)


@pytest.mark.parametrize(
    ("target", "expected"),
    [(ANCHOR + HOUR, HOUR), (ANCHOR + 1, 1), (ANCHOR, 1), (ANCHOR - DAY, 1)],
)
def test_ref_053_elapsed_next_occurrence_requeues_after_one_nanosecond(
    target: int, expected: int
) -> None:
    assert requeue_after(target, ANCHOR) == expected


# --- catch-up windows -------------------------------------------------------------------------

WINDOW = 15 * MINUTE
OCT_1 = ts("2026-10-01T03:00:00Z")
DAILY_0300 = CronSchedule(parse_cron("0 3 * * *"), dt.UTC)


@pytest.mark.parametrize("schedule", [IntervalSchedule(DAY), DAILY_0300], ids=["24h", "cron"])
@pytest.mark.parametrize(
    ("now", "eligible"),
    [
        (OCT_1 + 72 * HOUR + 10 * MINUTE, True),
        (OCT_1 + 72 * HOUR + 15 * MINUTE, True),
        (OCT_1 + 72 * HOUR + 15 * MINUTE + 1, False),
        (OCT_1 - MINUTE, False),
        (OCT_1, False),
    ],
)
def test_ref_015_recurring_window(
    schedule: IntervalSchedule | CronSchedule, now: int, eligible: bool
) -> None:
    occurrence, ok = schedule.recent_occurrence(OCT_1, now, WINDOW)
    assert ok is eligible
    if eligible:
        assert occurrence == OCT_1 + 72 * HOUR


WARSAW_0230 = CronSchedule(parse_cron("30 2 * * *"), ZoneInfo("Europe/Warsaw"))


@pytest.mark.parametrize(
    ("now", "eligible", "occurrence"),
    [
        ("2026-03-28T01:40:00Z", True, "2026-03-28T01:30:00Z"),
        # Local 02:30 does not exist on 03-29; under our policy it runs at 03:00 local
        # (01:00Z), 40 minutes before now: outside the window (as in the reference).
        ("2026-03-29T01:40:00Z", False, None),
        # ... but 10 minutes after it, it is eligible (the reference would skip the day).
        ("2026-03-29T01:10:00Z", True, "2026-03-29T01:00:00Z"),
        ("2026-03-30T00:40:00Z", True, "2026-03-30T00:30:00Z"),
        ("2026-10-25T00:40:00Z", True, "2026-10-25T00:30:00Z"),
        # Our DST policy: the second 02:30 (01:30Z) does not fire, so 10 minutes after it
        # nothing recent qualifies (the reference found the second run eligible).
        ("2026-10-25T01:40:00Z", False, None),
    ],
)
def test_ref_016_recurring_window_in_a_zone_with_dst(
    now: str, eligible: bool, occurrence: str | None
) -> None:
    found, ok = WARSAW_0230.recent_occurrence(ts(now) - 7 * DAY, ts(now), WINDOW)
    assert ok is eligible
    if occurrence is not None:
        assert found == ts(occurrence)


def test_cron_window_without_any_occurrence_in_the_horizon() -> None:
    leap_day = CronSchedule(parse_cron("0 0 29 2 *"), dt.UTC)
    last, now = ts("2098-01-01T00:00:00Z"), ts("2098-06-01T00:00:00Z")
    assert leap_day.recent_occurrence(last, now, WINDOW) == (GO_ZERO_TIME_NS, False)


def test_interval_window_needs_an_occurrence_after_the_anchor() -> None:
    schedule = IntervalSchedule(HOUR)
    assert schedule.recent_occurrence(ANCHOR, ANCHOR + 30 * MINUTE, WINDOW) == (
        ANCHOR,
        False,
    )


def test_next_occurrences_lists_successive_instants() -> None:
    assert next_occurrences(HOURLY, ANCHOR, 3) == [ANCHOR + HOUR * k for k in (1, 2, 3)]
    assert next_occurrences(IntervalSchedule(DAY), ANCHOR, 2) == [ANCHOR + DAY, ANCHOR + 2 * DAY]
    never = CronSchedule(parse_cron("0 0 31 2 *"), dt.UTC)
    assert next_occurrences(never, ANCHOR, 3) == []


# --- coalescing around DST: recurring plans are made of instants ----------------------------


def test_interval_cadence_is_absolute_across_dst() -> None:
    # restart-every 24h anchored at 02:30 New York time the day before spring-forward keeps
    # a 24-hour cadence in UTC (03:30 EDT local afterwards), unlike a cron at 02:30.
    anchor = ts("2026-03-07T07:30:00Z")  # 02:30 EST
    plan = plan_recurring(IntervalSchedule(DAY), anchor, ts("2026-03-10T08:00:00Z"))
    assert (plan.due, plan.anchor_ns) == (True, ts("2026-03-10T07:30:00Z"))


def test_cron_coalescing_across_spring_forward_uses_the_policy() -> None:
    new_york = CronSchedule(parse_cron("30 2 * * *"), ZoneInfo("America/New_York"))
    anchor = ts("2026-03-07T07:30:00Z")  # the 02:30 EST run on 03-07
    plan = plan_recurring(new_york, anchor, ts("2026-03-08T07:05:00Z"))
    # The first missed occurrence is the gap minute, run at 03:00 EDT.
    assert (plan.due, plan.scheduled_ns) == (True, ts("2026-03-08T07:00:00Z"))
    assert new_york.next_after(plan.anchor_ns) == ts("2026-03-09T06:30:00Z")


def test_cron_coalescing_across_fall_back_does_not_repeat() -> None:
    new_york = CronSchedule(parse_cron("30 1 * * *"), ZoneInfo("America/New_York"))
    plan = plan_recurring(new_york, ts("2026-11-01T05:30:00Z"), ts("2026-11-01T06:40:00Z"))
    assert plan.due is False  # 01:30 EST (06:30Z) is the repeat and does not fire
    assert plan.scheduled_ns == ts("2026-11-02T06:30:00Z")


@given(
    st.integers(ts("0001-01-01T00:00:00Z"), ts("9999-01-01T00:00:00Z")),
    st.integers(1, 400 * DAY),
    st.integers(0, 10**22),
)
def test_interval_coalescing_keeps_cadence_and_never_lands_after_now(
    last: int, interval: int, extra: int
) -> None:
    now = last + interval + extra
    plan = plan_recurring(IntervalSchedule(interval), last, now)
    assert plan.due
    assert (plan.anchor_ns - last) % interval == 0
    assert last < plan.anchor_ns <= now < plan.anchor_ns + interval
    assert plan.scheduled_ns == last + interval
