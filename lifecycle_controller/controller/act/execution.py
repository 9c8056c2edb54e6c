"""Carrying out one write decision, and accounting for it. Nothing here decides.

By the time a ``Patch`` or ``Delete`` reaches :meth:`Executor.carry_out`, core has decided it
and the guardrails (:mod:`lifecycle_controller.core.decision.guardrails`) have let it go, with what
it
uses reserved (:class:`~lifecycle_controller.controller.guardrails.state.Reservation`). The
executor:

* sends **exactly one guarded API call** through the
  :class:`~lifecycle_controller.controller.act.writes.ObjectWriter` (the leader's fencing check,
  then a merge patch with the ``metadata.resourceVersion`` it was decided on, or a delete with
  UID and resourceVersion preconditions: docs/behaviour.md#guarded-writes). A delete that
  finds the object gone counts as done; a patch that finds it gone ends the item;
* after the write, accounts for it (:meth:`Accounting.written
  <lifecycle_controller.controller.act.accounting.Accounting.written>`: Events, action and
  lateness metrics, ledger) and, after a restart, warns when the workload's settings keep its
  Pods from changing and hands the rollout to the
  :class:`~lifecycle_controller.controller.rollout.tracker.RolloutTracker`;
* after a failure, records the decision's failure Warning and the error metric, unless the
  caller retries a conflict quietly, and gives the reservation back;
* saves the circuit breaker's state when a hold tripped it (:meth:`Executor.save_breaker`):
  the guardrails open it in memory at once, and writing that to its ConfigMap is a write like
  any other.
"""

from __future__ import annotations

import enum
from dataclasses import dataclass
from typing import Any

from lifecycle_controller.controller.act.accounting import Accounting
from lifecycle_controller.controller.act.writes import ObjectWriter
from lifecycle_controller.controller.events.recorder import EventRecorder
from lifecycle_controller.controller.guardrails.breaker import CircuitBreaker
from lifecycle_controller.controller.guardrails.state import Reservation
from lifecycle_controller.controller.rollout.tracker import RolloutTracker
from lifecycle_controller.controller.watch.cache import CachedObject
from lifecycle_controller.core import Delete, ObjectKey, ObjectRef, Operation, Patch
from lifecycle_controller.core.decision import events as catalogue
from lifecycle_controller.core.objects.rollout import rollout_blockers
from lifecycle_controller.kube import Conflict, KubeError

__all__ = ["Executed", "Executor", "WriteOutcome"]


class WriteOutcome(enum.Enum):
    """How a write ended when it did not raise."""

    DONE = "done"
    GONE = "gone"  # a patch found the object deleted: nothing is left to act on


@dataclass(frozen=True, slots=True)
class Executed:
    """``outcome`` of the write; ``fresh`` is the object a patch returned (None otherwise)."""

    outcome: WriteOutcome
    fresh: CachedObject | None = None


@dataclass
class Executor:
    """Carries out write decisions (see the module docstring)."""

    writer: ObjectWriter
    accounting: Accounting
    recorder: EventRecorder
    rollouts: RolloutTracker | None = None
    breaker: CircuitBreaker | None = None

    async def save_breaker(self) -> None:
        """The breaker tripped: write its state to its ConfigMap."""
        if self.breaker is not None:
            await self.breaker.save()

    async def carry_out(
        self,
        key: ObjectKey,
        obj: CachedObject,
        decision: Patch | Delete,
        reservation: Reservation,
        *,
        quiet_conflict: bool,
    ) -> Executed:
        """The one guarded write, then its accounting.

        Raises :class:`~lifecycle_controller.kube.Conflict` when the object changed since it
        was read (after the failure Warning, unless ``quiet_conflict``), any other
        :class:`~lifecycle_controller.kube.KubeError` after the failure Warning, and
        :class:`~lifecycle_controller.controller.work.result.NotLeading` when this replica may not
        write. The reservation is settled in every case (after a quiet conflict it keeps
        its rollout slot for the decision that follows).
        """
        ref = ObjectRef(key, obj.uid, obj.resource_version)
        carried_out = retried = False
        try:
            executed, response = await self._write(key, obj, decision)
            carried_out = executed.outcome is WriteOutcome.DONE
        except Conflict as error:
            retried = quiet_conflict  # decided again at once: the rollout slot stays
            if not quiet_conflict:
                await self.accounting.failed(ref, decision, error)
            raise
        except KubeError as error:
            await self.accounting.failed(ref, decision, error)
            raise
        finally:
            reservation.settle(carried_out=carried_out, keep_slot=retried)
        if not carried_out:
            return executed
        return await self._succeeded(ref, decision, executed, response)

    async def _write(
        self, key: ObjectKey, obj: CachedObject, decision: Patch | Delete
    ) -> tuple[Executed, dict[str, Any] | None]:
        if isinstance(decision, Delete):
            await self.writer.delete(
                key,
                uid=decision.uid,
                resource_version=decision.resource_version,
                propagation=decision.propagation,
            )
            return Executed(WriteOutcome.DONE), None
        restart = decision.operation is Operation.RESTART
        patched = await self.writer.patch(key, obj, decision.body, restart=restart)
        if patched is None:
            return Executed(WriteOutcome.GONE), None
        return Executed(WriteOutcome.DONE, patched.fresh), patched.response

    async def _succeeded(
        self,
        ref: ObjectRef,
        decision: Patch | Delete,
        executed: Executed,
        response: dict[str, Any] | None,
    ) -> Executed:
        await self.accounting.written(ref, decision)
        if isinstance(decision, Patch) and decision.operation is Operation.RESTART and response:
            reasons = rollout_blockers(response)
            if reasons:
                await self.recorder.record(ref, catalogue.rollout_blocked(reasons))
            if self.rollouts is not None:
                self.rollouts.follow(ref, response)
        return executed
