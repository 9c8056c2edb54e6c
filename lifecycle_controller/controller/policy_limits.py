"""Each policy's ``limit`` in force, and the audit entries of what its actions did.

The reconciler asks :meth:`PolicyLimits.gate` about every due action a policy decided (a
deletion, a restart, a dry-run report): it goes, and takes its place in the policy's
sliding window (:class:`~lifecycle_controller.core.policy.limit.LimitWindow`), or it is
held (a deletion or a restart as a ``Hold`` with reason ``policy_limit``, a dry-run report
as a ``Wait``) and requeued at the instant the window frees the place it waits for. A
policy without ``spec.limit`` has the controller's default (``--policy-default-limit``).

A window is created when the policy is first gated, seeded from the instants its
``status.lastActions`` shows, so that a controller restart or a leader change does not
reset the cap (bounded by what ``lastActions`` keeps: docs/policies.md#limit). An action
admitted once for an occurrence is not counted again when a later control (a budget) held
it and it comes back. An action whose write then fails (or finds the object gone) gives its
place back (:meth:`PolicyLimits.give_back`) and the first object waiting for a place is
queued again (:attr:`PolicyLimits.on_freed`): only what was done counts; a dry-run report,
which writes nothing, counts when reported. A policy deleted takes its window with it
(:meth:`PolicyLimits.drop`): applied again, it starts with an empty one, as it starts with
an empty audit. A window belongs to one policy object (its UID): a policy deleted and
created again under the same name before the controller saw the deletion starts afresh too.

:meth:`done` records the audit entry of an action carried out (or reported, for a dry
run), which the status writer merges into the policy's ``status`` (:mod:`.policy_status`).

**A rehearsal is counted once** (:mod:`~lifecycle_controller.core.policy.audit`). A dry-run
report reported already, by this process (remembered per object while it lives) or by an
earlier one (due at or before the ``status.actions.dryRunThrough`` the policy showed when this
process first looked at it), is let through without a place in the window and without an
audit entry. The earlier one's instant holds for the policy's generation this process found
it at (followed until the process has first decided every object: :attr:`settled`): an
object an edit seen later brings under the policy is reported, whatever its due time.
:meth:`next_through` says what instant the writer may record now.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass

from lifecycle_controller.core.decision.guardrails import Hold, HoldReason
from lifecycle_controller.core.decision.outcomes import (
    Action,
    Decision,
    Delete,
    DryRun,
    Operation,
    Patch,
    Wait,
)
from lifecycle_controller.core.objects.resources import ObjectKey
from lifecycle_controller.core.policy.audit import (
    AuditEntry,
    next_through,
    reported_through,
    seed_instants,
)
from lifecycle_controller.core.policy.limit import LimitWindow, PolicyLimit
from lifecycle_controller.core.policy.model import Policy, PolicyRef

__all__ = ["LimitState", "PolicyLimits"]


@dataclass(frozen=True, slots=True)
class LimitState:
    """What the policy's status says of its limit: actions in the window, how many are held,
    when the next place frees up."""

    limit: PolicyLimit
    used: int
    held: int
    until_ns: int | None


@dataclass(slots=True)
class _Rehearsal:
    """One policy's dry-run reports as this process knows them."""

    #: ``status.actions.dryRunThrough`` when this process first looked (None: none).
    through: int | None
    #: The generation that instant holds for.
    generation: int
    #: The latest instant the status shows (read, or written by this process).
    written: int | None
    #: The latest due time of the occurrences this process reported.
    newest: int | None = None


