"""The restart path of decide(): one-off and recurring restarts.

See docs/behaviour.md#restart and docs/behaviour.md#recurring-restarts.
"""

from __future__ import annotations

from lifecycle_controller.core.decision import events
from lifecycle_controller.core.decision.outcomes import Action, Decision, Operation
from lifecycle_controller.core.decision.passes import (
    FORGET,
    RESTART_RELATIVE,
    DecisionPass,
    convert_relative,
)
from lifecycle_controller.core.objects import keys
from lifecycle_controller.core.schedule.catchup import CatchUpMode
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
from lifecycle_controller.core.text.timestamps import (
    TimestampError,
    format_rfc3339_nano,
    parse_rfc3339,
)

__all__ = ["decide_restart"]

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
    if plan.due and run.policy.mode is CatchUpMode.WINDOW:
        if run.windows is None:
            recent, allowed = schedule.recent_occurrence(last, run.now, run.policy.window_ns)
        else:  # lateness from the latest occurrence's window opening
            latest = _latest_occurrence(schedule, last, run.now)
            allowed = latest is not None and run.policy.within_window(run.opening(latest), run.now)
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
