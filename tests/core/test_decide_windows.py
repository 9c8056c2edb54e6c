"""decide() with maintenance windows: deferral, ActionDeferred, catch-up from the opening."""

from __future__ import annotations

import pytest

from lifecycle_controller.core import (
    NEVER,
    DecisionSettings,
    Delete,
    DryRun,
    Idle,
    Invalid,
    Patch,
    Wait,
    parse_catch_up_rule,
)
from lifecycle_controller.core.decision.outcomes import ObjectFacts
from lifecycle_controller.core.objects import keys
from lifecycle_controller.core.objects.relevance import should_enqueue_on_update
from lifecycle_controller.core.schedule.windows import parse_windows
from lifecycle_controller.core.tooling.plan import explain

from .support import CONFIGMAP, DEPLOYMENT, MINUTE, SECOND, World, reasons, run, ts

# 2026-10-05 is a Monday; Warsaw is on CEST (+02:00), New York on EDT (-04:00).
NIGHTLY = "Mon-Sun 01:00-02:00 Europe/Warsaw"  # 23:00-00:00 UTC
DUE = "2026-10-05T12:00:00Z"
OPENING = ts("2026-10-05T23:00:00Z")


def windowed(**extra: str) -> dict[str, str]:
    return {keys.DELETE_AT: DUE, keys.MAINTENANCE_WINDOW: NIGHTLY, **extra}


def test_before_due_waits_until_due_and_shows_the_effective_due_time() -> None:
    decision = run(windowed(), now=ts("2026-10-05T11:00:00Z"))
    assert isinstance(decision, Wait)
    assert decision.requeue_after_ns == 60 * MINUTE  # the pass at the due time defers
    assert decision.due_ns == OPENING
    assert "outside the maintenance windows, runs at 2026-10-05T23:00:00Z" in decision.log
    assert decision.events == ()


def test_due_outside_every_window_waits_for_the_opening_with_action_deferred() -> None:
    decision = run(windowed(), now=ts(DUE))
    assert isinstance(decision, Wait)
    assert decision.requeue_after_ns == OPENING - ts(DUE)
    assert decision.due_ns == OPENING
    assert reasons(decision.events) == ["ActionDeferred"]
    (event,) = decision.events
    assert event.message == (
        "The delete scheduled at 2026-10-05T12:00:00Z is outside every maintenance window; "
        "it will run at the next opening, 2026-10-05T23:00:00Z."
    )
    assert event.dedupe_key is not None  # once per occurrence


def test_at_the_opening_it_runs() -> None:
    assert isinstance(run(windowed(), now=OPENING), Delete)
    assert isinstance(run(windowed(), now=OPENING + 30 * MINUTE), Delete)


@pytest.mark.parametrize(
    ("annotations", "facts", "scheduled"),
    [
        (windowed(), CONFIGMAP, DUE),
        (
            {keys.RESTART_AT: DUE, keys.MAINTENANCE_WINDOW: NIGHTLY},
            DEPLOYMENT,
            DUE,
        ),
        (
            {keys.DELETE_AT: "2026-10-05T23:10:00Z", keys.MAINTENANCE_WINDOW: NIGHTLY},
            CONFIGMAP,
            "2026-10-05T23:10:00Z",
        ),
    ],
)
def test_an_action_is_due_at_its_opening_so_lateness_counts_from_there(
    annotations: dict[str, str], facts: ObjectFacts, scheduled: str
) -> None:
    """``due_ns`` of the acting decision feeds the lateness metric: waiting for a window is
    not lateness; an occurrence inside a window is due at its own time."""
    decision = run(annotations, now=OPENING + 10 * MINUTE + SECOND, facts=facts)
    assert isinstance(decision, Delete | Patch)
    assert decision.due_ns == max(OPENING, ts(scheduled))


def test_due_inside_a_window_runs_at_once() -> None:
    inside = {keys.DELETE_AT: "2026-10-05T23:10:00Z", keys.MAINTENANCE_WINDOW: NIGHTLY}
    before = run(inside, now=ts("2026-10-05T23:00:00Z"))
    assert isinstance(before, Wait)
    assert before.due_ns == ts("2026-10-05T23:10:00Z")
    assert isinstance(run(inside, now=ts("2026-10-05T23:10:00Z")), Delete)


