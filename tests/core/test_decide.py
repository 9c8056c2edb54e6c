"""decide(): the decision order (docs/behaviour.md#decision-order) and the acceptance scenarios.

Scenarios that need an API server (conflicts, NotFound, RBAC, discovery) belong to the
integration suite; here every scenario that is decided by core is checked, using the
``World`` helper where a scenario spans several reconciles.
"""

from __future__ import annotations

import dataclasses

import pytest

from lifecycle_controller.core import (
    NEVER,
    Decision,
    DecisionSettings,
    Delete,
    DryRun,
    Forget,
    Idle,
    Invalid,
    Ledger,
    ObjectFacts,
    Observe,
    Patch,
    Wait,
    format_rfc3339_seconds,
)
from lifecycle_controller.core.objects import keys

from .duration_vectors import REJECTED
from .support import (
    CONFIGMAP,
    DAY,
    DEPLOYMENT,
    HOUR,
    MINUTE,
    NAMESPACE,
    NOW,
    SECOND,
    World,
    reasons,
    rekey,
    run,
    ts,
)

PAST = "2026-10-05T02:00:00Z"
FUTURE = "2026-10-05T04:00:00Z"
MANAGED = {keys.MANAGED_BY: "lifecycle-controller"}


def kind(group: str, name: str, *, template: bool = True) -> ObjectFacts:
    return dataclasses.replace(
        DEPLOYMENT, key=rekey(DEPLOYMENT, group=group, kind=name), has_pod_template=template
    )


def annotations_patch(changes: dict[str, str | None]) -> dict[str, object]:
    return {"metadata": {"annotations": {**changes, **MANAGED}}}


def forgets(decision: Decision) -> bool:
    """Whether the arm is forgotten when the decision completes successfully."""
    ops = list(decision.ledger_ops)
    if isinstance(decision, Patch | Delete):
        ops += decision.on_success.ledger_ops
    return bool(ops) and ops[-1] == Forget()


# --- top-level gate (docs/behaviour.md#top-level-gate) -----------------------------------------


@pytest.mark.parametrize(
    "annotations",
    [
        {keys.DELETE_AT: PAST},
        {keys.RESTART_AT: PAST},
        {keys.DELETE_AFTER: "1h"},
        {keys.RESTART_EVERY: "1h"},
        {keys.DRY_RUN: "bogus", keys.DELETE_AT: PAST},
    ],
)
def test_terminating_objects_are_left_alone(annotations: dict[str, str]) -> None:
    # docs/behaviour.md#terminating-objects: never restarted, never a second DELETE, and
    # (our choice) nothing else.
    decision = run(annotations, facts=dataclasses.replace(DEPLOYMENT, terminating=True))
    assert isinstance(decision, Idle)
    assert decision.events == ()
    assert decision.ledger_ops == (Forget(),)


@pytest.mark.parametrize("annotations", [{}, {"example.com/x": "y"}])
def test_without_lifecycle_annotations_nothing_happens(annotations: dict[str, str]) -> None:
    decision = run(annotations)
    assert isinstance(decision, Idle)
    assert decision.events == ()
    assert forgets(decision)


@pytest.mark.parametrize("value", ["1", "t", "T", "TRUE", "true", "True"])
def test_ref_032_as_07_true_spellings_enable_dry_run(value: str) -> None:
    decision = run({keys.DELETE_AT: PAST, keys.DRY_RUN: value})
    assert isinstance(decision, DryRun)
    assert reasons(decision.events) == ["DryRunDelete"]
    assert forgets(decision)


@pytest.mark.parametrize("value", ["0", "f", "F", "FALSE", "false", "False"])
def test_ref_032_as_07_false_spellings_disable_dry_run(value: str) -> None:
    assert isinstance(run({keys.DELETE_AT: PAST, keys.DRY_RUN: value}), Delete)


def test_ref_033_as_51_global_dry_run_beats_an_annotation_false() -> None:
    decision = run(
        {keys.DELETE_AT: PAST, keys.DRY_RUN: "false"}, settings=DecisionSettings(dry_run=True)
    )
    assert isinstance(decision, DryRun)


@pytest.mark.parametrize(
    "annotations",
    [
        {keys.DELETE_AT: PAST},
        {keys.RESTART_AT: PAST},
        {keys.DELETE_AT: PAST, keys.RESTART_AT: PAST},  # checked before the conflict
        {"example.com/x": "y"},  # and before any check for action annotations
    ],
)
@pytest.mark.parametrize("value", ["not-a-boolean", "", "yes", "TRUE "])
def test_ref_034_as_07_invalid_dry_run_fails_closed(
    annotations: dict[str, str], value: str
) -> None:
    decision = run({**annotations, keys.DRY_RUN: value})
    assert isinstance(decision, Invalid)
    assert reasons(decision.events) == ["InvalidAnnotationValue"]
    assert decision.events[0].message.endswith("taking no action")
    assert decision.ledger_ops == (Forget(),)


