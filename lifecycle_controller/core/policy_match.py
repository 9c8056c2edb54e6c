"""Whether a lifecycle policy matches an object, from the object's metadata alone.

A policy matches an object when every one of its filters accepts it, checked cheapest first:

1. **resource**: the object's resource key (``configmaps``, ``deployments.apps``) matches one
   of ``resources`` (Go globs, as ``--watch-resource``);
2. **namespace**: a ``LifecyclePolicy`` matches only objects in its own namespace (never a
   cluster-scoped one); a ``ClusterLifecyclePolicy`` with ``namespaces`` matches an object in
   a matching namespace, a Namespace whose own name matches, and no other cluster-scoped
   object;
3. **names** (globs; none: every name) and the label **selector** (none: every object);
4. **exempt**: ``lifecycle.cezary.dev/exempt`` on the object (any value but a false one, so
   a misspelt value errs on the side of leaving the object alone) stops every policy;
5. **owned**: an object with a *controller* owner reference (a Deployment's ReplicaSets, a
   Job's Pods) is matched only with ``includeOwned: true``;
6. the CEL **condition**, last because it is the dearest; its errors count as no match.

:func:`match` says which filter refused the object, for ``explain``; :func:`matches` is the
plain answer. :func:`unwatched_resources` names the entries of ``resources`` that select no
watched resource type (the policy's ``Unwatched`` condition).
"""

from __future__ import annotations

import enum
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from types import MappingProxyType

from lifecycle_controller.core import keys
from lifecycle_controller.core.globs import glob_match, matches_any
from lifecycle_controller.core.gotext import go_parse_bool
from lifecycle_controller.core.policy_condition import OwnerReference
from lifecycle_controller.core.policy_model import Policy, PolicyKind
from lifecycle_controller.core.resources import ResourceType

__all__ = [
    "MatchReason",
    "ObjectView",
    "PolicyMatch",
    "is_exempt",
    "match",
    "matches",
    "matches_statically",
    "unwatched_resources",
]

_EMPTY: Mapping[str, str] = MappingProxyType({})


class MatchReason(enum.StrEnum):
    """Why a policy does or does not match an object (``explain`` prints it)."""

    MATCHED = "matched"
    RESOURCE = "its resource is not one the policy names"
    NAMESPACE = "its namespace is outside the policy's"
    NAME = "its name matches none of the policy's names"
    SELECTOR = "its labels do not match the policy's selector"
    EXEMPT = "it is exempt (lifecycle.cezary.dev/exempt)"
    OWNED = "it has a controller owner and the policy does not include owned objects"
    CONDITION = "the policy's condition is false for it"
    CONDITION_ERROR = "the policy's condition could not be evaluated for it"


@dataclass(frozen=True, slots=True, kw_only=True)
class ObjectView:
    """The metadata of one object that matching reads."""

    resource: ResourceType
    namespace: str | None
    name: str
    labels: Mapping[str, str] = field(default_factory=lambda: _EMPTY)
    annotations: Mapping[str, str] = field(default_factory=lambda: _EMPTY)
    creation_ns: int | None = None
    owner_references: tuple[OwnerReference, ...] = ()

    @property
    def is_namespace(self) -> bool:
        """A core Namespace (a custom kind of that name is not one)."""
        return self.resource.group == "" and self.resource.kind == "Namespace"

    @property
    def has_controller(self) -> bool:
        return any(ref.controller for ref in self.owner_references)


@dataclass(frozen=True, slots=True)
class PolicyMatch:
    """The answer, the first filter that refused the object, and a condition's problem."""

    matched: bool
    reason: MatchReason
    problem: str | None = None


def is_exempt(annotations: Mapping[str, str]) -> bool:
    """Whether the object opts out of every policy (present and not a false boolean)."""
    value = annotations.get(keys.EXEMPT)
    return value is not None and go_parse_bool(value) is not False


def _in_scope(policy: Policy, view: ObjectView) -> bool:
    if policy.kind is PolicyKind.NAMESPACED:
        return view.namespace is not None and view.namespace == policy.ref.namespace
    if not policy.namespaces:
        return True
    if view.namespace is not None:
        return matches_any(policy.namespaces, view.namespace)
    return view.is_namespace and matches_any(policy.namespaces, view.name)


def _refused(reason: MatchReason, problem: str | None = None) -> PolicyMatch:
    return PolicyMatch(False, reason, problem)


def _static_refusal(policy: Policy, view: ObjectView) -> MatchReason | None:
    """Filters 1 to 3, which read only what the informers can judge while listing."""
    if not matches_any(policy.resources, view.resource.key):
        return MatchReason.RESOURCE
    if not _in_scope(policy, view):
        return MatchReason.NAMESPACE
    if policy.names and not matches_any(policy.names, view.name):
        return MatchReason.NAME
    if policy.selector is not None and not policy.selector.matches(view.labels):
        return MatchReason.SELECTOR
    return None


def static_filters(policy: Policy) -> tuple[object, ...]:
    """What :func:`matches_statically` reads of ``policy``: equal for two generations when
    the objects the informers keep for it are the same (only its action, condition, owned
    rule or priority changed)."""
    return (
        policy.ref,
        policy.resources,
        policy.namespaces,
        policy.names,
        policy.selector,
    )


def matches_statically(policy: Policy, view: ObjectView) -> bool:
    """Resource, scope, names and selector accept the object (whether to keep it cached)."""
    return _static_refusal(policy, view) is None


def match(policy: Policy, view: ObjectView) -> PolicyMatch:
    """Check the filters in the module's order; never raises."""
    refusal = _static_refusal(policy, view)
    if refusal is not None:
        return _refused(refusal)
    if is_exempt(view.annotations):
        return _refused(MatchReason.EXEMPT)
    if view.has_controller and not policy.include_owned:
        return _refused(MatchReason.OWNED)
    if policy.condition is not None:
        result = policy.condition.evaluate(
            name=view.name,
            namespace=view.namespace,
            labels=view.labels,
            annotations=view.annotations,
            creation_ns=view.creation_ns,
            owner_references=view.owner_references,
        )
        if result.problem is not None:
            return _refused(MatchReason.CONDITION_ERROR, result.problem)
        if not result.matched:
            return _refused(MatchReason.CONDITION)
    return PolicyMatch(True, MatchReason.MATCHED)


def matches(policy: Policy, view: ObjectView) -> bool:
    """Whether ``policy`` matches the object."""
    return match(policy, view).matched


def unwatched_resources(policy: Policy, watched_keys: Iterable[str]) -> tuple[str, ...]:
    """The entries of ``policy.resources`` that match none of the watched resource keys."""
    watched = tuple(watched_keys)
    return tuple(
        pattern
        for pattern in policy.resources
        if not any(glob_match(pattern, key) for key in watched)
    )
