"""What every decision leaves behind besides its write: Events, metrics, ledger and log.

The reconciler decides once per pass (:func:`~lifecycle_controller.core.decision.decide` plus the
guardrails of :mod:`lifecycle_controller.core.decision.guardrails`) and hands the **final** decision
here, so the metrics that describe decisions are set in one place, from the decision that
really stands:

* :meth:`Accounting.decided`: the decision's ``never``-ledger operations, its Events (with
  its action, due time and dry-run filled in) and a hold's Event, the next-action gauge
  (``lifecycle_next_action_timestamp_seconds``: the due time of a waiting or held action), and the
  counters of decisions without a write (misconfigurations, dry runs, throttled actions);
* :meth:`Accounting.written`: after a write succeeded, the outcome's ledger operations and
  Events, the action counters and the lateness histogram (how long after its due time the
  action went);
* :meth:`Accounting.failed`: after a write failed, the decision's failure Warning and the
  error counter;
* :meth:`Accounting.gone`: the object is gone, its ledger arm and metric series too.

One log line at info per action (or hold, or problem); the decision detail is at debug.
Every Event text comes from :mod:`lifecycle_controller.core.decision.events`.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from typing import Any, Protocol

import structlog
from cachetools import LRUCache

from lifecycle_controller.controller.events.recorder import EventRecorder
from lifecycle_controller.core import (
    Action,
    Decision,
    Delete,
    DryRun,
    Event,
    Invalid,
    Ledger,
    LedgerOp,
    ObjectKey,
    ObjectRef,
    Operation,
    Patch,
    Wait,
)
from lifecycle_controller.core.decision import events as catalogue
from lifecycle_controller.core.decision.events import misconfiguration_label
from lifecycle_controller.core.decision.guardrails import Hold, HoldReason, acting_operation
from lifecycle_controller.core.objects.keys import KNOWN_KEYS, PREFIX
from lifecycle_controller.core.objects.unknown_keys import describe_unknown, unknown_keys
from lifecycle_controller.core.text.durations import NS_PER_SECOND
from lifecycle_controller.core.text.timestamps import format_rfc3339_nano

__all__ = ["Accounting", "ActionMetrics", "NoActionMetrics"]

_log = structlog.get_logger("lifecycle_controller.controller.reconcile.reconciler")
#: Every action with its label value (iterating the enum and reading ``.value`` is not free).
_ACTIONS = tuple((action, action.value) for action in Action)
_KNOWN = frozenset(KNOWN_KEYS)


class ActionMetrics(Protocol):
    """The metrics decisions feed (:class:`~lifecycle_controller.serving.metrics.Metrics`)."""

    def count_action(self, action: str, kind: str, result: str) -> None: ...
    def count_action_source(self, action: str, source: str, result: str) -> None: ...
    def count_misconfiguration(self, kind: str, reason: str) -> None: ...
    def observe_lateness(self, seconds: float) -> None: ...
    def set_next_action(
        self, key_id: str, action: str, kind: str, namespace: str, due_ts: float | None
    ) -> None: ...
    def drop_object_series(self, key_id: str) -> None: ...
    def set_ledger_arms(self, n: int) -> None: ...


class NoActionMetrics:
    """The default :class:`ActionMetrics`: records nothing."""

    def count_action(self, action: str, kind: str, result: str) -> None:
        pass

    def count_action_source(self, action: str, source: str, result: str) -> None:
        pass

    def count_misconfiguration(self, kind: str, reason: str) -> None:
        pass

    def observe_lateness(self, seconds: float) -> None:
        pass

    def set_next_action(
        self, key_id: str, action: str, kind: str, namespace: str, due_ts: float | None
    ) -> None:
        pass

    def drop_object_series(self, key_id: str) -> None:
        pass

    def set_ledger_arms(self, n: int) -> None:
        pass


@dataclass
class Accounting:
    """Events, metrics, ledger and log lines of decisions (see the module docstring)."""

    recorder: EventRecorder
    ledger: Ledger
    now_ns: Callable[[], int]
    metrics: ActionMetrics = field(default_factory=NoActionMetrics)
    #: The unknown keys already logged per object UID (each object's set is logged once).
    _told_unknown: LRUCache[str, tuple[str, ...]] = field(
        default_factory=lambda: LRUCache(maxsize=10_000)
    )
    #: The next action last published per object (key id): a pass that decides the same
    #: (a requeue, the write of a due action) does not publish it again. Dropped when gone.
    _published: dict[str, tuple[Action | None, int | None]] = field(default_factory=dict)

    def note_unknown_keys(self, key: ObjectKey, uid: str, annotations: Iterable[str]) -> None:
        """Log, once per object and set of keys, the lifecycle keys nothing reads (typos);
        called for every object the informers see, since one with only a misspelt key is
        never reconciled."""
        for annotation in annotations:
            if annotation not in _KNOWN:
                break
        else:
            return  # the common case: every key is known, nothing is compared
        found = unknown_keys(annotations)
        names = tuple(key for key, _ in found)
        if not names or self._told_unknown.get(uid) == names:
            return
        self._told_unknown[uid] = names
        for annotation, nearest in found:
            _log.warning(
                "unknown lifecycle annotation ignored",
                **key.log_context(),
                annotation=annotation,
                did_you_mean=nearest and PREFIX + nearest,
                detail=describe_unknown(annotation, nearest),
            )

    # ------------------------------------------------------------------ the decision

    async def decided(self, ref: ObjectRef, decision: Decision, final: Decision) -> None:
        """``decision`` is core's answer, ``final`` what stands (the same, or its Hold)."""
        key = ref.key
        self.apply_ledger(key, decision.ledger_ops)
        _log_decision(final)
        await self.emit(ref, decision.events, decision)
        if isinstance(final, Hold):
            for event in final.events:
                await self.recorder.record(ref, event)
        self._publish_next_action(key, final)
        kind = key.resource.kind
        if isinstance(final, Invalid):
            self.metrics.count_misconfiguration(kind, misconfiguration_label(final.reason))
        elif (
            isinstance(final, DryRun)
            and final.action is not None
            and final.operation
            in (
                Operation.DELETE,
                Operation.RESTART,
                Operation.SKIP,
            )
        ):
            self._count(final, final.action, kind, "dry_run")
        elif isinstance(final, Hold) and final.reason is HoldReason.BUDGET and final.action:
            self._count(final, final.action, kind, "throttled")

    def _count(self, decision: Decision, action: Action, kind: str, result: str) -> None:
        """One due action's outcome, by kind and by source (annotation or policy)."""
        self.metrics.count_action(action.value, kind, result)
        source = "annotation" if decision.policy is None else "policy"
        self.metrics.count_action_source(action.value, source, result)

    async def emit(
        self, ref: ObjectRef, events: Iterable[Event], decision: Decision | None = None
    ) -> None:
        """Record ``events``; those of a ``decision`` carry its action, due time and dry-run."""
        for event in events:
            if decision is not None:
                event = catalogue.about(
                    event,
                    action=None if decision.action is None else decision.action.value,
                    due_ns=decision.due_ns,
                    dry_run=isinstance(decision, DryRun),
                )
            await self.recorder.record(ref, event)

    def _publish_next_action(self, key: ObjectKey, final: Decision) -> None:
        """The due time of a waiting (or held) action, per action; None for the others."""
        due_ns = final.due_ns if isinstance(final, (Wait, Hold)) else None
        if isinstance(final, Hold) and final.until_ns is not None:
            due_ns = final.until_ns  # when the held action will go
        published = (None if due_ns is None else final.action, due_ns)
        before = self._published.get(key.id)
        if before == published:
            return
        self._published[key.id] = published
        for action, value in _ACTIONS:
            due = due_ns if published[0] is action else None
            # The first publication sets every action (a series another leadership term left
            # is cleared); later ones only the actions whose due time changed.
            if before is None or due != (before[1] if before[0] is action else None):
                self.metrics.set_next_action(
                    key.id,
                    value,
                    key.resource.kind,
                    key.namespace or "",
                    None if due is None else due / NS_PER_SECOND,
                )

    # ------------------------------------------------------------------ the write

    async def written(self, ref: ObjectRef, decision: Patch | Delete) -> None:
        """The write succeeded (for a delete, the object may have been gone already)."""
        key = ref.key
        outcome = decision.on_success
        self.apply_ledger(key, outcome.ledger_ops)
        await self.emit(ref, outcome.events, decision)
        operation = Operation.DELETE if isinstance(decision, Delete) else decision.operation
        if decision.action is not None:
            kind = key.resource.kind
            if acting_operation(decision) is not None:
                self._count(decision, decision.action, kind, "success")
                if decision.due_ns is not None:
                    lateness = (self.now_ns() - decision.due_ns) / NS_PER_SECOND
                    self.metrics.observe_lateness(lateness)
            elif operation is Operation.SKIP:
                self._count(decision, decision.action, kind, "skipped")
        _log.info("write succeeded", operation=operation.value)

    async def failed(self, ref: ObjectRef, decision: Patch | Delete, error: Exception) -> None:
        """The write failed: the decision's failure Warning and the error counter."""
        if decision.failure is not None:
            await self.emit(ref, (decision.failure.event(str(error)),), decision)
        if decision.action is not None:
            self._count(decision, decision.action, ref.key.resource.kind, "error")
        _log.warning("write failed", error=str(error))

    # ------------------------------------------------------------------ the ledger

    def apply_ledger(self, key: ObjectKey, ops: tuple[LedgerOp, ...]) -> None:
        if ops:
            self.ledger.apply(key, ops)
            self.metrics.set_ledger_arms(len(self.ledger))

    def gone(self, key: ObjectKey) -> None:
        """The object is gone: drop its ledger arm and its next-action series."""
        self.ledger.disarm(key)
        self.metrics.set_ledger_arms(len(self.ledger))
        self._published.pop(key.id, None)
        self.metrics.drop_object_series(key.id)


def _log_decision(decision: Decision) -> None:
    if not isinstance(decision, (Invalid, Hold, DryRun)) and not _log.is_enabled_for(logging.DEBUG):
        return  # a debug line nobody reads: its fields are not built either
    fields: dict[str, Any] = {"decision": type(decision).__name__}
    if decision.action is not None:
        fields["action"] = decision.action.value
    if decision.due_ns is not None:
        fields["due"] = format_rfc3339_nano(decision.due_ns)
    if isinstance(decision, (Patch, DryRun)):
        fields["operation"] = decision.operation.value
    if isinstance(decision, (Wait, Hold)):
        fields["requeue_after_s"] = decision.requeue_after_ns / NS_PER_SECOND
    if isinstance(decision, Hold):
        fields["held_by"] = decision.reason.value
    if isinstance(decision, Invalid):
        _log.warning(
            "invalid lifecycle annotations; nothing done",
            reason=decision.reason,
            error=decision.log,
            **fields,
        )
        return
    if decision.log:
        fields["detail"] = decision.log
    if isinstance(decision, (Hold, DryRun)):
        _log.info("decided", **fields)
    else:
        _log.debug("decided", **fields)
