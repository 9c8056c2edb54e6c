"""End-to-end scenarios of the reference suites (reference tests 39, 63-79 and 127-142, see
docs/acceptance-scenarios.md#reference-test-numbers), replayed against decide() with an injected
clock instead of a cluster and sleeps."""

from __future__ import annotations

import pytest

from lifecycle_controller.core import (
    CatchUpError,
    DecisionSettings,
    Delete,
    DryRun,
    Invalid,
    Patch,
    Wait,
    format_rfc3339_seconds,
    parse_catch_up_rule,
)
from lifecycle_controller.core.objects import keys

from .support import HOUR, MINUTE, NOW, SECOND, World, reasons, run, ts


def test_ref_039_messages_are_data_not_format_strings() -> None:
    decision = run({keys.DELETE_AT: "2026-10-05T02:00:00Z", keys.DRY_RUN: "invalid 50% value"})
    assert decision.events[0].message.startswith('invalid value "invalid 50% value" for ')


def test_ref_063_ref_064_handler_events() -> None:
    assert reasons(run({keys.DELETE_AT: "nope"}).events) == ["InvalidAnnotation"]
    assert reasons(run({keys.RESTART_AT: "nope"}).events) == ["InvalidAnnotation"]
    kept = World({keys.RESTART_AT: "2026-10-05T02:00:00Z", keys.DRY_RUN: "true"})
    assert isinstance(kept.reconcile(NOW), DryRun)
    assert keys.RESTART_AT in kept.annotations


def test_ref_066_three_days() -> None:
    decision = run({keys.DELETE_AFTER: "3d"})
    assert isinstance(decision, Patch)
    assert decision.body["metadata"]["annotations"][keys.DELETE_AT] == "2026-10-08T03:00:00Z"


def test_ref_067_ref_127_converted_deadline_is_then_deleted() -> None:
    world = World({keys.DELETE_AFTER: "2s"})
    world.reconcile(NOW)
    assert isinstance(world.reconcile(NOW + SECOND), Wait)
    assert isinstance(world.reconcile(NOW + 2 * SECOND), Delete)
    assert world.deleted
    assert reasons(world.events) == ["Deleted"]


def test_ref_070_ref_137_stale_interval_anchor_restarts_then_keeps_cadence() -> None:
    anchor = NOW - 24 * HOUR
    world = World(
        {keys.RESTART_EVERY: "1m", keys.LAST_RESTART_TIMESTAMP: format_rfc3339_seconds(anchor)}
    )
    world.reconcile(NOW)
    first_anchor = world.annotations[keys.LAST_RESTART_TIMESTAMP]
    first_marker = world.template[keys.RESTARTED_AT]
    # No catch-up storm: nothing more happens until the next minute.
    for seconds in (1, 5, 59):
        assert isinstance(world.reconcile(NOW + seconds * SECOND), Wait)
    assert world.annotations[keys.LAST_RESTART_TIMESTAMP] == first_anchor
    world.reconcile(NOW + MINUTE)
    assert world.annotations[keys.LAST_RESTART_TIMESTAMP] != first_anchor
    assert world.template[keys.RESTARTED_AT] != first_marker
    assert world.writes == 2


def test_ref_072_ref_132_reapplied_restart_after_moves_the_deadline_later() -> None:
    world = World({keys.RESTART_AFTER: "4s"})
    world.reconcile(NOW)
    first = world.annotations[keys.RESTART_AT]
    world.annotations[keys.RESTART_AFTER] = "4s"
    world.reconcile(NOW + 1_500_000_000)
    assert ts(world.annotations[keys.RESTART_AT]) > ts(first)
    assert world.template == {}


def test_ref_079_global_dry_run_with_a_past_deadline() -> None:
    world = World({keys.DELETE_AT: "2026-10-05T02:00:00Z"}, settings=DecisionSettings(dry_run=True))
    world.reconcile(NOW)
    assert reasons(world.events) == ["DryRunDelete"]
    assert not world.deleted


def test_ref_129_fixed_deadline_is_not_rewritten_by_reapply() -> None:
    world = World({keys.DELETE_AT: "2026-10-05T03:00:06Z"})
    for offset in (0, SECOND, 2 * SECOND):
        assert isinstance(world.reconcile(NOW + offset), Wait)
    assert world.annotations == {keys.DELETE_AT: "2026-10-05T03:00:06Z"}
    assert world.writes == 0
    world.reconcile(NOW + 6 * SECOND)
    assert world.deleted


