"""decide() with warn-before: the warning's time, text and name, across maintenance windows."""

from __future__ import annotations

import pytest

from lifecycle_controller.core import (
    DecisionSettings,
    Delete,
    DryRun,
    Patch,
    Wait,
    parse_catch_up_rule,
)
from lifecycle_controller.core.decision.events import Event
from lifecycle_controller.core.decision.warnings import (
    catch_up_text,
    occurrence_name,
    parse_lead_time,
)
from lifecycle_controller.core.objects import keys
from lifecycle_controller.core.objects.relevance import should_enqueue_on_update
from lifecycle_controller.core.schedule.windows import parse_windows

from .support import CONFIGMAP, DEPLOYMENT, HOUR, MINUTE, SECOND, World, reasons, run, ts

DUE = "2026-10-05T12:00:00Z"  # a Monday
NIGHTLY = "Mon-Sun 01:00-02:00 Europe/Warsaw"  # 23:00-00:00 UTC while on CEST
OPENING = ts("2026-10-05T23:00:00Z")


def upcoming(events: tuple[Event, ...] | list[Event]) -> list[Event]:
    return [e for e in events if e.reason in ("UpcomingDeletion", "UpcomingRestart")]


def delete_at(**extra: str) -> dict[str, str]:
    return {keys.DELETE_AT: DUE, keys.WARN_BEFORE: "15m", **extra}


# (annotations, now, requeue at, warned) for a delete-at with warn-before 15m
CASES = [
    ("long before: requeue at the warning", delete_at(), "2026-10-05T11:00:00Z", "11:45:00", False),
    ("at the warning time: warn", delete_at(), "2026-10-05T11:45:00Z", "12:00:00", True),
    ("inside the lead time: warn", delete_at(), "2026-10-05T11:59:00Z", "12:00:00", True),
    (
        "window: counts back from the opening",
        delete_at(**{keys.MAINTENANCE_WINDOW: NIGHTLY}),
        "2026-10-05T11:00:00Z",
        "12:00:00",  # the due pass defers, before the warning time (22:45)
        False,
    ),
    (
        "window: deferred, requeue at the warning before the opening",
        delete_at(**{keys.MAINTENANCE_WINDOW: NIGHTLY}),
        DUE,
        "22:45:00",
        False,
    ),
    (
        "window: warned while deferred",
        delete_at(**{keys.MAINTENANCE_WINDOW: NIGHTLY}),
        "2026-10-05T22:50:00Z",
        "23:00:00",
        True,
    ),
    (
        "due inside the window: counts back from the due time",
        delete_at(
            **{
                keys.MAINTENANCE_WINDOW: "Mon-Sun 13:00-15:00 UTC",
                keys.DELETE_AT: "2026-10-05T14:00:00Z",
            }
        ),
        "2026-10-05T13:00:00Z",
        "13:45:00",
        False,
    ),
]


@pytest.mark.parametrize(
    ("annotations", "now", "requeue_at", "warned"),
    [case[1:] for case in CASES],
    ids=[case[0] for case in CASES],
)
def test_a_waiting_deletion_is_requeued_at_the_warning_and_warned_once_inside_the_lead_time(
    annotations: dict[str, str], now: str, requeue_at: str, warned: bool
) -> None:
    decision = run(annotations, now=ts(now), facts=CONFIGMAP)
    assert isinstance(decision, Wait)
    assert ts(now) + decision.requeue_after_ns == ts(f"2026-10-05T{requeue_at}Z")
    assert len(upcoming(decision.events)) == (1 if warned else 0)


