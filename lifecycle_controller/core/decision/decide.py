"""decide(): one decision pass (docs/behaviour.md#decision-order), as a pure function.

The order of checks is the contract, so this module follows that section step by step:
top-level gate, catch-up resolution, deletion, restart, recurring restarts, the occurrence
check and the ``never`` record, skips and dry-run, with the deliberate differences
(docs/behaviour.md#deliberate-differences): terminating objects are left alone, the
restart marker always changes, cron uses our DST rule, repeated warnings carry a dedupe
key and ``--max-delete-ttl`` guards deletions.

This module holds the top-level gate; the deletion path is
:mod:`~lifecycle_controller.core.decision.delete`, the restart path
:mod:`~lifecycle_controller.core.decision.restart`, and what both share (the pass state, the
decisions it builds, the relative timers) :mod:`~lifecycle_controller.core.decision.passes`.

Nothing here reads the clock or talks to the API; the ledger is only read. Whatever the
annotations contain, decide() returns a decision rather than raising.
"""

from __future__ import annotations

from collections.abc import Mapping

from lifecycle_controller.core.decision import events
from lifecycle_controller.core.decision.delete import decide_deletion
from lifecycle_controller.core.decision.events import Event
from lifecycle_controller.core.decision.outcomes import (
    Decision,
    DecisionSettings,
    Idle,
    Invalid,
    ObjectFacts,
)
from lifecycle_controller.core.decision.passes import FORGET, DecisionPass
from lifecycle_controller.core.decision.restart import decide_restart
from lifecycle_controller.core.objects import keys
from lifecycle_controller.core.objects.copies import is_annotation_copy
from lifecycle_controller.core.schedule.catchup import LedgerView
from lifecycle_controller.core.text.gotext import go_parse_bool, go_quote

__all__ = ["decide"]


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
