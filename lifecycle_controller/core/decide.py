"""decide(): one decision pass (docs/behaviour.md#decision-order), as a pure function.

The order of checks is the contract, so this module follows that section step by step:
top-level gate, catch-up resolution, deletion, restart, recurring restarts, the occurrence
check and the ``never`` record, skips and dry-run, with the deliberate differences
(docs/behaviour.md#deliberate-differences): terminating objects are left alone, the
restart marker always changes, cron uses our DST rule, repeated warnings carry a dedupe
key and ``--max-delete-ttl`` guards deletions.

Nothing here reads the clock or talks to the API; the ledger is only read. Whatever the
annotations contain, decide() returns a decision rather than raising.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field

from lifecycle_controller.core import events, keys
from lifecycle_controller.core.catchup import (
    ALWAYS,
    CatchUpError,
    CatchUpMode,
    CatchUpPolicy,
    Forget,
    Identity,
    LedgerOp,
    LedgerView,
    Observe,
    observe_outcome,
    parse_catch_up_policy,
)
from lifecycle_controller.core.cron import CronError, ZoneError, load_zone, parse_cron
from lifecycle_controller.core.decision import (
    Action,
    Decision,
    DecisionSettings,
    Delete,
    DryRun,
    Failure,
    Idle,
    Invalid,
    ObjectFacts,
    Operation,
    Outcome,
    Patch,
    Wait,
)
from lifecycle_controller.core.durations import (
    DurationError,
    parse_duration,
    parse_restart_every,
)
from lifecycle_controller.core.events import Event
from lifecycle_controller.core.gotext import go_parse_bool
from lifecycle_controller.core.patches import (
    AnnotationChanges,
    annotation_patch,
    next_restart_marker,
    restart_patch,
)
from lifecycle_controller.core.schedules import (
    CronSchedule,
    IntervalSchedule,
    Schedule,
    plan_recurring,
    requeue_after,
)
from lifecycle_controller.core.timestamps import (
    TimestampError,
    format_rfc3339_nano,
    format_rfc3339_seconds,
    parse_rfc3339,
)

__all__ = ["decide"]

_FORGET = Forget()


def _then_forget(ops: tuple[LedgerOp, ...] | list[LedgerOp]) -> tuple[LedgerOp, ...]:
    """Append a Forget unless the operations already end with one."""
    ops = tuple(ops)
    return ops if ops and ops[-1] == _FORGET else (*ops, _FORGET)


_NO_FUTURE_OCCURRENCE = "cron expression has no future occurrence"


def decide(
    *,
    annotations: Mapping[str, str],
    facts: ObjectFacts,
    now_ns: int,
    settings: DecisionSettings,
    ledger: LedgerView,
) -> Decision:
    """Decide what to do with one object at ``now_ns``.

    ``annotations`` are the object's top-level ``metadata.annotations``. The ledger is read
    under ``facts.key``; apply ``decision.ledger_ops`` to it at once and
    ``on_success.ledger_ops`` after a successful write.
    """
    if facts.terminating:
        # docs/behaviour.md#terminating-objects: never restart, never DELETE again, and
        # nothing else either (no conversion or initialization on an object going away).
        return Idle(ledger_ops=(_FORGET,), log="object is terminating; nothing to do")
    if not annotations:
        return Idle(ledger_ops=(_FORGET,), log="no annotations")

    dry_run = settings.dry_run
    if keys.DRY_RUN in annotations:
        resource_dry_run = go_parse_bool(annotations[keys.DRY_RUN])
        if resource_dry_run is None:
            event = events.invalid_dry_run(annotations[keys.DRY_RUN])
            return Invalid(
                reason=event.reason,
                events=(event,),
                ledger_ops=(_FORGET,),
                log="invalid dry-run annotation; taking no action",
            )
        dry_run = dry_run or resource_dry_run

    early: list[Event] = []
    zone_value = annotations.get(keys.CRON_TIMEZONE, "")
    if zone_value and not annotations.get(keys.RESTART_CRON):
        early.append(events.ignored_cron_timezone(uid=facts.uid, value=zone_value))

    has_delete = any(annotations.get(key) for key in keys.DELETE_FAMILY)
    has_restart = any(annotations.get(key) for key in keys.RESTART_FAMILY)
    if has_delete and has_restart:
        event = events.conflicting_annotations()
        return Invalid(
            reason=event.reason,
            events=(*early, event),
            ledger_ops=(_FORGET,),
            log="both delete and restart annotations; taking no action",
        )

    run = _Pass(
        annotations=annotations,
        facts=facts,
        now=now_ns,
        settings=settings,
        ledger=ledger,
        dry_run=dry_run,
        events=early,
    )
    if has_delete:
        return _deletion(run)
    if has_restart:
        return _restart(run)
    return Idle(events=tuple(early), ledger_ops=(_FORGET,), log="no action annotations")


@dataclass(slots=True, kw_only=True)
class _Pass:
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
    policy: CatchUpPolicy = ALWAYS

    def get(self, key: str) -> str:
        return self.annotations.get(key, "")

    @property
    def never(self) -> bool:
        return self.policy.mode is CatchUpMode.NEVER

    # --- catch-up ------------------------------------------------------------------------

    def resolve_policy(self, default: CatchUpPolicy) -> Invalid | None:
        """docs/behaviour.md#catch-up-resolution; an Invalid decision for a bad annotation."""
        policy = default
        if keys.CATCH_UP in self.annotations:
            try:
                policy = parse_catch_up_policy(self.annotations[keys.CATCH_UP])
            except CatchUpError as error:
                return self.invalid(events.invalid_catch_up(str(error)), "invalid catch-up")
        self.policy = policy
        if not self.never or self.dry_run:
            self.ops.append(_FORGET)  # the ledger serves `never` outside dry-run only
        return None

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
        return Identity(self.facts.uid, self.action.value, self.policy, config)

    def allowed(self, due_ns: int, identity: Identity) -> bool:
        """The occurrence check (docs/behaviour.md#occurrence-check): may ``due_ns`` run?"""
        if self.policy.mode is CatchUpMode.ALWAYS:
            return True
        if self.policy.mode is CatchUpMode.WINDOW:
            return self.policy.within_window(due_ns, self.now)
        if self.dry_run:
            return False
        ok, _ = observe_outcome(self.ledger.peek(self.facts.key), identity, due_ns, self.now)
        self.ops.append(Observe(identity, due_ns, self.now))
        return ok

    def arm_ops(self, identity: Identity, due_ns: int | None) -> tuple[LedgerOp, ...]:
        """Ledger operations that arm an occurrence after a successful write (``never``)."""
        if not self.never or due_ns is None:
            return ()
        return (Observe(identity, due_ns, self.now),)

    # --- decisions -----------------------------------------------------------------------

    def invalid(self, event: Event, log: str) -> Invalid:
        return Invalid(
            reason=event.reason,
            events=(*self.events, event),
            ledger_ops=_then_forget(self.ops),
            action=self.action,
            log=log,
        )

    def wait(self, due_ns: int, log: str) -> Wait:
        return Wait(
            requeue_after_ns=requeue_after(due_ns, self.now),
            events=tuple(self.events),
            ledger_ops=tuple(self.ops),
            action=self.action,
            due_ns=due_ns,
            log=log,
        )

    def dry(
        self, operation: Operation, event: Event | None, due_ns: int | None, log: str
    ) -> DryRun:
        dry_events = (*self.events, event) if event is not None else tuple(self.events)
        return DryRun(
            operation=operation,
            events=dry_events,
            ledger_ops=_then_forget(self.ops),
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
            success_ops = _then_forget(success_ops)  # a finished handler forgets its arm
        return Outcome(events=success_events, ledger_ops=success_ops, requeue_after_ns=requeue_ns)

    def patch(
        self,
        operation: Operation,
        body: dict[str, object],
        *,
        on_success: Outcome,
        failure: Failure | None,
        due_ns: int | None,
        log: str,
    ) -> Patch:
        return Patch(
            operation=operation,
            body=body,
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
            annotation_patch(acknowledgement),
            on_success=self.outcome(
                (events.action_skipped(self.action.value, scheduled_ns),),
                (_FORGET, *then),
                requeue_ns,
            ),
            failure=Failure(
                reason=events.ACTION_SKIP_FAILED,
                message_prefix=events.skip_failed_prefix(self.action.value),
            ),
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
            restart_patch(acknowledgement, marker),
            on_success=self.outcome((events.restart_triggered(),), then, requeue_ns),
            failure=Failure(
                reason=events.RESTART_FAILED, message_prefix=events.RESTART_PATCH_FAILED_PREFIX
            ),
            due_ns=scheduled_ns,
            log=f"restarting (restartedAt={marker})",
        )


# --- relative timers (docs/behaviour.md#deletion step 1, restart step 4) ------------------


@dataclass(frozen=True, slots=True)
class _Relative:
    after_key: str
    at_key: str
    after_name: str  # as the Event messages spell it
    scheduled_event: str  # "deletion" / "restart"


_DELETE_RELATIVE = _Relative(keys.DELETE_AFTER, keys.DELETE_AT, "delete-after", "deletion")
_RESTART_RELATIVE = _Relative(keys.RESTART_AFTER, keys.RESTART_AT, "restart-after", "restart")


def _convert(run: _Pass, relative: _Relative) -> Decision:
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
        changes: AnnotationChanges = {relative.after_key: None}
        try:
            existing_due: int | None = parse_rfc3339(existing_at)
        except TimestampError:
            existing_due = None
        arm = run.arm_ops(run.identity(changes), existing_due) if existing_due is not None else ()
        return run.patch(
            Operation.CLEANUP,
            annotation_patch(changes),
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
        )
    limit = run.settings.max_delete_ttl_ns
    if relative is _DELETE_RELATIVE and limit is not None and duration > limit:
        return run.invalid(
            events.delete_ttl_exceeded(
                annotation=relative.after_key, value=after_value, ttl_ns=duration, max_ns=limit
            ),
            "delete-after exceeds --max-delete-ttl",
        )

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
            if relative is _DELETE_RELATIVE
            else events.dry_run_restart_scheduled(at_value)
        )
        return run.dry(
            Operation.CONVERT, scheduled, due, f"dry-run: would set {relative.at_key}={at_value}"
        )
    changes = {relative.at_key: at_value, relative.after_key: None}
    return run.patch(
        Operation.CONVERT,
        annotation_patch(changes),
        on_success=run.outcome((), run.arm_ops(run.identity(changes), due), 1),
        failure=None,
        due_ns=due,
        log=f"converting {relative.after_name} to {relative.at_key}={at_value}",
    )