@pytest.mark.parametrize(
    ("annotations", "expected_events"),
    [
        ({keys.DELETE_AFTER: "1h"}, ["DryRunDelete"]),
        ({keys.RESTART_AFTER: "1h"}, ["DryRunRestart"]),
        ({keys.RESTART_AT: PAST}, ["DryRunRestart"]),
        ({keys.RESTART_EVERY: "1h"}, []),
        ({keys.RESTART_EVERY: "1h", keys.LAST_RESTART_TIMESTAMP: "2026-10-05T01:00:00Z"},
         ["DryRunRestart"]),
        ({keys.RESTART_CRON: "* * * * *"}, []),
        ({keys.RESTART_CRON: "* * * * *", keys.LAST_RESTART_TIMESTAMP: "2026-10-05T01:00:00Z"},
         ["DryRunRestart"]),
    ],
)  # fmt: skip
def test_ref_035_as_48_as_49_dry_run_schedule_modes_neither_write_nor_requeue(
    annotations: dict[str, str], expected_events: list[str]
) -> None:
    decision = run({**annotations, keys.DRY_RUN: "true"})
    assert isinstance(decision, DryRun)  # no write, and DryRun has no requeue
    assert reasons(decision.events) == expected_events


def test_dry_run_future_one_time_action_still_waits_for_its_deadline() -> None:
    decision = run({keys.DELETE_AT: FUTURE, keys.DRY_RUN: "true"})
    assert isinstance(decision, Wait)
    assert decision.requeue_after_ns == HOUR


def test_dry_run_redundant_after_removal_is_only_logged() -> None:
    decision = run(
        {
            keys.DELETE_AFTER: "1h",
            keys.DELETE_AT: FUTURE,
            keys.REFERENCE_POINT: "creationTimestamp",
            keys.DRY_RUN: "true",
        }
    )
    assert isinstance(decision, DryRun)
    assert decision.events == ()
    assert decision.operation == "cleanup"


def test_as_06_ref_077_stray_cron_timezone_warns_and_processing_continues() -> None:
    decision = run({keys.RESTART_EVERY: "24h", keys.CRON_TIMEZONE: "Europe/Warsaw"})
    assert isinstance(decision, Patch)
    assert decision.operation == "initialize"
    assert reasons(decision.events) == ["IgnoredAnnotation"]


@pytest.mark.parametrize("delete_key", keys.DELETE_FAMILY)
@pytest.mark.parametrize("restart_key", keys.RESTART_FAMILY)
def test_as_52_ref_074_both_families_conflict(delete_key: str, restart_key: str) -> None:
    world = World({delete_key: "1s", restart_key: "1s"})
    decision = world.reconcile(NOW)
    assert isinstance(decision, Invalid)
    assert reasons(decision.events) == ["ConflictingAnnotations"]
    assert decision.ledger_ops == (Forget(),)
    assert world.writes == 0


@pytest.mark.parametrize(
    "modifier", [keys.LAST_RESTART_TIMESTAMP, keys.CRON_TIMEZONE, keys.CATCH_UP]
)
def test_as_53_modifiers_are_not_restart_annotations(modifier: str) -> None:
    value = {keys.CATCH_UP: "always", keys.CRON_TIMEZONE: "UTC"}.get(modifier, PAST)
    assert isinstance(run({keys.DELETE_AT: PAST, modifier: value}), Delete)


def test_empty_action_values_do_not_count() -> None:
    assert isinstance(run({keys.DELETE_AT: "", keys.RESTART_AT: PAST}), Patch)
    decision = run({keys.DELETE_AT: "", keys.RESTART_CRON: "", keys.CATCH_UP: "never"})
    assert isinstance(decision, Idle)
    assert forgets(decision)


# --- parsing (AS-1..AS-5) ----------------------------------------------------------------------

# Every rejected duration, for each annotation that takes one (an empty value means the
# action is absent, so it is not a rejection; 59s is rejected by restart-every only).
INVALID_DURATIONS = [
    pytest.param(key, value, id=f"{key.removeprefix(keys.PREFIX)}={value[:20]!r}")
    for key in (keys.DELETE_AFTER, keys.RESTART_AFTER, keys.RESTART_EVERY)
    for value in [v for v, _ in REJECTED if v] + (["59s"] if key == keys.RESTART_EVERY else [])
]


@pytest.mark.parametrize(("key", "value"), INVALID_DURATIONS)
def test_as_01_ref_038_invalid_durations_do_not_act(key: str, value: str) -> None:
    world = World({key: value})
    decision = world.reconcile(NOW)
    assert isinstance(decision, Invalid)
    assert reasons(decision.events) == ["InvalidAnnotation"]
    assert world.writes == 0
    assert world.annotations == {key: value}