class PolicyLimits:
    """See the module docstring; one per pipeline, beside the policy decisions."""

    def __init__(
        self,
        default: PolicyLimit | None,
        *,
        policy_of: Callable[[str], tuple[Policy, dict[str, object], str] | None],
        on_change: Callable[[PolicyRef], None] = lambda ref: None,
    ) -> None:
        self.default = default
        self._policy_of = policy_of
        self._on_change = on_change
        self._windows: dict[PolicyRef, LimitWindow] = {}
        #: The UID of the policy object each window belongs to.
        self._owners: dict[PolicyRef, str] = {}
        #: Per object, the action admitted: its policy, due time and the instant admitted.
        self._admitted: dict[ObjectKey, tuple[PolicyRef, int, int]] = {}
        self._waits: dict[ObjectKey, PolicyRef] = {}
        self.pending: dict[PolicyRef, list[AuditEntry]] = {}
        #: Policies whose limit tripped since the status writer last looked (one Warning each).
        self.tripped: set[PolicyRef] = set()
        #: Told the object waiting that may take a place given back (the work queue's add).
        self.on_freed: Callable[[ObjectKey], None] = lambda key: None
        self._rehearsals: dict[PolicyRef, _Rehearsal] = {}
        #: Per object, the due time of the dry-run occurrence each policy reported.
        self._reported: dict[ObjectKey, dict[PolicyRef, int]] = {}
        #: Every object has been decided once since the start (the status writer says when).
        self.settled = False

    def limit_of(self, policy: Policy) -> PolicyLimit | None:
        return policy.limit if policy.limit is not None else self.default

    def _own(self, ref: PolicyRef, uid: str) -> None:
        if self._owners.setdefault(ref, uid) != uid:
            self.drop([ref])  # another object under the same name: its window is gone
            self._owners[ref] = uid

    def _window(self, policy: Policy, status: dict[str, object]) -> LimitWindow | None:
        limit = self.limit_of(policy)
        window = self._windows.get(policy.ref)
        if limit is None:
            self._windows.pop(policy.ref, None)
            return None
        if window is None or window.limit != limit:
            window = LimitWindow(limit)
            window.seed(seed_instants(status))
            self._windows[policy.ref] = window
        return window

    def gate(self, key: ObjectKey, decision: Decision, now_ns: int) -> Decision:
        """``decision``, or its hold when the deciding policy's limit is reached."""
        acting = isinstance(decision, (Delete, DryRun)) or (
            isinstance(decision, Patch) and decision.operation is Operation.RESTART
        )
        if not acting or decision.policy is None or decision.action is None:
            self.forget(key)
            return decision
        found = self._policy_of(decision.policy)
        if found is None:
            return decision
        policy, status, uid = found
        self._own(policy.ref, uid)
        window = self._window(policy, status)
        if isinstance(decision, DryRun) and self._rehearsed(key, policy, status, decision):
            return decision  # reported already: no place, no second count
        if window is None:
            return decision
        due = decision.due_ns if decision.due_ns is not None else now_ns
        ref = policy.ref
        if self._admitted.get(key, (None, None))[:2] == (ref, due):
            return decision  # admitted already (a later control held it): no second place
        verdict = window.check(key, due, now_ns)
        if verdict.go:
            window.admit(key, now_ns)
            self._admitted[key] = (ref, due, now_ns)
            self._waits.pop(key, None)
            self._on_change(ref)  # its window's count changed
            return decision
        if self._waits.get(key) != ref:
            self._waits[key] = ref
            if window.held == 1:  # the first one held: the limit trips
                self.tripped.add(ref)
            self._on_change(ref)
        until = verdict.until_ns or now_ns + 1
        if isinstance(decision, DryRun):
            return Wait(
                action=decision.action,
                due_ns=decision.due_ns,
                policy=decision.policy,
                requeue_after_ns=max(1, until - now_ns),
                log=f"held by {ref}'s limit {window.limit}",
            )
        assert isinstance(decision, (Patch, Delete))
        return Hold(
            reason=HoldReason.POLICY_LIMIT,
            held=decision,
            action=decision.action,
            due_ns=decision.due_ns,
            policy=decision.policy,
            requeue_after_ns=max(1, until - now_ns),
            until_ns=until,
            log=f"held by {ref}'s limit {window.limit}",
        )

    def _rehearsal(self, policy: Policy, status: Mapping[str, object]) -> _Rehearsal:
        rehearsal = self._rehearsals.get(policy.ref)
        if rehearsal is None:
            through = reported_through(status)
            rehearsal = _Rehearsal(through, policy.generation, through)
            self._rehearsals[policy.ref] = rehearsal
        elif not self.settled:  # an edit before every object was decided once
            rehearsal.generation = policy.generation
        return rehearsal

    def _rehearsed(
        self, key: ObjectKey, policy: Policy, status: Mapping[str, object], decision: DryRun
    ) -> bool:
        """The dry-run occurrence was reported already (see the module docstring)."""
        due = decision.due_ns
        if due is None:
            return False
        ref = policy.ref
        reported = self._reported.get(key)
        if reported is not None and reported.get(ref) == due:
            return True
        rehearsal = self._rehearsal(policy, status)
        through = rehearsal.through
        if through is None or due > through or policy.generation != rehearsal.generation:
            return False
        self._reported.setdefault(key, {})[ref] = due  # an earlier process reported it
        return True

    def _report(
        self, key: ObjectKey, policy: Policy, status: Mapping[str, object], decision: DryRun
    ) -> bool:
        """Remember a dry-run report; False if it was reported already (no audit entry)."""
        due = decision.due_ns
        if due is None:
            return True
        ref = policy.ref
        reported = self._reported.setdefault(key, {})
        if reported.get(ref) == due:
            return False
        reported[ref] = due
        rehearsal = self._rehearsal(policy, status)
        rehearsal.newest = due if rehearsal.newest is None else max(rehearsal.newest, due)
        return True

    def next_through(
        self, ref: PolicyRef, matched: Mapping[ObjectKey, tuple[int, Action] | None], now_ns: int
    ) -> int | None:
        """The ``dryRunThrough`` the policy's status may show now (None: nothing new), given
        the objects it decides with their pending action (``Aggregate.matched``); for the
        writer, once every object has been decided since the last change."""
        rehearsal = self._rehearsals.get(ref)
        if rehearsal is None or rehearsal.newest is None:
            return None
        unreported = (
            pending[0]
            for key, pending in matched.items()
            if pending is not None
            and pending[0] <= now_ns
            and self._reported.get(key, {}).get(ref) != pending[0]
        )
        return next_through(
            written=rehearsal.written, newest=rehearsal.newest, unreported=unreported
        )

    def written_through(self, ref: PolicyRef) -> int | None:
        """The ``dryRunThrough`` the policy's status shows, as this process knows it (None:
        none, or no dry run of the policy decided in this process)."""
        rehearsal = self._rehearsals.get(ref)
        return None if rehearsal is None else rehearsal.written

    def through_written(self, ref: PolicyRef, through: int) -> None:
        """The status shows ``through`` now."""
        rehearsal = self._rehearsals.get(ref)
        if rehearsal is not None:
            rehearsal.written = max(through, rehearsal.written or through)

    def lagging(self) -> set[PolicyRef]:
        """The policies whose status does not show yet how far their reports go."""
        return {
            ref
            for ref, rehearsal in self._rehearsals.items()
            if rehearsal.newest is not None
            and (rehearsal.written is None or rehearsal.written < rehearsal.newest)
        }

    def give_back(self, key: ObjectKey) -> None:
        """The action admitted for ``key`` was not carried out (its write failed, or found
        the object gone): its place is free, for the first object waiting, or for ``key``
        itself when it is decided again."""
        admitted = self._admitted.pop(key, None)
        if admitted is None:
            return
        ref, _, at_ns = admitted
        window = self._windows.get(ref)
        if window is None or not window.give_back(at_ns):
            return
        self._on_change(ref)  # its window's count changed
        waiting = window.first_waiting()
        if isinstance(waiting, ObjectKey):
            self.on_freed(waiting)

    def drop(self, refs: Iterable[PolicyRef]) -> None:
        """Policies deleted: forget their windows, who waits for them and their audit
        entries not written (the policy objects are gone)."""
        gone = set(refs)
        for ref in gone:
            self._windows.pop(ref, None)
            self._owners.pop(ref, None)
            self.pending.pop(ref, None)
            self._rehearsals.pop(ref, None)
        for reported in self._reported.values():
            for ref in gone & reported.keys():
                del reported[ref]
        self.tripped -= gone
        for key in [key for key, ref in self._waits.items() if ref in gone]:
            del self._waits[key]
        for key in [key for key, admitted in self._admitted.items() if admitted[0] in gone]:
            del self._admitted[key]

    def done(self, key: ObjectKey, uid: str, decision: Decision, now_ns: int) -> None:
        """The action was carried out (or reported): its audit entry waits to be written."""
        if decision.policy is None or decision.action is None:
            return
        found = self._policy_of(decision.policy)
        if found is None:
            return
        ref = found[0].ref
        if isinstance(decision, DryRun) and not self._report(key, found[0], found[1], decision):
            return  # reported already: counted once
        entry = AuditEntry(
            at_ns=now_ns,
            action=decision.action.value,
            kind=key.resource.kind,
            namespace=key.namespace or "",
            name=key.name,
            uid=uid,
            dry_run=isinstance(decision, DryRun),
            due_ns=decision.due_ns if decision.due_ns is not None else now_ns,
        )
        self.pending.setdefault(ref, []).append(entry)
        self._on_change(ref)

    def forget(self, key: ObjectKey) -> None:
        """``key`` waits for no policy's window any more (gone, or nothing due)."""
        ref = self._waits.pop(key, None)
        if ref is None:
            return
        window = self._windows.get(ref)
        if window is not None:
            window.forget(key)
        self._on_change(ref)

    def gone(self, key: ObjectKey) -> None:
        self.forget(key)
        self._admitted.pop(key, None)
        self._reported.pop(key, None)

    def holding(self) -> set[PolicyRef]:
        """The policies whose limit holds objects now (their report changes as time passes)."""
        return {ref for ref, window in self._windows.items() if window.held}

    def state(self, ref: PolicyRef, now_ns: int) -> LimitState | None:
        window = self._windows.get(ref)
        if window is None:
            return None
        return LimitState(window.limit, window.used(now_ns), window.held, window.held_until())
