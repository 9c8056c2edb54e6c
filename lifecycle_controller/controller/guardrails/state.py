"""The guardrails' state: the facts they decide on, the holds' effects, the reservations.

:func:`lifecycle_controller.core.decision.guardrails.check` decides whether a due deletion or
restart
goes now; it is pure, so the state it decides on lives here, with the leader:

* :meth:`Guardrails.facts` reads that state into
  :class:`~lifecycle_controller.core.decision.guardrails.GuardrailFacts`
  without an API call: the circuit breaker (:mod:`.breaker`),
  the per-minute budgets (:mod:`lifecycle_controller.machinery.budget`), the rollout slots
  (:mod:`~lifecycle_controller.controller.rollout.tracker`), the restart pacing settings and
  the last restart known for the workload (its annotations and the cache's restart facts);
* :meth:`Guardrails.apply` carries out what a hold implies: the breaker trips and holds the
  object until a reset; a restart waiting for a rollout slot joins the due-ordered queue;
* :meth:`Guardrails.reserve` takes the budget's token, the rollout slot and the breaker
  window's place for an action :func:`check` let go, and returns the :class:`Reservation`
  that gives back what the write did not use. A restart whose write met a 409 Conflict
  keeps its rollout slot while the same reconcile re-reads and decides again, so a
  later-due restart cannot take its turn in between; :meth:`Guardrails.release` gives back
  a kept slot that the new decision did not use.

Facts are read, checked and reserved with no ``await`` in between, so nothing can change
under a decision on the one event loop.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from types import MappingProxyType

from lifecycle_controller.controller.guardrails.breaker import CircuitBreaker
from lifecycle_controller.controller.rollout.tracker import RolloutTracker
from lifecycle_controller.controller.watch.cache import CachedObject, MetadataCache
from lifecycle_controller.core import Action, Delete, ObjectKey, Operation, Patch
from lifecycle_controller.core.decision.guardrails import (
    GuardrailState,
    Hold,
    HoldReason,
    RolloutQueue,
    acting_operation,
)
from lifecycle_controller.core.decision.limit_line import LimitFacts
from lifecycle_controller.core.decision.pacing import last_restart_ns
from lifecycle_controller.core.objects import keys
from lifecycle_controller.core.text.durations import NS_PER_SECOND
from lifecycle_controller.machinery.budget import ActionBudget
from lifecycle_controller.machinery.clock import Clock

__all__ = ["Guardrails", "Reservation", "RestartPacing"]


@dataclass(frozen=True, slots=True)
class RestartPacing:
    """``--min-restart-interval`` and ``--restart-jitter`` in nanoseconds (0 = off)."""

    min_interval_ns: int = 0
    jitter_ns: int = 0

    @classmethod
    def of_seconds(cls, min_interval: float, jitter: float) -> RestartPacing:
        return cls(int(min_interval * NS_PER_SECOND), int(jitter * NS_PER_SECOND))


@dataclass
class Reservation:
    """What an action let go has taken; :meth:`settle` gives back what was not used."""

    key: ObjectKey
    breaker: CircuitBreaker | None = None
    breaker_counted: bool = False
    rollouts: RolloutTracker | None = None
    settled: bool = False

    def settle(self, *, carried_out: bool, keep_slot: bool = False) -> None:
        """The write ended; call once (later calls do nothing). ``keep_slot``: the write met
        a conflict and the same reconcile decides again at once, so the rollout slot stays
        with the key (:meth:`Guardrails.release` gives it back if that decision does not
        use it)."""
        if self.settled:
            return
        self.settled = True
        if self.breaker is not None:
            self.breaker.settle(self.key, counted=self.breaker_counted, carried_out=carried_out)
        if self.rollouts is not None and not carried_out and not keep_slot:
            self.rollouts.abandon(self.key)


#: No rollout limit for this object.
_NO_QUEUE = RolloutQueue()
#: The state of an object no configured control could hold: check() lets everything go.
_UNGUARDED = GuardrailState(now_ns=0)
_NO_LIMITS: Mapping[str, LimitFacts] = MappingProxyType({})


@dataclass
class Guardrails:
    """The leader's guardrail state (see the module docstring)."""

    cache: MetadataCache
    clock: Clock
    budgets: Mapping[Action, ActionBudget] = field(default_factory=dict)
    breaker: CircuitBreaker | None = None
    rollouts: RolloutTracker | None = None
    pacing: RestartPacing = field(default_factory=RestartPacing)

    def state(
        self,
        key: ObjectKey,
        obj: CachedObject,
        limits: Mapping[str, LimitFacts] = _NO_LIMITS,
    ) -> GuardrailState:
        """Their state for one object now, before its decision (no API call), with the
        ``limits`` of the policies that may decide it
        (:meth:`~lifecycle_controller.controller.policy.limits.PolicyLimits.facts`). With no
        control that could hold this object configured, one shared empty state (a pass that
        decides to wait pays nothing for the guardrails)."""
        restartable = key.resource.restartable
        paced = restartable and (self.pacing.min_interval_ns > 0 or self.pacing.jitter_ns > 0)
        queued = restartable and self.rollouts is not None and self.rollouts.limit > 0
        budgets = [(a, b) for a, b in self.budgets.items() if not b.unlimited]
        if self.breaker is None and not budgets and not paced and not queued:
            return _UNGUARDED if not limits else GuardrailState(now_ns=0, limits=limits)
        return GuardrailState(
            now_ns=self.clock.now_ns(),
            uid=obj.uid,
            breaker=None if self.breaker is None else self.breaker.facts(key),
            last_restart_ns=self._last_restart(obj) if restartable else None,
            min_restart_interval_ns=self.pacing.min_interval_ns,
            restart_jitter_ns=self.pacing.jitter_ns,
            rollouts=(
                self.rollouts.queue(key) if queued and self.rollouts is not None else _NO_QUEUE
            ),
            budget_wait_ns={
                action: max(0, int(budget.wait() * NS_PER_SECOND)) for action, budget in budgets
            },
            limits=limits,
        )

    def _last_restart(self, obj: CachedObject) -> int | None:
        fact = self.cache.restart_fact(obj.uid)
        last = last_restart_ns(
            (
                obj.annotations.get(keys.LAST_RESTART_TIMESTAMP),
                None if fact is None else fact.marker,
            )
        )
        exact = None if fact is None else fact.at_ns
        if exact is not None and (last is None or exact > last):
            return exact
        return last

    def apply(self, key: ObjectKey, hold: Hold) -> bool:
        """What a hold implies beyond its requeue (and its Event, which accounting records),
        in memory at once; True when the breaker tripped and its state must be saved (a
        write, which the executor makes)."""
        tripped = False
        if hold.reason is HoldReason.BREAKER_TRIPPED and self.breaker is not None:
            tripped = self.breaker.open_now(hold.tripped_at)
        if hold.reason in (HoldReason.BREAKER_OPEN, HoldReason.BREAKER_TRIPPED) and self.breaker:
            self.breaker.hold(key)
        elif hold.reason is HoldReason.ROLLOUT_SLOT and self.rollouts is not None:
            self.rollouts.wait(key, hold.due_ns)
        return tripped

    def reserve(self, key: ObjectKey, decision: Patch | Delete) -> Reservation:
        """Take what an action :func:`check` let go uses (nothing for other writes)."""
        operation = acting_operation(decision)
        reservation = Reservation(key)
        if operation is None:
            return reservation
        if operation is Operation.RESTART and self.rollouts is not None:
            self.rollouts.reserve(key)
            reservation.rollouts = self.rollouts
        budget = self.budgets.get(decision.action) if decision.action is not None else None
        if budget is not None:
            budget.take()
        if self.breaker is not None:
            reservation.breaker = self.breaker
            reservation.breaker_counted = self.breaker.reserve(key)
        return reservation

    def release(self, key: ObjectKey) -> None:
        """The reconcile of ``key`` ended: a rollout slot it kept across a conflict and did
        not use goes back (a restart it wrote keeps its slot until the rollout ends)."""
        if self.rollouts is not None:
            self.rollouts.abandon(key)

    def gone(self, key: ObjectKey) -> None:
        """The object is gone: it waits for no slot and no reset any more."""
        if self.rollouts is not None:
            self.rollouts.object_gone(key)
        if self.breaker is not None:
            self.breaker.release(key)