def test_as_01_restart_every_below_one_minute_names_the_minimum() -> None:
    decision = run({keys.RESTART_EVERY: "59s"})
    assert decision.events[0].message == (
        "Invalid duration for restart-every: duration must be at least 1m0s"
    )


@pytest.mark.parametrize(
    ("value", "duration"),
    [("1d", DAY), ("25h", 25 * HOUR), ("5m", 5 * MINUTE), ("106751d", 106_751 * DAY),
     ("9223372036s", 9_223_372_036 * SECOND)],
)  # fmt: skip
def test_as_02_conversion_writes_the_whole_second_utc_deadline(value: str, duration: int) -> None:
    now = NOW + 987_654_321
    decision = run({keys.DELETE_AFTER: value}, now=now)
    assert isinstance(decision, Patch)
    written = decision.body["metadata"]["annotations"][keys.DELETE_AT]
    assert written == format_rfc3339_seconds(now + duration)
    assert written.endswith("Z")
    assert len(written) == len("2026-10-05T03:00:00Z")


@pytest.mark.parametrize(
    ("value", "deadline"),
    [("106751d", "2319-01-14T03:00:00Z"), ("9223372036s", "2319-01-15T02:47:16Z")],
)
def test_as_02_largest_durations_give_literal_deadlines(value: str, deadline: str) -> None:
    # Worked out with datetime: 2026-10-05T03:00 plus 106751 days / 9223372036 seconds.
    decision = run({keys.DELETE_AFTER: value})
    assert isinstance(decision, Patch)
    assert decision.body["metadata"]["annotations"][keys.DELETE_AT] == deadline


@pytest.mark.parametrize(
    ("key", "value"),
    [(keys.DELETE_AT, v) for v in ("2026-10-10T03:00:00", "2026-10-10 03:00:00Z",
                                   "2026-10-10T03:00:00+0000", "2026-10-10", "garbage")]
    + [(keys.RESTART_AT, "2026-10-10t03:00:00z")],
)  # fmt: skip
def test_as_03_non_rfc3339_deadlines_are_invalid(key: str, value: str) -> None:
    decision = run({key: value})
    assert isinstance(decision, Invalid)
    short = key.removeprefix(keys.PREFIX)
    assert decision.events[0].message.startswith(f"Invalid format for {short} annotation: ")
    assert forgets(decision)


def test_as_03_offsets_and_fractions_are_absolute() -> None:
    annotations = {keys.DELETE_AT: "2026-10-05T05:00:00.5+02:00"}  # 03:00:00.5Z
    decision = run(annotations)
    assert isinstance(decision, Wait)
    assert decision.requeue_after_ns == 500_000_000
    assert isinstance(run(annotations, now=NOW + SECOND), Delete)


@pytest.mark.parametrize(
    "expression",
    ["0 0 * * * *", "@daily", "@every 1s", "60 * * * *", "0 0 31 2 *", "TZ=UTC 0 * * * *"],
)
def test_as_04_ref_051_ref_052_invalid_cron_writes_no_anchor(expression: str) -> None:
    world = World({keys.RESTART_CRON: expression})
    decision = world.reconcile(NOW)
    assert isinstance(decision, Invalid)
    assert reasons(decision.events) == ["InvalidAnnotation"]
    assert keys.LAST_RESTART_TIMESTAMP not in world.annotations
    assert world.writes == 0


def test_as_05_ref_076_invalid_timezone() -> None:
    world = World({keys.RESTART_CRON: "*/1 * * * *", keys.CRON_TIMEZONE: "Invalid/Timezone"})
    assert isinstance(world.reconcile(NOW), Invalid)
    assert reasons(world.events) == ["InvalidTimezone"]
    assert world.writes == 0


def test_local_cron_timezone_uses_the_configured_zone() -> None:
    from zoneinfo import ZoneInfo

    settings = DecisionSettings(local_zone=ZoneInfo("Asia/Kolkata"))
    annotations = {
        keys.RESTART_CRON: "30 9 * * *",
        keys.CRON_TIMEZONE: "Local",
        keys.LAST_RESTART_TIMESTAMP: "2026-10-05T00:00:00Z",
    }
    decision = run(annotations, settings=settings)
    assert isinstance(decision, Wait)  # 09:30 IST = 04:00Z
    assert decision.due_ns == ts("2026-10-05T04:00:00Z")


# --- conversion (AS-10..AS-15) -----------------------------------------------------------------


def test_as_10_ref_045_ref_065_delete_after_converts_and_requeues_at_once() -> None:
    decision = run({keys.DELETE_AFTER: "1h"})
    assert isinstance(decision, Patch)
    assert decision.operation == "convert"
    assert decision.body == annotations_patch({keys.DELETE_AT: FUTURE, keys.DELETE_AFTER: None})
    assert decision.on_success.requeue_after_ns == 1
    assert decision.failure is None
    assert decision.body_with("100")["metadata"]["resourceVersion"] == "100"
    assert "resourceVersion" not in decision.body["metadata"]


