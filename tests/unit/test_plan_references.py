"""``plan -f`` computes ``referencedBy`` among the given manifests."""

from __future__ import annotations

from typing import Any

from lifecycle_controller.config.build import build_settings
from lifecycle_controller.tools.options import controller_view
from lifecycle_controller.tools.plan import plan_report

NOW_NS = 1_800_000_000 * 10**9


def _configmap(name: str) -> dict[str, Any]:
    return {
        "apiVersion": "v1",
        "kind": "ConfigMap",
        "metadata": {"name": name, "namespace": "team-a"},
    }


POLICY: dict[str, Any] = {
    "apiVersion": "lifecycle.cezary.dev/v1alpha1",
    "kind": "ClusterLifecyclePolicy",
    "metadata": {"name": "unused"},
    "spec": {
        "resources": ["configmaps"],
        "condition": "size(referencedBy) == 0",
        "lifecycle": {"delete-after": "1h"},
    },
}

DEPLOYMENT: dict[str, Any] = {
    "apiVersion": "apps/v1",
    "kind": "Deployment",
    "metadata": {"name": "app", "namespace": "team-a"},
    "spec": {
        "replicas": 0,
        "template": {
            "spec": {"containers": [{"name": "c", "envFrom": [{"configMapRef": {"name": "used"}}]}]}
        },
    },
}


def test_plan_deletes_only_the_configmap_no_manifest_uses() -> None:
    view = controller_view(build_settings({"watch_resource": ("configmaps",)}))
    report = plan_report(
        [POLICY, DEPLOYMENT, _configmap("used"), _configmap("orphan")],
        now_ns=NOW_NS,
        controller=view,
    )
    rows = {row.name: row for row in report.rows if row.kind == "ConfigMap"}
    assert rows["orphan"].policy == "ClusterLifecyclePolicy/unused"
    assert rows["orphan"].action == "delete"
    assert "used" not in rows or rows["used"].policy == ""


def _claim(name: str) -> dict[str, Any]:
    return {
        "apiVersion": "v1",
        "kind": "PersistentVolumeClaim",
        "metadata": {"name": name, "namespace": "team-a"},
    }


def test_plan_keeps_the_claims_of_a_statefulset_scaled_to_zero() -> None:
    """``data-db-0`` has no Pod: it is used by ``StatefulSet/db`` (its template ``data``)."""
    policy = {**POLICY, "spec": {**POLICY["spec"], "resources": ["persistentvolumeclaims"]}}
    statefulset = {
        "apiVersion": "apps/v1",
        "kind": "StatefulSet",
        "metadata": {"name": "db", "namespace": "team-a"},
        "spec": {
            "replicas": 0,
            "template": {"spec": {"containers": [{"name": "c"}]}},
            "volumeClaimTemplates": [{"metadata": {"name": "data"}}],
        },
    }
    view = controller_view(build_settings({"watch_resource": ("persistentvolumeclaims",)}))
    report = plan_report(
        [policy, statefulset, _claim("data-db-0"), _claim("data-db-01"), _claim("idle")],
        now_ns=NOW_NS,
        controller=view,
    )
    deleted = sorted(row.name for row in report.rows if row.action == "delete")
    assert deleted == ["data-db-01", "idle"]  # a leading zero is no ordinal of db