def test_window_catch_up_is_measured_from_the_opening() -> None:
    late_ok = windowed(**{keys.CATCH_UP: "15m"})
    assert isinstance(run(late_ok, now=OPENING + 15 * MINUTE), Delete)
    skipped = run(late_ok, now=OPENING + 15 * MINUTE + SECOND)
    assert isinstance(skipped, Patch)
    assert skipped.on_success.events[0].reason == "ActionSkipped"


def test_never_observed_before_the_opening_runs_at_the_opening() -> None:
    world = World(windowed(**{keys.CATCH_UP: "never"}), facts=CONFIGMAP)
    # First seen after the due time, before the opening: it saw the opening coming.
    assert isinstance(world.reconcile(ts(DUE) + MINUTE), Wait)
    assert isinstance(world.reconcile(OPENING), Delete)


def test_never_first_seen_after_the_opening_is_skipped() -> None:
    world = World(windowed(**{keys.CATCH_UP: "never"}), facts=CONFIGMAP)
    decision = world.reconcile(OPENING + MINUTE)
    assert isinstance(decision, Patch)
    assert reasons(world.events) == ["ActionSkipped"]


def test_missing_the_whole_window_waits_for_the_next_one() -> None:
    # Controller down through the window: the next opening, a day later.
    decision = run(windowed(), now=ts("2026-10-06T12:00:00Z"))
    assert isinstance(decision, Wait)
    assert decision.due_ns == ts("2026-10-06T23:00:00Z")
    # ... where a 15m policy counts it as late (its first opening was missed).
    world = World(windowed(**{keys.CATCH_UP: "15m"}), facts=CONFIGMAP)
    world.reconcile(ts("2026-10-06T23:00:00Z"))
    assert reasons(world.events) == ["ActionSkipped"]


def test_flag_default_applies_and_the_annotation_wins() -> None:
    settings = DecisionSettings(maintenance_windows=parse_windows(NIGHTLY))
    deferred = run({keys.DELETE_AT: DUE}, now=ts(DUE), settings=settings)
    assert isinstance(deferred, Wait)
    assert reasons(deferred.events) == ["ActionDeferred"]
    open_now = {keys.DELETE_AT: DUE, keys.MAINTENANCE_WINDOW: "Mon-Mon 11:00-13:00 UTC"}
    assert isinstance(run(open_now, now=ts(DUE), settings=settings), Delete)


@pytest.mark.parametrize("value", ["", "always", "Mon-Fri 1:00-05:00 UTC", "Mon-Fri 01:00-05:00"])
def test_an_invalid_window_blocks_the_action(value: str) -> None:
    decision = run({keys.DELETE_AT: "2026-10-05T02:00:00Z", keys.MAINTENANCE_WINDOW: value})
    assert isinstance(decision, Invalid)
    assert reasons(decision.events) == ["InvalidAnnotation"]
    assert decision.events[0].message.startswith("Invalid maintenance-window: ")
    # ... and conversions too, like an invalid catch-up.
    converting = run({keys.DELETE_AFTER: "1h", keys.MAINTENANCE_WINDOW: value})
    assert isinstance(converting, Invalid)


def test_dry_run_defers_too() -> None:
    dry = windowed(**{keys.DRY_RUN: "true"})
    assert isinstance(run(dry, now=ts(DUE)), Wait)
    assert isinstance(run(dry, now=OPENING), DryRun)


def test_one_off_restart_defers() -> None:
    annotations = {keys.RESTART_AT: DUE, keys.MAINTENANCE_WINDOW: NIGHTLY}
    decision = run(annotations, now=ts(DUE))
    assert isinstance(decision, Wait)
    assert reasons(decision.events) == ["ActionDeferred"]
    restart = run(annotations, now=OPENING)
    assert isinstance(restart, Patch)
    assert restart.on_success.events[0].reason == "RestartTriggered"


def test_recurring_restart_defers_to_the_window_and_keeps_its_cadence() -> None:
    # Daily at 12:00 UTC; windows only at night (Warsaw, across the autumn change).
    annotations = {
        keys.RESTART_CRON: "0 12 * * *",
        keys.LAST_RESTART_TIMESTAMP: "2026-10-04T12:00:00Z",
        keys.MAINTENANCE_WINDOW: NIGHTLY,
    }
    world = World(annotations)
    waiting = world.reconcile(ts("2026-10-05T11:00:00Z"))
    assert isinstance(waiting, Wait)
    assert waiting.due_ns == OPENING
    deferred = world.reconcile(ts(DUE))
    assert isinstance(deferred, Wait)
    assert reasons(deferred.events) == ["ActionDeferred"]
    restarted = world.reconcile(OPENING)
    assert isinstance(restarted, Patch)
    assert reasons(world.events) == ["ActionDeferred", "RestartTriggered"]
    assert world.annotations[keys.LAST_RESTART_TIMESTAMP].startswith("2026-10-05T23:00:00")
    # The next occurrence (tomorrow 12:00) is shown at its opening.
    following = world.reconcile(OPENING + SECOND)
    assert isinstance(following, Wait)
    assert following.due_ns == ts("2026-10-06T23:00:00Z")


