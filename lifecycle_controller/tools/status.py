"""``lifecycle-controller status``: every annotated object in a live cluster, and its next action.

Runs discovery with the same scope flags as ``run``, lists metadata only (never specs or
Secret data) of every selected resource type, and explains each object that carries a
lifecycle annotation exactly as the controller would decide it now, problems included.
Resource types the caller may not list are reported, not fatal.

With lifecycle policies in the cluster (docs/policies.md) it keeps, of the types a policy
selects, also the unannotated objects a policy could match (as the controller's informers
do), and judges every kept object with the policies
(:func:`~lifecycle_controller.tools.policy_live.judge_live`): a row then names the policy its
action comes from. A workload a restart policy decides is read once for its Pod template's
restart marker, the one read beyond metadata, which the controller makes too.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any

from lifecycle_controller.controller.watch.cache import CachedObject
from lifecycle_controller.core import DecisionSettings
from lifecycle_controller.core.decision.namespace_defaults import (
    NamespaceDefaults,
    parse_namespace_defaults,
)
from lifecycle_controller.core.objects.copies import is_annotation_copy
from lifecycle_controller.core.objects.scope import ScopeConfig, plan_resources
from lifecycle_controller.core.policy.in_force import object_view
from lifecycle_controller.core.tooling.plan import GuardrailView
from lifecycle_controller.kube import KubeClient, KubeError, ResourceType
from lifecycle_controller.kube.discovery import fetch_discovery
from lifecycle_controller.kube.paging import pages
from lifecycle_controller.kube.resources import NAMESPACES
from lifecycle_controller.machinery.clock import Clock
from lifecycle_controller.tools.policy_live import (
    RestartMarkers,
    judge_live,
    read_fields,
    read_policies,
)
from lifecycle_controller.tools.policy_view import PolicyDocs
from lifecycle_controller.tools.report import Row, row_for


@dataclass
class StatusReport:
    rows: list[Row] = field(default_factory=list)
    unreadable: list[str] = field(default_factory=list)
    #: Lifecycle policies were read (the table shows a POLICY column).
    policies: bool = False
    #: The policies the rows were judged with (the console lists them beside the rows).
    docs: PolicyDocs = field(default_factory=PolicyDocs)


Metadata = Mapping[str, Any]
#: Told of every row with the object it was made from (the console reads its windows).
RowSeen = Callable[[ResourceType, Metadata, Row], None]


async def list_kept(
    kube: KubeClient,
    resource: ResourceType,
    namespace: str | None,
    keep: Callable[[Metadata], bool],
    *,
    field_selector: str | None = None,
    label_selector: str | None = None,
) -> list[Metadata]:
    """The metadata of every object of ``resource`` that ``keep`` accepts (all pages)."""
    found: list[Metadata] = []

    async def fetch(token: str | None) -> Mapping[str, Any]:
        return await kube.list_metadata(
            resource,
            namespace=namespace,
            continue_token=token,
            field_selector=field_selector,
            label_selector=label_selector,
        )

    async for page in pages(fetch):
        for item in page.get("items") or []:
            metadata = item.get("metadata") or {}
            if keep(metadata):
                found.append(metadata)
    return found


def _annotated(metadata: Metadata) -> bool:
    return CachedObject.from_metadata(metadata).annotated


def keeper(docs: PolicyDocs, resource: ResourceType) -> Callable[[Metadata], bool]:
    """What the controller's informers keep of ``resource``: annotated objects, and those a
    policy could match (``PolicySet.candidate``) when a policy selects the type."""
    policies = docs.policies
    if not policies.for_resource(resource):
        return _annotated
    return lambda metadata: (
        _annotated(metadata) or policies.candidate(object_view(resource, metadata))
    )


async def namespace_defaults(
    kube: KubeClient, namespace: str | None
) -> dict[str, NamespaceDefaults]:
    """The Namespaces' defaults (docs/annotations.md#namespace-defaults): just ``namespace``'s
    when one is given (a ``metadata.name`` field selector), else every Namespace's."""
    selector = None if namespace is None else f"metadata.name={namespace}"
    return defaults_of(await list_kept(kube, NAMESPACES, None, _annotated, field_selector=selector))


