"""Lifecycle policies in the leader's pipeline: load them, re-evaluate on change, report.

:class:`PolicyPipeline` owns the
:class:`~lifecycle_controller.controller.policy_store.PolicyStore` and the status writer. The
policies are loaded before the informers start (their first list already keeps the objects a
policy could match); afterwards a change of the policies that select a type re-evaluates its
cached policy objects, and lists that type again only when what the informers keep for it
changed (resources, namespaces, names or selector: objects dropped while listing may match
now; or the paths the conditions read beyond metadata: the informer relists with the new
projection), not for a new action, priority or a condition reading the same paths. When only
LifecyclePolicies' filters changed, only their namespaces are listed again, beside the
running watch (docs/architecture.md#scoped-relists); and when only LifecyclePolicies changed
(valid or invalid), only the objects of their namespaces are re-evaluated
(:func:`~lifecycle_controller.core.policy.read_scope.decided_change`); a removed policy's
pending actions are cancelled, and the log says so (docs/policies.md#changing-a-policy).
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable

import structlog

from lifecycle_controller.app.informer_metrics import InformerMetricsAdapter
from lifecycle_controller.config.settings import Settings
from lifecycle_controller.controller.cache import MetadataCache
from lifecycle_controller.controller.informers import InformerSet
from lifecycle_controller.controller.policy_decisions import PolicyDecisions
from lifecycle_controller.controller.policy_places import PolicyPlaces
from lifecycle_controller.controller.policy_status import PolicyStatusWriter
from lifecycle_controller.controller.policy_store import PolicyStore
from lifecycle_controller.controller.recorder import EventRecorder
from lifecycle_controller.controller.references import ReferenceWatch
from lifecycle_controller.core.objects.pod_references import (
    REFERENCED_KINDS,
    covers,
    used_kind,
)
from lifecycle_controller.core.objects.resources import ObjectKey, ResourceType
from lifecycle_controller.core.policy.in_force import PolicySet
from lifecycle_controller.core.policy.match import (
    DEFAULT_PROTECTION,
    SYSTEM_NAMESPACES,
    Protection,
)
from lifecycle_controller.core.policy.model import PolicyRef
from lifecycle_controller.core.policy.read_scope import (
    decided_change,
    kept_change,
    reference_scope,
)
from lifecycle_controller.kube import KubeClient
from lifecycle_controller.kube.breaker_store import breaker_name
from lifecycle_controller.kube.resources import CLUSTER_POLICIES
from lifecycle_controller.machinery.clock import Clock
from lifecycle_controller.serving.metrics import Metrics

__all__ = ["PolicyPipeline", "named_by"]

_log = structlog.get_logger(__name__)


def _refs(policies: PolicySet) -> set[PolicyRef]:
    """Every policy in the set, valid or not."""
    return {p.ref for p in policies.valid} | {p.ref for p in policies.invalid}


def named_by(cache: MetadataCache, namespace: str, kind: str, name: str) -> list[ObjectKey]:
    """The keys of the core-group objects a reference target names: one, or for a
    StatefulSet's claim template every claim of its ordinals the cache keeps in that
    namespace (any ordinal: they are looked for among the kept claims)."""
    named = used_kind(kind)
    found: list[ObjectKey] = []
    for resource in cache.types():
        if resource.group != "" or resource.kind != named:
            continue
        if named == kind:
            found.append(ObjectKey(resource, namespace, name))
        else:
            keys = cache.keys(resource, namespace=namespace)
            found.extend(key for key in keys if covers((kind, name), key.name))
    return found


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


class PolicyPipeline:
    """See the module docstring."""

    def __init__(
        self,
        kube: KubeClient,
        clock: Clock,
        metrics: Metrics,
        *,
        namespaces: Callable[[str], bool] | None = None,
        served: Callable[[str], bool | None] | None = None,
        protection: Protection = DEFAULT_PROTECTION,
        reference_namespaces: tuple[str, ...] | None = None,
    ) -> None:
        self.kube = kube
        self.clock = clock
        self.metrics = metrics
        found = None if served is None else (lambda: served(CLUSTER_POLICIES.key))
        self.store = PolicyStore(
            kube,
            clock=clock,
            namespaces=namespaces,
            served=found,
            protection=protection,
            metrics=InformerMetricsAdapter(metrics, purpose="policies"),
        )
        self.references = ReferenceWatch(  # open only while a policy reads referencedBy
            kube,
            clock,
            namespaces=reference_namespaces,
            metrics=InformerMetricsAdapter(metrics, purpose="references"),
        )
        #: Told whether a policy in force has a namespaceSelector (the namespace store keeps
        #: every Namespace's labels only then; set by the composition root).
        self.keep_namespace_labels: Callable[[bool], None] = lambda wanted: None

    def attach(
        self,
        *,
        cache: MetadataCache,
        informers: InformerSet,
        enqueue: Callable[[ObjectKey], None],
        allows: Callable[[ObjectKey], bool],
        decisions: PolicyDecisions,
        recorder: EventRecorder,
        idle: Callable[[], bool] = lambda: False,
    ) -> None:
        """Connect the store to the pipeline (after the reconciler exists); ``idle``: every
        object known has been decided since it last changed (the status writer's)."""
        self._cache = cache
        self._informers = informers
        self._enqueue = enqueue
        self._allows = allows
        self._decisions = decisions
        self.status = PolicyStatusWriter(
            self.kube,
            self.store,
            decisions,
            recorder,
            self.clock,
            watched_keys=lambda: [r.key for r in informers.running()],
            on_matched=self.metrics.policy.set_matched,
            on_held=self.metrics.policy.set_held,
            idle=idle,
        )
        self.store.on_change = self._changed
        decisions.limits.on_freed = enqueue  # a place a failed write gave back
        # A limit's places are recorded in the policy's status before they are used.
        decisions.limits.places = PolicyPlaces(self.kube, self.clock, done=decisions.place_done)
        decisions.references = self.references
        self.references.on_target = self._referenced
        self.references.on_synced = self._references_synced

    async def load(self) -> None:
        """The policies as they are now, before the informers list (logs when they are off)."""
        await self.store.load()
        self._wants(self.store.current)

    def _wants(self, policies: PolicySet) -> None:
        """What the policies in force read besides the objects: who uses them (in the
        namespaces of the LifecyclePolicies that ask, cluster-wide once a cluster policy
        does), the labels of their Namespaces."""
        self.references.want(policies.reads_references(), reference_scope(policies))
        self.keep_namespace_labels(policies.selects_namespaces_by_label())

    async def run(self) -> None:
        try:
            async with asyncio.TaskGroup() as group:
                group.create_task(self.store.run(), name="lifecycle policies")
                group.create_task(self.status.run(), name="lifecycle policy status")
        finally:
            await self.references.aclose()

    def _referenced(self, namespace: str, kind: str, name: str) -> None:
        """Who uses the target (namespace, kind, name) changed: re-evaluate the objects it
        names, if kept."""
        for key in named_by(self._cache, namespace, kind, name):
            obj = self._cache.get(key)
            if obj is not None and obj.view is not None and self._allows(key):
                self._enqueue(key)

    def _references_synced(self) -> None:
        """The index is complete: the objects held for it are decided again."""
        for resource in self._cache.types():
            if resource.group == "" and resource.kind in REFERENCED_KINDS:
                for key in self._policy_keys(resource):
                    self._enqueue(key)

    async def _changed(self, old: PolicySet, new: PolicySet) -> None:
        self._wants(new)
        self._decisions.matched_at.sync(new)  # a policy gone: its matchedAt (and record) too
        deleted = _refs(old) - _refs(new)
        if deleted:
            self._decisions.limits.drop(deleted)  # re-created, a policy starts a new window
        removed = {p.ref for p in old.valid} - {p.ref for p in new.valid}
        for ref in sorted(removed, key=str):
            pending = sum(1 for t in self._decisions.tallies.values() if ref in t.decided_by)
            _log.info(
                "lifecycle policy removed or invalid; its pending actions are cancelled",
                policy=str(ref),
                objects=pending,
            )
        for resource in sorted(self._informers.running()):
            decided = decided_change(old, new, resource)
            if not decided:
                continue
            namespaces = None if decided.everywhere else decided.namespaces
            keys = self._policy_keys(resource, namespaces)
            _log.info(
                "re-evaluating for changed policies",
                resource=str(resource),
                objects=len(keys),
                namespaces=None if namespaces is None else sorted(namespaces),
            )
            for key in keys:
                self._enqueue(key)
            kept = kept_change(old, new, resource)  # objects it dropped may match now
            if kept.everywhere:
                await self._informers.relist(resource)
            elif kept.namespaces:
                await self._informers.relist_namespaces(resource, kept.namespaces)

    def _policy_keys(
        self, resource: ResourceType, namespaces: frozenset[str] | None = None
    ) -> list[ObjectKey]:
        """The kept objects of ``resource`` a policy may decide for: in ``namespaces`` only
        when given (a LifecyclePolicy's change concerns its own namespace)."""
        return [
            key
            for key, obj in self._cache.items(resource)
            if (namespaces is None or key.namespace in namespaces)
            and obj.view is not None
            and self._allows(key)
        ]
