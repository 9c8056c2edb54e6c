"""Each policy's ``limit``: its window and line, kept for the pure decision; the audit entries.

The limit is a guardrail like the others (docs/policies.md#limit): whether a due action
goes or waits is decided by
:func:`~lifecycle_controller.core.decision.guardrails.check`, on the facts
:meth:`PolicyLimits.facts` reads before the pass decides (for each policy that may decide the
object: its window's instants, its line, what of this object it let go or reported
already). What is kept here is only what those decisions did:

* :meth:`PolicyLimits.record`, after every pass: an object the limit held joins the policy's
  line (due order, ties by key); one decided otherwise (by another policy, nothing due, no
  policy any more) leaves every line at once, so no line keeps a waiter nobody decides;
  one held by another guardrail keeps its place;
* :meth:`PolicyLimits.reserve`, when a pass's action may take a place that is not recorded
  yet: the place (and those of the policy's other objects due now) recorded in the policy's
  ``status.limit`` before the action goes (:mod:`.places`; the facts say which of an
  object's occurrences have a recorded place, and why the last record failed);
* :meth:`PolicyLimits.take`, when an action the decision let go is carried out: it takes
  its recorded place and its place in the window (a sliding window of the instants, seeded
  when this process first needs it from the places ``status.limit`` records, or, for a
  status written before that record existed, from ``status.lastActions``, so that a restart
  or a leader change does not reset the cap), and the earliest
  waiter is woken if a place is still free (one at a time: a freed place wakes the waiters
  it can serve, not the line); a write that then fails gives its place back
  (:meth:`PolicyLimits.give_back`) and wakes the first waiter (:attr:`PolicyLimits.on_freed`).
  Only what was done counts; a dry-run report, which writes nothing, counts when reported.

A policy deleted takes its window with it (:meth:`drop`): applied again, it starts with an
empty one, as it starts with an empty audit. A window belongs to one policy object (its
UID), so a policy deleted and created again under the same name before the controller saw
the deletion starts afresh too; a policy edited (a new generation) empties its line, and
its objects are decided again on the new spec.

:meth:`done` records the audit entry of an action carried out (or reported, for a dry
run), which the status writer merges into the policy's ``status`` (:mod:`.status`).

**A rehearsal is counted once** (:mod:`~lifecycle_controller.core.policy.audit`). A dry-run
report reported already, by this process (remembered per object while it lives) or by an
earlier one (due at or before the ``status.actions.dryRunThrough`` the policy showed when this
process first looked at it), takes no place in the window and adds no audit entry. The
earlier one's instant holds for the policy's generation this process found it at (followed
until the process has first decided every object: :attr:`settled`): an object an edit seen
later brings under the policy is reported, whatever its due time. :meth:`next_through` says
what instant the writer may record now.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass

from lifecycle_controller.controller.policy.places import PolicyPlaces
from lifecycle_controller.core.decision.guardrails import Hold, HoldReason
from lifecycle_controller.core.decision.limit_line import LimitFacts, occurrence_due
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
from lifecycle_controller.core.policy.limit import LimitWindow, PolicyLimit, limited_since
from lifecycle_controller.core.policy.model import Policy, PolicyRef
from lifecycle_controller.core.policy.places import Place

__all__ = ["DueObject", "LimitState", "PolicyLimits"]

#: One object a policy decides, with an action due: its key, uid, due time and action.
DueObject = tuple[ObjectKey, str, int, Action]


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
        on_freed: Callable[[ObjectKey], None] = lambda key: None,
        due_objects: Callable[[PolicyRef, int], Iterable[DueObject]] = lambda ref, now: (),
        places: PolicyPlaces | None = None,
    ) -> None:
        self.default = default
        #: The objects a policy decides with an action due by an instant, earliest first
        #: (those a batch of places is recorded for besides the one asking).
        self._due_objects = due_objects
        #: Places recorded before they are used (None: not recorded, as in the tools).
        self.places = places
        self._policy_of = policy_of
        self._on_change = on_change
        self._windows: dict[PolicyRef, LimitWindow] = {}
        #: The UID of the policy object each window belongs to.
        self._owners: dict[PolicyRef, str] = {}
        #: Per object, the action admitted: its policy, due time and the instant admitted.
        self._admitted: dict[ObjectKey, tuple[PolicyRef, int, int]] = {}
        #: Per object, the policy whose line it waits in.
        self._waits: dict[ObjectKey, PolicyRef] = {}
        self.pending: dict[PolicyRef, list[AuditEntry]] = {}
        #: Policies whose limit tripped since the status writer last looked (one Warning each).
        self.tripped: set[PolicyRef] = set()
        #: Told the object waiting that may take a place now (the work queue's, through the
        #: requeue rules).
        self.on_freed = on_freed
        self._rehearsals: dict[PolicyRef, _Rehearsal] = {}
        #: Per object, the due time of the dry-run occurrence each policy reported.
        self._reported: dict[ObjectKey, dict[PolicyRef, int]] = {}
        #: Every object has been decided once since the start (the status writer says when).
        self.settled = False
        #: The policies a pass read the limits of, by name (``Kind/namespace/name``).
        self._refs: dict[str, PolicyRef] = {}
        #: The latest instant a pass was decided at.
        self._latest_ns = 0

    def limit_of(self, policy: Policy) -> PolicyLimit | None:
        return policy.limit if policy.limit is not None else self.default

    def _own(self, ref: PolicyRef, uid: str) -> None:
        if self._owners.setdefault(ref, uid) != uid:
            self.drop([ref])  # another object under the same name: its window is gone
            self._owners[ref] = uid

    def _window(
        self, policy: Policy, status: Mapping[str, object], uid: str = ""
    ) -> LimitWindow | None:
        """The policy's window, created (and seeded) the first time it is needed, made anew
        when its limit changed; an edit empties its line."""
        limit = self.limit_of(policy)
        ref = policy.ref
        window = self._windows.get(ref)
        if limit is None:
            if window is not None:
                self._empty_line(ref, window)
                del self._windows[ref]
            return None
        if window is None or window.limit != limit:
            if window is not None:
                self._empty_line(ref, window)
            window = LimitWindow(limit, generation=policy.generation)
            recorded = None if self.places is None else self.places.seed(ref, uid, status)
            window.seed(seed_instants(status) if recorded is None else recorded)
            window.held_since = limited_since(status)  # held before this process knew
            self._windows[ref] = window
        elif window.generation != policy.generation:
            self._empty_line(ref, window)
            window.generation = policy.generation
        return window

    def _empty_line(self, ref: PolicyRef, window: LimitWindow) -> None:
        for key in window.empty_line():
            if isinstance(key, ObjectKey) and self._waits.get(key) == ref:
                del self._waits[key]
        self._on_change(ref)

    def _current(self, ref: PolicyRef) -> LimitWindow | None:
        """The policy's window as its current object and generation have it."""
        found = self._policy_of(str(ref))
        if found is None:
            return self._windows.get(ref)
        policy, status, uid = found
        self._own(ref, uid)
        return self._window(policy, status, uid) if ref in self._windows else None

    # ------------------------------------------------------------------ the facts

    def facts(
        self, key: ObjectKey, deciders: Iterable[PolicyRef], now_ns: int
    ) -> dict[str, LimitFacts]:
        """The limits of the policies that may decide ``key``, as its pass reads them."""
        found: dict[str, LimitFacts] = {}
        self._latest_ns = max(self._latest_ns, now_ns)
        for ref in deciders:
            current = self._policy_of(str(ref))
            if current is None:
                continue
            policy, status, uid = current
            self._own(ref, uid)
            window = self._window(policy, status, uid)
            if window is None:
                continue
            admitted = self._admitted.get(key)
            self._refs[str(ref)] = ref
            places = self.places
            found[str(ref)] = window.facts(
                key,
                key.id,
                now_ns,
                policy=str(ref),
                admitted_due=admitted[1] if admitted is not None and admitted[0] == ref else None,
                reported_due=self._reported.get(key, {}).get(ref),
                reported_through=self._through(policy, status),
                held_since=window.held_since,
                recording=places is not None,
                recorded=frozenset() if places is None else places.recorded(ref, key.id, now_ns),
                record_problem=None if places is None else places.problem(ref),
            )
        return found

    def quiet(self) -> None:
        """Every object has been decided since it last changed: a hold carried over an
        empty line (read from the status at start, or kept across an edit) that no object
        rejoined is over."""
        for window in self._windows.values():
            if not window.held:
                window.held_since = None

    def _through(self, policy: Policy, status: Mapping[str, object]) -> int | None:
        """The instant through which an earlier process reported every due dry run of the
        policy's current generation (see the module docstring)."""
        rehearsal = self._rehearsals.get(policy.ref)
        if rehearsal is None:
            return reported_through(status)  # first look: it holds for this generation
        if not self.settled or policy.generation == rehearsal.generation:
            return rehearsal.through
        return None

    # ------------------------------------------------------------------ what was decided

    def record(self, key: ObjectKey, decision: Decision, final: Decision, now_ns: int) -> None:
        """The line after one pass over ``key``: ``final`` stands for ``decision``."""
        held = (isinstance(final, Hold) and final.reason is HoldReason.POLICY_LIMIT) or (
            isinstance(decision, DryRun) and isinstance(final, Wait)
        )
        waits = self._waits.get(key)
        ref = None if decision.policy is None else self._refs.get(decision.policy)
        window = None if ref is None else self._windows.get(ref)
        if held and ref is not None and window is not None:
            if waits is not None and waits != ref:
                self.forget(key, now_ns)
            due = final.due_ns if final.due_ns is not None else now_ns
            if window.join(key, key.id, due, now_ns):
                self._waits[key] = ref
                if window.held == 1:  # the first one held: the limit trips
                    self.tripped.add(ref)
                self._on_change(ref)
            return
        if waits is not None and (ref != waits or not _acts(final)):
            self.forget(key, now_ns)  # decided otherwise: it waits in no line any more

    def take(
        self, key: ObjectKey, decision: Decision, limit: LimitFacts | None, now_ns: int
    ) -> bool:
        """The action ``decision`` let go is carried out now: it takes its place in its
        policy's window (none when ``limit`` says it needs none); a place still free wakes
        the next waiter. False: its recorded place is no longer usable (its batch ran out
        while the pass read other facts): it does not go, and is decided again."""
        if limit is None or not _is_action(decision) or not limit.takes_place(decision):
            return True
        ref = self._refs.get(limit.policy)
        window = None if ref is None else self._windows.get(ref)
        if ref is None or window is None:
            return True
        due = occurrence_due(decision)
        if self.places is not None and not self.places.use(ref, key.id, due):
            return False
        window.admit(key, now_ns)
        if self._waits.get(key) == ref:
            del self._waits[key]
        self._admitted[key] = (ref, due, now_ns)
        self._on_change(ref)  # its window's count changed
        self._wake(window, now_ns)
        return True

    async def reserve(self, key: ObjectKey, uid: str, decision: Decision, now_ns: int) -> None:
        """Record, in the deciding policy's status, a place for ``decision``'s action (and,
        in the same write, for the policy's other objects due now, as many as the window
        has free): the action goes only once its place is recorded (:mod:`.places`)."""
        ref = self._refs.get(decision.policy or "")
        window = None if ref is None else self._windows.get(ref)
        found = None if ref is None else self._policy_of(str(ref))
        if ref is None or window is None or found is None or self.places is None:
            return
        action = decision.action
        if action is None:
            return
        due = occurrence_due(decision)
        want = [_place(key, uid, action, due)]
        for other, other_uid, other_due, other_action in self._due_objects(ref, now_ns):
            admitted = self._admitted.get(other)
            if other == key or (admitted is not None and admitted[:2] == (ref, other_due)):
                continue
            if self._reported.get(other, {}).get(ref) == other_due:
                continue  # a rehearsal reported already takes no place
            want.append(_place(other, other_uid, other_action, other_due))
        await self.places.reserve(ref, found[2], want, window)

    async def settle_places(self, now_ns: int) -> None:
        """Settle the batches of places a stopped leader left (:meth:`.PolicyPlaces.settle`):
        for the status writer, once every object has been decided since the start."""
        places = self.places
        if places is None:
            return
        for ref in places.settleable(now_ns):
            window = self._windows.get(ref)
            if window is not None:
                await places.settle(ref, window.limit.window_ns)

    def _wake(self, window: LimitWindow, now_ns: int) -> None:
        """A place is free and someone waits: the first waiter is told (it takes the place,
        then wakes the next if one is still free)."""
        if window.room(now_ns):
            waiting = window.first_waiting()
            if isinstance(waiting, ObjectKey):
                self.on_freed(waiting)

    def _rehearsal(self, policy: Policy, status: Mapping[str, object]) -> _Rehearsal:
        rehearsal = self._rehearsals.get(policy.ref)
        if rehearsal is None:
            through = reported_through(status)
            rehearsal = _Rehearsal(through, policy.generation, through)
            self._rehearsals[policy.ref] = rehearsal
        elif not self.settled:  # an edit before every object was decided once
            rehearsal.generation = policy.generation
        return rehearsal

    def _report(
        self, key: ObjectKey, policy: Policy, status: Mapping[str, object], decision: DryRun
    ) -> bool:
        """Remember a dry-run report; False if it was reported already (no audit entry), by
        this process or an earlier one."""
        due = decision.due_ns
        if due is None:
            return True
        ref = policy.ref
        reported = self._reported.setdefault(key, {})
        if reported.get(ref) == due:
            return False
        through = self._through(policy, status)
        rehearsal = self._rehearsal(policy, status)
        reported[ref] = due
        if through is not None and due <= through:
            return False  # an earlier process reported it
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
        ref, due, at_ns = admitted
        if self.places is not None:
            self.places.unuse(ref, key.id, due)
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
        if self.places is not None:
            self.places.drop(gone)
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
        if self.places is not None:
            dry_run = isinstance(decision, DryRun)
            self.places.finish(ref, key.id, occurrence_due(decision), dry_run=dry_run)
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

    def forget(self, key: ObjectKey, now_ns: int | None = None) -> None:
        """``key`` waits in no policy's line any more (gone, or decided otherwise); a place
        free now that it waited for goes to the next waiter."""
        ref = self._waits.pop(key, None)
        if ref is None:
            return
        window = self._windows.get(ref)
        if window is not None and window.leave(key):
            self._on_change(ref)
            self._wake(window, self._latest_ns if now_ns is None else now_ns)

    def gone(self, key: ObjectKey) -> None:
        self.forget(key)
        self._admitted.pop(key, None)
        self._reported.pop(key, None)

    def holding(self) -> set[PolicyRef]:
        """The policies whose limit holds objects now (their report changes as time passes)."""
        return {ref for ref in list(self._windows) if (w := self._current(ref)) and w.held}

    def state(self, ref: PolicyRef, now_ns: int) -> LimitState | None:
        window = self._current(ref)
        if window is None:
            return None
        return LimitState(window.limit, window.used(now_ns), window.held, window.held_until())


def _place(key: ObjectKey, uid: str, action: Action, due_ns: int) -> Place:
    """The place of one object's occurrence, as a batch names it."""
    return Place(
        resource=key.resource.key,
        kind=key.resource.kind,
        namespace=key.namespace or "",
        name=key.name,
        uid=uid,
        action=action.value,
        due_ns=due_ns,
    )


def _is_action(decision: Decision) -> bool:
    """``decision`` carries out (or reports) a due deletion or restart."""
    if decision.action is None:
        return False
    if isinstance(decision, (Delete, DryRun)):
        return True
    return isinstance(decision, Patch) and decision.operation is Operation.RESTART


def _acts(decision: Decision) -> bool:
    """``decision`` is a due action, or a guardrail's hold of one (which keeps an object's
    place in its policy's line)."""
    return isinstance(decision, Hold) or _is_action(decision)
