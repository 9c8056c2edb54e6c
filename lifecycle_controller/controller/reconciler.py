"""One work item: read the cache, ask the core what to do, carry out that one decision.

``Reconciler.__call__(key)`` is what the workers run. It never decides (that is
:func:`lifecycle_controller.core.decide`) and never builds API requests (that is
:mod:`lifecycle_controller.controller.actions`); it sequences them:

1. read the object from the metadata cache (gone: forget its ledger arm, done);
2. ``decide()`` at ``now``; apply the decision's ledger operations and emit its Events;
3. a write (merge patch or delete) goes out as ONE guarded API call. A 409 Conflict is retried
   quietly (SPEC §2.3): re-read that one object from the API and decide again, a few times,
   before the decision's failure Warning is emitted and the error handed to the rate-limited
   retry;
4. on success: the outcome's Events and ledger operations, rollout-blocker warnings after a
   restart (SPEC §2.8), metrics, and the requeue delay the core asked for.

Deletes and restarts draw from the action budgets first (SPEC §2.12): over budget, the item
waits (Normal ``ActionThrottled`` once per occurrence) and is never dropped.
"""

from __future__ import annotations

from collections import OrderedDict
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any, Protocol

import structlog

from lifecycle_controller.controller.actions import delete_object, patch_object, rollout_blockers
from lifecycle_controller.controller.actions.restart import blocker_message
from lifecycle_controller.controller.cache import (
    CachedObject,
    MetadataCache,
    ObjectKey,
    object_facts,
)
from lifecycle_controller.controller.recorder import EventRecorder, ObjectRef
from lifecycle_controller.controller.workers import Result
from lifecycle_controller.core import (
    Action,
    Decision,
    Delete,
    DryRun,
    Event,
    Invalid,
    Ledger,
    ObjectFacts,
    Operation,
    Patch,
    Settings,
    Wait,
    WorkKey,
    decide,
    keys,
    should_enqueue_on_update,
)
from lifecycle_controller.core.timestamps import format_rfc3339_nano
from lifecycle_controller.kube import Conflict, KubeClient, KubeError, NotFound
from lifecycle_controller.machinery.budget import ActionBudget
from lifecycle_controller.machinery.clock import Clock

_log = structlog.get_logger(__name__)
NS = 1_000_000_000
THROTTLED = "ActionThrottled"


class NotLeading(Exception):
    """A write was about to happen without a fresh leader lease; retried later."""


class ReconcileMetrics(Protocol):
    """The metrics a reconcile feeds (:class:`~lifecycle_controller.serving.metrics.Metrics`)."""

    def count_action(self, action: str, kind: str, result: str) -> None: ...
    def count_misconfiguration(self, kind: str, reason: str) -> None: ...
    def observe_lateness(self, seconds: float) -> None: ...
    def set_next_action(
        self, key_id: str, action: str, kind: str, namespace: str, due_ts: float | None
    ) -> None: ...
    def forget_object(self, key_id: str) -> None: ...
    def set_ledger_arms(self, n: int) -> None: ...


class NoReconcileMetrics:
    def count_action(self, action: str, kind: str, result: str) -> None:
        pass

    def count_misconfiguration(self, kind: str, reason: str) -> None:
        pass

    def observe_lateness(self, seconds: float) -> None:
        pass

    def set_next_action(
        self, key_id: str, action: str, kind: str, namespace: str, due_ts: float | None
    ) -> None:
        pass

    def forget_object(self, key_id: str) -> None:
        pass

    def set_ledger_arms(self, n: int) -> None:
        pass


class _Markers:
    """The last restart marker written per object UID (bounded), so the next one differs."""

    def __init__(self, limit: int = 100_000) -> None:
        self._items: OrderedDict[str, str] = OrderedDict()
        self._limit = limit

    def get(self, uid: str) -> str | None:
        return self._items.get(uid)

    def remember(self, uid: str, marker: str) -> None:
        self._items[uid] = marker
        self._items.move_to_end(uid)
        if len(self._items) > self._limit:
            self._items.popitem(last=False)


