"""One work item, decided once per pass: read → decide → account → write → result.

``Reconciler.__call__(key)`` is what the workers run. Each pass over the object:

1. **read** it from the metadata cache (gone: forget it, done);
2. **decide**, in one place:
   :func:`~lifecycle_controller.core.namespace_defaults.decide_in_namespace`
   (core, with the namespace's defaults) answers what the object needs, or, for an object a
   lifecycle policy could match,
   :class:`~lifecycle_controller.controller.policy_decisions.PolicyDecisions` (the same, on
   the inputs its policies resolve to); for a deletion or a
   restart the guardrails (:func:`lifecycle_controller.core.guardrails.check`, on the facts
   :class:`~lifecycle_controller.controller.guardrail_state.Guardrails` reads) may turn it
   into a :class:`~lifecycle_controller.core.guardrails.Hold`, which is treated like a
   ``Wait``. The one read a decision may need, the Pod template's restart marker for the
   restart guard, is made here before deciding, once per workload and process. A deletion
   a policy decided is first confirmed by the
   :class:`~lifecycle_controller.controller.policy_fence.PolicyFence` (the policy on the
   API server is still the one decided on), else held the same way;
3. **account** for the final decision
   (:class:`~lifecycle_controller.controller.accounting.Accounting`:
   ledger, Events, the metrics that describe decisions, one log line);
4. **write**: a ``Patch`` or ``Delete`` goes to the
   :class:`~lifecycle_controller.controller.execution.Executor` with its reservation; a
   ``Wait`` may carry its ``never`` record (docs/behaviour.md#persisted-observations), which
   the :class:`~lifecycle_controller.controller.observations.ObservationWriter` sends;
5. **result**: the requeue the decision asked for, or **another pass** at once, on the state
   the pass left, in exactly two cases: a write hit a 409 Conflict (re-read that one object
   and decide again, a few times, before the failure Warning and the rate-limited retry:
   docs/behaviour.md#quiet-conflict-retries), or a write changed what decides (a consumed
   ``restart-at`` uncovering a recurring schedule, a new anchor).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

import structlog

from lifecycle_controller.controller.accounting import Accounting
from lifecycle_controller.controller.cache import CachedObject, MetadataCache, object_facts
from lifecycle_controller.controller.execution import Executor, WriteOutcome
from lifecycle_controller.controller.guardrail_state import Guardrails, Reservation
from lifecycle_controller.controller.observations import ObservationWriter, RecordResult
from lifecycle_controller.controller.policy_decisions import PolicyDecisions
from lifecycle_controller.controller.policy_fence import PolicyBasis, PolicyFence
from lifecycle_controller.controller.result import Result
from lifecycle_controller.controller.writes import ObjectWriter
from lifecycle_controller.core import (
    Decision,
    DecisionSettings,
    Delete,
    DryRun,
    Ledger,
    ObjectKey,
    ObjectRef,
    Patch,
    Wait,
    should_enqueue_on_update,
)
from lifecycle_controller.core.durations import NS_PER_SECOND
from lifecycle_controller.core.guardrails import Hold, acting_operation, check
from lifecycle_controller.core.namespace_defaults import NamespaceDefaults, decide_in_namespace
from lifecycle_controller.kube import Conflict, KubeError
from lifecycle_controller.machinery.clock import Clock

__all__ = ["Reconciler"]

_log = structlog.get_logger(__name__)


@dataclass(frozen=True, slots=True)
class _Step:
    """How one pass ended: the reconcile's ``result``, or ``again`` on this state."""

    result: Result | None = None
    again: CachedObject | None = None
    conflict: bool = False
    gone: bool = False