def test_the_warning_names_the_effective_due_time_the_policy_and_a_stable_name() -> None:
    annotations = delete_at(**{keys.MAINTENANCE_WINDOW: NIGHTLY, keys.CATCH_UP: "30m"})
    first = run(annotations, now=ts("2026-10-05T22:50:00Z"), facts=CONFIGMAP)
    again = run(annotations, now=ts("2026-10-05T22:55:00Z"), facts=CONFIGMAP)
    [event] = upcoming(first.events)
    assert event.type.value == "Normal"
    assert event.reason == "UpcomingDeletion"
    assert event.message == (
        "The deletion of this object is due at 2026-10-05T23:00:00Z "
        "(warn-before 15m0s, catch-up policy 30m0s)."
    )
    assert event.name == occurrence_name(CONFIGMAP.uid, "delete", ts(DUE))
    assert upcoming(again.events) == [event]  # the same name: the recorder posts it once
    assert event.name is not None
    assert event.name.startswith("upcoming-")


def test_each_occurrence_and_object_has_its_own_name() -> None:
    names = {
        occurrence_name("uid-a", "delete", 1),
        occurrence_name("uid-a", "delete", 2),
        occurrence_name("uid-b", "delete", 1),
        occurrence_name("uid-a", "restart", 1),
    }
    assert len(names) == 4
    assert occurrence_name("uid-a", "delete", 1) == occurrence_name("uid-a", "delete", 1)


def test_first_seen_when_due_warns_at_once_before_the_action() -> None:
    decision = run(delete_at(), now=ts(DUE) + MINUTE, facts=CONFIGMAP)
    assert isinstance(decision, Delete)
    assert reasons(decision.events) == ["UpcomingDeletion"]  # recorded before the write


def test_a_restart_at_the_opening_warns_at_once_when_first_seen_there() -> None:
    annotations = {
        keys.RESTART_AT: DUE,
        keys.WARN_BEFORE: "1h",
        keys.MAINTENANCE_WINDOW: NIGHTLY,
    }
    decision = run(annotations, now=OPENING)
    assert isinstance(decision, Patch)
    [event] = upcoming(decision.events)
    assert event.reason == "UpcomingRestart"
    assert "due at 2026-10-05T23:00:00Z (warn-before 1h0m0s, catch-up policy always)" in (
        event.message
    )


def test_dry_run_objects_get_the_warning_marked_dry_run() -> None:
    annotations = delete_at(**{keys.DRY_RUN: "true"})
    waiting = run(annotations, now=ts("2026-10-05T11:50:00Z"), facts=CONFIGMAP)
    [event] = upcoming(waiting.events)
    assert event.message.endswith("Dry-run: the deletion will only be reported, not carried out.")
    due = run(annotations, now=ts(DUE), facts=CONFIGMAP)
    assert isinstance(due, DryRun)
    assert reasons(due.events)[0] == "UpcomingDeletion"


def test_the_flag_is_the_default_and_the_annotation_wins() -> None:
    settings = DecisionSettings(warn_before_ns=HOUR)
    plain = {keys.DELETE_AT: DUE}
    by_flag = run(plain, now=ts("2026-10-05T10:00:00Z"), facts=CONFIGMAP, settings=settings)
    assert isinstance(by_flag, Wait)
    assert by_flag.requeue_after_ns == HOUR  # the warning at 11:00
    own = run(delete_at(), now=ts("2026-10-05T11:10:00Z"), facts=CONFIGMAP, settings=settings)
    assert upcoming(own.events) == []  # 15m, not the flag's hour
    off = run(
        {**plain, keys.WARN_BEFORE: "0s"},
        now=ts("2026-10-05T11:59:00Z"),
        facts=CONFIGMAP,
        settings=settings,
    )
    assert isinstance(off, Wait)
    assert upcoming(off.events) == []
    assert off.requeue_after_ns == MINUTE


def test_without_a_lead_time_nothing_changes() -> None:
    decision = run({keys.DELETE_AT: DUE}, now=ts("2026-10-05T11:59:00Z"), facts=CONFIGMAP)
    assert isinstance(decision, Wait)
    assert decision.events == ()
    assert decision.requeue_after_ns == MINUTE