# --- deletion (docs/behaviour.md#deletion) --------------------------------------------------


def _deletion(run: _Pass) -> Decision:
    run.action = Action.DELETE
    problem = run.resolve_policy(run.settings.delete_catch_up)
    if problem is not None:
        return problem
    if run.get(keys.DELETE_AFTER):
        return _convert(run, _DELETE_RELATIVE)

    value = run.get(keys.DELETE_AT)
    try:
        due = parse_rfc3339(value)
    except TimestampError as error:
        return run.invalid(events.invalid_timestamp("delete-at", str(error)), "invalid delete-at")
    limit = run.settings.max_delete_ttl_ns
    if limit is not None and due - run.now > limit:
        return run.invalid(
            events.delete_ttl_exceeded(
                annotation=keys.DELETE_AT, value=value, ttl_ns=due - run.now, max_ns=limit
            ),
            "delete-at exceeds --max-delete-ttl",
        )

    allowed = run.allowed(due, run.identity())
    if run.now < due:
        return run.wait(due, f"deletion scheduled at {value}")
    if not allowed:
        return run.skip(due, {keys.DELETE_AT: None})
    if run.dry_run:
        return run.dry(
            Operation.DELETE, events.dry_run_delete_now(), due, "dry-run: would delete now"
        )
    return Delete(
        uid=run.facts.uid,
        resource_version=run.facts.resource_version,
        on_success=run.outcome((events.deleted(value),), (), None),
        failure=Failure(
            reason=events.DELETION_FAILED, message_prefix=events.DELETION_FAILED_PREFIX
        ),
        events=tuple(run.events),
        ledger_ops=tuple(run.ops),
        action=Action.DELETE,
        due_ns=due,
        log=f"deleting (delete-at {value})",
    )


