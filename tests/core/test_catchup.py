"""Catch-up policies and the ``never`` ledger (docs/behaviour.md#occurrence-check; ref 1-24)."""

from __future__ import annotations

import dataclasses

import pytest

from lifecycle_controller.core import (
    ALWAYS,
    NEVER,
    CatchUpError,
    CatchUpMode,
    CatchUpRule,
    DecisionSettings,
    Delete,
    DryRun,
    Identity,
    Idle,
    Invalid,
    Ledger,
    Patch,
    Wait,
    parse_catch_up_rule,
)
from lifecycle_controller.core.objects import keys
from lifecycle_controller.core.schedule.catchup import Forget, Observe, observe_outcome

from .support import (
    CONFIGMAP,
    DAY,
    DEPLOYMENT,
    HOUR,
    MINUTE,
    NOW,
    SECOND,
    World,
    reasons,
    rekey,
    run,
    ts,
)

GLOBAL_NEVER = DecisionSettings(delete_catch_up=NEVER, restart_catch_up=NEVER)
DUE = NOW + MINUTE
DUE_TEXT = "2026-10-05T03:01:00Z"
WINDOW_15M = CatchUpRule(CatchUpMode.WINDOW, 15 * MINUTE)


def one_time(action: str, value: str = DUE_TEXT) -> dict[str, str]:
    return {keys.DELETE_AT if action == "delete" else keys.RESTART_AT: value}


def executed(world: World, action: str) -> bool:
    if action == "delete":
        return world.deleted
    return keys.RESTARTED_AT in world.template and keys.RESTART_AT not in world.annotations


def skipped(world: World, action: str) -> bool:
    key = keys.DELETE_AT if action == "delete" else keys.RESTART_AT
    return (
        not world.deleted
        and key not in world.annotations
        and keys.RESTARTED_AT not in world.template
        and "ActionSkipped" in reasons(world.events)
    )


# --- policy grammar -----------------------------------------------------------------------


@pytest.mark.parametrize(
    ("value", "policy"),
    [
        ("always", ALWAYS),
        ("never", NEVER),
        ("1s", CatchUpRule(CatchUpMode.WINDOW, SECOND)),
        ("15m", WINDOW_15M),
        ("2h", CatchUpRule(CatchUpMode.WINDOW, 2 * HOUR)),
        ("7d", CatchUpRule(CatchUpMode.WINDOW, 7 * DAY)),
    ],
)
def test_ref_011_catch_up_rule_parsing_accepts(value: str, policy: CatchUpRule) -> None:
    assert parse_catch_up_rule(value) == policy


@pytest.mark.parametrize(
    ("value", "detail"),
    [
        ("", 'invalid duration format: ""'),
        ("none", 'invalid duration format: "none"'),
        ("Always", 'invalid duration format: "Always"'),
        (" NEVER", 'invalid duration format: " NEVER"'),
        ("0s", "duration must be positive"),
        ("-1m", "duration must be positive and unsigned"),
        ("+1m", "duration must be positive and unsigned"),
        ("1.5m", 'invalid duration format: "1.5m"'),
        ("1h30m", 'invalid duration format: "1h30m"'),
        ("15 m", 'invalid duration format: "15 m"'),
        ("999999999999999999d", "number of days is too large: 999999999999999999d"),
    ],
)
def test_ref_011_catch_up_rule_parsing_rejects(value: str, detail: str) -> None:
    with pytest.raises(CatchUpError) as caught:
        parse_catch_up_rule(value)
    prefix = 'invalid catch-up policy "' + value + '"'
    assert (
        str(caught.value) == f"{prefix}: expected always, never, or a positive duration: {detail}"
    )


def test_ref_012_as_46_per_action_defaults_and_annotation_override() -> None:
    settings = DecisionSettings(delete_catch_up=NEVER, restart_catch_up=WINDOW_15M)
    overdue_delete = {keys.DELETE_AT: "2026-10-05T02:50:00Z"}  # 10 minutes late
    overdue_restart = {keys.RESTART_AT: "2026-10-05T02:50:00Z"}
    # No annotation: delete uses `never` (never observed: skip), restart the 15m window.
    delete = run(overdue_delete, settings=settings)
    assert isinstance(delete, Patch)
    assert delete.operation == "skip"
    restart = run(overdue_restart, settings=settings)
    assert isinstance(restart, Patch)
    assert restart.operation == "restart"
    # The annotation overrides whichever action is selected.
    both_always = {keys.CATCH_UP: "always"}
    assert isinstance(run({**overdue_delete, **both_always}, settings=settings), Delete)
    late_restart = run({keys.RESTART_AT: "2026-10-05T02:40:00Z", **both_always}, settings=settings)
    assert isinstance(late_restart, Patch)
    assert late_restart.operation == "restart"
    # Zero configuration means always.
    assert DecisionSettings().delete_catch_up == ALWAYS == DecisionSettings().restart_catch_up
    assert isinstance(run(overdue_delete), Delete)


