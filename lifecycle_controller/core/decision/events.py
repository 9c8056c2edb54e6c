"""Every Event the controller emits: reasons, types and messages, byte for byte.

Messages are part of the compatibility promise (users grep for them, alerts match them;
the catalogue is docs/annotations.md#events), so they are built here and nowhere else.
``dedupe_key`` marks the warnings sent once per object and annotation value
(docs/behaviour.md#repeated-warnings); the caller does the deduplication.
"""

from __future__ import annotations

import enum
from dataclasses import dataclass, field
from typing import Final

from lifecycle_controller.core.objects import keys
from lifecycle_controller.core.text.gotext import format_go_duration, go_quote
from lifecycle_controller.core.text.timestamps import format_rfc3339_nano

__all__ = [
    "ACTIONS_HALTED",
    "ACTION_DEFERRED",
    "ACTION_SKIPPED",
    "ACTION_SKIP_FAILED",
    "ACTION_THROTTLED",
    "BREAKER_TRIPPED",
    "CONFLICTING_ANNOTATIONS",
    "DELETED",
    "DELETE_TTL_EXCEEDED",
    "DELETION_FAILED",
    "DELETION_FAILURE",
    "DRY_RUN_ACTION_SKIPPED",
    "DRY_RUN_DELETE",
    "DRY_RUN_RESTART",
    "IGNORED_ANNOTATION",
    "INVALID_ANNOTATION",
    "INVALID_ANNOTATION_VALUE",
    "INVALID_POLICY",
    "INVALID_STATE",
    "INVALID_TIMEZONE",
    "MISCONFIGURATION_LABELS",
    "NOT_POD_SPAWNER",
    "RESTART_DEFERRED",
    "RESTART_FAILED",
    "RESTART_FAILURE",
    "RESTART_QUEUED",
    "RESTART_TRIGGERED",
    "ROLLOUT_BLOCKED",
    "ROLLOUT_COMPLETED",
    "ROLLOUT_STALLED",
    "UNSUPPORTED_RESTART_KIND",
    "UPCOMING_DELETION",
    "UPCOMING_RESTART",
    "Event",
    "EventType",
    "Failure",
    "about",
    "action_deferred",
    "action_throttled",
    "actions_halted",
    "breaker_tripped",
    "invalid_maintenance_window",
    "invalid_namespace_default",
    "invalid_warn_before",
    "misconfiguration_label",
    "restart_deferred",
    "restart_queued",
    "rollout_blocked",
    "rollout_completed",
    "rollout_stalled",
    "upcoming",
]


class EventType(enum.StrEnum):
    NORMAL = "Normal"
    WARNING = "Warning"


@dataclass(frozen=True, slots=True)
class Event:
    """One Event to record on the object."""

    type: EventType
    reason: str
    message: str
    dedupe_key: str | None = None
    #: A stable Event name suffix (``<object>.<name>``): created once, never folded into a
    #: series; a second create answered AlreadyExists means the Event was already posted.
    name: str | None = None
    # What the Event is about, for notifications (docs/notifications.md): the action
    # (``delete``/``restart``), its due time and whether it is a dry-run. Not written to the
    # API and not part of an Event's identity (equality ignores them).
    action: str | None = field(default=None, compare=False)
    due_ns: int | None = field(default=None, compare=False)
    dry_run: bool = field(default=False, compare=False)
    #: When it happened, in Unix nanoseconds: the Event's ``eventTime`` and a notification's
    #: time. None: when it is written (an Event written in the background is stamped when it
    #: is queued, so a burst's Events carry their actions' times, in their order).
    at_ns: int | None = field(default=None, compare=False)


def about(
    event: Event,
    *,
    action: str | None,
    due_ns: int | None,
    dry_run: bool,
    at_ns: int | None = None,
) -> Event:
    """``event`` with the action, due time, dry-run and time it does not carry yet filled in.

    Built field by field rather than by ``dataclasses.replace`` (which inspects the fields
    on every call): every Event of an action passes here."""
    return Event(
        event.type,
        event.reason,
        event.message,
        event.dedupe_key,
        event.name,
        event.action if event.action is not None else action,
        event.due_ns if event.due_ns is not None else due_ns,
        event.dry_run or dry_run,
        event.at_ns if event.at_ns is not None else at_ns,
    )