def test_as_11_ref_071_reapplied_after_overwrites_the_deadline() -> None:
    world = World({keys.DELETE_AFTER: "1h"})
    world.reconcile(NOW)
    world.annotations[keys.DELETE_AFTER] = "1h"
    world.reconcile(NOW + 10 * MINUTE)
    assert world.annotations == {keys.DELETE_AT: "2026-10-05T04:10:00Z", **MANAGED}


def test_as_12_ref_073_creation_timestamp_reference() -> None:
    decision = run({keys.DELETE_AFTER: "1h", keys.REFERENCE_POINT: "creationTimestamp"})
    assert isinstance(decision, Patch)
    # DEPLOYMENT was created at 02:00Z.
    assert decision.body["metadata"]["annotations"][keys.DELETE_AT] == "2026-10-05T03:00:00Z"


def test_as_12_ref_138_creation_timestamp_keeps_an_existing_deadline() -> None:
    world = World(
        {
            keys.DELETE_AFTER: "3s",
            keys.REFERENCE_POINT: "creationTimestamp",
        }
    )
    world.reconcile(NOW)
    first = world.annotations[keys.DELETE_AT]
    world.annotations[keys.DELETE_AFTER] = "1h"
    decision = world.reconcile(NOW + SECOND)
    assert isinstance(decision, Patch)
    assert decision.operation == "cleanup"
    assert decision.body == annotations_patch({keys.DELETE_AFTER: None})
    assert decision.on_success.requeue_after_ns == 1
    assert world.annotations[keys.DELETE_AT] == first
    assert keys.DELETE_AFTER not in world.annotations


def test_creation_timestamp_cleanup_next_to_an_invalid_deadline_then_reports_it() -> None:
    world = World(
        {
            keys.DELETE_AFTER: "1h",
            keys.DELETE_AT: "garbage",
            keys.REFERENCE_POINT: "creationTimestamp",
            keys.CATCH_UP: "never",
        }
    )
    decision = world.reconcile(NOW)
    assert isinstance(decision, Patch)
    assert decision.operation == "cleanup"
    assert decision.on_success.ledger_ops == ()  # nothing to arm
    following = world.reconcile(NOW + 1)
    assert isinstance(following, Invalid)
    assert following.events[0].message.startswith("Invalid format for delete-at annotation")


def test_as_13_bogus_reference_point_warns_and_uses_now() -> None:
    decision = run({keys.RESTART_AFTER: "30m", keys.REFERENCE_POINT: "bogus"})
    assert isinstance(decision, Patch)
    assert reasons(decision.events) == ["InvalidAnnotationValue"]
    assert decision.body["metadata"]["annotations"][keys.RESTART_AT] == "2026-10-05T03:30:00Z"


@pytest.mark.parametrize("value", ["", "applyTimestamp"])
def test_apply_timestamp_spellings(value: str) -> None:
    decision = run({keys.DELETE_AFTER: "1h", keys.REFERENCE_POINT: value})
    assert isinstance(decision, Patch)
    assert decision.events == ()
    assert decision.body["metadata"]["annotations"][keys.DELETE_AT] == FUTURE


def test_creation_timestamp_missing_from_a_manifest_behaves_as_just_created() -> None:
    facts = dataclasses.replace(DEPLOYMENT, creation_ns=None)
    decision = run(
        {keys.DELETE_AFTER: "1h", keys.REFERENCE_POINT: "creationTimestamp"}, facts=facts
    )
    assert isinstance(decision, Patch)
    assert decision.body["metadata"]["annotations"][keys.DELETE_AT] == FUTURE


def test_as_14_ref_046_ref_068_restart_after_converts_without_touching_the_template() -> None:
    decision = run({keys.RESTART_AFTER: "30m"})
    assert isinstance(decision, Patch)
    assert decision.body == annotations_patch(
        {keys.RESTART_AT: "2026-10-05T03:30:00Z", keys.RESTART_AFTER: None}
    )
    assert "spec" not in decision.body


def test_as_14_restart_after_on_other_kinds_is_not_converted() -> None:
    decision = run({keys.RESTART_AFTER: "30m"}, facts=CONFIGMAP)
    assert isinstance(decision, Invalid)
    assert decision.reason == "UnsupportedRestartKind"


