"""One decision pass: its state, the decisions it builds, and the relative timers.

:func:`~lifecycle_controller.core.decision.decide.decide` runs the top-level gate and hands a
:class:`DecisionPass` to the deletion path or the restart path (both in
:mod:`~lifecycle_controller.core.decision.decide`). Both use what is here:
catch-up resolution, the occurrence check, the decisions (Invalid, Wait, DryRun, Patch) with
their Events and ledger operations, skips, the restart patch, and the ``*-after`` to ``*-at``
conversion (docs/behaviour.md#deletion step 1, docs/behaviour.md#restart step 4).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field

from lifecycle_controller.core.decision import events
from lifecycle_controller.core.decision.delete_ttl import refuse_ttl
from lifecycle_controller.core.decision.events import Event
from lifecycle_controller.core.decision.observed import check_record, encode_observation
from lifecycle_controller.core.decision.outcomes import (
    Action,
    Decision,
    DecisionSettings,
    DryRun,
    Failure,
    Invalid,
    ObjectFacts,
    Operation,
    Outcome,
    Patch,
    Refusal,
    Wait,
)
from lifecycle_controller.core.decision.patches import (
    AnnotationChanges,
    annotation_patch,
    next_restart_marker,
    write_body,
)
from lifecycle_controller.core.decision.warnings import (
    NO_LEAD,
    LeadTime,
    catch_up_text,
    occurrence_name,
    parse_lead_time,
)
from lifecycle_controller.core.objects import keys
from lifecycle_controller.core.schedule.catchup import (
    ALWAYS,
    CatchUpError,
    CatchUpMode,
    CatchUpRule,
    Forget,
    Identity,
    LedgerOp,
    LedgerView,
    Observe,
    observe_outcome,
    parse_catch_up_rule,
)
from lifecycle_controller.core.schedule.schedules import requeue_after
from lifecycle_controller.core.schedule.windows import (
    MaintenanceWindows,
    WindowError,
    defer,
    parse_windows,
)
from lifecycle_controller.core.text.durations import DurationError, parse_duration
from lifecycle_controller.core.text.timestamps import (
    TimestampError,
    format_rfc3339_nano,
    format_rfc3339_seconds,
    parse_rfc3339,
)

__all__ = [
    "DELETE_RELATIVE",
    "FORGET",
    "RESTART_RELATIVE",
    "DecisionPass",
    "RelativeTimer",
    "convert_relative",
    "then_forget",
]

FORGET = Forget()


def then_forget(ops: tuple[LedgerOp, ...] | list[LedgerOp]) -> tuple[LedgerOp, ...]:
    """Append a Forget unless the operations already end with one."""
    ops = tuple(ops)
    return ops if ops and ops[-1] == FORGET else (*ops, FORGET)


@dataclass(slots=True, kw_only=True)
class DecisionPass:
    """State of one decision: inputs, plus Events and ledger operations that apply now."""

    annotations: Mapping[str, str]
    facts: ObjectFacts
    now: int
    settings: DecisionSettings
    ledger: LedgerView
    dry_run: bool
    events: list[Event]
    ops: list[LedgerOp] = field(default_factory=list)
    action: Action = Action.DELETE
    catch_up: CatchUpRule = ALWAYS
    windows: MaintenanceWindows | None = None
    lead: LeadTime = NO_LEAD
    record: str | None = None  # an ``observed`` value for the Wait to persist

    def get(self, key: str) -> str:
        return self.annotations.get(key, "")

    @property
    def never(self) -> bool:
        return self.catch_up.mode is CatchUpMode.NEVER

    # --- catch-up ------------------------------------------------------------------------

    def begin(self, action: Action, default_rule: CatchUpRule) -> Invalid | None:
        """What every action path does first: its catch-up policy, the maintenance windows
        and the lead-time warning; an Invalid blocks the action."""
        self.action = action
        problem = self.resolve_catch_up(default_rule)
        if problem is None:
            problem = self.resolve_windows()
        if problem is None:
            self.resolve_warning()
        return problem

    def resolve_catch_up(self, default: CatchUpRule) -> Invalid | None:
        """docs/behaviour.md#catch-up-resolution; an Invalid decision for a bad annotation."""
        rule = default
        if keys.CATCH_UP in self.annotations:
            try:
                rule = parse_catch_up_rule(self.annotations[keys.CATCH_UP])
            except CatchUpError as error:
                return self.invalid(
                    events.invalid_catch_up(str(error)), "invalid catch-up", str(error)
                )
        self.catch_up = rule
        if not self.never or self.dry_run:
            self.ops.append(FORGET)  # the ledger serves `never` outside dry-run only
        return None

    # --- maintenance windows (docs/annotations.md#maintenance-windows) --------------------

    def resolve_windows(self) -> Invalid | None:
        """The object's windows, else the flag's; an Invalid decision for a bad annotation."""
        if keys.MAINTENANCE_WINDOW not in self.annotations:
            self.windows = self.settings.maintenance_windows
            return None
        try:
            self.windows = parse_windows(self.annotations[keys.MAINTENANCE_WINDOW])
        except WindowError as error:
            return self.invalid(
                events.invalid_maintenance_window(str(error)),
                "invalid maintenance-window",
                str(error),
            )
        return None

    # --- warnings with lead time (docs/annotations.md#warnings-before-acting) ------------

    def resolve_warning(self) -> None:
        """The lead time; an invalid ``warn-before`` only turns the warning off."""
        self.lead = parse_lead_time(self.annotations, self.settings.warn_before_ns, self.facts.uid)
        if self.lead.problem is not None:
            self.events.append(self.lead.problem)

    def announce(self, scheduled_ns: int, effective_ns: int) -> int | None:
        """Post the occurrence's warning once it is due; else when to come back for it."""
        warn_at = self.lead.warn_at(effective_ns)
        if warn_at is None:
            return None
        if self.now < warn_at:
            return warn_at
        self.events.append(
            events.upcoming(
                delete=self.action is Action.DELETE,
                due_ns=effective_ns,
                policy=catch_up_text(self.catch_up),
                dry_run=self.dry_run,
                lead_ns=self.lead.lead_ns,
                name=occurrence_name(self.facts.uid, self.action.value, scheduled_ns),
            )
        )
        return None

    def opening(self, scheduled_ns: int) -> int:
        """Where catch-up lateness is measured from: the first in-window instant from then."""
        return scheduled_ns if self.windows is None else self.windows.first_open(scheduled_ns)

    def held(self, scheduled_ns: int) -> Wait | None:
        """A due occurrence outside every window waits for the next opening."""
        if self.windows is None:
            return None
        deferral = defer(self.windows, scheduled_ns, self.now)
        if deferral.run_at_ns <= self.now:
            return None
        self.events.append(
            events.action_deferred(self.action.value, scheduled_ns, deferral.run_at_ns)
        )
        return self.wait(
            deferral.run_at_ns,
            f"{self.action.value} due at {format_rfc3339_nano(scheduled_ns)} waits for the "
            f"maintenance window opening at {format_rfc3339_nano(deferral.run_at_ns)}",
            occurrence_ns=scheduled_ns,
        )

    def identity(self, changes: AnnotationChanges | None = None) -> Identity:
        """The arm identity for the selected action, on the annotations after ``changes``."""
        current = dict(self.annotations)
        for key, value in (changes or {}).items():
            if value is None:
                current.pop(key, None)
            else:
                current[key] = value
        if self.action is Action.DELETE:
            config: tuple[str, ...] = (keys.DELETE_AT, current.get(keys.DELETE_AT, ""))
        elif current.get(keys.RESTART_AT):
            config = (keys.RESTART_AT, current[keys.RESTART_AT])
        elif current.get(keys.RESTART_CRON):
            config = (
                keys.RESTART_CRON,
                current[keys.RESTART_CRON],
                current.get(keys.CRON_TIMEZONE, ""),
                current.get(keys.LAST_RESTART_TIMESTAMP, ""),
            )
        else:
            config = (
                keys.RESTART_EVERY,
                current.get(keys.RESTART_EVERY, ""),
                current.get(keys.LAST_RESTART_TIMESTAMP, ""),
            )
        return Identity(self.facts.uid, self.action.value, self.catch_up, config)

    def held_for(self) -> int:
        """How long the deciding policy's limit has held its actions: time that is not
        lateness (docs/policies.md#limit)."""
        since = self.settings.limit_held_since_ns
        return 0 if since is None else max(0, self.now - since)

    def in_time(self, due_ns: int) -> bool:
        """A ``catch-up`` window's test: at most the window late, measured from ``due_ns``,
        the time the policy's limit has held its actions not counted."""
        return self.catch_up.within_window(due_ns + self.held_for(), self.now)

    def allowed(self, due_ns: int, identity: Identity) -> bool:
        """The occurrence check (docs/behaviour.md#occurrence-check): may ``due_ns`` run?"""
        if self.catch_up.mode is CatchUpMode.ALWAYS:
            return True
        if self.catch_up.mode is CatchUpMode.WINDOW:
            return self.in_time(due_ns)
        if self.dry_run:
            return False
        ok, _ = observe_outcome(self.ledger.peek(self.facts.key), identity, due_ns, self.now)
        self.ops.append(Observe(identity, due_ns, self.now))
        if self.settings.persist_observations:  # docs/behaviour.md#persisted-observations
            seen, self.record = check_record(self.get(keys.OBSERVED), identity, due_ns, self.now)
            ok = ok or seen
        return ok

    def recorded(self, changes: AnnotationChanges, next_ns: int | None) -> AnnotationChanges:
        """``changes`` plus the ``observed`` record of the next occurrence, or its removal."""
        if not self.settings.persist_observations:
            return changes
        value = None
        if self.never and not self.dry_run and next_ns is not None:
            due = self.opening(next_ns)
            value = encode_observation(self.identity(changes), due) if due > self.now else None
        if value is None and keys.OBSERVED not in self.annotations:
            return changes
        return {**changes, keys.OBSERVED: value}

    def arm_ops(self, identity: Identity, due_ns: int | None) -> tuple[LedgerOp, ...]:
        """Ledger operations that arm an occurrence after a successful write (``never``)."""
        if not self.never or due_ns is None:
            return ()
        return (Observe(identity, due_ns, self.now),)

    # --- decisions -----------------------------------------------------------------------

    def invalid(
        self, event: Event, log: str, error: str | None = None, *, refusal: Refusal | None = None
    ) -> Invalid:
        """An Invalid decision; ``error`` (the parse error) goes into the log line too;
        ``refusal``: what max-delete-ttl refused."""
        return Invalid(
            reason=event.reason,
            refusal=refusal,
            events=(*self.events, event),
            ledger_ops=then_forget(self.ops),
            action=self.action,
            log=log if error is None else f"{log}: {error}",
        )

    def wait(self, due_ns: int, log: str, *, occurrence_ns: int | None = None) -> Wait:
        """Requeue at ``due_ns`` (or at the warning before it, if that is earlier).

        The decision shows the effective due time (after windows). ``occurrence_ns`` is the
        occurrence's scheduled time when ``due_ns`` is already its window opening.
        """
        effective = self.opening(due_ns)
        if effective != due_ns:
            log += f"; outside the maintenance windows, runs at {format_rfc3339_nano(effective)}"
        timer = due_ns
        warn_at = self.announce(due_ns if occurrence_ns is None else occurrence_ns, effective)
        if warn_at is not None and warn_at < timer:
            timer = warn_at
            log += f"; warns at {format_rfc3339_nano(warn_at)}"
        return Wait(
            requeue_after_ns=requeue_after(timer, self.now),
            events=tuple(self.events),
            ledger_ops=tuple(self.ops),
            action=self.action,
            due_ns=effective,
            scheduled_ns=due_ns if occurrence_ns is None else occurrence_ns,
            log=log,
            record=(
                None
                if self.record is None or not self.settings.writes_annotations
                else annotation_patch({keys.OBSERVED: self.record})
            ),
        )

    def dry(
        self, operation: Operation, event: Event | None, due_ns: int | None, log: str
    ) -> DryRun:
        dry_events = (*self.events, event) if event is not None else tuple(self.events)
        return DryRun(
            operation=operation,
            events=dry_events,
            ledger_ops=then_forget(self.ops),
            action=self.action,
            due_ns=due_ns,
            log=log,
        )

    def outcome(
        self,
        success_events: tuple[Event, ...],
        success_ops: tuple[LedgerOp, ...],
        requeue_ns: int | None,
    ) -> Outcome:
        if requeue_ns is None:
            success_ops = then_forget(success_ops)  # a finished handler forgets its arm
        return Outcome(events=success_events, ledger_ops=success_ops, requeue_after_ns=requeue_ns)

    def patch(
        self,
        operation: Operation,
        changes: AnnotationChanges,
        *,
        marker: str | None = None,
        on_success: Outcome,
        failure: Failure | None,
        due_ns: int | None,
        log: str,
    ) -> Patch:
        """One write: ``changes`` to the annotations (and a restart's template ``marker``),
        in the form the settings ask for (:func:`~.patches.write_body`)."""
        annotations = self.settings.writes_annotations
        return Patch(
            operation=operation,
            body=write_body(changes, marker, annotations=annotations),
            acknowledges=None if annotations else changes.get(keys.LAST_RESTART_TIMESTAMP),
            on_success=on_success,
            failure=failure,
            events=tuple(self.events),
            ledger_ops=tuple(self.ops),
            action=self.action,
            due_ns=due_ns,
            log=log,
        )

    def skip(
        self,
        scheduled_ns: int,
        acknowledgement: AnnotationChanges,
        *,
        then: tuple[LedgerOp, ...] = (),
        requeue_ns: int | None = None,
    ) -> Decision:
        """docs/behaviour.md#skip-acknowledgement: acknowledge a refused occurrence."""
        if self.dry_run:
            return self.dry(
                Operation.SKIP,
                events.dry_run_action_skipped(self.action.value, scheduled_ns),
                scheduled_ns,
                f"dry-run: would skip {self.action.value} under the catch-up policy",
            )
        return self.patch(
            Operation.SKIP,
            acknowledgement,
            on_success=self.outcome(
                (events.action_skipped(self.action.value, scheduled_ns),),
                (FORGET, *then),
                requeue_ns,
            ),
            failure=events.skip_failure(self.action.value),
            due_ns=scheduled_ns,
            log=f"skipping {self.action.value} under the catch-up policy",
        )

    def restart(
        self,
        scheduled_ns: int,
        acknowledgement: AnnotationChanges,
        *,
        then: tuple[LedgerOp, ...] = (),
        requeue_ns: int | None = None,
    ) -> Decision:
        """docs/behaviour.md#guarded-writes: marker and acknowledgement in one patch."""
        self.announce(scheduled_ns, self.opening(scheduled_ns))
        if self.dry_run:
            return self.dry(
                Operation.RESTART,
                events.dry_run_restart_now(),
                scheduled_ns,
                "dry-run: would restart now",
            )
        marker = next_restart_marker(self.now, self.facts.restart_marker)
        return self.patch(
            Operation.RESTART,
            acknowledgement,
            marker=marker,
            on_success=self.outcome((events.restart_triggered(),), then, requeue_ns),
            failure=events.RESTART_FAILURE,
            due_ns=self.opening(scheduled_ns),  # lateness counts from a window's opening
            log=f"restarting (restartedAt={marker})",
        )


