"""``lifecycle-controller status``: every annotated object in a live cluster, and its next action.

Runs discovery with the same scope flags as ``run``, lists metadata only (never specs or
Secret data) of every selected resource type, and explains each object that carries a
lifecycle annotation exactly as the controller would decide it now, problems included.
Resource types the caller may not list are reported, not fatal.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from lifecycle_controller.controller.cache import CachedObject, object_facts
from lifecycle_controller.core import DecisionSettings
from lifecycle_controller.core.copies import is_annotation_copy
from lifecycle_controller.core.namespace_defaults import (
    NamespaceDefaults,
    parse_namespace_defaults,
)
from lifecycle_controller.core.plan import GuardrailView, explain
from lifecycle_controller.core.scope import ScopeConfig, plan_resources
from lifecycle_controller.kube import KubeClient, KubeError, ResourceType
from lifecycle_controller.kube.discovery import fetch_discovery
from lifecycle_controller.kube.resources import NAMESPACES
from lifecycle_controller.machinery.clock import Clock
from lifecycle_controller.tools.report import Row, row_for


@dataclass
class StatusReport:
    rows: list[Row] = field(default_factory=list)
    unreadable: list[str] = field(default_factory=list)


async def _annotated(
    kube: KubeClient,
    resource: ResourceType,
    namespace: str | None,
    *,
    field_selector: str | None = None,
) -> list[CachedObject]:
    found: list[CachedObject] = []
    token: str | None = None
    while True:
        page = await kube.list_metadata(
            resource, namespace=namespace, continue_token=token, field_selector=field_selector
        )
        for item in page.get("items") or []:
            obj = CachedObject.from_metadata(item.get("metadata") or {})
            if obj.annotated:
                found.append(obj)
        token = (page.get("metadata") or {}).get("continue") or None
        if not token:
            return found


async def namespace_defaults(
    kube: KubeClient, namespace: str | None
) -> dict[str, NamespaceDefaults]:
    """The Namespaces' defaults (docs/annotations.md#namespace-defaults): just ``namespace``'s
    when one is given (a ``metadata.name`` field selector), else every Namespace's."""
    selector = None if namespace is None else f"metadata.name={namespace}"
    annotated = await _annotated(kube, NAMESPACES, None, field_selector=selector)
    return {obj.name: parse_namespace_defaults(obj.name, obj.annotations) for obj in annotated}


async def collect_status(
    kube: KubeClient,
    *,
    scope: ScopeConfig,
    clock: Clock,
    settings: DecisionSettings,
    namespace: str | None = None,
    guardrails: GuardrailView | None = None,
) -> StatusReport:
    """Explain every annotated object of the selected types (optionally in one namespace)."""
    snapshot = await fetch_discovery(kube)
    plan = plan_resources(snapshot.resources, scope)
    report = StatusReport()
    now_ns = clock.now_ns()
    try:
        defaults = await namespace_defaults(kube, namespace)
    except KubeError as error:
        report.unreadable.append(f"namespaces (namespace defaults are not shown): {error}")
        defaults = {}
    for resource in plan.watched:
        if namespace is not None and not resource.namespaced:
            continue
        try:
            objects = await _annotated(kube, resource, namespace if resource.namespaced else None)
        except KubeError as error:
            report.unreadable.append(f"{resource.key}: {error}")
            continue
        for obj in objects:
            if not scope.allows_object(resource, obj.namespace, obj.name):
                continue
            if not settings.act_on_annotation_copies and is_annotation_copy(
                resource, obj.controller_owner
            ):
                continue  # the owner's annotations, shown on the owner's row
            explanation = explain(
                annotations=obj.annotations,
                facts=object_facts(resource, obj),
                now_ns=now_ns,
                settings=settings,
                namespace_defaults=defaults.get(obj.namespace) if obj.namespace else None,
                guardrails=guardrails,
            )
            if explanation.action is None and not explanation.problems:
                continue  # only bookkeeping (managed-by, a restart marker): nothing to show
            report.rows.append(
                row_for(
                    api_version=resource.api_version,
                    kind=resource.kind,
                    namespace=obj.namespace,
                    name=obj.name,
                    explanation=explanation,
                )
            )
    report.rows.sort(key=lambda row: (row.next or "~", row.kind, row.namespace, row.name))
    return report
