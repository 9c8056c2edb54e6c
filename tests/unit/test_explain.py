"""``explain`` on the fake API server: resolving KIND/NAME, the report and its rendering."""

from __future__ import annotations

import pytest

from lifecycle_controller.core import DecisionSettings
from lifecycle_controller.core.objects import keys
from lifecycle_controller.core.objects.scope import DiscoveredResource, ScopeConfig
from lifecycle_controller.kube import KubeClient
from lifecycle_controller.kube.resources import CONFIGMAPS, NAMESPACES
from lifecycle_controller.tools.explain import (
    ExplainError,
    explain_object,
    render_report,
    resolve_resource,
)
from tests.doubles.fakeclock import FakeClock
from tests.unit.support import annotated

ALL = frozenset({"get", "list", "watch", "patch", "delete"})
CATALOGUE = [
    DiscoveredResource("", "v1", "configmaps", "ConfigMap", True, ALL, frozenset({"cm"})),
    DiscoveredResource("apps", "v1", "deployments", "Deployment", True, ALL, frozenset({"deploy"})),
    DiscoveredResource("example.com", "v1", "deployments", "Deployment", True, ALL),
    DiscoveredResource("a.example", "v1", "widgets", "Widget", True, ALL),
    DiscoveredResource("b.example", "v1", "widgets", "Widget", True, ALL),
    DiscoveredResource("", "v1", "pods/status", "Pod", True, ALL),
]


@pytest.mark.parametrize(
    ("name", "key"),
    [
        ("configmap", "configmaps"),
        ("ConfigMaps", "configmaps"),
        ("cm", "configmaps"),
        ("deploy", "deployments.apps"),
        ("deployment", "deployments.apps"),  # apps wins over a CRD of the same kind
        ("deployments.example.com", "deployments.example.com"),
        ("deployment.example.com", "deployments.example.com"),
        ("widgets.b.example", "widgets.b.example"),
    ],
)
def test_resolve_resource(name: str, key: str) -> None:
    assert resolve_resource(CATALOGUE, name).key == key


def test_unknown_and_ambiguous_names() -> None:
    with pytest.raises(ExplainError, match="doesn't have a resource type 'gizmo'"):
        resolve_resource(CATALOGUE, "gizmo")
    with pytest.raises(ExplainError, match=r"ambiguous: say which of widgets\.a\.example"):
        resolve_resource(CATALOGUE, "widget")
    with pytest.raises(ExplainError):
        resolve_resource(CATALOGUE, "pods/status")


async def test_explain_a_configmap(kube: KubeClient, clock: FakeClock) -> None:
    due = "2026-01-01T02:00:00Z"
    body = annotated("preview", {keys.DELETE_AT: due, keys.CATCH_UP: "15m"})
    await kube.create(CONFIGMAPS, "team-a", body)
    report = await explain_object(
        kube,
        "configmap/preview",
        namespace="team-a",
        scope=ScopeConfig(),
        settings=DecisionSettings(),
        now_ns=clock.now_ns(),
    )
    assert (report.kind, report.namespace, report.name) == ("ConfigMap", "team-a", "preview")
    assert report.action == "delete"
    assert report.due == due
    assert report.due_relative == "in 2h"
    assert report.catch_up.startswith("15m (annotation); if the controller is down at the due")
    assert report.watched is True
    assert report.why_nothing_happened is None
    text = render_report(report)
    assert "Due:          2026-01-01T02:00:00Z (in 2h)" in text
    assert "Events:       none" in text

    outside = await explain_object(
        kube,
        "configmaps/preview",
        namespace="team-a",
        scope=ScopeConfig(ignore_namespaces=("team-*",)),
        settings=DecisionSettings(dry_run=True),
        now_ns=clock.now_ns(),
    )
    assert outside.watched is False
    assert outside.dry_run == "yes (--dry-run)"
    assert outside.why_nothing_happened is not None
    assert "outside the namespace watch list" in outside.why_nothing_happened


async def test_missing_object_and_bad_target(kube: KubeClient, clock: FakeClock) -> None:
    settings = DecisionSettings()
    with pytest.raises(ExplainError, match='configmaps "ghost" not found in namespace default'):
        await explain_object(
            kube,
            "configmap/ghost",
            namespace=None,
            scope=ScopeConfig(),
            settings=settings,
            now_ns=clock.now_ns(),
        )
    with pytest.raises(ExplainError, match="expected KIND/NAME"):
        await explain_object(
            kube,
            "ghost",
            namespace=None,
            scope=ScopeConfig(),
            settings=settings,
            now_ns=clock.now_ns(),
        )


async def test_explain_names_the_namespace_defaults(kube: KubeClient, clock: FakeClock) -> None:
    await kube.create(
        NAMESPACES, None, annotated("previews", {keys.DRY_RUN: "true", keys.CATCH_UP: "never"})
    )
    await kube.create(
        CONFIGMAPS, "previews", annotated("tmp", {keys.DELETE_AT: "2026-01-01T02:00:00Z"})
    )
    report = await explain_object(
        kube,
        "configmap/tmp",
        namespace="previews",
        scope=ScopeConfig(),
        settings=DecisionSettings(),
        now_ns=clock.now_ns(),
    )
    assert report.dry_run == "yes (namespace previews)"
    assert report.catch_up.startswith("never (default of namespace previews)")
    assert report.inherited == [
        "catch-up: never (from namespace previews)",
        "dry-run: true (from namespace previews)",
    ]
    assert "Inherited:    dry-run: true (from namespace previews)" in render_report(report)
