"""decide(): one decision pass over an object's annotations (docs/behaviour.md#decision-order).

The order of checks is the contract, so this module follows that section step by step:
top-level gate, catch-up resolution, deletion, restart, recurring restarts, the occurrence
check and the ``never`` record, skips and dry-run, with the deliberate differences
(docs/behaviour.md#deliberate-differences): terminating objects are left alone, the
restart marker always changes, cron uses our DST rule, repeated warnings carry a dedupe
key and ``--max-delete-ttl`` guards deletions.

It holds the top-level gate, the deletion path (docs/behaviour.md#deletion) and the restart
path, one-off and recurring (docs/behaviour.md#restart, docs/behaviour.md#recurring-restarts):
one concept, read top to bottom. What the paths share (the pass state, the decisions it
builds, the relative timers) is :mod:`~lifecycle_controller.core.decision.passes`.

Nothing here reads the clock or talks to the API; the ledger is only read. Whatever the
annotations contain, decide() returns a decision rather than raising.
"""

from __future__ import annotations

from collections.abc import Mapping

from lifecycle_controller.core.decision import events
from lifecycle_controller.core.decision.delete_ttl import delete_at_ttl, refuse_ttl
from lifecycle_controller.core.decision.events import Event
from lifecycle_controller.core.decision.outcomes import (
    Action,
    Decision,
    DecisionSettings,
    Delete,
    Idle,
    Invalid,
    ObjectFacts,
    Operation,
)
from lifecycle_controller.core.decision.passes import (
    DELETE_RELATIVE,
    FORGET,
    RESTART_RELATIVE,
    DecisionPass,
    convert_relative,
)
from lifecycle_controller.core.objects import keys
from lifecycle_controller.core.objects.copies import is_annotation_copy
from lifecycle_controller.core.schedule.catchup import CatchUpMode, LedgerView
from lifecycle_controller.core.schedule.schedules import (
    CronSchedule,
    IntervalSchedule,
    Schedule,
    plan_recurring,
    requeue_after,
)
from lifecycle_controller.core.text.cron import CronError, ZoneError, load_zone, parse_cron
from lifecycle_controller.core.text.durations import (
    NS_PER_SECOND,
    DurationError,
    parse_restart_every,
)
from lifecycle_controller.core.text.gotext import go_parse_bool, go_quote
from lifecycle_controller.core.text.timestamps import (
    TimestampError,
    format_rfc3339_nano,
    parse_rfc3339,
)

__all__ = ["decide", "decide_deletion", "decide_restart"]


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
        return Idle(ledger_ops=(FORGET,), log="object is terminating; nothing to do")
    if not annotations:
        return Idle(ledger_ops=(FORGET,), log="no annotations")
    if not settings.act_on_annotation_copies and is_annotation_copy(
        facts.key.resource, facts.controller_owner
    ):
        # docs/annotations.md#annotation-copies: the owner's request, not this object's.
        return Idle(ledger_ops=(FORGET,), log="annotations copied by the owner; ignored")

    dry_run = settings.dry_run
    if keys.DRY_RUN in annotations:
        resource_dry_run = go_parse_bool(annotations[keys.DRY_RUN])
        if resource_dry_run is None:
            event = events.invalid_dry_run(annotations[keys.DRY_RUN])
            return Invalid(
                reason=event.reason,
                events=(event,),
                ledger_ops=(FORGET,),
                log=f"invalid dry-run {go_quote(annotations[keys.DRY_RUN])}: expected a boolean",
            )
        dry_run = dry_run or resource_dry_run

    early: list[Event] = []
    zone_value = annotations.get(keys.CRON_TIMEZONE, "")
    if zone_value and not annotations.get(keys.RESTART_CRON):
        early.append(events.ignored_cron_timezone(uid=facts.uid, value=zone_value))

    # Spelled out (an empty value counts as absent): this runs on every reconcile.
    get = annotations.get
    has_delete = bool(get(keys.DELETE_AT) or get(keys.DELETE_AFTER))
    has_restart = bool(
        get(keys.RESTART_AT)
        or get(keys.RESTART_AFTER)
        or get(keys.RESTART_CRON)
        or get(keys.RESTART_EVERY)
    )
    if has_delete and has_restart:
        event = events.conflicting_annotations()
        return Invalid(
            reason=event.reason,
            events=(*early, event),
            ledger_ops=(FORGET,),
            log="both delete and restart annotations; taking no action",
        )

    run = DecisionPass(
        annotations=annotations,
        facts=facts,
        now=now_ns,
        settings=settings,
        ledger=ledger,
        dry_run=dry_run,
        events=early,
    )
    if has_delete:
        return decide_deletion(run)
    if has_restart:
        return decide_restart(run)
    return Idle(events=tuple(early), ledger_ops=(FORGET,), log="no action annotations")