CONFLICTING_ANNOTATIONS: Final = "ConflictingAnnotations"
IGNORED_ANNOTATION: Final = "IgnoredAnnotation"
INVALID_ANNOTATION_VALUE: Final = "InvalidAnnotationValue"
INVALID_ANNOTATION: Final = "InvalidAnnotation"
INVALID_TIMEZONE: Final = "InvalidTimezone"
INVALID_STATE: Final = "InvalidState"
UNSUPPORTED_RESTART_KIND: Final = "UnsupportedRestartKind"
NOT_POD_SPAWNER: Final = "NotPodSpawner"
DELETION_FAILED: Final = "DeletionFailed"
DELETED: Final = "Deleted"
DRY_RUN_DELETE: Final = "DryRunDelete"
RESTART_FAILED: Final = "RestartFailed"
RESTART_TRIGGERED: Final = "RestartTriggered"
DRY_RUN_RESTART: Final = "DryRunRestart"
ACTION_SKIPPED: Final = "ActionSkipped"
DRY_RUN_ACTION_SKIPPED: Final = "DryRunActionSkipped"
ACTION_SKIP_FAILED: Final = "ActionSkipFailed"
DELETE_TTL_EXCEEDED: Final = "DeleteTTLExceeded"
#: The Warning's reason on an invalid lifecycle policy (docs/policies.md#status).
INVALID_POLICY: Final = "InvalidLifecyclePolicy"
_SET_BY_NAMESPACE: Final = " set by the max-delete-ttl annotation of Namespace "


@dataclass(frozen=True, slots=True)
class Failure:
    """A failed write's Warning (one per kind of write): ``reason``, ``message_prefix`` + error."""

    reason: str
    message_prefix: str

    def event(self, error: str) -> Event:
        return Event(EventType.WARNING, self.reason, self.message_prefix + error)


DELETION_FAILURE: Final = Failure(DELETION_FAILED, "Failed to delete resource: ")
RESTART_FAILURE: Final = Failure(RESTART_FAILED, "Could not patch object to trigger restart: ")


def _warning(reason: str, message: str, dedupe_key: str | None = None) -> Event:
    return Event(EventType.WARNING, reason, message, dedupe_key)


def _normal(reason: str, message: str) -> Event:
    return Event(EventType.NORMAL, reason, message)


def _dedupe_key(uid: str, annotation: str, value: str) -> str:
    return f"{uid}:{annotation}={value}"


# --- problems -------------------------------------------------------------------------------


def conflicting_annotations() -> Event:
    return _warning(CONFLICTING_ANNOTATIONS, "Resource has both delete and restart annotations.")


def ignored_cron_timezone(*, uid: str, value: str) -> Event:
    message = f"Ignoring {keys.CRON_TIMEZONE} because {keys.RESTART_CRON} is not set."
    return _warning(IGNORED_ANNOTATION, message, _dedupe_key(uid, keys.CRON_TIMEZONE, value))


def invalid_dry_run(value: str) -> Event:
    message = (
        f"invalid value {go_quote(value)} for {keys.DRY_RUN}: expected a boolean; taking no action"
    )
    return _warning(INVALID_ANNOTATION_VALUE, message)


def invalid_reference_point(*, uid: str, value: str) -> Event:
    message = (
        f"Invalid value for {keys.REFERENCE_POINT}: '{value}', "
        f"falling back to '{keys.REFERENCE_POINT_APPLY}'"
    )
    return _warning(
        INVALID_ANNOTATION_VALUE, message, _dedupe_key(uid, keys.REFERENCE_POINT, value)
    )


