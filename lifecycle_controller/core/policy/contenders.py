"""The contenders for one action family of one object, and their order.

A contender is a valid policy that matches the object, or a **hold**
(:class:`PolicyHold`): an invalid policy that would match it, or a policy whose condition
could not be evaluated on it, or whose namespaceSelector cannot be judged because the
object's Namespace is not known yet. Contenders are ranked by layer (enforced cluster policies, the
object's own annotations, namespaced policies, the other cluster policies), then by
``priority`` (higher first; a hold whose priority cannot be read comes first of its layer),
then by name. :mod:`.policy_precedence` takes the first of each family as its winner.
"""

from __future__ import annotations

import enum
from collections.abc import Iterable
from dataclasses import dataclass
from typing import Final

from lifecycle_controller.core.decision.outcomes import Action
from lifecycle_controller.core.objects import keys
from lifecycle_controller.core.policy.model import Policy, PolicyInvalid, PolicyKind, PolicyRef

__all__ = [
    "CLUSTER_LAYER",
    "ENFORCED_LAYER",
    "FAMILY_KEYS",
    "NAMESPACED_LAYER",
    "Family",
    "PolicyHold",
    "PolicyHoldReason",
    "best_policy",
    "contender_order",
    "family_of",
    "precedence_order",
]


class Family(enum.StrEnum):
    """An action family: each has its own winner."""

    DELETE = "delete"
    RESTART = "restart"


FAMILY_KEYS: Final = {Family.DELETE: keys.DELETE_FAMILY, Family.RESTART: keys.RESTART_FAMILY}


def family_of(action: Action) -> Family:
    return Family.DELETE if action is Action.DELETE else Family.RESTART


class PolicyHoldReason(enum.StrEnum):
    """Why a policy holds an object instead of acting (``lifecycle_policy_held_objects``)."""

    INVALID = "invalid"
    CONDITION_ERROR = "condition-error"
    NAMESPACE_UNKNOWN = "namespace-unknown"


#: Precedence layers, best first.
ENFORCED_LAYER, OWN_LAYER, NAMESPACED_LAYER, CLUSTER_LAYER = range(4)


@dataclass(frozen=True, slots=True)
class PolicyHold:
    """A policy that holds an object: invalid, or its condition failed on the object."""

    ref: PolicyRef
    reason: PolicyHoldReason
    problem: str
    #: The families it holds (an invalid policy whose action is unreadable holds both).
    families: frozenset[Family]
    layer: int
    #: Its rank within the layer (None: unreadable, first).
    priority: int | None

    @classmethod
    def invalid(cls, policy: PolicyInvalid) -> PolicyHold:
        scope = policy.scope
        namespaced = policy.ref.kind is PolicyKind.NAMESPACED
        layer = (
            NAMESPACED_LAYER if namespaced else (ENFORCED_LAYER if scope.enforce else CLUSTER_LAYER)
        )
        families = frozenset(Family) if scope.action is None else {family_of(scope.action)}
        return cls(
            policy.ref,
            PolicyHoldReason.INVALID,
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
        reason: PolicyHoldReason = PolicyHoldReason.CONDITION_ERROR,
    ) -> PolicyHold:
        """Its condition failed on the object (or, ``reason``, its namespace is unknown)."""
        return cls(
            policy.ref,
            reason,
            problem,
            frozenset({family_of(policy.action)}),
            _layer(policy),
            policy.priority,
        )

    def describe(self) -> str:
        """``held: LifecyclePolicy/team-a/keep is invalid`` and the like."""
        if self.reason is PolicyHoldReason.INVALID:
            return f"held: {self.ref} is invalid"
        if self.reason is PolicyHoldReason.NAMESPACE_UNKNOWN:
            return f"held: {self.ref} selects namespaces by label: {self.problem}"
        return f"held: the condition of {self.ref} could not be evaluated: {self.problem}"


def _layer(policy: Policy) -> int:
    if policy.kind is PolicyKind.NAMESPACED:
        return NAMESPACED_LAYER
    return ENFORCED_LAYER if policy.enforce else CLUSTER_LAYER


def _name_key(ref: PolicyRef) -> str:
    return f"{ref.name}\x00{ref.namespace or ''}"


def contender_order(contender: Policy | PolicyHold) -> tuple[int, int, int, str]:
    if isinstance(contender, PolicyHold):
        unreadable = contender.priority is None
        priority = 0 if contender.priority is None else -contender.priority
        return (contender.layer, 0 if unreadable else 1, priority, _name_key(contender.ref))
    return (_layer(contender), 1, -contender.priority, _name_key(contender.ref))


def precedence_order(policy: Policy) -> tuple[int, int, int, str]:
    """Sort key, best first: enforced, namespaced, then cluster policies; priority; name."""
    return contender_order(policy)


def best_policy(policies: Iterable[Policy]) -> Policy | None:
    """The deciding one of several matching policies of one family."""
    return min(policies, key=precedence_order, default=None)