def decide_deletion(run: DecisionPass) -> Decision:
    problem = run.begin(Action.DELETE, run.settings.delete_catch_up)
    if problem is not None:
        return problem
    if run.get(keys.DELETE_AFTER):
        return convert_relative(run, DELETE_RELATIVE)

    value = run.get(keys.DELETE_AT)
    try:
        due = parse_rfc3339(value)
    except TimestampError as error:
        return run.invalid(
            events.invalid_timestamp("delete-at", str(error)), "invalid delete-at", str(error)
        )
    ttl = delete_at_ttl(due, annotations=run.annotations, facts=run.facts, now_ns=run.now)
    refusal = refuse_ttl(run.settings, annotation=keys.DELETE_AT, value=value, ttl_ns=ttl)
    if refusal is not None:  # docs/behaviour.md#max-delete-ttl: never expires by itself
        return run.invalid(refusal.event, refusal.log, refusal=refusal.refusal)

    allowed = run.allowed(run.opening(due), run.identity())
    if run.now < due:
        return run.wait(due, f"deletion scheduled at {value}")
    if (held := run.held(due)) is not None:
        return held
    if not allowed:
        return run.skip(due, run.recorded({keys.DELETE_AT: None}, None))
    run.announce(due, run.opening(due))  # first seen inside the lead time: warn before acting
    if run.dry_run:
        return run.dry(
            Operation.DELETE, events.dry_run_delete_now(), due, "dry-run: would delete now"
        )
    return Delete(
        uid=run.facts.uid,
        resource_version=run.facts.resource_version,
        on_success=run.outcome((events.deleted(value),), (), None),
        failure=events.DELETION_FAILURE,
        events=tuple(run.events),
        ledger_ops=tuple(run.ops),
        action=Action.DELETE,
        due_ns=run.opening(due),  # lateness counts from a window's opening
        log=f"deleting (delete-at {value})",
    )


_NO_FUTURE_OCCURRENCE = "cron expression has no future occurrence"