@dataclass
class Reconciler:
    """Callable per work item; see the module docstring for the sequence."""

    cache: MetadataCache
    kube: KubeClient
    recorder: EventRecorder
    ledger: Ledger
    settings: Settings
    clock: Clock
    budgets: Mapping[Action, ActionBudget]
    may_write: Callable[[], bool] = lambda: True
    metrics: ReconcileMetrics = field(default_factory=NoReconcileMetrics)
    conflict_retries: int = 3
    _markers: _Markers = field(default_factory=_Markers)

    async def __call__(self, key: ObjectKey) -> Result | None:
        obj = self.cache.get(key)
        for attempt in range(self.conflict_retries + 1):
            if obj is None:
                self.forget(key)
                return None
            facts = self._facts(key, obj)
            decision = decide(
                annotations=obj.annotations,
                facts=facts,
                now_ns=self.clock.now_ns(),
                settings=self.settings,
                ledger=self.ledger,
            )
            self.ledger.apply(facts.key, decision.ledger_ops)
            self.metrics.set_ledger_arms(len(self.ledger))
            self._log_decision(decision)
            await self._emit(key, obj, decision.events)
            self._track_next_action(key, decision)
            if not isinstance(decision, Patch | Delete):
                return self._finish_without_write(key, decision)
            throttled = await self._throttle(key, obj, decision)
            if throttled is not None:
                return throttled
            if not self.may_write():
                raise NotLeading("leader lease not fresh; write postponed")
            try:
                response = await self._write(key, obj, decision)
            except Conflict as error:
                if attempt < self.conflict_retries:
                    _log.debug("conflict; re-reading and deciding again", attempt=attempt + 1)
                    obj = await self._reread(key)
                    continue
                await self._fail(key, obj, decision, error)
                raise
            except NotFound:
                if isinstance(decision, Delete):
                    response = None
                else:
                    self.forget(key)
                    return None
            except KubeError as error:
                await self._fail(key, obj, decision, error)
                raise
            return await self._succeed(key, obj, decision, response)
        raise AssertionError("unreachable")  # pragma: no cover

    # ------------------------------------------------------------------ reading

    def _facts(self, key: ObjectKey, obj: CachedObject) -> ObjectFacts:
        return object_facts(key.resource, obj, restart_marker=self._markers.get(obj.uid))

    async def _reread(self, key: ObjectKey) -> CachedObject | None:
        """The object's current metadata straight from the API (after a conflict)."""
        try:
            fresh = await self.kube.get_metadata(key.resource, key.namespace, key.name)
        except NotFound:
            return None
        obj = CachedObject.from_metadata(fresh.get("metadata") or {})
        self._refresh_cache(key, None, obj)
        return obj

    def _refresh_cache(
        self, key: ObjectKey, decided_on: CachedObject | None, fresh: CachedObject
    ) -> None:
        """Store what a write returned, unless the informer already stored something newer."""
        current = self.cache.get(key)
        if (
            decided_on is not None
            and current is not None
            and current is not decided_on
            and (current.resource_version != decided_on.resource_version)
        ):
            return
        if fresh.annotated:
            self.cache.put(key, fresh)
        else:
            self.cache.delete(key)

    # ------------------------------------------------------------------ acting

    async def _throttle(
        self, key: ObjectKey, obj: CachedObject, decision: Patch | Delete
    ) -> Result | None:
        operation = Operation.DELETE if isinstance(decision, Delete) else decision.operation
        if operation not in (Operation.DELETE, Operation.RESTART) or decision.action is None:
            return None
        budget = self.budgets.get(decision.action)
        wait = budget.take() if budget is not None else 0.0
        if wait <= 0:
            return None
        self.metrics.count_action(decision.action.value, key.resource.kind, "throttled")
        per_minute = (
            "--max-deletes-per-minute"
            if decision.action is Action.DELETE
            else ("--max-restarts-per-minute")
        )
        message = (
            f"The {decision.action.value} is due but waits for the action budget "
            f"({per_minute}); it will run as soon as the budget allows."
        )
        dedupe = f"{decision.action.value}@{decision.due_ns}"
        await self.recorder.record(
            self._ref(key, obj), "Normal", THROTTLED, message, dedupe_key=dedupe
        )
        _log.info("action throttled by budget", action=decision.action.value, wait_s=wait)
        return Result(requeue_after=wait)

    async def _write(
        self, key: ObjectKey, obj: CachedObject, decision: Patch | Delete
    ) -> dict[str, Any] | None:
        if isinstance(decision, Delete):
            deleted = await delete_object(
                self.kube,
                key.resource,
                key.namespace,
                key.name,
                uid=decision.uid,
                resource_version=decision.resource_version,
            )
            return {} if deleted else None
        return await patch_object(
            self.kube,
            key.resource,
            key.namespace,
            key.name,
            decision.body,
            resource_version=obj.resource_version,
        )

    async def _succeed(
        self,
        key: ObjectKey,
        obj: CachedObject,
        decision: Patch | Delete,
        response: dict[str, Any] | None,
    ) -> Result | None:
        outcome = decision.on_success
        kind = key.resource.kind
        changed_decision_input = False
        self.ledger.apply(self._work_key(key), outcome.ledger_ops)
        self.metrics.set_ledger_arms(len(self.ledger))
        if isinstance(decision, Delete):
            self.cache.delete(key)
            self.metrics.forget_object(self._key_id(key))
        elif response is not None:
            fresh = CachedObject.from_metadata(response.get("metadata") or {})
            self._refresh_cache(key, obj, fresh)
            # The informer's event for this write is now compared with the refreshed entry and
            # dropped, so a write that changed what decides (a consumed restart-at uncovering
            # restart-every, REFERENCE §2.11; a new anchor) must ask for the pass that event
            # would have run. That pass also publishes the next due time (the metric).
            changed_decision_input = should_enqueue_on_update(obj.annotations, fresh.annotations)
        await self._emit(key, obj, outcome.events)
        operation = Operation.DELETE if isinstance(decision, Delete) else decision.operation
        if decision.action is not None:
            if operation in (Operation.DELETE, Operation.RESTART):
                self.metrics.count_action(decision.action.value, kind, "success")
                if decision.due_ns is not None:
                    lateness = (self.clock.now_ns() - decision.due_ns) / NS
                    self.metrics.observe_lateness(lateness)
            elif operation is Operation.SKIP:
                self.metrics.count_action(decision.action.value, kind, "skipped")
        if operation is Operation.RESTART and response:
            await self._after_restart(key, obj, response)
        _log.info("write succeeded", operation=operation.value)
        if changed_decision_input:
            return Result(requeue_after=1 / NS)
        if outcome.requeue_after_ns:
            return Result(requeue_after=max(outcome.requeue_after_ns, 1) / NS)
        return None

    async def _after_restart(
        self, key: ObjectKey, obj: CachedObject, response: dict[str, Any]
    ) -> None:
        template = ((response.get("spec") or {}).get("template") or {}).get("metadata") or {}
        marker = (template.get("annotations") or {}).get(keys.RESTARTED_AT)
        if isinstance(marker, str):
            self._markers.remember(obj.uid, marker)
        reasons = rollout_blockers(response)
        if reasons:
            await self.recorder.record(
                self._ref(key, obj), "Warning", "RolloutBlocked", blocker_message(reasons)
            )

    async def _fail(
        self, key: ObjectKey, obj: CachedObject, decision: Patch | Delete, error: KubeError
    ) -> None:
        if decision.failure is not None:
            await self._emit(key, obj, (decision.failure.event(str(error)),))
        if decision.action is not None:
            self.metrics.count_action(decision.action.value, key.resource.kind, "error")
        _log.warning("write failed", error=str(error))

    def _finish_without_write(self, key: ObjectKey, decision: Decision) -> Result | None:
        kind = key.resource.kind
        if isinstance(decision, Invalid):
            self.metrics.count_misconfiguration(kind, _misconfiguration_reason(decision.reason))
        elif (
            isinstance(decision, DryRun)
            and decision.action is not None
            and decision.operation in (Operation.DELETE, Operation.RESTART, Operation.SKIP)
        ):
            self.metrics.count_action(decision.action.value, kind, "dry_run")
        if isinstance(decision, Wait):
            return Result(requeue_after=max(decision.requeue_after_ns, 1) / NS)
        return None

    # ------------------------------------------------------------------ bookkeeping

    def forget(self, key: ObjectKey) -> None:
        """The object is gone: drop its ledger arm and its next-action metric."""
        self.ledger.forget(self._work_key(key))
        self.metrics.set_ledger_arms(len(self.ledger))
        self.metrics.forget_object(self._key_id(key))

    @staticmethod
    def _work_key(key: ObjectKey) -> WorkKey:
        return WorkKey(key.resource.group, key.resource.kind, key.namespace, key.name)

    @staticmethod
    def _key_id(key: ObjectKey) -> str:
        return f"{key.resource.key}/{key.namespace or ''}/{key.name}"

    def _track_next_action(self, key: ObjectKey, decision: Decision) -> None:
        key_id = self._key_id(key)
        for action in Action:
            due = (
                decision.due_ns
                if isinstance(decision, Wait) and decision.action is action
                else None
            )
            self.metrics.set_next_action(
                key_id,
                action.value,
                key.resource.kind,
                key.namespace or "",
                None if due is None else due / NS,
            )

    @staticmethod
    def _ref(key: ObjectKey, obj: CachedObject) -> ObjectRef:
        return ObjectRef(
            api_version=key.resource.api_version,
            kind=key.resource.kind,
            name=key.name,
            namespace=key.namespace,
            uid=obj.uid,
            resource_version=obj.resource_version,
        )

    async def _emit(self, key: ObjectKey, obj: CachedObject, events: tuple[Event, ...]) -> None:
        for event in events:
            await self.recorder.record(
                self._ref(key, obj),
                "Warning" if event.type.value == "Warning" else "Normal",
                event.reason,
                event.message,
                dedupe_key=event.dedupe_key,
            )

    @staticmethod
    def _log_decision(decision: Decision) -> None:
        fields: dict[str, Any] = {"decision": type(decision).__name__}
        if decision.action is not None:
            fields["action"] = decision.action.value
        if decision.due_ns is not None:
            fields["due"] = format_rfc3339_nano(decision.due_ns)
        if isinstance(decision, Patch | DryRun):
            fields["operation"] = decision.operation.value
        if isinstance(decision, Wait):
            fields["requeue_after_s"] = decision.requeue_after_ns / NS
        _log.info(decision.log or "decided", **fields)


_MISCONFIGURATION_REASONS = {
    "InvalidAnnotation": "invalid_annotation",
    "InvalidAnnotationValue": "invalid_annotation",
    "InvalidTimezone": "invalid_timezone",
    "InvalidState": "invalid_state",
    "NotPodSpawner": "not_pod_spawner",
    "UnsupportedRestartKind": "unsupported_restart_kind",
    "ConflictingAnnotations": "conflicting_annotations",
    "DeleteTTLExceeded": "delete_ttl_exceeded",
}


def _misconfiguration_reason(event_reason: str) -> str:
    return _MISCONFIGURATION_REASONS.get(event_reason, "invalid_annotation")
