"""Lifecycle policies in the leader's pipeline, composed: the store, the reference index and
the status writer.

The store is built first (the cache keeps what a policy could match, :func:`policy_store`) and
the policies are loaded before the informers start (their first list already keeps the objects
a policy could match). Afterwards :meth:`PolicyPipeline.changed` hands a change, in this order,
to what the new policies read besides the objects (the reference index's scopes, whether the
namespace store keeps every Namespace's labels), to the decisions' state (a removed policy's
pending actions are cancelled, and the log says so:
:meth:`~lifecycle_controller.controller.policy.decisions.PolicyDecisions.policies_changed`),
and to the requeue rule, which re-evaluates the objects concerned and lists a type again
only when what its informers keep changed
(:class:`~lifecycle_controller.controller.reconcile.requeue.PolicyRequeue`,
docs/policies.md#changing-a-policy, docs/architecture.md#scoped-relists).
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable, Mapping

from lifecycle_controller.app.informer_metrics import InformerMetricsAdapter
from lifecycle_controller.config.settings import Settings
from lifecycle_controller.controller.events.recorder import EventRecorder
from lifecycle_controller.controller.policy.decisions import PolicyDecisions
from lifecycle_controller.controller.policy.references import ReferenceWatch
from lifecycle_controller.controller.policy.status import PolicyStatusWriter
from lifecycle_controller.controller.policy.store import PolicyChange, PolicyStore
from lifecycle_controller.controller.reconcile.requeue import PolicyRequeue, Requeue
from lifecycle_controller.controller.watch.informers import InformerSet
from lifecycle_controller.core.policy.in_force import PolicySet
from lifecycle_controller.core.policy.match import (
    SYSTEM_NAMESPACES,
    Protection,
)
from lifecycle_controller.core.policy.read_scope import reference_scope
from lifecycle_controller.kube import KubeClient
from lifecycle_controller.kube.breaker_store import breaker_name
from lifecycle_controller.kube.resources import CLUSTER_POLICIES
from lifecycle_controller.machinery.clock import Clock
from lifecycle_controller.serving.metrics import Metrics

__all__ = ["PolicyPipeline", "policy_protection", "policy_store"]


def policy_protection(settings: Settings, default_namespace: str) -> Protection:
    """What no policy reaches: the system namespaces, ``--policy-protected-namespace``, the
    controller's own namespace (its Lease's) and there its Lease and breaker ConfigMap."""
    election = settings.leader_election
    return Protection(
        namespaces=SYSTEM_NAMESPACES | frozenset(settings.actions.policy_protected_namespaces),
        own_namespace=election.namespace or default_namespace,
        lease=election.name,
        breaker=breaker_name(election.name),
    )


def policy_store(
    kube: KubeClient,
    clock: Clock,
    metrics: Metrics,
    settings: Settings,
    *,
    served: Callable[[str], bool | None],
    on_change: PolicyChange,
    namespace_labels: Callable[[str], Mapping[str, str] | None],
    namespace_exempt: Callable[[str], bool],
) -> PolicyStore:
    """The leader's policy store: LifecyclePolicies counted in the namespaces the scope
    allows, looked for while discovery ``served`` them, protecting what
    :func:`policy_protection` names."""
    return PolicyStore(
        kube,
        clock=clock,
        namespaces=settings.scope.is_namespace_allowed,
        served=lambda: served(CLUSTER_POLICIES.key),
        protection=policy_protection(settings, kube.default_namespace),
        metrics=InformerMetricsAdapter(metrics, purpose="policies"),
        on_change=on_change,
        namespace_labels=namespace_labels,
        namespace_exempt=namespace_exempt,
    )


class PolicyPipeline:
    """See the module docstring; built once the informers and the decisions exist."""

    def __init__(
        self,
        store: PolicyStore,
        references: ReferenceWatch,
        decisions: PolicyDecisions,
        *,
        kube: KubeClient,
        clock: Clock,
        metrics: Metrics,
        recorder: EventRecorder,
        informers: InformerSet,
        requeue: Requeue,
        keep_namespace_labels: Callable[[bool], None],
        idle: Callable[[], bool] = lambda: False,
    ) -> None:
        """``keep_namespace_labels`` is told whether a policy in force has a
        namespaceSelector (the namespace store keeps every Namespace's labels only then);
        ``idle``: every object known has been decided since it last changed (the status
        writer's)."""
        self.store = store
        self.references = references  # open only while a policy reads referencedBy
        self._decisions = decisions
        self._requeue = PolicyRequeue(requeue, informers)
        self._keep_namespace_labels = keep_namespace_labels
        self.status = PolicyStatusWriter(
            kube,
            store,
            decisions,
            recorder,
            clock,
            watched_keys=lambda: [r.key for r in informers.running()],
            on_matched=metrics.policy.set_matched,
            on_held=metrics.policy.set_held,
            idle=idle,
        )

    async def load(self) -> None:
        """The policies as they are now, before the informers list (logs when they are off)."""
        await self.store.load()
        self._wants(self.store.current)

    def _wants(self, policies: PolicySet) -> None:
        """What the policies in force read besides the objects: who uses them (in the
        namespaces of the LifecyclePolicies that ask, cluster-wide once a cluster policy
        does), the labels of their Namespaces."""
        self.references.want(policies.reads_references(), reference_scope(policies))
        self._keep_namespace_labels(policies.selects_namespaces_by_label())

    async def run(self) -> None:
        try:
            async with asyncio.TaskGroup() as group:
                group.create_task(self.store.run(), name="lifecycle policies")
                group.create_task(self.status.run(), name="lifecycle policy status")
        finally:
            await self.references.aclose()

    async def changed(self, old: PolicySet, new: PolicySet) -> None:
        """The store's ``on_change``: see the module docstring."""
        self._wants(new)
        self._decisions.policies_changed(old, new)
        await self._requeue(old, new)