def invalid_catch_up(error: str) -> Event:
    """``error`` is the CatchUpError text (``invalid catch-up policy "<v>": ...``)."""
    return _warning(INVALID_ANNOTATION, f"{error} for {keys.CATCH_UP}; taking no action")


def invalid_relative_duration(short_key: str, error: str) -> Event:
    """``short_key`` is ``delete-after`` or ``restart-after``."""
    return _warning(INVALID_ANNOTATION, f"Invalid format for {short_key} annotation: {error}")


def invalid_timestamp(short_key: str, error: str) -> Event:
    """``short_key`` is ``delete-at`` or ``restart-at``."""
    return _warning(INVALID_ANNOTATION, f"Invalid format for {short_key} annotation: {error}")


def invalid_cron(error: str) -> Event:
    return _warning(INVALID_ANNOTATION, f"Invalid cron expression for restart-cron: {error}")


def invalid_restart_every(error: str) -> Event:
    return _warning(INVALID_ANNOTATION, f"Invalid duration for restart-every: {error}")


def invalid_timezone(zone: str) -> Event:
    return _warning(
        INVALID_TIMEZONE, f"Invalid timezone '{zone}' for restart-cron, taking no action."
    )


def invalid_state(error: str) -> Event:
    return _warning(INVALID_STATE, f"Could not parse last-restart-timestamp: {error}")


def unsupported_restart_kind() -> Event:
    return _warning(
        UNSUPPORTED_RESTART_KIND,
        "Restart requires an apps Deployment, StatefulSet, or DaemonSet; no action taken",
    )


def not_pod_spawner() -> Event:
    return _warning(
        NOT_POD_SPAWNER,
        "Restart annotations are present but resource does not have a spec.template field.",
    )


def delete_ttl_exceeded(
    *, annotation: str, value: str, ttl_ns: int, max_ns: int, namespace: str | None = None
) -> Event:
    by = "" if namespace is None else _SET_BY_NAMESPACE + namespace  # the flag's: the reference's
    message = (
        f"Ignoring {annotation}={go_quote(value)} because TTL {format_go_duration(ttl_ns)} "
        f"exceeds maximum {format_go_duration(max_ns)}{by}."
    )
    return _warning(DELETE_TTL_EXCEEDED, message)


# --- deletion -------------------------------------------------------------------------------


def deleted(delete_at_value: str) -> Event:
    return _normal(DELETED, f"Resource deleted based on delete-at annotation: {delete_at_value}")


def dry_run_delete_now() -> Event:
    return _normal(DRY_RUN_DELETE, "Dry-run: Resource would be deleted now.")


def dry_run_delete_scheduled(timestamp: str) -> Event:
    return _normal(
        DRY_RUN_DELETE, f"Dry-run: Resource would be scheduled for deletion at {timestamp}."
    )


# --- restarts -------------------------------------------------------------------------------


def restart_triggered() -> Event:
    return _normal(RESTART_TRIGGERED, "Updated Pod template for a restart request")


def dry_run_restart_now() -> Event:
    return _normal(DRY_RUN_RESTART, "Dry-run: Resource would be restarted now.")


def dry_run_restart_scheduled(timestamp: str) -> Event:
    return _normal(
        DRY_RUN_RESTART, f"Dry-run: Resource would be scheduled for restart at {timestamp}."
    )


# --- catch-up skips -------------------------------------------------------------------------


def skip_failure(action: str) -> Failure:
    """The Warning when acknowledging a skipped occurrence fails."""
    return Failure(ACTION_SKIP_FAILED, f"Could not acknowledge skipped {action}: ")


def action_skipped(action: str, scheduled_ns: int) -> Event:
    when = format_rfc3339_nano(scheduled_ns)
    return Event(
        EventType.NORMAL,
        ACTION_SKIPPED,
        f"Skipped {action} scheduled at {when} under the catch-up policy.",
        action=action,
        due_ns=scheduled_ns,
    )