def test_as_14_creation_timestamp_with_existing_restart_at_drops_restart_after() -> None:
    decision = run(
        {
            keys.RESTART_AFTER: "1h",
            keys.RESTART_AT: FUTURE,
            keys.REFERENCE_POINT: "creationTimestamp",
        },
        settings=DecisionSettings(restart_catch_up=NEVER),
    )
    assert isinstance(decision, Patch)
    assert decision.body == annotations_patch({keys.RESTART_AFTER: None})
    # Under `never` the kept deadline is armed once the write succeeds.
    (arm,) = decision.on_success.ledger_ops
    assert isinstance(arm, Observe)
    assert arm.due_ns == ts(FUTURE)
    assert arm.identity.config == (keys.RESTART_AT, FUTURE)


def test_as_15_unrelated_updates_leave_the_deadline_alone() -> None:
    decision = run({keys.DELETE_AT: FUTURE, "example.com/label": "changed"})
    assert isinstance(decision, Wait)


# --- deletion (AS-16..AS-21) -------------------------------------------------------------------


def test_as_16_due_delete_carries_preconditions_and_the_original_value() -> None:
    value = "2026-10-05T05:00:00+02:00"
    decision = run({keys.DELETE_AT: value})
    assert isinstance(decision, Delete)
    assert (decision.uid, decision.resource_version) == ("uid-1", "100")
    assert [e.message for e in decision.on_success.events] == [
        f"Resource deleted based on delete-at annotation: {value}"
    ]
    assert decision.on_success.requeue_after_ns is None
    assert forgets(decision)
    assert decision.failure.event("boom").message == "Failed to delete resource: boom"


def test_as_17_ref_042_future_deadline_requeues_at_the_deadline() -> None:
    decision = run({keys.DELETE_AT: FUTURE})
    assert isinstance(decision, Wait)
    assert 0 < decision.requeue_after_ns <= HOUR
    assert decision.due_ns == ts(FUTURE)
    assert isinstance(run({keys.DELETE_AT: FUTURE}, now=ts(FUTURE)), Delete)


@pytest.mark.parametrize("action", ["delete", "restart"])
def test_ref_044_deadline_crossing_retains_the_timer(action: str) -> None:
    key = keys.DELETE_AT if action == "delete" else keys.RESTART_AT
    world = World({key: FUTURE})
    first = world.reconcile(ts(FUTURE) - 1)
    assert isinstance(first, Wait)
    assert first.requeue_after_ns == 1
    assert world.writes == 0
    world.reconcile(ts(FUTURE) + 1)
    assert world.writes == 1


@pytest.mark.parametrize(
    "facts",
    [CONFIGMAP, NAMESPACE, kind("example.test", "Deployment", template=False)],
    ids=["configmap", "namespace", "custom-deployment"],
)
def test_as_20_as_21_deletion_works_for_any_kind(facts: ObjectFacts) -> None:
    decision = run({keys.DELETE_AT: "2000-01-01T00:00:00Z"}, facts=facts)
    assert isinstance(decision, Delete)
    assert decision.uid == facts.uid


# --- restarts (AS-22..AS-28) -------------------------------------------------------------------


def test_as_22_ref_048_ref_069_restart_is_one_patch_with_marker_and_acknowledgement() -> None:
    decision = run({keys.RESTART_AT: PAST}, now=NOW + 750_000_000)
    assert isinstance(decision, Patch)
    assert decision.operation == "restart"
    assert decision.body == {
        "metadata": {"annotations": {keys.RESTART_AT: None, **MANAGED}},
        "spec": {
            "template": {
                "metadata": {
                    "annotations": {keys.RESTARTED_AT: "2026-10-05T03:00:00.75Z", **MANAGED}
                }
            }
        },
    }
    assert reasons(decision.on_success.events) == ["RestartTriggered"]
    assert decision.on_success.requeue_after_ns is None
    assert forgets(decision)


@pytest.mark.parametrize(
    ("previous", "marker"),
    [
        (None, "2026-10-05T03:00:00Z"),
        ("2026-10-05T02:59:59Z", "2026-10-05T03:00:00Z"),
        ("2026-10-05T03:00:00Z", "2026-10-05T03:00:00.000000001Z"),
        ("2026-10-05T03:00:00.9Z", "2026-10-05T03:00:00.900000001Z"),
        ("2026-10-05T05:00:00+02:00", "2026-10-05T03:00:00.000000001Z"),
        ("2026-10-05T03:00:07Z", "2026-10-05T03:00:07.000000001Z"),
        ("not a timestamp", "2026-10-05T03:00:00Z"),
    ],
)
def test_as_22_spec_restart_marker_always_changes(previous: str | None, marker: str) -> None:
    # docs/behaviour.md#restart-marker changes AS-22: never equal to (nor before) the previous one.
    facts = dataclasses.replace(DEPLOYMENT, restart_marker=previous)
    decision = run({keys.RESTART_AT: PAST}, facts=facts)
    assert isinstance(decision, Patch)
    template = decision.body["spec"]["template"]["metadata"]["annotations"]
    assert template[keys.RESTARTED_AT] == marker
    assert template[keys.RESTARTED_AT] != previous