def defaults_of(namespaces: Iterable[Metadata]) -> dict[str, NamespaceDefaults]:
    """The defaults of the annotated ones among these Namespaces' metadata, by name."""
    objects = [CachedObject.from_metadata(metadata) for metadata in namespaces]
    return {
        obj.name: parse_namespace_defaults(obj.name, obj.annotations)
        for obj in objects
        if obj.annotated
    }


@dataclass(frozen=True)
class Judging:
    """What every object of one look is judged with (``status`` and the live tools)."""

    scope: ScopeConfig
    settings: DecisionSettings
    docs: PolicyDocs
    now_ns: int
    markers: RestartMarkers
    occurrences: int = 3
    guardrails: GuardrailView | None = None


async def judge_row(
    kube: KubeClient,
    resource: ResourceType,
    metadata: Metadata,
    judging: Judging,
    *,
    defaults: Mapping[str, NamespaceDefaults],
    fields: Mapping[str, Any] | None = None,
) -> Row | None:
    """The row of one kept object, judged as the controller would judge it now; None when
    there is nothing to show (out of scope, an annotation copy its owner's row shows, or
    only bookkeeping)."""
    obj = CachedObject.from_metadata(metadata)
    if not judging.scope.allows_object(resource, obj.namespace, obj.name):
        return None
    if not judging.settings.act_on_annotation_copies and is_annotation_copy(
        resource, obj.controller_owner
    ):
        return None  # the owner's annotations, shown on the owner's row
    explanation, verdict = await judge_live(
        kube,
        judging.markers,
        judging.docs,
        resource,
        metadata,
        now_ns=judging.now_ns,
        settings=judging.settings,
        occurrences=judging.occurrences,
        defaults=defaults.get(obj.namespace) if obj.namespace else None,
        guardrails=judging.guardrails,
        fields=fields,
    )
    if explanation.action is None and not explanation.problems:
        return None  # only bookkeeping (managed-by, a restart marker): nothing to show
    return row_for(
        api_version=resource.api_version,
        kind=resource.kind,
        namespace=obj.namespace,
        name=obj.name,
        explanation=explanation,
        verdict=verdict,
    )


async def collect_status(
    kube: KubeClient,
    *,
    scope: ScopeConfig,
    clock: Clock,
    settings: DecisionSettings,
    namespace: str | None = None,
    guardrails: GuardrailView | None = None,
    markers: RestartMarkers | None = None,
    occurrences: int = 3,
    seen: RowSeen | None = None,
) -> StatusReport:
    """Explain every annotated object of the selected types (optionally in one namespace),
    and every object a lifecycle policy decides or overlaps. ``markers``: workloads' restart
    markers already read (``--watch`` keeps them between looks); ``occurrences``: how many
    upcoming occurrences of a recurring schedule each row lists; ``seen``: told of each row
    with its object's metadata."""
    snapshot = await fetch_discovery(kube)
    plan = plan_resources(snapshot.resources, scope)
    now_ns = clock.now_ns()
    read = await read_policies(kube, now_ns=now_ns)
    docs = read.docs
    report = StatusReport(policies=docs.any, docs=docs)
    if read.problem is not None:
        report.unreadable.append(f"lifecycle policies (judged without them): {read.problem}")
    markers = RestartMarkers() if markers is None else markers
    try:
        defaults = await namespace_defaults(kube, namespace)
    except KubeError as error:
        report.unreadable.append(f"namespaces (namespace defaults are not shown): {error}")
        defaults = {}
    judging = Judging(
        scope=scope,
        settings=settings,
        docs=docs,
        now_ns=now_ns,
        markers=markers,
        occurrences=occurrences,
        guardrails=guardrails,
    )
    for resource in plan.watched:
        if namespace is not None and not resource.namespaced:
            continue
        where = namespace if resource.namespaced else None
        try:
            objects = await list_kept(kube, resource, where, keeper(docs, resource))
            fields = await read_fields(kube, resource, where, docs.policies.reads(resource))
        except KubeError as error:
            report.unreadable.append(f"{resource.key}: {error}")
            continue
        for metadata in objects:
            row = await judge_row(
                kube,
                resource,
                metadata,
                judging,
                defaults=defaults,
                fields=None if fields is None else fields.get(str(metadata.get("uid", "")), {}),
            )
            if row is not None:
                report.rows.append(row)
                if seen is not None:
                    seen(resource, metadata, row)
    report.rows.sort(key=lambda row: (row.next or "~", row.kind, row.namespace, row.name))
    return report