def dry_run_action_skipped(action: str, scheduled_ns: int) -> Event:
    when = format_rfc3339_nano(scheduled_ns)
    return _normal(
        DRY_RUN_ACTION_SKIPPED,
        f"Dry-run: Would skip {action} scheduled at {when} under the catch-up policy.",
    )


# --- guardrails around a write ------------------------------------------------------------

ACTION_THROTTLED: Final = "ActionThrottled"
ROLLOUT_BLOCKED: Final = "RolloutBlocked"

_BUDGET_FLAGS: Final = {
    "delete": "--max-deletes-per-minute",
    "restart": "--max-restarts-per-minute",
}


def action_throttled(action: str, due_ns: int | None) -> Event:
    """A due action waits for its per-minute budget; sent once per occurrence."""
    return Event(
        EventType.NORMAL,
        ACTION_THROTTLED,
        f"The {action} is due but waits for the action budget ({_BUDGET_FLAGS[action]}); "
        "it will run as soon as the budget allows.",
        dedupe_key=f"{action}@{due_ns}",
    )


def rollout_blocked(reasons: list[str]) -> Event:
    """The restart patch landed, but settings of the workload keep its Pods from changing."""
    return _warning(
        ROLLOUT_BLOCKED,
        "Pod template updated for a restart, but Pods may not be replaced: "
        + "; ".join(reasons)
        + ".",
    )


# --- blast-radius controls (docs/behaviour.md#circuit-breaker and after) ------------------

ACTIONS_HALTED: Final = "ActionsHalted"
BREAKER_TRIPPED: Final = "CircuitBreakerTripped"
RESTART_DEFERRED: Final = "RestartDeferred"
RESTART_QUEUED: Final = "RestartQueued"
ROLLOUT_COMPLETED: Final = "RolloutCompleted"
ROLLOUT_STALLED: Final = "RolloutStalled"


def breaker_tripped(actions: int, window_ns: int, reset_command: str) -> Event:
    """The breaker tripped (recorded on its ConfigMap, once per trip): one notice for a trip."""
    return _warning(
        BREAKER_TRIPPED,
        f"Circuit breaker tripped: {actions} actions within {format_go_duration(window_ns)}; "
        f"every further deletion and restart is held until `{reset_command}`",
    )


def actions_halted(actions: int, window_ns: int, tripped_at: str) -> Event:
    """The circuit breaker is open: the due action is held; sent once per object and trip."""
    return Event(
        EventType.WARNING,
        ACTIONS_HALTED,
        f"Circuit breaker open: {actions} actions within {format_go_duration(window_ns)}; "
        "reset with `lifecycle-controller breaker reset`",
        dedupe_key=f"breaker@{tripped_at}",
    )


def restart_deferred(*, last_ns: int, run_at_ns: int, due_ns: int | None) -> Event:
    """A due restart waits for ``--min-restart-interval``; sent once per occurrence."""
    return Event(
        EventType.NORMAL,
        RESTART_DEFERRED,
        f"The restart is due but the workload was last restarted at "
        f"{format_rfc3339_nano(last_ns)} (--min-restart-interval); "
        f"it will run at {format_rfc3339_nano(run_at_ns)}.",
        dedupe_key=f"deferred@{due_ns}",
    )


def restart_queued(limit: int, due_ns: int | None) -> Event:
    """A due restart waits for a rollout slot; sent once per occurrence."""
    return Event(
        EventType.NORMAL,
        RESTART_QUEUED,
        f"The restart is due but {limit} restarted workloads are still rolling out "
        "(--max-concurrent-rollouts); it will run in due-time order as rollouts complete.",
        dedupe_key=f"queued@{due_ns}",
    )


def rollout_completed(duration_ns: int) -> Event:
    """The rollout a restart started has completed."""
    rounded = duration_ns - duration_ns % 1_000_000
    return _normal(
        ROLLOUT_COMPLETED, f"Rollout after the restart completed in {format_go_duration(rounded)}."
    )


