"""Where a change of the policies makes the controller read again, and where they make it watch.

A ``LifecyclePolicy`` reaches the objects of its own namespace only
(:class:`~lifecycle_controller.core.policy.reach.Reach`), so what it adds to the controller's
reads is bounded by that namespace:

* :func:`kept_change`: a policy change that changes which objects of a type the informers
  keep (objects dropped while listing may be kept now, kept ones may go) needs the type read
  again. When only LifecyclePolicies' filters changed, the namespaces they are in are read
  again, not the cluster; a ClusterLifecyclePolicy's filters, or the paths the conditions
  read beyond metadata (the informers' projection), change what is kept everywhere.
* :func:`decided_change`: a policy change that may change what is decided for the objects of
  a type needs them re-evaluated (the work queue, not a read): a LifecyclePolicy's edit, valid
  or not, re-queues the objects of its namespace; a ClusterLifecyclePolicy's, every object of
  the types it selects. An invalid policy counts for the types its readable ``resources``
  select (every type when they cannot be read), as it holds exactly those objects.
* :func:`reference_scope`: the reference index (``referencedBy``) watches Pods and workloads
  in the namespaces of the LifecyclePolicies that read it, cluster-wide once a
  ClusterLifecyclePolicy does (a Pod refers to objects of its own namespace only).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass

from lifecycle_controller.core.objects.resources import ResourceType
from lifecycle_controller.core.policy.in_force import PolicySet
from lifecycle_controller.core.policy.match import selects_resource, static_filters
from lifecycle_controller.core.policy.model import Policy, PolicyInvalid, PolicyKind, PolicyRef

__all__ = ["KeptChange", "decided_change", "kept_change", "reference_scope"]


@dataclass(frozen=True, slots=True)
class KeptChange:
    """Where a policy change changed which objects of one type the informers keep:
    ``everywhere`` (the type is listed again whole) or in ``namespaces`` only; neither when
    nothing kept changed (a new action, priority, or a condition reading the same paths)."""

    everywhere: bool = False
    namespaces: frozenset[str] = frozenset()

    def __bool__(self) -> bool:
        return self.everywhere or bool(self.namespaces)


_Filters = tuple[tuple[object, ...], ...]


def _kept_by_scope(
    policies: PolicySet, resource: ResourceType
) -> tuple[_Filters, dict[str, _Filters]]:
    """The static filters of the policies for ``resource``: the cluster policies' in one
    tuple, the LifecyclePolicies' by their namespace (each in the set's order)."""
    cluster: list[tuple[object, ...]] = []
    local: dict[str, list[tuple[object, ...]]] = {}
    for policy in policies.for_resource(resource):
        namespace = _own_namespace(policy)
        if namespace is None:
            cluster.append(static_filters(policy))
        else:
            local.setdefault(namespace, []).append(static_filters(policy))
    return tuple(cluster), {namespace: tuple(found) for namespace, found in local.items()}


def _own_namespace(policy: Policy | PolicyInvalid) -> str | None:
    """The namespace a LifecyclePolicy is bounded by (None: a ClusterLifecyclePolicy)."""
    return policy.ref.namespace if policy.ref.kind is PolicyKind.NAMESPACED else None


def _compared(
    old: tuple[object, Mapping[str, object]],
    new: tuple[object, Mapping[str, object]],
    resource: ResourceType,
) -> KeptChange:
    """Where two (cluster part, per-namespace parts) views of the policies differ: everywhere
    when the cluster part does (or the type is cluster-scoped), else the namespaces whose
    parts do."""
    (old_cluster, old_local), (new_cluster, new_local) = old, new
    if old_cluster != new_cluster:
        return KeptChange(everywhere=True)
    changed = frozenset(
        namespace
        for namespace in old_local.keys() | new_local.keys()
        if old_local.get(namespace) != new_local.get(namespace)
    )
    if changed and not resource.namespaced:
        return KeptChange(everywhere=True)
    return KeptChange(namespaces=changed)


def kept_change(old: PolicySet, new: PolicySet, resource: ResourceType) -> KeptChange:
    """Where going from ``old`` to ``new`` changed which objects of ``resource`` are kept
    (see the module docstring). A cluster-scoped type is read again whole: it is small, and
    no namespace bounds it."""
    if old.reads(resource) != new.reads(resource):
        return KeptChange(everywhere=True)
    return _compared(_kept_by_scope(old, resource), _kept_by_scope(new, resource), resource)


_Marks = frozenset[tuple[PolicyRef, int]]


def _concerned(policies: PolicySet, resource: ResourceType) -> tuple[_Marks, dict[str, _Marks]]:
    """Which generations of which policies may decide for (or hold) objects of ``resource``:
    the cluster policies' in one set, the LifecyclePolicies' by their namespace."""
    concerned: list[Policy | PolicyInvalid] = [*policies.for_resource(resource)]
    concerned.extend(
        p
        for p in policies.invalid
        if p.scope.resources is None or selects_resource(p.scope.resources, resource)
    )
    cluster: set[tuple[PolicyRef, int]] = set()
    local: dict[str, set[tuple[PolicyRef, int]]] = {}
    for policy in concerned:
        namespace = _own_namespace(policy)
        found = cluster if namespace is None else local.setdefault(namespace, set())
        found.add((policy.ref, policy.generation))
    return frozenset(cluster), {ns: frozenset(marks) for ns, marks in local.items()}


def decided_change(old: PolicySet, new: PolicySet, resource: ResourceType) -> KeptChange:
    """Where going from ``old`` to ``new`` may change what is decided for the objects of
    ``resource`` (see the module docstring): ``everywhere`` when a cluster policy concerning
    it came, went or has a new generation, else the namespaces of the LifecyclePolicies that
    did. A cluster-scoped type is re-evaluated whole, as :func:`kept_change` reads it."""
    return _compared(_concerned(old, resource), _concerned(new, resource), resource)


def reference_scope(policies: PolicySet) -> frozenset[str] | None:
    """Where the reference index must watch: None cluster-wide (a ClusterLifecyclePolicy's
    condition reads ``referencedBy``), else the namespaces of the LifecyclePolicies whose
    conditions read it (empty: the index is closed)."""
    namespaces: set[str] = set()
    for policy in policies.valid:
        if policy.condition is None or not policy.condition.reads_references:
            continue
        namespace = _own_namespace(policy)
        if namespace is None:
            return None
        namespaces.add(namespace)
    return frozenset(namespaces)
