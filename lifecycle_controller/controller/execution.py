"""Carrying out one decision: the guarded write, its Events, its metrics, its guardrails.

The reconciler (:mod:`~lifecycle_controller.controller.reconciler`) decides what to do; this
module is the one place that does it and accounts for it:

* **guardrails before a write**, in this order, for deletions and restarts (each one makes
  the item wait, never drops it; docs/behaviour.md#blast-radius-controls):
  the open circuit breaker (Warning ``ActionsHalted`` once per trip,
  :mod:`~lifecycle_controller.controller.breaker`); for restarts the per-object restart
  guard (Normal ``RestartDeferred`` once per occurrence) and the restart jitter
  (:mod:`lifecycle_controller.core.pacing`) and a rollout slot (Normal ``RestartQueued``
  once, :mod:`~lifecycle_controller.controller.rollouts`); the per-minute action budgets
  (Normal ``ActionThrottled`` once per occurrence); the breaker's window (the (N+1)th
  action trips it instead of being sent); the leader's fencing check
  (:class:`~lifecycle_controller.controller.result.NotLeading`);
* **the write**: exactly one guarded API call. A merge patch carries the
  ``metadata.resourceVersion`` it was decided on, a delete carries UID and resourceVersion
  preconditions, so a stale read costs a retry, never a wrong action
  (docs/behaviour.md#guarded-writes). A delete that finds the object gone counts as done; a
  patch that finds it gone drops the object;
* **after the write**: the outcome's Events, the action and lateness metrics, the restart
  marker memory (so the next marker differs), the rollout-blocker Warning and the rollout
  verification after a restart;
* **after a failure**: the decision's failure Warning and the error metric, unless the
  caller retries a conflict quietly.

Every Event text comes from :mod:`lifecycle_controller.core.events`.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any, Protocol

import structlog
from cachetools import LRUCache

from lifecycle_controller.controller.breaker import CircuitBreaker
from lifecycle_controller.controller.cache import CachedObject, MetadataCache
from lifecycle_controller.controller.recorder import EventRecorder
from lifecycle_controller.controller.result import NotLeading, Result
from lifecycle_controller.controller.rollouts import RolloutTracker
from lifecycle_controller.core import (
    Action,
    Decision,
    Delete,
    DryRun,
    Event,
    Invalid,
    ObjectKey,
    ObjectRef,
    Operation,
    Patch,
    Wait,
    keys,
)
from lifecycle_controller.core import events as catalogue
from lifecycle_controller.core.pacing import last_restart_ns, restart_not_before_ns
from lifecycle_controller.core.rollout import restart_marker_of, rollout_blockers
from lifecycle_controller.kube import Conflict, KubeClient, KubeError, NotFound
from lifecycle_controller.machinery.budget import ActionBudget
from lifecycle_controller.machinery.clock import Clock

__all__ = ["ActionMetrics", "Executed", "Executor", "NoActionMetrics", "RestartPacing", "guarded"]

_log = structlog.get_logger(__name__)
NS = 1_000_000_000
_ACTING = (Operation.DELETE, Operation.RESTART)
#: How soon an action waits when the breaker's window is full only with actions in flight.
BREAKER_SETTLE_S = 0.2
#: How soon an item held by the breaker or waiting for a rollout slot is looked at again
#: when nothing wakes it earlier.
HELD_RECHECK_S = 30.0


class ActionMetrics(Protocol):
    """The metrics execution feeds (:class:`~lifecycle_controller.serving.metrics.Metrics`)."""

    def count_action(self, action: str, kind: str, result: str) -> None: ...
    def count_misconfiguration(self, kind: str, reason: str) -> None: ...
    def observe_lateness(self, seconds: float) -> None: ...
    def set_next_action(
        self, key_id: str, action: str, kind: str, namespace: str, due_ts: float | None
    ) -> None: ...
    def forget_object(self, key_id: str) -> None: ...
    def set_ledger_arms(self, n: int) -> None: ...


class NoActionMetrics:
    """The default :class:`ActionMetrics`: records nothing."""

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


def guarded(
    patch: Mapping[str, Any], resource_version: str, *, uid: str | None = None
) -> dict[str, Any]:
    """A copy of ``patch`` with ``metadata.resourceVersion`` (and ``uid``, if given) set,
    other metadata kept."""
    body = dict(patch)
    metadata = dict(body.get("metadata") or {})
    metadata["resourceVersion"] = resource_version
    if uid is not None:
        metadata["uid"] = uid
    body["metadata"] = metadata
    return body


def operation_of(decision: Patch | Delete) -> Operation:
    return Operation.DELETE if isinstance(decision, Delete) else decision.operation


@dataclass(frozen=True, slots=True)
class Executed:
    """How a write decision ended when it did not raise.

    ``result`` is what the reconcile returns; ``fresh`` is the object the patch returned
    (None for deletes, throttled actions and objects that turned out to be gone); ``gone``
    says a patch found the object deleted.
    """

    result: Result | None
    fresh: CachedObject | None = None
    gone: bool = False


@dataclass(frozen=True, slots=True)
class RestartPacing:
    """``--min-restart-interval`` and ``--restart-jitter`` in nanoseconds (0 = off)."""

    min_interval_ns: int = 0
    jitter_ns: int = 0


@dataclass
class Executor:
    """Carries out write decisions and accounts for every decision (see the module doc)."""

    cache: MetadataCache
    kube: KubeClient
    recorder: EventRecorder
    clock: Clock
    budgets: Mapping[Action, ActionBudget]
    may_write: Callable[[], bool] = lambda: True
    metrics: ActionMetrics = field(default_factory=NoActionMetrics)
    breaker: CircuitBreaker | None = None
    pacing: RestartPacing = field(default_factory=RestartPacing)
    rollouts: RolloutTracker | None = None
    # The last restart marker written per object UID, so the next one differs.
    _markers: LRUCache[str, str] = field(default_factory=lambda: LRUCache(maxsize=100_000))
    # When this process last restarted the object with a UID (the marker has whole seconds).
    _restarted_ns: LRUCache[str, int] = field(default_factory=lambda: LRUCache(maxsize=100_000))

    # ------------------------------------------------------------------ facts

    def restart_marker(self, uid: str) -> str | None:
        """The restart marker this process last wrote on the object with ``uid``."""
        return self._markers.get(uid)

    # ------------------------------------------------------------------ Events

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

    # ------------------------------------------------------------------ decisions without a write

    def settle(self, key: ObjectKey, decision: Decision) -> Result | None:
        """Metrics and the requeue of a decision that writes nothing."""
        kind = key.resource.kind
        if isinstance(decision, Invalid):
            label = catalogue.misconfiguration_label(decision.reason)
            self.metrics.count_misconfiguration(kind, label)
        elif (
            isinstance(decision, DryRun)
            and decision.action is not None
            and decision.operation in (*_ACTING, Operation.SKIP)
        ):
            self.metrics.count_action(decision.action.value, kind, "dry_run")
        if isinstance(decision, Wait):
            return Result(
                requeue_after=max(decision.requeue_after_ns, 1) / NS,
                order=decision.scheduled_ns or 0,
            )
        return None

    def publish_next_action(self, key: ObjectKey, decision: Decision) -> None:
        """``lifecycle_next_action_timestamp_seconds``: each waiting action's due time."""
        for action in Action:
            due = (
                decision.due_ns
                if isinstance(decision, Wait) and decision.action is action
                else None
            )
            self.metrics.set_next_action(
                key.id,
                action.value,
                key.resource.kind,
                key.namespace or "",
                None if due is None else due / NS,
            )

    def forget(self, key: ObjectKey) -> None:
        """The object is gone: drop its next-action series and its place in a rollout queue."""
        self.metrics.forget_object(key.id)
        if self.rollouts is not None:
            self.rollouts.forget(key)

    # ------------------------------------------------------------------ writes

    async def carry_out(
        self,
        key: ObjectKey,
        obj: CachedObject,
        decision: Patch | Delete,
        *,
        quiet_conflict: bool,
    ) -> Executed:
        """Guardrails, the one guarded write, then its accounting.

        Raises :class:`~lifecycle_controller.kube.Conflict` when the object changed since it
        was read (after the failure Warning, unless ``quiet_conflict``), any other
        :class:`~lifecycle_controller.kube.KubeError` after the failure Warning, and
        :class:`NotLeading` when this replica may not write.
        """
        ref = ObjectRef(key, obj.uid, obj.resource_version)
        acting = operation_of(decision) in _ACTING and decision.action is not None
        restart = acting and operation_of(decision) is Operation.RESTART
        if acting:
            waiting = await self._held(key, ref, decision)
            if waiting is None and restart:
                waiting = await self._paced(key, obj, ref, decision)
            if waiting is not None:
                return Executed(waiting)
        slot = False
        if restart and self.rollouts is not None:
            if not self.rollouts.try_start(key, decision.due_ns):
                await self.recorder.record(
                    ref, catalogue.restart_queued(self.rollouts.limit, decision.due_ns)
                )
                _log.info("restart queued for a rollout slot", limit=self.rollouts.limit)
                return Executed(Result(requeue_after=HELD_RECHECK_S))
            slot = True
        admitted = False
        try:
            throttled = await self._throttle(key, ref, decision)
            if throttled is not None:
                return Executed(throttled)
            if acting and self.breaker is not None:
                verdict = self.breaker.admit()
                if verdict is None:  # full only with actions in flight: look again soon
                    return Executed(Result(requeue_after=BREAKER_SETTLE_S))
                if not verdict:
                    await self.breaker.trip()
                    return Executed(await self._held(key, ref, decision))
                admitted = True
            if not self.may_write():
                raise NotLeading("leader lease not fresh; write postponed")
            try:
                response = await self._write(key, obj, decision)
            except NotFound:
                if isinstance(decision, Patch):
                    return Executed(None, gone=True)  # nothing left to patch
                response = None  # a delete that finds the object gone is done
            except Conflict as error:
                if not quiet_conflict:
                    await self._fail(key, ref, decision, error)
                raise
            except KubeError as error:
                await self._fail(key, ref, decision, error)
                raise
            if admitted and self.breaker is not None:
                self.breaker.settle(carried_out=True)
            admitted = slot = False
            return await self._succeed(key, obj, ref, decision, response)
        finally:
            if admitted and self.breaker is not None:
                self.breaker.settle(carried_out=False)
            if slot and self.rollouts is not None:
                self.rollouts.abandon(key)

    async def _held(self, key: ObjectKey, ref: ObjectRef, decision: Decision) -> Result | None:
        """The breaker is open: the action waits for the reset (Warning once per trip)."""
        breaker = self.breaker
        if breaker is None or not breaker.is_open:
            return None
        state = breaker.state
        breaker.hold(key)
        halted = catalogue.actions_halted(state.actions, breaker.window_ns, state.tripped_at)
        await self.emit(ref, (halted,), decision)
        _log.info("action held by the open circuit breaker", tripped_at=state.tripped_at)
        return Result(requeue_after=HELD_RECHECK_S)

    async def _paced(
        self, key: ObjectKey, obj: CachedObject, ref: ObjectRef, decision: Patch | Delete
    ) -> Result | None:
        """``--min-restart-interval`` and ``--restart-jitter``: the restart may have to wait."""
        pacing = self.pacing
        if pacing.min_interval_ns <= 0 and pacing.jitter_ns <= 0:
            return None
        last = None
        if pacing.min_interval_ns > 0:
            last = last_restart_ns(
                (
                    obj.annotations.get(keys.LAST_RESTART_TIMESTAMP),
                    self._markers.get(obj.uid),
                    await self._template_marker(key),
                )
            )
            exact = self._restarted_ns.get(obj.uid)
            if exact is not None and (last is None or exact > last):
                last = exact
        jittered, guarded = restart_not_before_ns(
            due_ns=decision.due_ns,
            uid=obj.uid,
            last_restart=last,
            min_interval_ns=pacing.min_interval_ns,
            jitter_max_ns=pacing.jitter_ns,
        )
        now = self.clock.now_ns()
        run_at = max(t for t in (jittered, guarded, now) if t is not None)
        if run_at <= now:
            return None
        if guarded is not None and last is not None and guarded > now:
            await self.recorder.record(
                ref,
                catalogue.restart_deferred(last_ns=last, run_at_ns=run_at, due_ns=decision.due_ns),
            )
            _log.info(
                "restart deferred by the minimum restart interval", wait_s=(run_at - now) / NS
            )
        else:
            _log.info("restart delayed by its jitter", wait_s=(run_at - now) / NS)
        return Result(requeue_after=(run_at - now) / NS)

    async def _template_marker(self, key: ObjectKey) -> str | None:
        """The workload's Pod-template restart marker, read from the API (guard on only)."""
        try:
            return restart_marker_of(
                await self.kube.get(key.resource, key.namespace, key.name), keys.RESTARTED_AT
            )
        except KubeError as error:
            _log.warning("workload unreadable for the restart guard", error=str(error))
            return None

    async def _throttle(
        self, key: ObjectKey, ref: ObjectRef, decision: Patch | Delete
    ) -> Result | None:
        if operation_of(decision) not in _ACTING or decision.action is None:
            return None
        budget = self.budgets.get(decision.action)
        wait = budget.take() if budget is not None else 0.0
        if wait <= 0:
            return None
        action = decision.action.value
        self.metrics.count_action(action, key.resource.kind, "throttled")
        await self.recorder.record(ref, catalogue.action_throttled(action, decision.due_ns))
        _log.info("action throttled by budget", action=action, wait_s=wait)
        return Result(requeue_after=wait)

    async def _write(
        self, key: ObjectKey, obj: CachedObject, decision: Patch | Delete
    ) -> dict[str, Any] | None:
        if isinstance(decision, Delete):
            await self.kube.delete(
                key.resource,
                key.namespace,
                key.name,
                uid=decision.uid,
                resource_version=decision.resource_version,
            )
            return None
        body = guarded(decision.body, obj.resource_version)
        return await self.kube.merge_patch(key.resource, key.namespace, key.name, body)

    async def _succeed(
        self,
        key: ObjectKey,
        obj: CachedObject,
        ref: ObjectRef,
        decision: Patch | Delete,
        response: dict[str, Any] | None,
    ) -> Executed:
        outcome = decision.on_success
        operation = operation_of(decision)
        fresh: CachedObject | None = None
        if isinstance(decision, Delete):
            self.cache.forget_deleted(key)
            self.forget(key)
        elif response is not None:
            fresh = CachedObject.from_metadata(response.get("metadata") or {})
            self.cache.refresh(key, fresh, decided_on=obj)
        await self.emit(ref, outcome.events, decision)
        self._count_success(key, decision, operation)
        if operation is Operation.RESTART and response:
            self._restarted_ns[obj.uid] = self.clock.now_ns()
            await self._after_restart(ref, response)
        _log.info("write succeeded", operation=operation.value)
        requeue = outcome.requeue_after_ns
        return Executed(Result(requeue_after=max(requeue, 1) / NS) if requeue else None, fresh)

    def _count_success(self, key: ObjectKey, decision: Patch | Delete, op: Operation) -> None:
        if decision.action is None:
            return
        if op in _ACTING:
            self.metrics.count_action(decision.action.value, key.resource.kind, "success")
            if decision.due_ns is not None:
                self.metrics.observe_lateness((self.clock.now_ns() - decision.due_ns) / NS)
        elif op is Operation.SKIP:
            self.metrics.count_action(decision.action.value, key.resource.kind, "skipped")

    async def _after_restart(self, ref: ObjectRef, response: dict[str, Any]) -> None:
        marker = restart_marker_of(response, keys.RESTARTED_AT)
        if marker is not None:
            self._markers[ref.uid] = marker
        reasons = rollout_blockers(response)
        if reasons:
            await self.recorder.record(ref, catalogue.rollout_blocked(reasons))
        if self.rollouts is not None:
            self.rollouts.follow(ref, response)

    async def _fail(
        self, key: ObjectKey, ref: ObjectRef, decision: Patch | Delete, error: KubeError
    ) -> None:
        if decision.failure is not None:
            await self.emit(ref, (decision.failure.event(str(error)),), decision)
        if decision.action is not None:
            self.metrics.count_action(decision.action.value, key.resource.kind, "error")
        _log.warning("write failed", error=str(error))