def test_two_leaders_restarting_within_one_second_write_different_markers() -> None:
    # Issue 8, scenario 10: a new leader does not know the marker the previous one wrote
    # (no GET on the ordinary path); sub-second markers still differ.
    first = dataclasses.replace(DEPLOYMENT, restart_marker=None)
    a = run({keys.RESTART_AT: PAST}, facts=first, now=NOW + 100_000_000)
    b = run({keys.RESTART_AT: PAST}, facts=first, now=NOW + 400_000_000)
    assert isinstance(a, Patch)
    assert isinstance(b, Patch)
    marker_a = a.body["spec"]["template"]["metadata"]["annotations"][keys.RESTARTED_AT]
    marker_b = b.body["spec"]["template"]["metadata"]["annotations"][keys.RESTARTED_AT]
    assert (marker_a, marker_b) == ("2026-10-05T03:00:00.1Z", "2026-10-05T03:00:00.4Z")


def test_two_restarts_in_one_second_roll_twice() -> None:
    world = World({keys.RESTART_AT: PAST})
    world.reconcile(NOW)
    first = world.template[keys.RESTARTED_AT]
    world.annotations[keys.RESTART_AT] = PAST
    world.reconcile(NOW + 100_000_000)
    assert world.template[keys.RESTARTED_AT] != first


def test_as_24_ref_056_committed_restart_is_not_replayed() -> None:
    world = World({keys.RESTART_AT: PAST})
    world.reconcile(NOW, lose=True)
    assert "RestartFailed" in reasons(world.events)
    assert keys.RESTART_AT not in world.annotations
    assert keys.RESTARTED_AT in world.template
    assert isinstance(world.reconcile(NOW + SECOND), Idle)
    assert world.writes == 1


def test_ref_057_committed_recurring_restart_is_not_replayed() -> None:
    anchor = NOW - 2 * HOUR - MINUTE
    world = World(
        {keys.RESTART_EVERY: "2h", keys.LAST_RESTART_TIMESTAMP: format_rfc3339_seconds(anchor)}
    )
    world.reconcile(NOW, lose=True)
    assert world.annotations[keys.LAST_RESTART_TIMESTAMP] == format_rfc3339_seconds(
        anchor + 2 * HOUR
    )
    assert isinstance(world.reconcile(NOW + SECOND), Wait)
    assert world.writes == 1


def test_ref_058_failed_restart_is_retried_on_fresh_state() -> None:
    world = World({keys.RESTART_AT: PAST})
    world.reconcile(NOW, fail="Operation cannot be fulfilled: the object has been modified")
    assert world.events[-1].reason == "RestartFailed"
    world.annotations["example.com/concurrent"] = "preserved"
    world.reconcile(NOW + SECOND)
    assert world.writes == 2
    assert world.annotations["example.com/concurrent"] == "preserved"
    assert keys.RESTARTED_AT in world.template


@pytest.mark.parametrize(
    ("facts", "annotations"),
    [
        (kind("apps", "ReplicaSet"), {keys.RESTART_AT: PAST}),
        (kind("example.test", "Deployment"), {keys.RESTART_AT: PAST}),
        (kind("example.test", "Deployment"), {keys.RESTART_AFTER: "1s"}),
        (kind("example.test", "Deployment"), {keys.RESTART_EVERY: "1m"}),
        (kind("example.test", "Deployment"), {keys.RESTART_CRON: "* * * * *"}),
        (kind("batch", "Job"), {keys.RESTART_AT: PAST}),
        (CONFIGMAP, {keys.RESTART_AT: PAST}),
    ],
)
def test_as_25_ref_059_ref_075_unsupported_kinds_do_not_mutate_or_schedule(
    facts: ObjectFacts, annotations: dict[str, str]
) -> None:
    world = World(annotations, facts=facts)
    decision = world.reconcile(NOW)
    assert isinstance(decision, Invalid)
    assert reasons(decision.events) == ["UnsupportedRestartKind"]
    assert world.writes == 0
    assert world.annotations == annotations


@pytest.mark.parametrize("name", ["Deployment", "StatefulSet", "DaemonSet"])
def test_ref_043_every_apps_workload_kind_restarts(name: str) -> None:
    facts = dataclasses.replace(
        kind("apps", name), key=rekey(kind("apps", name), version="v1beta2")
    )
    decision = run({keys.RESTART_AT: "2000-01-01T00:00:00Z"}, facts=facts)
    assert isinstance(decision, Patch)
    assert decision.operation == "restart"


def test_as_26_supported_kind_without_template() -> None:
    decision = run({keys.RESTART_AT: PAST}, facts=kind("apps", "Deployment", template=False))
    assert isinstance(decision, Invalid)
    assert decision.reason == "NotPodSpawner"