@dataclass
class Reconciler:
    """Callable per work item; see the module docstring for the sequence."""

    cache: MetadataCache
    writer: ObjectWriter
    executor: Executor
    guardrails: Guardrails
    accounting: Accounting
    ledger: Ledger
    settings: DecisionSettings
    clock: Clock
    conflict_retries: int = 3
    #: Passes one reconcile may run back to back after writes that changed what decides.
    max_passes: int = 8
    #: The defaults of a namespace (docs/annotations.md#namespace-defaults); None: none.
    namespace_defaults: Callable[[str | None], NamespaceDefaults | None] | None = None
    #: ``--persist-observations``: writes a Wait's ``never`` record (None: off).
    observations: ObservationWriter | None = None
    #: Lifecycle policies (docs/policies.md); None: annotations alone decide.
    policies: PolicyDecisions | None = None
    #: Confirms the deciding policy before a policy deletion (None: not confirmed).
    policy_fence: PolicyFence | None = None

    async def __call__(self, key: ObjectKey) -> Result | None:
        try:
            return await self._reconcile(key)
        finally:
            self.guardrails.release(key)  # a slot kept across a conflict and not used

    async def _reconcile(self, key: ObjectKey) -> Result | None:
        obj = self.cache.get(key)
        conflicts = passes = 0
        while obj is not None:
            step = await self._pass(key, obj, quiet_conflict=conflicts < self.conflict_retries)
            if step.gone:
                break
            if step.again is None:
                return step.result
            if step.conflict:
                conflicts += 1
            else:
                passes += 1
                if passes >= self.max_passes:
                    return step.result
            obj = step.again
        self.object_gone(key)
        return None

    # ------------------------------------------------------------------ one pass

    async def _pass(self, key: ObjectKey, obj: CachedObject, *, quiet_conflict: bool) -> _Step:
        now_ns = self.clock.now_ns()
        decision, final, reservation, others = await self._decide(key, obj, now_ns)
        ref = ObjectRef(key, obj.uid, obj.resource_version)
        for other in others:  # the other action family's, accounted before the one that acts
            await self.accounting.decided(ref, other, other)
        step = await self._carry_out(
            key, obj, ref, decision, final, reservation, now_ns, quiet_conflict
        )
        return _with_others(step, others)

    async def _carry_out(
        self,
        key: ObjectKey,
        obj: CachedObject,
        ref: ObjectRef,
        decision: Decision,
        final: Decision,
        reservation: Reservation | None,
        now_ns: int,
        quiet_conflict: bool,
    ) -> _Step:
        await self.accounting.decided(ref, decision, final)
        if isinstance(final, DryRun) and self.policies is not None:
            self.policies.limits.done(key, obj.uid, final, now_ns)  # the policy's audit
        if isinstance(final, Hold):
            return _Step(self._requeue(final.requeue_after_ns, since_ns=now_ns))
        if isinstance(final, (Patch, Delete)):
            assert reservation is not None
            return await self._write(key, obj, final, reservation, quiet_conflict=quiet_conflict)
        if isinstance(final, Wait):
            if final.record and self.observations is not None:
                written = await self.observations.write(key, obj, final.record)
                if written is RecordResult.CONFLICT and quiet_conflict:
                    return await self._reread(key)  # the record, like any write
            order = final.scheduled_ns or 0
            return _Step(self._requeue(final.requeue_after_ns, since_ns=now_ns, order=order))
        return _Step()

    def _requeue(self, after_ns: int, *, since_ns: int, order: int = 0) -> Result:
        """A requeue ``after_ns`` from ``since_ns`` (the decision's now): the time the pass
        spent since (Events, a record) is taken off, so every key waiting for one instant
        (a window's opening) is due at that instant, not at it plus its own pass's length."""
        return _requeue(after_ns - max(0, self.clock.now_ns() - since_ns), order=order)

    async def _decide(
        self, key: ObjectKey, obj: CachedObject, now_ns: int
    ) -> tuple[Decision, Decision, Reservation | None, tuple[Decision, ...]]:
        """Core's decision, the one that stands after the guardrails, for a write that goes
        what it reserved (facts read, checked and reserved with no await between), and the
        other action family's decision when policies decide the families apart."""
        if self.observations is not None:
            self.observations.check(obj)
        lookup = self.namespace_defaults
        defaults = None if lookup is None else lookup(key.namespace)
        policies = self.policies
        basis: PolicyBasis | None = None
        if policies is not None and policies.applies(obj):
            await policies.prepare(key, obj, now_ns)
            decision, *rest = policies.decide(
                key,
                obj,
                facts=object_facts(key.resource, obj, restart_marker=self._marker(obj)),
                now_ns=now_ns,
                settings=self.settings,
                ledger=self.ledger,
                defaults=defaults,
            )
            others = tuple(rest)
            decision = policies.limits.gate(key, decision, now_ns)  # the policy's limit
            if self.policy_fence is not None and isinstance(decision, Delete) and decision.policy:
                tally = policies.tallies.get(key)  # what this decision was made on, just now
                deciders = () if tally is None else tally.decided_by
                ref = next((r for r in deciders if str(r) == decision.policy), None)
                basis = self.policy_fence.basis(ref)
        else:
            if policies is not None:
                policies.gone(key)
            others = ()
            decision = decide_in_namespace(
                annotations=obj.annotations,
                facts=object_facts(key.resource, obj, restart_marker=self._marker(obj)),
                now_ns=now_ns,
                settings=self.settings,
                ledger=self.ledger,
                defaults=defaults,
            )
        if isinstance(decision, Delete):
            others = ()  # the object goes: the other family has nothing left to do
        if not isinstance(decision, (Patch, Delete)):
            return decision, decision, None, others
        if self.policy_fence is not None and isinstance(decision, Delete) and decision.policy:
            fenced = await self.policy_fence.check(basis, decision)  # docs/reliability.md
            if fenced is not None:
                return decision, fenced, None, others
        if self.guardrails.needs_restart_marker(obj, decision):
            try:
                await self.writer.read_restart_marker(key, obj)
            except KubeError as error:
                _log.warning("workload unreadable for the restart guard", error=str(error))
        hold = check(decision, self.guardrails.facts(key, obj, decision))
        if hold is None:
            return decision, decision, self.guardrails.reserve(key, decision), others
        await self.guardrails.apply(key, hold)  # its state changes before its first await
        return decision, hold, None, others

    def _marker(self, obj: CachedObject) -> str | None:
        fact = self.cache.restart_fact(obj.uid)
        return None if fact is None else fact.marker

    async def _write(
        self,
        key: ObjectKey,
        obj: CachedObject,
        decision: Patch | Delete,
        reservation: Reservation,
        *,
        quiet_conflict: bool,
    ) -> _Step:
        try:
            done = await self.executor.carry_out(
                key, obj, decision, reservation, quiet_conflict=quiet_conflict
            )
        except Conflict:
            if not quiet_conflict:
                raise
            _log.debug("conflict; re-reading and deciding again")
            return await self._reread(key)
        if self.policies is not None and acting_operation(decision) is not None:
            self.policies.limits.done(key, obj.uid, decision, self.clock.now_ns())
        if done.outcome is WriteOutcome.GONE or isinstance(decision, Delete):
            return _Step(gone=True)
        requeue = decision.on_success.requeue_after_ns
        result = _requeue(requeue) if requeue else None
        fresh = done.fresh
        if fresh is None or not should_enqueue_on_update(obj.annotations, fresh.annotations):
            return _Step(result)
        # The write changed what decides: decide again now, on what the cache holds.
        cached = self.cache.get(key)
        return _Step(result, again=cached) if cached is not None else _Step(gone=True)

    async def _reread(self, key: ObjectKey) -> _Step:
        fresh = await self.writer.reread(key)
        return _Step(gone=True) if fresh is None else _Step(again=fresh, conflict=True)

    def object_gone(self, key: ObjectKey) -> None:
        """The object is gone (or this controller deleted it): drop everything about it."""
        self.accounting.gone(key)
        self.guardrails.gone(key)
        if self.policies is not None:
            self.policies.gone(key)


def _with_others(step: _Step, others: tuple[Decision, ...]) -> _Step:
    """The pass's step, requeued no later than the other family needs: at its wait's end,
    or at once for an action this pass did not carry out (one write per pass)."""
    if step.gone or step.again is not None or not others:
        return step
    needs = [
        1 if isinstance(other, (Patch, Delete)) else other.requeue_after_ns
        for other in others
        if isinstance(other, (Patch, Delete, Wait))
    ]
    if not needs:
        return step
    after = min(needs) / NS_PER_SECOND
    result = step.result
    if result is not None and result.requeue_after and result.requeue_after <= after:
        return step
    return _Step(Result(requeue_after=max(after, 1e-9)), conflict=step.conflict)


def _requeue(after_ns: int, *, order: int = 0) -> Result:
    return Result(requeue_after=max(after_ns, 1) / NS_PER_SECOND, order=order)