# --- restarts (docs/behaviour.md#restart, docs/behaviour.md#recurring-restarts) ------------


def _restart(run: _Pass) -> Decision:
    run.action = Action.RESTART
    problem = run.resolve_policy(run.settings.restart_catch_up)
    if problem is not None:
        return problem
    facts = run.facts
    if not facts.key.resource.restartable:
        return run.invalid(events.unsupported_restart_kind(), "restart on an unsupported kind")
    if not facts.has_pod_template:
        return run.invalid(events.not_pod_spawner(), "restart without a Pod template")
    if run.get(keys.RESTART_AFTER):
        return _convert(run, _RESTART_RELATIVE)

    if value := run.get(keys.RESTART_AT):
        try:
            due = parse_rfc3339(value)
        except TimestampError as error:
            return run.invalid(
                events.invalid_timestamp("restart-at", str(error)), "invalid restart-at"
            )
        allowed = run.allowed(due, run.identity())
        if run.now < due:
            return run.wait(due, f"restart scheduled at {value}")
        if not allowed:
            return run.skip(due, {keys.RESTART_AT: None})
        return run.restart(due, {keys.RESTART_AT: None})

    if expression := run.get(keys.RESTART_CRON):
        zone_name = run.get(keys.CRON_TIMEZONE) or "UTC"
        try:
            zone = load_zone(zone_name, local_zone=run.settings.local_zone)
        except ZoneError:
            return run.invalid(events.invalid_timezone(zone_name), "invalid cron-timezone")
        try:
            spec = parse_cron(expression)
        except CronError as error:
            return run.invalid(events.invalid_cron(str(error)), "invalid restart-cron")
        schedule: Schedule = CronSchedule(spec, zone)
        if schedule.next_after(run.now) is None:
            return run.invalid(events.invalid_cron(_NO_FUTURE_OCCURRENCE), "invalid restart-cron")
        return _recurring(run, schedule)

    try:
        interval = parse_restart_every(run.get(keys.RESTART_EVERY))
    except DurationError as error:
        return run.invalid(events.invalid_restart_every(str(error)), "invalid restart-every")
    return _recurring(run, IntervalSchedule(interval))