def test_as_27_restart_at_takes_precedence_then_the_schedule_initializes() -> None:
    world = World(
        {
            keys.RESTART_AT: FUTURE,
            keys.RESTART_CRON: "not even cron",
            keys.CRON_TIMEZONE: "Invalid/Zone",
            keys.RESTART_EVERY: "1h",
        }
    )
    decision = world.reconcile(NOW)
    assert isinstance(decision, Wait)
    assert decision.due_ns == ts(FUTURE)
    world.reconcile(ts(FUTURE))
    assert keys.RESTARTED_AT in world.template
    world.annotations[keys.RESTART_CRON] = "0 * * * *"
    world.annotations[keys.CRON_TIMEZONE] = "Europe/Warsaw"
    decision = world.reconcile(ts(FUTURE) + SECOND)
    assert isinstance(decision, Patch)
    assert decision.operation == "initialize"


def test_as_28_cron_beats_every_silently() -> None:
    decision = run({keys.RESTART_CRON: "0 * * * *", keys.RESTART_EVERY: "bogus"})
    assert isinstance(decision, Patch)
    assert decision.operation == "initialize"
    assert decision.events == ()
    assert decision.on_success.requeue_after_ns == HOUR


# --- recurring (AS-29..AS-34) ------------------------------------------------------------------


def test_as_29_ref_047_initialization_sets_the_anchor_only() -> None:
    now = NOW + 123_456_789
    decision = run({keys.RESTART_EVERY: "1h"}, now=now)
    assert isinstance(decision, Patch)
    assert decision.body == annotations_patch(
        {keys.LAST_RESTART_TIMESTAMP: "2026-10-05T03:00:00.123456789Z"}
    )
    assert decision.on_success.requeue_after_ns == HOUR
    assert decision.on_success.events == ()


def test_as_30_ref_055_as_34_interval_coalesces_into_one_restart() -> None:
    anchor = NOW - DAY - 30 * SECOND
    world = World(
        {keys.RESTART_EVERY: "1m", keys.LAST_RESTART_TIMESTAMP: format_rfc3339_seconds(anchor)}
    )
    decision = world.reconcile(NOW)
    assert isinstance(decision, Patch)
    assert world.annotations[keys.LAST_RESTART_TIMESTAMP] == format_rfc3339_seconds(anchor + DAY)
    assert decision.on_success.requeue_after_ns == 30 * SECOND
    marker = world.template[keys.RESTARTED_AT]
    assert isinstance(world.reconcile(NOW), Wait)
    assert world.writes == 1
    assert world.template[keys.RESTARTED_AT] == marker


def test_as_31_cron_anchor_moves_to_now() -> None:
    world = World(
        {keys.RESTART_CRON: "0 * * * *", keys.LAST_RESTART_TIMESTAMP: "2026-10-05T00:00:00Z"}
    )
    now = NOW + 25 * MINUTE + 1
    decision = world.reconcile(now)
    assert isinstance(decision, Patch)
    assert world.annotations[keys.LAST_RESTART_TIMESTAMP] == "2026-10-05T03:25:00.000000001Z"
    assert decision.on_success.requeue_after_ns == 35 * MINUTE - 1
    assert decision.due_ns == ts("2026-10-05T01:00:00Z")  # the first missed occurrence


def test_as_32_invalid_anchor_blocks_until_fixed() -> None:
    world = World({keys.RESTART_EVERY: "1m", keys.LAST_RESTART_TIMESTAMP: "invalid"})
    decision = world.reconcile(NOW)
    assert isinstance(decision, Invalid)
    assert decision.reason == "InvalidState"
    assert world.writes == 0
    world.annotations[keys.LAST_RESTART_TIMESTAMP] = format_rfc3339_seconds(NOW - 2 * MINUTE)
    world.reconcile(NOW)
    assert keys.RESTARTED_AT in world.template


def test_as_33_warsaw_spring_forward_restart_runs_at_three_local() -> None:
    # Our DST policy changes AS-33 (the reference has no run that day).
    annotations = {
        keys.RESTART_CRON: "30 2 * * *",
        keys.CRON_TIMEZONE: "Europe/Warsaw",
        keys.LAST_RESTART_TIMESTAMP: "2026-03-28T01:30:00Z",
    }
    waiting = run(annotations, now=ts("2026-03-29T00:59:00Z"))
    assert isinstance(waiting, Wait)
    assert waiting.due_ns == ts("2026-03-29T01:00:00Z")
    restart = run(annotations, now=ts("2026-03-29T01:00:00Z"))
    assert isinstance(restart, Patch)
    assert restart.operation == "restart"
    # After the fall-back 02:30 ran once, the repeated 02:30 is not due.
    after_first = {**annotations, keys.LAST_RESTART_TIMESTAMP: "2026-10-25T00:30:00Z"}
    repeated = run(after_first, now=ts("2026-10-25T01:30:00Z"))
    assert isinstance(repeated, Wait)
    assert repeated.due_ns == ts("2026-10-26T01:30:00Z")


