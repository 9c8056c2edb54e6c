"""Per-policy aggregates of the objects' tallies, kept as the tallies change.

The status writer (:mod:`.status`) reports, per policy, how many objects it decides,
overlaps, holds and is kept from by protection or an exemption, leaves alone for its own
reasons, how many deletions ``max-delete-ttl`` refuses it, its earliest pending action and
the first object its condition failed on. Walking every object's tally for every policy on
each flush costs policies times objects every few seconds, even when nothing changes. Instead,
:class:`PolicyAggregates` is told of each tally that changes (:meth:`PolicyAggregates.update`)
and moves the object between the sets of the policies involved, marking them ``dirty``: the
writer then looks at the dirty policies only, and an idle cluster costs nothing.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterable
from dataclasses import dataclass, field
from typing import Protocol

from lifecycle_controller.core.decision.outcomes import Action
from lifecycle_controller.core.objects.resources import ObjectKey
from lifecycle_controller.core.policy.model import PolicyRef
from lifecycle_controller.core.policy.precedence import UnjudgedReason

__all__ = ["Aggregate", "PolicyAggregates", "TallyView"]


class TallyView(Protocol):
    """What an aggregate reads of one object's tally (``decisions.Tally``)."""

    @property
    def decided_by(self) -> tuple[PolicyRef, ...]: ...
    @property
    def overlapped(self) -> tuple[PolicyRef, ...]: ...
    @property
    def action(self) -> Action | None: ...
    @property
    def due_ns(self) -> int | None: ...
    @property
    def held_by(self) -> tuple[tuple[PolicyRef, UnjudgedReason], ...]: ...
    @property
    def protected_from(self) -> tuple[PolicyRef, ...]: ...
    @property
    def exempt_from(self) -> tuple[PolicyRef, ...]: ...
    @property
    def refused(self) -> tuple[tuple[PolicyRef, str], ...]: ...
    @property
    def left_alone_by(self) -> tuple[PolicyRef, ...]: ...


@dataclass
class Aggregate:
    """One policy's objects, by what the policy is to them."""

    #: Objects it decides, with their pending action's due time and action (None: none).
    matched: dict[ObjectKey, tuple[int, Action] | None] = field(default_factory=dict)
    overlapped: set[ObjectKey] = field(default_factory=set)
    #: Objects it holds, and why (``lifecycle_policy_held_objects{reason}``).
    held: dict[ObjectKey, UnjudgedReason] = field(default_factory=dict)
    #: How many it holds for each reason (kept with ``held``, so a flush does not count).
    held_by_reason: Counter[UnjudgedReason] = field(default_factory=Counter)
    protected: set[ObjectKey] = field(default_factory=set)
    #: Objects it would match but for ``exempt`` on them or on their Namespace.
    exempt: set[ObjectKey] = field(default_factory=set)
    #: Objects it matches but leaves alone for its own reasons (created after its ``*-at``).
    left_alone: set[ObjectKey] = field(default_factory=set)
    #: Objects its condition failed on, first seen first.
    condition_failed: dict[ObjectKey, None] = field(default_factory=dict)
    #: Objects whose deletion ``max-delete-ttl`` refuses, and why (``Refused``).
    refused: dict[ObjectKey, str] = field(default_factory=dict)
    #: How many it refuses for each cause (kept with ``refused``).
    refused_by_cause: Counter[str] = field(default_factory=Counter)

    def next_action(self) -> tuple[ObjectKey, int, Action] | None:
        """Its earliest pending action (cost: the objects it decides, once per flush)."""
        best: tuple[ObjectKey, int, Action] | None = None
        for key, pending in self.matched.items():
            if pending is not None and (best is None or pending[0] < best[1]):
                best = (key, pending[0], pending[1])
        return best

    def discard(self, key: ObjectKey) -> None:
        self.matched.pop(key, None)
        self.overlapped.discard(key)
        reason = self.held.pop(key, None)
        if reason is not None:
            self.held_by_reason[reason] -= 1
            if not self.held_by_reason[reason]:
                del self.held_by_reason[reason]
        self.protected.discard(key)
        self.exempt.discard(key)
        self.left_alone.discard(key)
        self.condition_failed.pop(key, None)
        cause = self.refused.pop(key, None)
        if cause is not None:
            self.refused_by_cause[cause] -= 1
            if not self.refused_by_cause[cause]:
                del self.refused_by_cause[cause]


_EMPTY = Aggregate()
#: The reasons its ``PolicyConditionFailed`` Warning reports: the condition could not be judged.
_CONDITION_FAILED = frozenset(
    {
        UnjudgedReason.CONDITION_ERROR,
        UnjudgedReason.REFERENCES_UNKNOWN,
        UnjudgedReason.SINCE_ERROR,
    }
)


def _held_for(tally: TallyView, ref: PolicyRef) -> UnjudgedReason | None:
    """Why ``ref`` holds the object (None: it does not)."""
    return next((reason for holder, reason in tally.held_by if holder == ref), None)


def _refs(tally: TallyView) -> set[PolicyRef]:
    return {
        *tally.decided_by,
        *tally.overlapped,
        *(ref for ref, _ in tally.held_by),
        *tally.protected_from,
        *tally.exempt_from,
        *(ref for ref, _ in tally.refused),
        *tally.left_alone_by,
    }


class PolicyAggregates:
    """See the module docstring."""

    def __init__(self) -> None:
        self._by_policy: dict[PolicyRef, Aggregate] = {}
        #: Policies whose aggregate changed since the writer last took them.
        self.dirty: set[PolicyRef] = set()

    def of(self, ref: PolicyRef) -> Aggregate:
        """The policy's aggregate (an empty one when no object concerns it)."""
        return self._by_policy.get(ref, _EMPTY)

    def update(self, key: ObjectKey, old: TallyView | None, new: TallyView | None) -> None:
        """The object's tally went from ``old`` to ``new`` (None: none)."""
        if old is not None:
            for ref in _refs(old):
                aggregate = self._by_policy.get(ref)
                if aggregate is not None:
                    aggregate.discard(key)
                self.dirty.add(ref)
        if new is None:
            return
        for ref in _refs(new):
            self.dirty.add(ref)
            aggregate = self._by_policy.setdefault(ref, Aggregate())
            if ref in new.decided_by:
                due, action = new.due_ns, new.action
                aggregate.matched[key] = None if due is None or action is None else (due, action)
            elif (reason := _held_for(new, ref)) is not None:
                aggregate.held[key] = reason
                aggregate.held_by_reason[reason] += 1
            elif ref in new.overlapped:
                aggregate.overlapped.add(key)
            elif ref in new.left_alone_by:
                aggregate.left_alone.add(key)
            if ref in new.protected_from:
                aggregate.protected.add(key)
            if ref in new.exempt_from:
                aggregate.exempt.add(key)
            if _held_for(new, ref) in _CONDITION_FAILED:
                aggregate.condition_failed.setdefault(key, None)
            cause = next((cause for refuser, cause in new.refused if refuser == ref), None)
            if cause is not None:
                aggregate.refused[key] = cause
                aggregate.refused_by_cause[cause] += 1

    def take_dirty(self) -> set[PolicyRef]:
        """The dirty policies, now clean."""
        dirty, self.dirty = self.dirty, set()
        return dirty

    def forget(self, refs: Iterable[PolicyRef]) -> None:
        """Policies gone: drop their aggregates."""
        for ref in refs:
            self._by_policy.pop(ref, None)