@pytest.mark.parametrize("action", ["delete", "restart"])
@pytest.mark.parametrize("policy", ["never", "15m"])
def test_ref_133_stale_one_time_action_is_skipped(action: str, policy: str) -> None:
    key = keys.DELETE_AT if action == "delete" else keys.RESTART_AT
    world = World({key: format_rfc3339_seconds(NOW - HOUR), keys.CATCH_UP: policy})
    world.reconcile(NOW)
    assert key not in world.annotations
    assert world.annotations[keys.CATCH_UP] == policy
    assert world.template == {}
    assert reasons(world.events) == ["ActionSkipped"]
    assert not world.deleted


@pytest.mark.parametrize("action", ["delete", "restart"])
def test_ref_134_recent_missed_action_runs_within_the_window(action: str) -> None:
    key = keys.DELETE_AT if action == "delete" else keys.RESTART_AT
    world = World({key: format_rfc3339_seconds(NOW - MINUTE), keys.CATCH_UP: "15m"})
    world.reconcile(NOW)
    assert world.deleted or keys.RESTARTED_AT in world.template


@pytest.mark.parametrize("action", ["delete", "restart"])
def test_ref_135_action_armed_before_due_runs_under_never(action: str) -> None:
    key = keys.DELETE_AT if action == "delete" else keys.RESTART_AT
    world = World({key: format_rfc3339_seconds(NOW + 6 * SECOND), keys.CATCH_UP: "never"})
    assert isinstance(world.reconcile(NOW), Wait)
    world.reconcile(NOW + 6 * SECOND)
    assert world.deleted or keys.RESTARTED_AT in world.template


def test_ref_136_never_recurring_skips_first_then_restarts_on_schedule() -> None:
    anchor = NOW - 330 * SECOND
    world = World(
        {
            keys.RESTART_EVERY: "1m",
            keys.LAST_RESTART_TIMESTAMP: format_rfc3339_seconds(anchor),
            keys.CATCH_UP: "never",
        }
    )
    skip = world.reconcile(NOW)
    assert isinstance(skip, Patch)
    assert skip.operation == "skip"
    assert world.template == {}
    assert reasons(world.events) == ["ActionSkipped"]
    assert skip.on_success.requeue_after_ns == 30 * SECOND
    world.reconcile(NOW + 30 * SECOND)
    assert keys.RESTARTED_AT in world.template
    assert world.annotations[keys.RESTART_EVERY] == "1m"
    assert world.annotations[keys.CATCH_UP] == "never"


def test_ref_139_cron_in_los_angeles_initializes_then_restarts() -> None:
    world = World({keys.RESTART_CRON: "* * * * *", keys.CRON_TIMEZONE: "America/Los_Angeles"})
    init = world.reconcile(NOW + 20 * SECOND)
    assert isinstance(init, Patch)
    assert init.on_success.requeue_after_ns == 40 * SECOND
    world.reconcile(NOW + MINUTE)
    assert keys.RESTARTED_AT in world.template


def test_ref_142_dry_run_annotation_keeps_the_object() -> None:
    world = World({keys.DELETE_AFTER: "2s", keys.DRY_RUN: "true"})
    world.reconcile(NOW)
    assert reasons(world.events) == ["DryRunDelete"]
    assert world.writes == 0


def test_as_09_invalid_global_catch_up_flags_are_rejected() -> None:
    for value in ("", "sometimes", "0s", "-5m"):
        with pytest.raises(CatchUpError):
            parse_catch_up_rule(value)


def test_as_47_dry_run_due_delete() -> None:
    decision = run({keys.DELETE_AT: "2026-10-05T02:00:00Z", keys.DRY_RUN: "true"})
    assert isinstance(decision, DryRun)
    assert [e.message for e in decision.events] == ["Dry-run: Resource would be deleted now."]


def test_as_18_the_delete_is_guarded_by_what_was_observed() -> None:
    # The conflict itself is the API server's; core's part is to carry the observed UID and
    # resourceVersion, and to re-decide on fresh state (here: the deadline was postponed).
    world = World({keys.DELETE_AT: "2026-10-05T02:00:00Z"})
    first = world.reconcile(NOW, fail="Conflict")
    assert isinstance(first, Delete)
    assert (first.uid, first.resource_version) == ("uid-1", "100")
    world.annotations[keys.DELETE_AT] = "2026-10-05T05:00:00Z"
    assert isinstance(world.reconcile(NOW + SECOND), Wait)
    assert not world.deleted


def test_invalid_values_never_change_stored_annotations() -> None:
    for stored in (
        {keys.RESTART_EVERY: "1m", keys.LAST_RESTART_TIMESTAMP: "bad"},
        {keys.RESTART_CRON: "bad"},
        {keys.DELETE_AT: "bad"},
    ):
        world = World(stored)
        assert isinstance(world.reconcile(NOW), Invalid)
        assert world.annotations == stored
        assert world.writes == 0