# --- relative timers (docs/behaviour.md#deletion step 1, restart step 4) ------------------


@dataclass(frozen=True, slots=True)
class RelativeTimer:
    after_key: str
    at_key: str
    after_name: str  # as the Event messages spell it
    scheduled_event: str  # "deletion" / "restart"


DELETE_RELATIVE = RelativeTimer(keys.DELETE_AFTER, keys.DELETE_AT, "delete-after", "deletion")
RESTART_RELATIVE = RelativeTimer(keys.RESTART_AFTER, keys.RESTART_AT, "restart-after", "restart")


def convert_relative(run: DecisionPass, relative: RelativeTimer) -> Decision:
    """Turn ``*-after`` into ``*-at`` (or drop a redundant ``*-after``)."""
    existing_at = run.get(relative.at_key)
    if run.get(keys.REFERENCE_POINT) == keys.REFERENCE_POINT_CREATION and existing_at:
        # The existing deadline wins; only the -after annotation goes.
        if run.dry_run:
            return run.dry(
                Operation.CLEANUP,
                None,
                None,
                f"dry-run: would remove redundant {relative.after_name}",
            )
        try:
            existing_due: int | None = parse_rfc3339(existing_at)
        except TimestampError:
            existing_due = None
        changes = run.recorded({relative.after_key: None}, existing_due)
        arm = run.arm_ops(run.identity(changes), existing_due) if existing_due is not None else ()
        return run.patch(
            Operation.CLEANUP,
            changes,
            on_success=run.outcome((), arm, 1),
            failure=None,
            due_ns=existing_due,
            log=f"removing redundant {relative.after_name}",
        )

    after_value = run.get(relative.after_key)
    try:
        duration = parse_duration(after_value)
    except DurationError as error:
        return run.invalid(
            events.invalid_relative_duration(relative.after_name, str(error)),
            f"invalid {relative.after_name}",
            str(error),
        )
    if relative is DELETE_RELATIVE:
        refusal = refuse_ttl(
            run.settings, annotation=relative.after_key, value=after_value, ttl_ns=duration
        )
        if refusal is not None:
            return run.invalid(refusal.event, refusal.log, refusal=refusal.refusal)

    reference_point = run.get(keys.REFERENCE_POINT)
    reference = run.now
    if reference_point == keys.REFERENCE_POINT_CREATION:
        # Always set on API objects; a manifest without one (plan) behaves as if just created.
        if run.facts.creation_ns is not None:
            reference = run.facts.creation_ns
    elif reference_point not in ("", keys.REFERENCE_POINT_APPLY):
        run.events.append(events.invalid_reference_point(uid=run.facts.uid, value=reference_point))
    at_value = format_rfc3339_seconds(reference + duration)
    due = parse_rfc3339(at_value)  # whole seconds, as it will be read back

    if run.dry_run:
        scheduled = (
            events.dry_run_delete_scheduled(at_value)
            if relative is DELETE_RELATIVE
            else events.dry_run_restart_scheduled(at_value)
        )
        return run.dry(
            Operation.CONVERT, scheduled, due, f"dry-run: would set {relative.at_key}={at_value}"
        )
    changes = run.recorded({relative.at_key: at_value, relative.after_key: None}, due)
    return run.patch(
        Operation.CONVERT,
        changes,
        on_success=run.outcome((), run.arm_ops(run.identity(changes), due), 1),
        failure=None,
        due_ns=due,
        log=f"converting {relative.after_name} to {relative.at_key}={at_value}",
    )