@pytest.mark.parametrize(
    "action",
    [
        {keys.DELETE_AT: "1h"},
        {keys.RESTART_AT: "1h"},
        {keys.DELETE_AFTER: "1h"},
        {keys.RESTART_EVERY: "1h"},
    ],
    ids=["delete-at", "restart-at", "delete-after", "restart-every"],
)
@pytest.mark.parametrize("value", ["", "none", "0s"])
def test_ref_013_as_08_invalid_catch_up_blocks_all_mutations(
    action: dict[str, str], value: str
) -> None:
    world = World({**action, keys.CATCH_UP: value})
    decision = world.reconcile(NOW)
    assert isinstance(decision, Invalid)
    assert world.writes == 0
    first = world.events[0]
    assert (first.type, first.reason) == ("Warning", "InvalidAnnotation")
    assert first.message.startswith(f'invalid catch-up policy "{value}": expected always')
    assert first.message.endswith(" for lifecycle.cezary.dev/catch-up; taking no action")


def test_invalid_catch_up_comes_before_the_restart_kind_check() -> None:
    decision = run({keys.RESTART_AT: DUE_TEXT, keys.CATCH_UP: "x"}, facts=CONFIGMAP)
    assert isinstance(decision, Invalid)
    assert decision.reason == "InvalidAnnotation"


# --- duration windows -----------------------------------------------------------------------


@pytest.mark.parametrize("action", ["delete", "restart"])
@pytest.mark.parametrize(
    ("late", "runs"),
    [(14 * MINUTE, True), (15 * MINUTE, True), (15 * MINUTE + 1, False)],
    ids=["14m", "15m", "15m+1ns"],
)
def test_ref_014_as_36_one_time_window_boundaries(action: str, late: int, runs: bool) -> None:
    world = World({**one_time(action), keys.CATCH_UP: "15m"})
    world.reconcile(DUE + late)
    assert executed(world, action) is runs
    assert skipped(world, action) is not runs
    assert world.writes == 1


def test_ref_017_as_37_window_deadline_is_not_reset_by_retries() -> None:
    world = World({keys.RESTART_AT: DUE_TEXT, keys.CATCH_UP: "15m"})
    world.reconcile(DUE + 14 * MINUTE, fail="the server is on fire")
    assert "RestartFailed" in reasons(world.events)
    assert keys.RESTART_AT in world.annotations
    world.reconcile(DUE + 16 * MINUTE)
    assert skipped(world, "restart")


