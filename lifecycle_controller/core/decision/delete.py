"""The deletion path of decide() (docs/behaviour.md#deletion)."""

from __future__ import annotations

from lifecycle_controller.core.decision import events
from lifecycle_controller.core.decision.delete_ttl import delete_at_ttl, refuse_ttl
from lifecycle_controller.core.decision.outcomes import Action, Decision, Delete, Operation
from lifecycle_controller.core.decision.passes import (
    DELETE_RELATIVE,
    DecisionPass,
    convert_relative,
)
from lifecycle_controller.core.objects import keys
from lifecycle_controller.core.text.timestamps import TimestampError, parse_rfc3339

__all__ = ["decide_deletion"]


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
        return run.invalid(refusal.event, refusal.log)

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
