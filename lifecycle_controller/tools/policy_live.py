"""The live tools' reads for lifecycle policies: the policies themselves, and restart markers.

* :func:`read_policies` lists both kinds, whole (every page), the way the controller's
  policy store does. Without the CRDs there are no policies and nothing is said
  about them; a list that fails otherwise (forbidden, say) is reported by the caller and the
  objects are judged without policies.
* :class:`RestartMarkers` reads a workload once for its Pod template's
  ``lifecycle.cezary.dev/restartedAt`` when a restart policy decides it: a policy's recurring
  restart counts from that marker (docs/policies.md#how-a-policy-is-anchored), which the
  metadata never shows. The controller makes the same read. A workload's answer is kept for
  its resourceVersion, so ``status --watch`` reads it again only after it changed.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from functools import partial
from typing import Any

from lifecycle_controller.controller.watch.cache import CachedObject, object_facts
from lifecycle_controller.core import DecisionSettings
from lifecycle_controller.core.decision.namespace_defaults import NamespaceDefaults
from lifecycle_controller.core.decision.outcomes import Action
from lifecycle_controller.core.objects import keys
from lifecycle_controller.core.objects.pod_references import (
    REFERENCED_KINDS,
    REFERRING_TYPES,
    ReferenceIndex,
    object_references,
)
from lifecycle_controller.core.objects.resources import ResourceType
from lifecycle_controller.core.objects.rollout import restart_marker_of
from lifecycle_controller.core.policy.field_paths import fields_of, pick
from lifecycle_controller.core.policy.in_force import PolicySet, object_view
from lifecycle_controller.core.tooling.plan import Explanation, GuardrailView
from lifecycle_controller.kube import KubeClient, KubeError, NotFound
from lifecycle_controller.kube.paging import list_whole, pages
from lifecycle_controller.kube.resources import CLUSTER_POLICIES, NAMESPACES, POLICIES
from lifecycle_controller.tools.policy_view import PolicyDocs, PolicyVerdict, judge, policy_docs

__all__ = [
    "PolicyRead",
    "RestartMarkers",
    "judge_live",
    "needs_marker",
    "read_fields",
    "read_policies",
    "with_live_namespaces",
]


@dataclass(frozen=True)
class PolicyRead:
    """The policies in the cluster (empty without the CRDs) and, if listing failed, why."""

    docs: PolicyDocs = field(default_factory=PolicyDocs)
    manifests: tuple[Mapping[str, Any], ...] = ()
    problem: str | None = None


async def read_policies(kube: KubeClient, *, now_ns: int) -> PolicyRead:
    """Both policy kinds, every page of each, as the controller lists them."""
    manifests: list[Mapping[str, Any]] = []
    for resource in (CLUSTER_POLICIES, POLICIES):
        try:
            items, _ = await list_whole(partial(_page, kube, resource))
        except NotFound:
            return PolicyRead()  # the CRDs are not installed: policies are off
        except KubeError as error:
            return PolicyRead(problem=f"{resource.key}: {error}")
        for item in items:
            manifests.append({**item, "apiVersion": resource.api_version, "kind": resource.kind})
    docs = await with_live_namespaces(kube, policy_docs(manifests, now_ns=now_ns))
    return PolicyRead(docs, tuple(manifests))


async def with_live_namespaces(kube: KubeClient, docs: PolicyDocs) -> PolicyDocs:
    """``docs`` knowing the cluster's Namespaces' labels, when a policy selects namespaces
    by label (unreadable Namespaces stay unknown: their objects are held, as the controller
    holds them)."""
    if not docs.policies.selects_namespaces_by_label():
        return docs
    try:
        items, _ = await list_whole(partial(_page, kube, NAMESPACES))
    except KubeError:
        return docs
    return docs.with_namespaces({**item, "apiVersion": "v1", "kind": "Namespace"} for item in items)


async def _page(kube: KubeClient, resource: ResourceType, token: str | None) -> dict[str, Any]:
    return await kube.list_objects(resource, limit=500, continue_token=token)


def needs_marker(resource: ResourceType, policies: PolicySet, verdict: PolicyVerdict) -> bool:
    """Whether a restart policy decides this workload (its anchor needs the template marker)."""
    if not resource.restartable or verdict.inputs is None:
        return False
    decided = verdict.inputs.decided_by
    return decided is not None and decided.action is Action.RESTART and bool(policies)


class RestartMarkers:
    """Pod template markers by (uid, resourceVersion); see the module docstring."""

    def __init__(self) -> None:
        self._known: dict[tuple[str, str], str | None] = {}
        #: Each namespace's references (``referencedBy``), read once per command; None: the
        #: Pods or workloads could not be read.
        self.references: dict[str, ReferenceIndex | None] = {}

    async def referenced_by(
        self, kube: KubeClient, resource: ResourceType, metadata: Mapping[str, Any]
    ) -> tuple[str, ...] | None:
        """What uses the object in its namespace (None: unknown, a condition reading it
        holds)."""
        namespace = str(metadata.get("namespace") or "")
        if resource.group or resource.kind not in REFERENCED_KINDS or not namespace:
            return ()
        if namespace not in self.references:
            self.references[namespace] = await _namespace_references(kube, namespace)
        index = self.references[namespace]
        if index is None:
            return None
        return index.referenced_by(namespace, resource.kind, str(metadata.get("name", "")))

    async def marker(
        self,
        kube: KubeClient,
        resource: ResourceType,
        metadata: Mapping[str, Any],
    ) -> str | None:
        """The workload's marker (None: it has none, or it cannot be read)."""
        uid = str(metadata.get("uid", ""))
        version = str(metadata.get("resourceVersion", ""))
        if (uid, version) in self._known:
            return self._known[(uid, version)]
        namespace = metadata.get("namespace") or None
        try:
            workload = await kube.get(resource, namespace, str(metadata.get("name", "")))
        except KubeError:
            return None  # judged from its creation and the policy's acceptance alone
        found = restart_marker_of(workload, keys.RESTARTED_AT)
        if len(self._known) > 10_000:
            self._known.clear()
        self._known[(uid, version)] = found
        return found