# --- max delete TTL (docs/behaviour.md#max-delete-ttl; reference tests 153-159) ------------------

MAX_30D = DecisionSettings(max_delete_ttl_ns=30 * DAY)


def test_ref_153_ref_156_delete_after_above_the_maximum_is_not_converted() -> None:
    world = World({keys.DELETE_AFTER: "31d"}, settings=MAX_30D)
    decision = world.reconcile(NOW)
    assert isinstance(decision, Invalid)
    assert decision.reason == "DeleteTTLExceeded"
    assert world.annotations == {keys.DELETE_AFTER: "31d"}


def test_ref_154_ref_157_delete_after_at_the_maximum_is_converted() -> None:
    decision = run({keys.DELETE_AFTER: "30d"}, settings=MAX_30D)
    assert isinstance(decision, Patch)
    assert decision.on_success.requeue_after_ns == 1


def test_ref_155_ref_158_future_delete_at_above_the_maximum_is_ignored() -> None:
    # Measured from the object's creation (docs/behaviour.md#max-delete-ttl), not from now.
    created = DEPLOYMENT.creation_ns
    assert created is not None
    decision = run({keys.DELETE_AT: format_rfc3339_seconds(created + 31 * DAY)}, settings=MAX_30D)
    assert isinstance(decision, Invalid)
    assert decision.reason == "DeleteTTLExceeded"
    assert forgets(decision)
    at_limit = run({keys.DELETE_AT: format_rfc3339_seconds(created + 30 * DAY)}, settings=MAX_30D)
    assert isinstance(at_limit, Wait)


def test_ref_159_past_delete_at_is_still_deleted() -> None:
    assert isinstance(run({keys.DELETE_AT: PAST}, settings=MAX_30D), Delete)


def test_max_delete_ttl_does_not_touch_restarts() -> None:
    decision = run({keys.RESTART_AFTER: "365d"}, settings=MAX_30D)
    assert isinstance(decision, Patch)


# --- ledger operations carried by decisions ------------------------------------------------------


def test_never_wait_arms_the_occurrence_now() -> None:
    ledger = Ledger()
    decision = run({keys.DELETE_AT: FUTURE, keys.CATCH_UP: "never"}, ledger=ledger)
    assert isinstance(decision, Wait)
    (observe,) = decision.ledger_ops
    assert isinstance(observe, Observe)
    assert (observe.due_ns, observe.identity.config) == (ts(FUTURE), (keys.DELETE_AT, FUTURE))
    assert ledger.peek(DEPLOYMENT.key) is None  # decide() itself only reads the ledger


def test_other_policies_forget_the_arm_at_once() -> None:
    decision = run({keys.DELETE_AT: FUTURE, keys.CATCH_UP: "15m"})
    assert decision.ledger_ops == (Forget(),)


def test_recurring_never_rearms_the_next_occurrence_after_a_restart() -> None:
    annotations = {
        keys.RESTART_EVERY: "1h",
        keys.LAST_RESTART_TIMESTAMP: "2026-10-05T02:00:00Z",
        keys.CATCH_UP: "never",
    }
    ledger = Ledger()
    armed = World(annotations, ledger=ledger)
    armed.reconcile(NOW - MINUTE)  # observes the 03:00 occurrence before it is due
    decision = armed.reconcile(NOW)
    assert isinstance(decision, Patch)
    assert decision.operation == "restart"
    forget, observe = decision.on_success.ledger_ops
    assert forget == Forget()
    assert isinstance(observe, Observe)
    assert observe.due_ns == NOW + HOUR
    assert observe.identity.config == (keys.RESTART_EVERY, "1h", "2026-10-05T03:00:00Z")
    arm = ledger.peek(DEPLOYMENT.key)
    assert arm is not None
    assert arm.due_ns == NOW + HOUR


# --- log details of invalid values ---------------------------------------------------------------


@pytest.mark.parametrize(
    ("annotations", "log"),
    [
        ({keys.DELETE_AFTER: "2x"}, 'invalid delete-after: invalid duration format: "2x"'),
        ({keys.DELETE_AT: "tomorrow"}, "invalid delete-at: "),
        ({keys.RESTART_EVERY: "30s"}, "invalid restart-every: duration must be at least 1m0s"),
        (
            {keys.DELETE_AT: PAST, keys.CATCH_UP: "Always"},
            'invalid catch-up: invalid catch-up policy "Always"',
        ),
    ],
)
def test_an_invalid_value_is_logged_with_its_parse_error(
    annotations: dict[str, str], log: str
) -> None:
    decision = run(annotations)
    assert isinstance(decision, Invalid)
    assert decision.log.startswith(log)
    assert decision.log != log.split(":", 1)[0]  # more than "invalid <key>"
