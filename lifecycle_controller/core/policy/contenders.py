"""The contenders of one object, and their order: what precedence ranks.

A contender for an object, in one action family (deletion, restart), is a valid policy that
matches it or an *unjudged policy*: an invalid policy that would match, or a valid one that
cannot be judged on the object (its condition or ``since`` failed, its Namespace's labels or
what uses the object are unknown). An unjudged policy that wins *holds* the object in its
families (fail closed: nothing acts; the policy's ``status.held`` counts it).
:mod:`.precedence` picks the winner among them; this module says
what a contender is (:class:`UnjudgedPolicy`, :class:`UnjudgedReason`), which family an action
belongs to, and the order: the layers (enforced cluster policies, the object's own
annotations, namespaced policies, the other cluster policies), then ``priority``, then name.
"""

from __future__ import annotations

import enum
from collections.abc import Iterable
from dataclasses import dataclass, field
from typing import Final

from lifecycle_controller.core.decision.outcomes import Action
from lifecycle_controller.core.objects import keys
from lifecycle_controller.core.policy.model import Policy, PolicyInvalid, PolicyKind, PolicyRef

__all__ = [
    "CLUSTER_LAYER",
    "ENFORCED_LAYER",
    "FAMILY_KEYS",
    "NAMESPACED_LAYER",
    "OWN_LAYER",
    "Family",
    "UnjudgedPolicy",
    "UnjudgedReason",
    "best_policy",
    "contender_order",
    "family_of",
    "policy_layer",
    "precedence_order",
]


class Family(enum.StrEnum):
    """An action family: each has its own winner."""

    DELETE = "delete"
    RESTART = "restart"


FAMILY_KEYS: Final = {Family.DELETE: keys.DELETE_FAMILY, Family.RESTART: keys.RESTART_FAMILY}


def family_of(action: Action) -> Family:
    return Family.DELETE if action is Action.DELETE else Family.RESTART


class UnjudgedReason(enum.StrEnum):
    """Why a policy cannot be judged on an object, and so holds it instead of acting (the
    ``reason`` of ``lifecycle_policy_held_objects``)."""

    INVALID = "invalid"
    CONDITION_ERROR = "condition-error"
    #: A ``namespaceSelector``'s Namespace labels are not known yet.
    NAMESPACE_UNKNOWN = "namespace-unknown"
    #: A condition reads ``referencedBy`` and what uses the object is not known (the
    #: reference index has not synced, or may not list a referring type).
    REFERENCES_UNKNOWN = "references-unknown"
    #: Its ``since`` could not be evaluated for the object (:mod:`.since`).
    SINCE_ERROR = "since-error"


#: Precedence layers, best first.
ENFORCED_LAYER, OWN_LAYER, NAMESPACED_LAYER, CLUSTER_LAYER = range(4)


@dataclass(frozen=True, slots=True)
class UnjudgedPolicy:
    """A policy that cannot be judged on an object (:class:`UnjudgedReason`), so it holds
    the object in its families."""

    ref: PolicyRef
    reason: UnjudgedReason
    problem: str
    #: The families it holds (an invalid policy whose action is unreadable holds both).
    families: frozenset[Family]
    layer: int
    #: Its rank within the layer (None: unreadable, first).
    priority: int | None
    #: The valid policy whose condition failed (None: an invalid one): one that leaves the
    #: object alone for its own reasons does not hold it (:func:`.coverage.leaves_alone`).
    policy: Policy | None = field(default=None, compare=False, repr=False)

    @classmethod
    def invalid(cls, policy: PolicyInvalid) -> UnjudgedPolicy:
        scope = policy.scope
        namespaced = policy.ref.kind is PolicyKind.NAMESPACED
        layer = (
            NAMESPACED_LAYER if namespaced else (ENFORCED_LAYER if scope.enforce else CLUSTER_LAYER)
        )
        families = frozenset(Family) if scope.action is None else {family_of(scope.action)}
        return cls(
            policy.ref,
            UnjudgedReason.INVALID,
            policy.message,
            frozenset(families),
            layer,
            scope.priority,
        )

    @classmethod
    def condition_error(
        cls,
        policy: Policy,
        problem: str,
        reason: UnjudgedReason = UnjudgedReason.CONDITION_ERROR,
    ) -> UnjudgedPolicy:
        """Its condition failed on the object (or, ``reason``, its namespace or what uses
        the object is unknown)."""
        return cls(
            policy.ref,
            reason,
            problem,
            frozenset({family_of(policy.action)}),
            policy_layer(policy),
            policy.priority,
            policy,
        )

    def describe(self) -> str:
        """``held: LifecyclePolicy/team-a/keep is invalid`` and the like."""
        if self.reason is UnjudgedReason.INVALID:
            return f"held: {self.ref} is invalid"
        if self.reason is UnjudgedReason.NAMESPACE_UNKNOWN:
            return f"held: {self.ref} selects namespaces by label: {self.problem}"
        if self.reason is UnjudgedReason.REFERENCES_UNKNOWN:
            return f"held: the condition of {self.ref} reads referencedBy: {self.problem}"
        if self.reason is UnjudgedReason.SINCE_ERROR:
            return f"held: the since of {self.ref} could not be evaluated: {self.problem}"
        return f"held: the condition of {self.ref} could not be evaluated: {self.problem}"


def policy_layer(policy: Policy) -> int:
    if policy.kind is PolicyKind.NAMESPACED:
        return NAMESPACED_LAYER
    return ENFORCED_LAYER if policy.enforce else CLUSTER_LAYER


def _name_key(ref: PolicyRef) -> str:
    return f"{ref.name}\x00{ref.namespace or ''}"


def contender_order(contender: Policy | UnjudgedPolicy) -> tuple[int, int, int, str]:
    if isinstance(contender, UnjudgedPolicy):
        unreadable = contender.priority is None
        priority = 0 if contender.priority is None else -contender.priority
        return (contender.layer, 0 if unreadable else 1, priority, _name_key(contender.ref))
    return (policy_layer(contender), 1, -contender.priority, _name_key(contender.ref))


def precedence_order(policy: Policy) -> tuple[int, int, int, str]:
    """Sort key, best first: enforced, namespaced, then cluster policies; priority; name."""
    return contender_order(policy)


def best_policy(policies: Iterable[Policy]) -> Policy | None:
    """The deciding one of several matching policies of one family."""
    return min(policies, key=precedence_order, default=None)


#: The object's own keys a deciding policy leaves out (they belong to annotation actions).