def rollout_stalled(timeout_ns: int, detail: str) -> Event:
    """The rollout a restart started has not completed within ``--rollout-timeout``."""
    return Event(
        EventType.WARNING,
        ROLLOUT_STALLED,
        f"Rollout after the restart not complete after {format_go_duration(timeout_ns)} "
        f"(--rollout-timeout): {detail}.",
        action="restart",
    )


# --- maintenance windows (docs/annotations.md#maintenance-windows) --------------------------

ACTION_DEFERRED: Final = "ActionDeferred"


def invalid_maintenance_window(error: str) -> Event:
    return _warning(
        INVALID_ANNOTATION,
        f"Invalid maintenance-window: {error}; taking no action until it is fixed",
    )


def action_deferred(action: str, scheduled_ns: int, opening_ns: int) -> Event:
    """A due action outside every maintenance window waits; sent once per occurrence."""
    return Event(
        EventType.NORMAL,
        ACTION_DEFERRED,
        f"The {action} scheduled at {format_rfc3339_nano(scheduled_ns)} is outside every "
        f"maintenance window; it will run at the next opening, "
        f"{format_rfc3339_nano(opening_ns)}.",
        dedupe_key=f"window@{scheduled_ns}@{opening_ns}",
    )


# --- warnings with lead time (docs/annotations.md#warnings-before-acting) -------------------

UPCOMING_DELETION: Final = "UpcomingDeletion"
UPCOMING_RESTART: Final = "UpcomingRestart"


def invalid_warn_before(*, uid: str, value: str, error: str) -> Event:
    """An invalid ``warn-before`` blocks nothing but the warning; sent once per value."""
    return _warning(
        INVALID_ANNOTATION,
        f"Invalid format for warn-before annotation: {error}; no warning will be posted "
        "before the action",
        _dedupe_key(uid, keys.WARN_BEFORE, value),
    )


def upcoming(
    *, delete: bool, due_ns: int, policy: str, dry_run: bool, lead_ns: int, name: str
) -> Event:
    """The one warning ``lead_ns`` before an occurrence; ``due_ns`` is after the windows."""
    noun = "deletion" if delete else "restart"
    message = (
        f"The {noun} of this object is due at {format_rfc3339_nano(due_ns)} "
        f"(warn-before {format_go_duration(lead_ns)}, catch-up policy {policy})."
    )
    if dry_run:
        message += f" Dry-run: the {noun} will only be reported, not carried out."
    reason = UPCOMING_DELETION if delete else UPCOMING_RESTART
    return Event(
        EventType.NORMAL,
        reason,
        message,
        name=name,
        action="delete" if delete else "restart",
        due_ns=due_ns,
        dry_run=dry_run,
    )


# --- namespace defaults (docs/annotations.md#namespace-defaults) ----------------------------


def invalid_namespace_default(*, uid: str, key: str, value: str, error: str, blocks: str) -> Event:
    """An invalid default, on its Namespace once per value; ``blocks``: what it holds back."""
    return _warning(
        INVALID_ANNOTATION,
        f"Invalid namespace default {key}={go_quote(value)}: {error}; {blocks}",
        _dedupe_key(uid, key, value),
    )


#: The ``reason`` label of ``lifecycle_misconfigurations_total`` for each problem Event.
MISCONFIGURATION_LABELS: Final = {
    INVALID_ANNOTATION: "invalid_annotation",
    INVALID_ANNOTATION_VALUE: "invalid_annotation",
    INVALID_TIMEZONE: "invalid_timezone",
    INVALID_STATE: "invalid_state",
    NOT_POD_SPAWNER: "not_pod_spawner",
    UNSUPPORTED_RESTART_KIND: "unsupported_restart_kind",
    CONFLICTING_ANNOTATIONS: "conflicting_annotations",
    DELETE_TTL_EXCEEDED: "delete_ttl_exceeded",
}


def misconfiguration_label(event_reason: str) -> str:
    """The metric label for a problem Event's reason (``invalid_annotation`` if unknown)."""
    return MISCONFIGURATION_LABELS.get(event_reason, "invalid_annotation")