async def _namespaced_page(
    kube: KubeClient, resource: ResourceType, namespace: str, token: str | None
) -> dict[str, Any]:
    return await kube.list_objects(resource, namespace=namespace, continue_token=token)


async def _namespace_references(kube: KubeClient, namespace: str) -> ReferenceIndex | None:
    index = ReferenceIndex()
    try:
        for referring in REFERRING_TYPES:
            items, _ = await list_whole(partial(_namespaced_page, kube, referring, namespace))
            for obj in items:
                name = str((obj.get("metadata") or {}).get("name", ""))
                found = object_references(referring.kind, obj)
                index.put(namespace, f"{referring.kind}/{name}", found)
    except KubeError:
        return None
    return index


async def judge_live(
    kube: KubeClient,
    markers: RestartMarkers,
    docs: PolicyDocs,
    resource: ResourceType,
    metadata: Mapping[str, Any],
    *,
    now_ns: int,
    settings: DecisionSettings,
    occurrences: int = 3,
    defaults: NamespaceDefaults | None = None,
    guardrails: GuardrailView | None = None,
    fields: Mapping[str, Any] | None = None,
) -> tuple[Explanation, PolicyVerdict]:
    """:func:`~.policy_view.judge` for a live object (``fields``: what its policies'
    conditions read beyond metadata); a workload a restart policy decides is read once for
    its template marker first, as the controller's policy step does."""
    policies = docs.policies
    view = object_view(resource, metadata, fields) if policies.for_resource(resource) else None
    kept = view if view is not None and policies.candidate(view) else None
    obj = CachedObject.from_metadata(metadata, view=kept)  # as the controller's cache has it
    marker: str | None = None
    referenced_by: tuple[str, ...] | None = None
    if kept is not None and policies.reads_references():
        referenced_by = await markers.referenced_by(kube, resource, metadata)
    for _ in range(2):
        explanation, verdict = judge(
            docs,
            resource,
            metadata,
            annotations=obj.annotations,
            facts=object_facts(resource, obj, restart_marker=marker),
            now_ns=now_ns,
            settings=settings,
            occurrences=occurrences,
            defaults=defaults,
            guardrails=guardrails,
            restart_marker=marker,
            fields=fields,
            referenced_by=referenced_by,
        )
        if marker is not None or not needs_marker(resource, docs.policies, verdict):
            break
        marker = await markers.marker(kube, resource, metadata)
        if marker is None:
            break
    return explanation, verdict


async def read_fields(
    kube: KubeClient,
    resource: ResourceType,
    namespace: str | None,
    reads: frozenset[tuple[str, ...]],
) -> dict[str, dict[str, Any]] | None:
    """By UID, the fields beyond metadata the conditions read of each object (whole objects
    listed, as the controller's informers do for such a type); None when none reads any."""
    if not reads:
        return None
    found: dict[str, dict[str, Any]] = {}

    async def fetch(token: str | None) -> Mapping[str, Any]:
        return await kube.list_objects(resource, namespace=namespace, continue_token=token)

    async for page in pages(fetch):
        for item in page.get("items") or []:
            uid = str((item.get("metadata") or {}).get("uid", ""))
            found[uid] = pick(fields_of(item), reads)
    return found
