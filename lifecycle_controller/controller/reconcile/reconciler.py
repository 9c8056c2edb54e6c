"""One work item, decided once per pass: the facts → one pure verdict → account → write.

``Reconciler.__call__(key)`` is what the workers run (docs/architecture.md#decision-path).
Each pass over the object:

1. **the facts**: the object from the metadata cache (gone: forget it, done), and
   :class:`PassFacts` puts together from memory everything its decision needs, once: the
   namespace's defaults, the lifecycle policies resolved for it (once per pass, by
   :class:`~lifecycle_controller.controller.policy.decisions.PolicyDecisions`: when a restart
   policy contends, the workload's Pod template marker is read first, once per workload and
   process, so that the resolution counts from it), the ledger, what is known of the
   workload's restarts, the guardrails' state
   (:class:`~lifecycle_controller.controller.guardrails.state.Guardrails`) with the limits of
   the policies that may decide it
   (:class:`~lifecycle_controller.controller.policy.limits.PolicyLimits`);
2. **one pure verdict**:
   :func:`~lifecycle_controller.core.policy.decide.decide_pass` answers the final
   decision, the guardrails' :class:`~lifecycle_controller.core.decision.guardrails.Hold`
   included (treated like a ``Wait``), or the one fact it lacks that is not in memory: the
   workload's Pod template marker for the restart guard, or, before a policy's deletion, the
   :class:`~lifecycle_controller.controller.policy.fence.PolicyFence`'s fresh view: the
   object resolved on the policies and Namespace labels the API server has now, which the
   verdict must find deciding the same deletion; or, for an action its policy's limit has a
   place for, that place recorded in the policy's status (one guarded write for a batch of
   places, :mod:`~lifecycle_controller.controller.policy.places`). The pass reads (or
   writes) each such fact once and asks again on the same facts (the resolution is not made
   again): those are its only reads, and the record its only write before the action's.
   What the verdict said is then kept: the policies' tallies, and the line a limit's hold
   joins (an object decided otherwise leaves every line);
3. **account** for the final decision
   (:class:`~lifecycle_controller.controller.act.accounting.Accounting`:
   ledger, Events, the metrics that describe decisions, one log line);
4. **write**: a ``Patch`` or ``Delete`` goes to the
   :class:`~lifecycle_controller.controller.act.execution.Executor` with what it reserved (taken
   right after the verdict, with no await between: the budget's token, the rollout slot, the
   breaker window's place and the policy limit's place, given back if the write fails); a
   hold's effects are in memory at once,
   and a tripped breaker's state is saved by the executor; a ``Wait`` may carry its
   ``never`` record (docs/behaviour.md#persisted-observations), which the
   :class:`~lifecycle_controller.controller.act.observations.ObservationWriter` sends;
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

from lifecycle_controller.controller.act.accounting import Accounting
from lifecycle_controller.controller.act.execution import Executor, WriteOutcome
from lifecycle_controller.controller.act.observations import ObservationWriter, RecordResult
from lifecycle_controller.controller.act.writes import ObjectWriter
from lifecycle_controller.controller.guardrails.state import Guardrails, Reservation
from lifecycle_controller.controller.policy.decisions import PolicyDecisions
from lifecycle_controller.controller.policy.fence import PolicyFence
from lifecycle_controller.controller.watch.cache import (
    CachedObject,
    MetadataCache,
    RestartFact,
    object_facts,
)
from lifecycle_controller.controller.work.result import Result
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
from lifecycle_controller.core.decision.guardrails import Hold, acting_operation
from lifecycle_controller.core.decision.namespace_defaults import NamespaceDefaults
from lifecycle_controller.core.policy.decide import (
    MissingFact,
    PassInputs,
    PolicyConfirmation,
    decide_pass,
)
from lifecycle_controller.core.text.durations import NS_PER_SECOND
from lifecycle_controller.kube import Conflict, KubeError
from lifecycle_controller.machinery.clock import Clock

__all__ = ["PassFacts", "Reconciler"]

_log = structlog.get_logger(__name__)

#: How many times one pass asks the verdict again with a fact it lacked: once per fact (the
#: verdict never asks again for one it was given).
_MAX_ASKS = len(MissingFact)


@dataclass
class PassFacts:
    """Gathers what one pass decides on, from memory; and, when the verdict asks, the one
    fact that is not there (see the module docstring)."""

    cache: MetadataCache
    writer: ObjectWriter
    settings: DecisionSettings
    ledger: Ledger
    guardrails: Guardrails
    #: The defaults of a namespace (docs/annotations.md#namespace-defaults); None: none.
    namespace_defaults: Callable[[str | None], NamespaceDefaults | None] | None = None
    #: Lifecycle policies (docs/policies.md); None: annotations alone decide.
    policies: PolicyDecisions | None = None
    #: Reads the fresh view a policy deletion is confirmed on (None: not confirmed).
    fence: PolicyFence | None = None

    async def gather(self, key: ObjectKey, obj: CachedObject, now_ns: int) -> PassInputs:
        """Every fact in memory, the policies resolved once (their matching first: a restart
        policy contending needs the template marker, read here once per workload and
        process, before the resolution counts from it)."""
        policies = self.policies
        resolution = None
        marker_tried = False
        if policies is not None and obj.view is not None:  # kept for a policy
            matched = policies.match(obj)
            if (
                matched is not None
                and matched.restarts
                and key.resource.restartable
                and self.cache.restart_fact(obj.uid) is None
            ):
                await self.read_marker(key, obj)
                marker_tried = True
            resolution = policies.resolve(obj, now_ns, matched)
        limits = (
            {}
            if policies is None or resolution is None
            else policies.limits.facts(key, resolution.deciders, now_ns)
        )
        lookup = self.namespace_defaults
        fact = self.cache.restart_fact(obj.uid)
        return PassInputs(
            annotations=obj.annotations,
            facts=object_facts(key.resource, obj, restart_marker=_marker(fact)),
            now_ns=now_ns,
            settings=self.settings,
            ledger=self.ledger,
            defaults=None if lookup is None else lookup(key.namespace),
            resolution=resolution,
            marker_known=marker_tried or fact is not None,
            fenced=self.fence is not None,
            # the controller's state first, then core
            guardrails=self.guardrails.state(key, obj, limits),
        )

    async def with_marker(self, key: ObjectKey, obj: CachedObject, inputs: PassInputs) -> None:
        """The verdict asked for the template marker (the restart guard measures from it):
        read it, once, into ``inputs`` (the object's facts, the guardrails' last restart)."""
        await self.read_marker(key, obj)
        marker = _marker(self.cache.restart_fact(obj.uid))
        inputs.facts = object_facts(key.resource, obj, restart_marker=marker)
        inputs.guardrails = self.guardrails.state(key, obj, inputs.guardrails.limits)
        inputs.marker_known = True  # once: a failed read is not tried again in this pass

    async def read_marker(self, key: ObjectKey, obj: CachedObject) -> None:
        """Read the workload's Pod template marker into the cache's restart facts. A failed
        read is logged and the pass goes on without it (as a controller that never knew it)."""
        try:
            await self.writer.read_restart_marker(key, obj)
        except KubeError as error:
            _log.warning("workload unreadable for its restart marker", error=str(error))

    async def record_place(
        self, key: ObjectKey, obj: CachedObject, inputs: PassInputs, decision: Decision
    ) -> None:
        """The verdict asked for its limit place to be recorded in the policy's status
        (docs/policies.md#limit): one write, for a batch of places; then the limits' facts
        again, saying whether it has its place (or why the write failed)."""
        policies = self.policies
        resolution = inputs.resolution
        assert policies is not None
        assert resolution is not None  # a policy decided it
        await policies.limits.reserve(key, obj.uid, decision, inputs.now_ns)
        limits = policies.limits.facts(key, resolution.deciders, inputs.now_ns)
        inputs.guardrails = self.guardrails.state(key, obj, limits)
        inputs.place_asked = True  # once: a place still unrecorded holds the action

    async def confirm(self, obj: CachedObject, now_ns: int) -> PolicyConfirmation:
        """The policy fence's fact: the object resolved on the API server's view of its
        policies and Namespace labels (docs/reliability.md#policy-fence)."""
        fence, policies = self.fence, self.policies
        assert fence is not None
        assert policies is not None
        namespace = None if obj.view is None else obj.view.namespace
        try:
            fresh = await fence.view(namespace)
        except KubeError as error:
            return fence.confirmation_failed(error)
        resolution = policies.resolve_on(obj, now_ns, fresh.policies, fresh.namespace_labels)
        return PolicyConfirmation(resolution, fence.retry_after_ns, recent=fresh.recent)


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
    facts: PassFacts
    executor: Executor
    guardrails: Guardrails
    accounting: Accounting
    clock: Clock
    conflict_retries: int = 3
    #: Passes one reconcile may run back to back after writes that changed what decides.
    max_passes: int = 8
    #: ``--persist-observations``: writes a Wait's ``never`` record (None: off).
    observations: ObservationWriter | None = None

    @property
    def policies(self) -> PolicyDecisions | None:
        """Lifecycle policies (docs/policies.md); None: annotations alone decide."""
        return self.facts.policies

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
        """The facts, the one pure verdict on them (asked again with a fact it lacked, read
        once), then what the verdict implies: for a write that goes, what it reserves (checked
        and reserved with no await between); for a hold, its effects."""
        if self.observations is not None:
            self.observations.check(obj)
        facts = self.facts
        inputs = await facts.gather(key, obj, now_ns)
        for _ in range(_MAX_ASKS + 1):
            verdict = decide_pass(inputs)
            if verdict.missing is None:
                break
            if verdict.missing is MissingFact.TEMPLATE_MARKER:
                await facts.with_marker(key, obj, inputs)
            elif verdict.missing is MissingFact.LIMIT_PLACE:
                await facts.record_place(key, obj, inputs, verdict.final)
            else:
                inputs.confirmation = await facts.confirm(obj, now_ns)
        assert verdict.missing is None, "the verdict asked again for a fact it was given"
        if inputs.confirmation is not None and facts.fence is not None:
            facts.fence.checked(inputs.confirmation, verdict)
        final = verdict.final
        policies = self.policies
        if policies is not None:
            if inputs.resolution is not None:
                policies.record(key, obj, inputs.resolution, verdict)
            elif key in policies.tallies:  # no policy decides it any more
                policies.gone(key)
            policies.limits.record(key, verdict.decision, final, now_ns)  # the limits' lines
        if isinstance(final, Hold):
            if self.guardrails.apply(key, final):  # in memory at once; the save is a write
                await self.executor.save_breaker()
            return verdict.decision, final, None, verdict.others
        if policies is not None and isinstance(final, (Patch, Delete, DryRun)):
            limit = inputs.guardrails.limits.get(final.policy or "")
            if not policies.limits.take(key, final, limit, now_ns):  # its place in the window
                # Its recorded place ran out while the pass read other facts: decided again.
                again = Wait(action=final.action, due_ns=final.due_ns, requeue_after_ns=1)
                return verdict.decision, again, None, verdict.others
        reservation = (
            self.guardrails.reserve(key, final) if isinstance(final, (Patch, Delete)) else None
        )
        return verdict.decision, final, reservation, verdict.others

    async def _write(
        self,
        key: ObjectKey,
        obj: CachedObject,
        decision: Patch | Delete,
        reservation: Reservation,
        *,
        quiet_conflict: bool,
    ) -> _Step:
        carried_out = False
        try:
            done = await self.executor.carry_out(
                key, obj, decision, reservation, quiet_conflict=quiet_conflict
            )
            carried_out = done.outcome is WriteOutcome.DONE
        except Conflict:
            if not quiet_conflict:
                raise
            _log.debug("conflict; re-reading and deciding again")
            return await self._reread(key)
        finally:
            if not carried_out:  # a conflict decided again takes a place again
                self._not_carried_out(key)
        if self.policies is not None and acting_operation(decision) is not None and carried_out:
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

    def _not_carried_out(self, key: ObjectKey) -> None:
        """The write failed (or found the object gone): the policy's limit gets back the
        place the action took (docs/policies.md#limit); only what was done counts."""
        if self.policies is not None:
            self.policies.limits.give_back(key)

    async def _reread(self, key: ObjectKey) -> _Step:
        fresh = await self.writer.reread(key)
        return _Step(gone=True) if fresh is None else _Step(again=fresh, conflict=True)

    def object_gone(self, key: ObjectKey) -> None:
        """The object is gone (or this controller deleted it): drop everything about it."""
        self.accounting.gone(key)
        self.guardrails.gone(key)
        if self.policies is not None:
            self.policies.gone(key)


def _marker(fact: RestartFact | None) -> str | None:
    return None if fact is None else fact.marker


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
