"""``rbac.readReferences``: list/watch on Pods and workloads for ``referencedBy``, only when on."""

from __future__ import annotations

from typing import Any

from tests.chart.support import FULLNAME, NAMESPACED_VALUES, Helm, one, rules

ROLE = f"{FULLNAME}-references-role"
RULES = [
    {"apiGroups": [""], "resources": ["pods"], "verbs": ["list", "watch"]},
    {
        "apiGroups": ["apps"],
        "resources": ["deployments", "statefulsets", "daemonsets", "replicasets"],
        "verbs": ["list", "watch"],
    },
    {"apiGroups": ["batch"], "resources": ["jobs", "cronjobs"], "verbs": ["list", "watch"]},
]


def _on(values: dict[str, Any]) -> dict[str, Any]:
    return {**values, "rbac": {"readReferences": True}}


def test_off_by_default_nothing_reads_pods(helm: Helm) -> None:
    docs = helm.render()
    assert [d for d in docs if d["metadata"]["name"].startswith(ROLE)] == []


def test_on_cluster_wide_a_read_only_role_and_one_binding(helm: Helm) -> None:
    docs = helm.render(_on({}))
    assert rules(one(docs, "ClusterRole", ROLE)) == RULES
    binding = one(docs, "ClusterRoleBinding", f"{FULLNAME}-references-rolebinding")
    assert binding["roleRef"]["name"] == ROLE


def test_on_namespaced_a_binding_per_namespace_only(helm: Helm) -> None:
    docs = helm.render(_on(NAMESPACED_VALUES))
    bindings = [
        d
        for d in docs
        if d["kind"] == "RoleBinding" and d["metadata"]["name"].endswith("-references-rolebinding")
    ]
    assert sorted(d["metadata"]["namespace"] for d in bindings) == ["team-a", "team-b"]
    assert not [
        d
        for d in docs
        if d["kind"] == "ClusterRoleBinding" and "references" in d["metadata"]["name"]
    ]