def decide_restart(run: DecisionPass) -> Decision:
    problem = run.begin(Action.RESTART, run.settings.restart_catch_up)
    if problem is not None:
        return problem
    facts = run.facts
    if not facts.key.resource.restartable:
        return run.invalid(events.unsupported_restart_kind(), "restart on an unsupported kind")
    if not facts.has_pod_template:
        return run.invalid(events.not_pod_spawner(), "restart without a Pod template")
    if run.get(keys.RESTART_AFTER):
        return convert_relative(run, RESTART_RELATIVE)

    if value := run.get(keys.RESTART_AT):
        try:
            due = parse_rfc3339(value)
        except TimestampError as error:
            return run.invalid(
                events.invalid_timestamp("restart-at", str(error)), "invalid restart-at", str(error)
            )
        allowed = run.allowed(run.opening(due), run.identity())
        if run.now < due:
            return run.wait(due, f"restart scheduled at {value}")
        if (held := run.held(due)) is not None:
            return held
        consumed = run.recorded({keys.RESTART_AT: None}, None)
        if not allowed:
            return run.skip(due, consumed)
        return run.restart(due, consumed)

    if expression := run.get(keys.RESTART_CRON):
        zone_name = run.get(keys.CRON_TIMEZONE) or "UTC"
        try:
            zone = load_zone(zone_name, local_zone=run.settings.local_zone)
        except ZoneError:
            return run.invalid(
                events.invalid_timezone(zone_name), "invalid cron-timezone", "unknown time zone"
            )
        try:
            spec = parse_cron(expression)
        except CronError as error:
            return run.invalid(events.invalid_cron(str(error)), "invalid restart-cron", str(error))
        schedule: Schedule = CronSchedule(spec, zone)
        if schedule.next_after(run.now) is None:
            return run.invalid(
                events.invalid_cron(_NO_FUTURE_OCCURRENCE),
                "invalid restart-cron",
                _NO_FUTURE_OCCURRENCE,
            )
        return _recurring(run, schedule)

    try:
        interval = parse_restart_every(run.get(keys.RESTART_EVERY))
    except DurationError as error:
        return run.invalid(
            events.invalid_restart_every(str(error)), "invalid restart-every", str(error)
        )
    return _recurring(run, IntervalSchedule(interval))


def _latest_occurrence(schedule: Schedule, last_ns: int, now_ns: int) -> int | None:
    """The latest occurrence in (last, now]: a doubling search back from now, then forward."""
    step = NS_PER_SECOND
    while True:
        lower = max(last_ns, now_ns - step)
        first = schedule.next_after(lower)
        if first is not None and first <= now_ns:
            break
        if lower == last_ns:
            return None
        step *= 2
    latest = first
    while (following := schedule.next_after(latest)) is not None and following <= now_ns:
        latest = following
    return latest


def _recurring(run: DecisionPass, schedule: Schedule) -> Decision:
    """docs/behaviour.md#recurring-restarts: start, wait, or act once on due occurrences."""
    anchor_value = run.get(keys.LAST_RESTART_TIMESTAMP)
    if not anchor_value:
        following = schedule.next_after(run.now)
        if run.dry_run:
            return run.dry(
                Operation.INITIALIZE, None, following, "dry-run: would initialize the schedule"
            )
        new_anchor = format_rfc3339_nano(run.now)
        changes = run.recorded({keys.LAST_RESTART_TIMESTAMP: new_anchor}, following)
        return run.patch(
            Operation.INITIALIZE,
            changes,
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
        return run.invalid(
            events.invalid_state(str(error)), "invalid last-restart-timestamp", str(error)
        )

    plan = plan_recurring(schedule, last, run.now)
    scheduled = plan.scheduled_ns
    allowed = run.allowed(run.opening(scheduled), run.identity())
    if plan.due and run.catch_up.mode is CatchUpMode.WINDOW:
        if run.windows is None:
            recent, allowed = schedule.recent_occurrence(
                last, run.now, run.catch_up.window_ns + run.held_for()
            )
        else:  # lateness from the latest occurrence's window opening
            latest = _latest_occurrence(schedule, last, run.now)
            allowed = latest is not None and run.in_time(run.opening(latest))
            recent = scheduled if latest is None else latest
        if allowed:
            scheduled = recent
    if not plan.due:
        return run.wait(scheduled, f"next recurring restart at {format_rfc3339_nano(scheduled)}")
    if (held := run.held(scheduled)) is not None:
        return held

    following = schedule.next_after(plan.anchor_ns)
    acknowledgement = run.recorded(
        {keys.LAST_RESTART_TIMESTAMP: format_rfc3339_nano(plan.anchor_ns)}, following
    )
    then = (FORGET, *run.arm_ops(run.identity(acknowledgement), following))
    requeue = None if following is None else requeue_after(following, run.now)
    if not allowed:
        return run.skip(scheduled, acknowledgement, then=then, requeue_ns=requeue)
    return run.restart(scheduled, acknowledgement, then=then, requeue_ns=requeue)