@pytest.mark.parametrize("value", ["", "1h30m", "1.5h", "-1h", "500ms", " 15m", "15"])
def test_an_invalid_warn_before_blocks_only_the_warning(value: str) -> None:
    annotations = delete_at(**{keys.WARN_BEFORE: value})
    waiting = run(annotations, now=ts("2026-10-05T11:59:00Z"), facts=CONFIGMAP)
    assert isinstance(waiting, Wait)
    assert reasons(waiting.events) == ["InvalidAnnotation"]
    (problem,) = waiting.events
    assert problem.type.value == "Warning"
    assert problem.message.startswith("Invalid format for warn-before annotation: ")
    assert problem.dedupe_key is not None  # once per object and value
    assert isinstance(run(annotations, now=ts(DUE), facts=CONFIGMAP), Delete)


def test_recurring_restarts_warn_before_each_occurrence_across_a_window() -> None:
    # restart-every 1d from Monday 12:00, window Mon-Sun 01:00-02:00 Warsaw (23:00 UTC).
    annotations = {
        keys.RESTART_EVERY: "1d",
        keys.LAST_RESTART_TIMESTAMP: "2026-10-04T12:00:00Z",
        keys.WARN_BEFORE: "30m",
        keys.MAINTENANCE_WINDOW: NIGHTLY,
    }
    world = World(annotations, facts=DEPLOYMENT)
    deferred = world.reconcile(ts(DUE))
    assert isinstance(deferred, Wait)
    assert ts(DUE) + deferred.requeue_after_ns == ts("2026-10-05T22:30:00Z")
    warned = world.reconcile(ts("2026-10-05T22:30:00Z"))
    assert isinstance(warned, Wait)
    assert [e.reason for e in upcoming(world.events)] == ["UpcomingRestart"]
    assert isinstance(world.reconcile(OPENING), Patch)
    assert reasons(world.events)[-1] == "RestartTriggered"
    names = {e.name for e in upcoming(world.events)}
    # The next occurrence (Tuesday 23:00 after the window) has its own warning name.
    following = world.reconcile(ts("2026-10-06T22:30:00Z") + SECOND)
    assert isinstance(following, Wait)
    assert {e.name for e in upcoming(following.events)} - names


def test_lead_time_grammar_and_policy_text() -> None:
    assert parse_lead_time({}, 5, "u").lead_ns == 5
    assert parse_lead_time({keys.WARN_BEFORE: "00m"}, 5, "u").lead_ns == 0
    assert parse_lead_time({keys.WARN_BEFORE: "2d"}, 5, "u").lead_ns == 48 * HOUR
    assert parse_lead_time({keys.WARN_BEFORE: "x"}, 5, "u").problem is not None
    assert catch_up_text(parse_catch_up_rule("never")) == "never"
    assert catch_up_text(parse_catch_up_rule("90s")) == "1m30s"


def test_windows_across_dst_shift_the_warning_with_the_opening() -> None:
    # 2026-03-29 Warsaw springs forward: 02:00-04:00 opens at 03:00 CEST = 01:00 UTC.
    annotations = {
        keys.DELETE_AT: "2026-03-28T12:00:00Z",
        keys.WARN_BEFORE: "10m",
        keys.MAINTENANCE_WINDOW: "Sun-Sun 02:00-04:00 Europe/Warsaw",
    }
    decision = run(annotations, now=ts("2026-03-28T12:00:00Z"), facts=CONFIGMAP)
    assert isinstance(decision, Wait)
    assert decision.due_ns == ts("2026-03-29T01:00:00Z")
    assert ts("2026-03-28T12:00:00Z") + decision.requeue_after_ns == ts("2026-03-29T00:50:00Z")
    assert parse_windows("Sun-Sun 02:00-04:00 Europe/Warsaw") is not None


def test_a_warn_before_change_re_evaluates_the_object() -> None:
    old = {keys.DELETE_AT: DUE}
    assert should_enqueue_on_update(old, {**old, keys.WARN_BEFORE: "15m"})
