"""Every Event of docs/annotations.md#events, from decide() (or its failure hooks), byte for byte.

Each row drives a real decision and compares the Event with literal text, so a change of
wording anywhere in core fails here.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable

import pytest

from lifecycle_controller.core import NEVER, Decision, DecisionSettings, Delete, Event, Patch
from lifecycle_controller.core.decision import events as ev
from lifecycle_controller.core.objects import keys

from .support import CONFIGMAP, DAY, DEPLOYMENT, NOW, run

PAST = "2026-10-05T02:00:00Z"
PAST_NANO = "2026-10-05T02:00:00.5Z"
LATER = "2026-10-06T00:00:00Z"
W, N = "Warning", "Normal"
NO_TEMPLATE = dataclasses.replace(DEPLOYMENT, has_pod_template=False)


def immediate(decision: Decision) -> list[tuple[str, str, str]]:
    return [(e.type.value, e.reason, e.message) for e in decision.events]


def on_success(decision: Decision) -> list[tuple[str, str, str]]:
    assert isinstance(decision, Patch | Delete)
    return [(e.type.value, e.reason, e.message) for e in decision.on_success.events]


def on_failure(decision: Decision, error: str) -> list[tuple[str, str, str]]:
    assert isinstance(decision, Patch | Delete)
    assert decision.failure is not None
    event = decision.failure.event(error)
    return [(event.type.value, event.reason, event.message)]


CASES: list[tuple[str, Callable[[], list[tuple[str, str, str]]], list[tuple[str, str, str]]]] = [
    (
        "ConflictingAnnotations",
        lambda: immediate(run({keys.DELETE_AT: PAST, keys.RESTART_AFTER: "1s"})),
        [(W, "ConflictingAnnotations", "Resource has both delete and restart annotations.")],
    ),
    (
        "IgnoredAnnotation",
        lambda: immediate(run({keys.DELETE_AT: LATER, keys.CRON_TIMEZONE: "Europe/Warsaw"})),
        [(W, "IgnoredAnnotation", "Ignoring lifecycle.cezary.dev/cron-timezone because "
          "lifecycle.cezary.dev/restart-cron is not set.")],
    ),
    (
        "InvalidAnnotationValue dry-run",
        lambda: immediate(run({keys.DELETE_AT: PAST, keys.DRY_RUN: "yes"})),
        [(W, "InvalidAnnotationValue", 'invalid value "yes" for lifecycle.cezary.dev/dry-run: '
          "expected a boolean; taking no action")],
    ),
    (
        "InvalidAnnotationValue reference-point",
        lambda: immediate(run({keys.DELETE_AFTER: "1h", keys.REFERENCE_POINT: "bogus"})),
        [(W, "InvalidAnnotationValue", "Invalid value for lifecycle.cezary.dev/reference-point: "
          "'bogus', falling back to 'applyTimestamp'")],
    ),
    (
        "InvalidAnnotation catch-up",
        lambda: immediate(run({keys.DELETE_AT: PAST, keys.CATCH_UP: "Always"})),
        [(W, "InvalidAnnotation", 'invalid catch-up policy "Always": expected always, never, '
          'or a positive duration: invalid duration format: "Always" for '
          "lifecycle.cezary.dev/catch-up; taking no action")],
    ),
    (
        "InvalidAnnotation delete-after",
        lambda: immediate(run({keys.DELETE_AFTER: "2h30m"})),
        [(W, "InvalidAnnotation",
          'Invalid format for delete-after annotation: invalid duration format: "2h30m"')],
    ),
    (
        "InvalidAnnotation restart-after",
        lambda: immediate(run({keys.RESTART_AFTER: "0s"})),
        [(W, "InvalidAnnotation",
          "Invalid format for restart-after annotation: duration must be positive")],
    ),
    (
        "InvalidAnnotation delete-at",
        lambda: immediate(run({keys.DELETE_AT: "2026-10-10"})),
        [(W, "InvalidAnnotation", 'Invalid format for delete-at annotation: parsing time '
          '"2026-10-10" as "2006-01-02T15:04:05Z07:00": cannot parse "" as "T"')],
    ),
    (
        "InvalidAnnotation restart-at",
        lambda: immediate(run({keys.RESTART_AT: "2026-10-10T03:00:00"})),
        [(W, "InvalidAnnotation", 'Invalid format for restart-at annotation: parsing time '
          '"2026-10-10T03:00:00" as "2006-01-02T15:04:05Z07:00": cannot parse "" as "Z07:00"')],
    ),
    (
        "InvalidAnnotation restart-cron",
        lambda: immediate(run({keys.RESTART_CRON: "@daily"})),
        [(W, "InvalidAnnotation",
          "Invalid cron expression for restart-cron: parser does not accept descriptors: @daily")],
    ),
    (
        "InvalidAnnotation restart-cron no future occurrence",
        lambda: immediate(run({keys.RESTART_CRON: "0 0 31 2 *"})),
        [(W, "InvalidAnnotation",
          "Invalid cron expression for restart-cron: cron expression has no future occurrence")],
    ),
    (
        "InvalidAnnotation restart-every",
        lambda: immediate(run({keys.RESTART_EVERY: "59s"})),
        [(W, "InvalidAnnotation",
          "Invalid duration for restart-every: duration must be at least 1m0s")],
    ),
    (
        "InvalidTimezone",
        lambda: immediate(
            run({keys.RESTART_CRON: "*/1 * * * *", keys.CRON_TIMEZONE: "Invalid/Timezone"})
        ),
        [(W, "InvalidTimezone",
          "Invalid timezone 'Invalid/Timezone' for restart-cron, taking no action.")],
    ),
    (
        "InvalidState",
        lambda: immediate(run({keys.RESTART_EVERY: "1m", keys.LAST_RESTART_TIMESTAMP: "invalid"})),
        [(W, "InvalidState", 'Could not parse last-restart-timestamp: parsing time "invalid" '
          'as "2006-01-02T15:04:05Z07:00": cannot parse "invalid" as "2006"')],
    ),
    (
        "UnsupportedRestartKind",
        lambda: immediate(run({keys.RESTART_AT: PAST}, facts=CONFIGMAP)),
        [(W, "UnsupportedRestartKind",
          "Restart requires an apps Deployment, StatefulSet, or DaemonSet; no action taken")],
    ),
    (
        "NotPodSpawner",
        lambda: immediate(run({keys.RESTART_AT: PAST}, facts=NO_TEMPLATE)),
        [(W, "NotPodSpawner",
          "Restart annotations are present but resource does not have a spec.template field.")],
    ),
    (
        "DeletionFailed",
        lambda: on_failure(run({keys.DELETE_AT: PAST}), 'deployments.apps "web" is forbidden'),
        [(W, "DeletionFailed", 'Failed to delete resource: deployments.apps "web" is forbidden')],
    ),
    (
        "Deleted",
        lambda: on_success(run({keys.DELETE_AT: "2026-10-05T04:00:00+02:00"})),
        [(N, "Deleted",
          "Resource deleted based on delete-at annotation: 2026-10-05T04:00:00+02:00")],
    ),
    (
        "DryRunDelete now",
        lambda: immediate(run({keys.DELETE_AT: PAST, keys.DRY_RUN: "true"})),
        [(N, "DryRunDelete", "Dry-run: Resource would be deleted now.")],
    ),
    (
        "DryRunDelete scheduled",
        lambda: immediate(run({keys.DELETE_AFTER: "1h"}, settings=DecisionSettings(dry_run=True))),
        [(N, "DryRunDelete",
          "Dry-run: Resource would be scheduled for deletion at 2026-10-05T04:00:00Z.")],
    ),
    (
        "RestartFailed",
        lambda: on_failure(run({keys.RESTART_AT: PAST}), "the object has been modified"),
        [(W, "RestartFailed",
          "Could not patch object to trigger restart: the object has been modified")],
    ),
    (
        "RestartTriggered",
        lambda: on_success(run({keys.RESTART_AT: PAST})),
        [(N, "RestartTriggered", "Updated Pod template for a restart request")],
    ),
    (
        "DryRunRestart now",
        lambda: immediate(run({keys.RESTART_AT: PAST, keys.DRY_RUN: "1"})),
        [(N, "DryRunRestart", "Dry-run: Resource would be restarted now.")],
    ),
    (
        "DryRunRestart scheduled",
        lambda: immediate(run({keys.RESTART_AFTER: "30m", keys.DRY_RUN: "T"})),
        [(N, "DryRunRestart",
          "Dry-run: Resource would be scheduled for restart at 2026-10-05T03:30:00Z.")],
    ),
    (
        "ActionSkipped",
        lambda: on_success(run({keys.DELETE_AT: PAST_NANO, keys.CATCH_UP: "never"})),
        [(N, "ActionSkipped",
          "Skipped delete scheduled at 2026-10-05T02:00:00.5Z under the catch-up policy.")],
    ),
    (
        "DryRunActionSkipped",
        lambda: immediate(run({keys.RESTART_AT: PAST, keys.CATCH_UP: "1s", keys.DRY_RUN: "true"})),
        [(N, "DryRunActionSkipped",
          "Dry-run: Would skip restart scheduled at 2026-10-05T02:00:00Z "
          "under the catch-up policy.")],
    ),
    (
        "ActionSkipFailed",
        lambda: on_failure(run({keys.RESTART_AT: PAST, keys.CATCH_UP: "never"}), "conflict"),
        [(W, "ActionSkipFailed", "Could not acknowledge skipped restart: conflict")],
    ),
    (
        "DeleteTTLExceeded delete-after",
        lambda: immediate(run({keys.DELETE_AFTER: "31d"},
                              settings=DecisionSettings(max_delete_ttl_ns=30 * DAY))),
        [(W, "DeleteTTLExceeded", 'Ignoring lifecycle.cezary.dev/delete-after="31d" because TTL '
          "744h0m0s exceeds maximum 720h0m0s.")],
    ),
    (
        "DeleteTTLExceeded delete-at",
        lambda: immediate(run({keys.DELETE_AT: "2026-11-05T02:00:00Z"},
                              settings=DecisionSettings(max_delete_ttl_ns=30 * DAY))),
        [(W, "DeleteTTLExceeded", "Ignoring lifecycle.cezary.dev/delete-at="
          '"2026-11-05T02:00:00Z" because TTL 744h0m0s exceeds maximum 720h0m0s.')],
    ),
    (
        "DeleteTTLExceeded from a namespace, TTL rounded up to whole seconds",
        lambda: immediate(run({keys.DELETE_AT: "2026-10-05T02:00:45.48Z"},
                              settings=DecisionSettings(max_delete_ttl_ns=30 * 10**9,
                                                        max_delete_ttl_namespace="demo"))),
        [(W, "DeleteTTLExceeded", "Ignoring lifecycle.cezary.dev/delete-at="
          '"2026-10-05T02:00:45.48Z" because TTL 46s exceeds maximum 30s set by the '
          "max-delete-ttl annotation of Namespace demo.")],
    ),
]  # fmt: skip


@pytest.mark.parametrize(("produce", "expected"), [c[1:] for c in CASES], ids=[c[0] for c in CASES])
def test_event_texts_are_byte_for_byte(
    produce: Callable[[], list[tuple[str, str, str]]], expected: list[tuple[str, str, str]]
) -> None:
    assert produce() == expected


def test_messages_keep_percent_signs_and_quotes_from_user_values() -> None:
    decision = run({keys.DELETE_AT: PAST, keys.DRY_RUN: '50% "off"'})
    assert decision.events[0].message == (
        'invalid value "50% \\"off\\"" for lifecycle.cezary.dev/dry-run: '
        "expected a boolean; taking no action"
    )


def test_each_failed_write_has_one_failure_event_with_the_reference_text() -> None:
    assert ev.RESTART_FAILURE.event("z") == Event(
        ev.EventType.WARNING, "RestartFailed", "Could not patch object to trigger restart: z"
    )
    assert ev.DELETION_FAILURE.event("e") == Event(
        ev.EventType.WARNING, "DeletionFailed", "Failed to delete resource: e"
    )
    skipped = ev.skip_failure("delete").event("e")
    assert (skipped.reason, skipped.message) == (
        "ActionSkipFailed",
        "Could not acknowledge skipped delete: e",
    )


def test_as_06_as_13_repeated_warnings_carry_a_dedupe_key_per_object_and_value() -> None:
    # docs/behaviour.md#repeated-warnings (changes AS-6, AS-13): sent once per UID and value.
    ignored = run({keys.DELETE_AT: LATER, keys.CRON_TIMEZONE: "Europe/Warsaw"}).events[0]
    assert ignored.dedupe_key == "uid-1:lifecycle.cezary.dev/cron-timezone=Europe/Warsaw"
    reference = run({keys.DELETE_AFTER: "1h", keys.REFERENCE_POINT: "bogus"}).events[0]
    assert reference.dedupe_key == "uid-1:lifecycle.cezary.dev/reference-point=bogus"
    other_value = run({keys.DELETE_AFTER: "1h", keys.REFERENCE_POINT: "Bogus"}).events[0]
    assert other_value.dedupe_key != reference.dedupe_key
    # Other warnings are not deduplicated by value.
    conflict = run({keys.DELETE_AT: PAST, keys.RESTART_AT: PAST}).events[0]
    assert conflict.dedupe_key is None


def test_never_without_observation_skips_with_exact_instant() -> None:
    decision = run({keys.DELETE_AT: PAST_NANO}, settings=DecisionSettings(delete_catch_up=NEVER))
    assert on_success(decision)[0][2].endswith(
        "at 2026-10-05T02:00:00.5Z under the catch-up policy."
    )
    assert decision.due_ns is not None
    assert NOW - decision.due_ns == 3600 * 10**9 - 500_000_000


def test_blast_radius_events() -> None:
    from lifecycle_controller.core.decision import events as ev

    halted = ev.actions_halted(5, 600 * 10**9, "2027-01-01T00:00:00Z")
    assert (halted.type, halted.reason) == ("Warning", "ActionsHalted")
    assert halted.message == (
        "Circuit breaker open: 5 actions within 10m0s; "
        "reset with `lifecycle-controller breaker reset`"
    )
    assert halted.dedupe_key == "breaker@2027-01-01T00:00:00Z"
    deferred = ev.restart_deferred(last_ns=0, run_at_ns=10 * 10**9, due_ns=5)
    assert deferred.reason == "RestartDeferred"
    assert "1970-01-01T00:00:10Z" in deferred.message
    assert ev.restart_queued(2, 7).dedupe_key == "queued@7"
    assert ev.rollout_completed(2_345_678_901).message.endswith("completed in 2.345s.")
    stalled = ev.rollout_stalled(30 * 10**9, "replicas=1")
    assert (stalled.type, stalled.reason) == ("Warning", "RolloutStalled")
    assert "after 30s" in stalled.message
    assert "replicas=1" in stalled.message