def test_recurring_window_catch_up_from_the_latest_occurrences_opening() -> None:
    # Down for three days: the latest occurrence (10-07 12:00) opened at 23:00; 10 min late.
    annotations = {
        keys.RESTART_CRON: "0 12 * * *",
        keys.LAST_RESTART_TIMESTAMP: "2026-10-04T12:00:00Z",
        keys.MAINTENANCE_WINDOW: NIGHTLY,
        keys.CATCH_UP: "15m",
    }
    now = ts("2026-10-07T23:10:00Z")
    decision = run(annotations, now=now)
    assert isinstance(decision, Patch)
    assert decision.on_success.events[0].reason == "RestartTriggered"
    skipped = run(annotations, now=now + 10 * MINUTE)
    assert isinstance(skipped, Patch)
    assert skipped.on_success.events[0].reason == "ActionSkipped"


def test_recurring_every_with_window_in_new_york_across_fall_back() -> None:
    # restart-every 24h anchored at 2026-10-31 12:00 UTC; window 01:30-03:00 New York on
    # 2026-11-01, when 01:30 happens twice: it opens at the first one (05:30 UTC).
    annotations = {
        keys.RESTART_EVERY: "24h",
        keys.LAST_RESTART_TIMESTAMP: "2026-10-31T00:00:00Z",
        keys.MAINTENANCE_WINDOW: "Sun-Sun 01:30-03:00 America/New_York",
    }
    decision = run(annotations, now=ts("2026-11-01T00:00:00Z"))
    assert isinstance(decision, Wait)
    assert decision.due_ns == ts("2026-11-01T05:30:00Z")
    assert isinstance(run(annotations, now=ts("2026-11-01T05:30:00Z")), Patch)


def test_never_recurring_armed_before_due_runs_at_the_opening() -> None:
    annotations = {
        keys.RESTART_EVERY: "24h",
        keys.LAST_RESTART_TIMESTAMP: "2026-10-04T12:00:00Z",
        keys.MAINTENANCE_WINDOW: NIGHTLY,
    }
    world = World(annotations, settings=DecisionSettings(restart_catch_up=NEVER))
    assert isinstance(world.reconcile(ts("2026-10-05T11:00:00Z")), Wait)
    assert isinstance(world.reconcile(ts(DUE)), Wait)
    assert isinstance(world.reconcile(OPENING), Patch)
    assert reasons(world.events) == ["ActionDeferred", "RestartTriggered"]


def test_without_windows_nothing_changes() -> None:
    plain = run({keys.DELETE_AT: DUE}, now=ts("2026-10-05T11:00:00Z"))
    assert isinstance(plain, Wait)
    assert plain.due_ns == ts(DUE)
    assert "maintenance" not in plain.log
    assert isinstance(run({keys.DELETE_AT: DUE}, now=ts(DUE)), Delete)
    assert parse_catch_up_rule("15m").window_ns == 15 * MINUTE


def test_explain_shows_the_effective_due_time() -> None:
    explanation = explain(
        annotations=windowed(),
        facts=DEPLOYMENT,
        now_ns=ts("2026-10-05T11:00:00Z"),
        settings=DecisionSettings(),
    )
    assert explanation.due_ns == OPENING
    assert "runs at 2026-10-05T23:00:00Z" in explanation.summary


def test_a_changed_window_wakes_the_controller() -> None:
    old = {keys.DELETE_AT: DUE}
    assert should_enqueue_on_update(old, {**old, keys.MAINTENANCE_WINDOW: NIGHTLY})
    assert not should_enqueue_on_update({}, {keys.MAINTENANCE_WINDOW: NIGHTLY})


def test_terminating_and_plain_objects_ignore_windows() -> None:
    assert isinstance(run({keys.MAINTENANCE_WINDOW: "bogus"}), Idle)