@pytest.mark.parametrize("kind", ["cron", "interval"])
@pytest.mark.parametrize(("late", "restarted"), [(10 * MINUTE, True), (20 * MINUTE, False)])
def test_ref_018_as_38_recurring_window_reconcile(kind: str, late: int, restarted: bool) -> None:
    anchor = "2026-10-01T03:00:00Z"
    schedule = {keys.RESTART_CRON: "0 3 * * *"} if kind == "cron" else {keys.RESTART_EVERY: "24h"}
    world = World({**schedule, keys.LAST_RESTART_TIMESTAMP: anchor, keys.CATCH_UP: "15m"})
    now = ts(anchor) + 72 * HOUR + late
    decision = world.reconcile(now)
    assert isinstance(decision, Patch)
    assert decision.on_success.requeue_after_ns is not None
    assert decision.on_success.requeue_after_ns > 0
    assert world.annotations[keys.LAST_RESTART_TIMESTAMP] != anchor
    assert all(world.annotations[k] == v for k, v in schedule.items())
    assert (keys.RESTARTED_AT in world.template) is restarted
    if not restarted:
        assert world.template == {}
        skipped_at = "2026-10-02T03:00:00Z"  # the first missed occurrence
        assert world.events[-1].message == (
            f"Skipped restart scheduled at {skipped_at} under the catch-up policy."
        )
    expected_anchor = (
        "2026-10-04T03:00:00Z"
        if kind == "interval"
        else ("2026-10-04T03:" + str(late // MINUTE) + ":00Z")
    )
    assert world.annotations[keys.LAST_RESTART_TIMESTAMP] == expected_anchor


@pytest.mark.parametrize(
    "annotations",
    [
        {keys.DELETE_AT: "2026-10-05T02:00:00Z"},
        {keys.RESTART_AT: "2026-10-05T02:00:00Z"},
        {keys.RESTART_EVERY: "1h", keys.LAST_RESTART_TIMESTAMP: "2026-10-05T01:30:00Z"},
    ],
    ids=["delete-at", "restart-at", "restart-every"],
)
def test_ref_019_as_50_dry_run_expired_action_does_not_acknowledge(
    annotations: dict[str, str],
) -> None:
    world = World({**annotations, keys.CATCH_UP: "1s", keys.DRY_RUN: "true"})
    decision = world.reconcile(NOW)
    assert isinstance(decision, DryRun)
    assert world.writes == 0
    assert reasons(world.events) == ["DryRunActionSkipped"]
    assert world.events[0].message.startswith("Dry-run: Would skip ")


# --- never: the ledger ----------------------------------------------------------------------


def test_ledger_observe_semantics() -> None:
    identity = Identity("u", "delete", NEVER, (keys.DELETE_AT, DUE_TEXT))
    other = dataclasses.replace(identity, uid="v")
    ledger = Ledger()
    assert ledger.observe("k", identity, DUE, NOW) is True  # future: armed
    assert len(ledger) == 1
    assert ledger.observe("k", identity, DUE, DUE + SECOND) is True  # matching arm
    assert ledger.observe("k", other, DUE, DUE + SECOND) is False  # identity differs: dropped
    assert ledger.peek("k") is None
    ledger.observe("k", identity, DUE, NOW)
    assert ledger.observe("k", identity, DUE - SECOND, DUE) is False  # due instant differs
    assert len(ledger) == 0
    ledger.apply("k", [Observe(identity, DUE, NOW), Forget()])
    assert ledger.peek("k") is None
    ledger.disarm("absent")  # forgetting nothing is fine
    assert observe_outcome(None, identity, NOW, NOW) == (False, None)  # due exactly now


MODIFIERS = {
    "reference-point": {keys.REFERENCE_POINT: "creationTimestamp"},
    "cron-timezone": {keys.CRON_TIMEZONE: "Europe/Warsaw"},
    "last-restart-timestamp": {keys.LAST_RESTART_TIMESTAMP: "2026-10-05T00:00:00Z"},
}
# Next to restart-at, lower-priority schedules are modifiers too (a conflict next to delete-at).
RESTART_MODIFIERS = {
    **MODIFIERS,
    "restart-cron": {keys.RESTART_CRON: "0 3 * * *"},
    "restart-every": {keys.RESTART_EVERY: "1h"},
}
UNUSED_CONFIGURATION = [
    pytest.param(action, extra, id=f"{action}+{name}")
    for action, table in (("delete", MODIFIERS), ("restart", RESTART_MODIFIERS))
    for name, extra in table.items()
]


@pytest.mark.parametrize(("action", "extra"), UNUSED_CONFIGURATION)
def test_ref_001_as_42_unused_configuration_keeps_the_selected_arm(
    action: str, extra: dict[str, str]
) -> None:
    world = World(one_time(action), settings=GLOBAL_NEVER)
    assert isinstance(world.reconcile(NOW), Wait)
    world.annotations.update(extra)
    world.reconcile(DUE + SECOND)
    assert executed(world, action)
    if action == "restart":
        assert world.annotations[keys.MANAGED_BY] == "lifecycle-controller"
        assert world.template[keys.MANAGED_BY] == "lifecycle-controller"


@pytest.mark.parametrize("action", ["delete", "restart"])
@pytest.mark.parametrize("source", ["global", "annotation"])
def test_ref_002_as_39_armed_one_time_actions_execute(action: str, source: str) -> None:
    if source == "global":
        world = World(one_time(action), settings=GLOBAL_NEVER)
    else:
        world = World({**one_time(action), keys.CATCH_UP: "never"})
    world.reconcile(NOW)
    world.reconcile(DUE + 250_000_000)
    assert executed(world, action)


@pytest.mark.parametrize("action", ["delete", "restart"])
def test_ref_003_as_40_a_new_process_skips_overdue_one_time_actions(action: str) -> None:
    world = World(one_time(action), settings=GLOBAL_NEVER)
    world.reconcile(NOW)
    world.restart_process()
    world.reconcile(DUE + SECOND)
    assert skipped(world, action)
    assert world.events[-1].message == (
        f"Skipped {action} scheduled at {DUE_TEXT} under the catch-up policy."
    )


@pytest.mark.parametrize("action", ["delete", "restart"])
def test_ref_004_as_39_api_failure_retains_the_armed_action(action: str) -> None:
    world = World(one_time(action), settings=GLOBAL_NEVER)
    world.reconcile(NOW)
    world.reconcile(DUE + SECOND, fail="etcdserver: request timed out")
    assert not executed(world, action)
    world.reconcile(DUE + SECOND + 10 * MINUTE)
    assert executed(world, action)
    assert world.writes == 2


@pytest.mark.parametrize("change", ["uid", "deadline", "policy"])
def test_ref_005_as_41_changed_identity_does_not_reuse_the_arm(change: str) -> None:
    world = World(one_time("restart"), settings=GLOBAL_NEVER)
    world.reconcile(NOW)
    if change == "uid":
        world.facts = dataclasses.replace(world.facts, uid="replacement-uid")
    elif change == "deadline":
        world.annotations[keys.RESTART_AT] = "2026-10-05T03:00:59Z"
    else:
        world.annotations[keys.CATCH_UP] = "always"
        world.reconcile(NOW + SECOND)
        del world.annotations[keys.CATCH_UP]
    world.reconcile(DUE + SECOND)
    assert skipped(world, "restart")


@pytest.mark.parametrize("action", ["delete", "restart"])
def test_ref_006_relative_conversion_arms_the_new_deadline(action: str) -> None:
    after = keys.DELETE_AFTER if action == "delete" else keys.RESTART_AFTER
    at = keys.DELETE_AT if action == "delete" else keys.RESTART_AT
    world = World({after: "1m"}, settings=GLOBAL_NEVER)
    decision = world.reconcile(NOW)
    assert isinstance(decision, Patch)
    assert decision.on_success.requeue_after_ns == 1
    assert world.annotations[at] == DUE_TEXT
    world.reconcile(NOW + 61 * SECOND)
    assert executed(world, action)


@pytest.mark.parametrize(
    "schedule",
    [{keys.RESTART_EVERY: "1h"}, {keys.RESTART_CRON: "0 * * * *"}],
    ids=["every", "cron"],
)
def test_ref_007_recurring_initialization_arms_the_next_occurrence(
    schedule: dict[str, str],
) -> None:
    world = World(schedule, settings=GLOBAL_NEVER)
    decision = world.reconcile(NOW)
    assert isinstance(decision, Patch)
    assert decision.on_success.requeue_after_ns == HOUR
    world.reconcile(NOW + HOUR + SECOND)
    assert keys.RESTARTED_AT in world.template


def test_ref_008_never_recurring_skip_preserves_cadence() -> None:
    world = World(
        {keys.RESTART_EVERY: "1h", keys.LAST_RESTART_TIMESTAMP: "2026-10-05T03:00:00Z"},
        settings=GLOBAL_NEVER,
    )
    world.reconcile(ts("2026-10-05T06:20:00Z"))
    assert world.annotations[keys.LAST_RESTART_TIMESTAMP] == "2026-10-05T06:00:00Z"
    assert world.template == {}
    assert world.annotations[keys.RESTART_EVERY] == "1h"
    world.reconcile(ts("2026-10-05T07:00:01Z"))
    assert keys.RESTARTED_AT in world.template


def test_ref_009_changed_recurring_schedule_does_not_reuse_the_arm() -> None:
    world = World(
        {keys.RESTART_EVERY: "1h", keys.LAST_RESTART_TIMESTAMP: "2026-10-05T03:00:00Z"},
        settings=GLOBAL_NEVER,
    )
    assert isinstance(world.reconcile(NOW), Wait)  # armed for 04:00
    world.annotations[keys.RESTART_EVERY] = "2h"
    world.reconcile(ts("2026-10-05T05:00:01Z"))
    assert world.template == {}
    assert "ActionSkipped" in reasons(world.events)


@pytest.mark.parametrize("action", ["delete", "restart"])
def test_ref_010_never_in_dry_run_neither_writes_nor_arms(action: str) -> None:
    world = World({**one_time(action), keys.DRY_RUN: "true"}, settings=GLOBAL_NEVER)
    before = dict(world.annotations)
    assert isinstance(world.reconcile(NOW), Wait)
    assert isinstance(world.reconcile(DUE + SECOND), DryRun)
    assert world.annotations == before
    assert world.writes == 0
    assert len(world.ledger) == 0
    del world.annotations[keys.DRY_RUN]
    world.reconcile(DUE + 2 * SECOND)
    assert skipped(world, action)


def test_ref_020_not_found_and_no_annotations_forget_arms() -> None:
    world = World(one_time("restart"), settings=GLOBAL_NEVER)
    world.reconcile(NOW)
    assert world.ledger.peek(DEPLOYMENT.key) is not None
    world.ledger.disarm(DEPLOYMENT.key)  # the caller's NotFound path
    assert world.ledger.peek(DEPLOYMENT.key) is None
    world.reconcile(NOW)
    world.annotations.clear()
    decision = world.reconcile(NOW + SECOND)
    assert isinstance(decision, Idle)
    assert world.ledger.peek(DEPLOYMENT.key) is None


@pytest.mark.parametrize("action", ["delete", "restart"])
def test_ref_021_as_44_failed_skip_leaves_the_schedule_untouched(action: str) -> None:
    world = World(one_time(action), settings=GLOBAL_NEVER)
    decision = world.reconcile(DUE + 3 * HOUR, fail="Operation cannot be fulfilled: conflict")
    assert isinstance(decision, Patch)
    assert decision.operation == "skip"
    # Only the acknowledgement and managed-by are written, guarded by resourceVersion.
    assert decision.body_with("100") == {
        "metadata": {
            "annotations": {
                (keys.DELETE_AT if action == "delete" else keys.RESTART_AT): None,
                keys.MANAGED_BY: "lifecycle-controller",
            },
            "resourceVersion": "100",
        }
    }
    assert world.annotations == one_time(action)
    assert world.events[-1].reason == "ActionSkipFailed"
    assert world.events[-1].message == (
        f"Could not acknowledge skipped {action}: Operation cannot be fulfilled: conflict"
    )


@pytest.mark.parametrize(
    ("annotations", "anchor_after"),
    [
        ({keys.DELETE_AT: DUE_TEXT}, None),
        ({keys.RESTART_AT: DUE_TEXT}, None),
        (
            {keys.RESTART_EVERY: "1h", keys.LAST_RESTART_TIMESTAMP: "2026-10-05T03:00:00Z"},
            "2026-10-05T06:00:00Z",
        ),
        (
            {keys.RESTART_CRON: "0 * * * *", keys.LAST_RESTART_TIMESTAMP: "2026-10-05T03:00:00Z"},
            "2026-10-05T06:01:00Z",
        ),
    ],
    ids=["delete-at", "restart-at", "every", "cron"],
)
def test_ref_022_as_44_committed_skip_is_not_replayed_after_a_lost_response(
    annotations: dict[str, str], anchor_after: str | None
) -> None:
    world = World(annotations, settings=GLOBAL_NEVER)
    now = NOW + 3 * HOUR + MINUTE
    world.reconcile(now, lose=True)
    assert world.writes == 1
    following = world.reconcile(now + SECOND)
    assert world.writes == 1
    assert world.template == {}
    if anchor_after is None:
        assert isinstance(following, Idle)
    else:
        assert isinstance(following, Wait)
        assert world.annotations[keys.LAST_RESTART_TIMESTAMP] == anchor_after


@pytest.mark.parametrize(
    "block",
    [
        {keys.CATCH_UP: "bogus"},
        {keys.RESTART_AT: "not-a-time"},
        {keys.DRY_RUN: "maybe"},
        {keys.DELETE_AT: DUE_TEXT},
        "remove-action",
        "remove-all",
    ],
    ids=["catch-up", "restart-at", "dry-run", "conflict", "removed", "no-annotations"],
)
def test_ref_023_as_43_blocking_states_clear_the_arm(block: dict[str, str] | str) -> None:
    world = World(one_time("restart"), settings=GLOBAL_NEVER)
    world.reconcile(NOW)
    if block == "remove-action":
        world.annotations = {"example.com/other": "kept"}
    elif block == "remove-all":
        world.annotations = {}
    else:
        assert isinstance(block, dict)
        world.annotations.update(block)
    world.reconcile(NOW + SECOND)
    assert world.ledger.peek(DEPLOYMENT.key) is None
    world.annotations = one_time("restart")
    world.reconcile(DUE + SECOND)
    assert skipped(world, "restart")


def test_ref_024_as_45_many_objects_share_one_ledger() -> None:
    ledger = Ledger()
    worlds = [
        World(
            one_time("delete" if n % 2 else "restart"),
            facts=dataclasses.replace(
                DEPLOYMENT, key=rekey(DEPLOYMENT, name=f"web-{n}"), uid=f"uid-{n}"
            ),
            settings=GLOBAL_NEVER,
            ledger=ledger,
        )
        for n in range(32)
    ]
    for world in worlds:
        world.reconcile(NOW)
    assert len(ledger) == 32
    for n, world in enumerate(worlds):
        world.reconcile(DUE + SECOND)
        assert executed(world, "delete" if n % 2 else "restart")
    assert len(ledger) == 0


def test_as_35_always_executes_however_late() -> None:
    world = World({keys.DELETE_AT: "2000-01-01T00:00:00Z"})
    assert isinstance(world.reconcile(NOW), Delete)
    assert world.deleted