def _recurring(run: _Pass, schedule: Schedule) -> Decision:
    """docs/behaviour.md#recurring-restarts: start, wait, or act once on due occurrences."""
    anchor_value = run.get(keys.LAST_RESTART_TIMESTAMP)
    if not anchor_value:
        following = schedule.next_after(run.now)
        if run.dry_run:
            return run.dry(
                Operation.INITIALIZE, None, following, "dry-run: would initialize the schedule"
            )
        new_anchor = format_rfc3339_nano(run.now)
        changes: AnnotationChanges = {keys.LAST_RESTART_TIMESTAMP: new_anchor}
        return run.patch(
            Operation.INITIALIZE,
            annotation_patch(changes),
            on_success=run.outcome(
                (),
                run.arm_ops(run.identity(changes), following),
                None if following is None else requeue_after(following, run.now),
            ),
            failure=None,
            due_ns=following,
            log=f"initializing {keys.LAST_RESTART_TIMESTAMP}={new_anchor}",
        )

    try:
        last = parse_rfc3339(anchor_value)
    except TimestampError as error:
        return run.invalid(events.invalid_state(str(error)), "invalid last-restart-timestamp")

    plan = plan_recurring(schedule, last, run.now)
    scheduled = plan.scheduled_ns
    allowed = run.allowed(scheduled, run.identity())
    if plan.due and run.policy.mode is CatchUpMode.WINDOW:
        recent, allowed = schedule.recent_occurrence(last, run.now, run.policy.window_ns)
        if allowed:
            scheduled = recent
    if not plan.due:
        return run.wait(scheduled, f"next recurring restart at {format_rfc3339_nano(scheduled)}")

    acknowledgement: AnnotationChanges = {
        keys.LAST_RESTART_TIMESTAMP: format_rfc3339_nano(plan.anchor_ns)
    }
    following = schedule.next_after(plan.anchor_ns)
    then = (_FORGET, *run.arm_ops(run.identity(acknowledgement), following))
    requeue = None if following is None else requeue_after(following, run.now)
    if not allowed:
        return run.skip(scheduled, acknowledgement, then=then, requeue_ns=requeue)
    return run.restart(scheduled, acknowledgement, then=then, requeue_ns=requeue)
