"""helm template of the chart's lifecycle policy parts: the controller's RBAC for policies.

No cluster is needed; docs/policies.md says what policies are, and
tests/chart/test_least_privilege.py proves on the real API server that the controller carries
them out with exactly these rules.
"""

from __future__ import annotations

from typing import Any

import pytest

from tests.chart.support import (
    FULLNAME,
    NAMESPACED_VALUES,
    RELEASE_NAMESPACE,
    Doc,
    Helm,
    of_kind,
    one,
    rules,
)

GROUP = "lifecycle.cezary.dev"
POLICY_RULES = [
    {
        "apiGroups": [GROUP],
        "resources": ["clusterlifecyclepolicies", "lifecyclepolicies"],
        "verbs": ["get", "list", "watch"],
    },
    {
        "apiGroups": [GROUP],
        "resources": ["clusterlifecyclepolicies/status", "lifecyclepolicies/status"],
        "verbs": ["patch"],
    },
]
EVENT_RULES = [
    {"apiGroups": [""], "resources": ["events"], "verbs": ["create", "patch"]},
    {"apiGroups": ["events.k8s.io"], "resources": ["events"], "verbs": ["create", "patch"]},
]


def scope(**lists: Any) -> dict[str, Any]:
    return {"controllerManager": {"scope": lists}}


def policy_rbac(docs: list[Doc]) -> list[Doc]:
    return [d for d in docs if "-policy-" in d["metadata"]["name"] and d["kind"] != "Deployment"]


def grants_policies(doc: Doc) -> bool:
    return any(GROUP in rule.get("apiGroups", ()) for rule in doc.get("rules", ()))


@pytest.mark.parametrize(
    "values", [{}, NAMESPACED_VALUES, scope(watchResources=[])], ids=["cluster", "ns", "all"]
)
def test_the_policy_role_is_the_same_whatever_the_scope(helm: Helm, values: Any) -> None:
    docs = helm.render(values)
    role = one(docs, "ClusterRole", f"{FULLNAME}-policy-role")
    assert rules(role) == POLICY_RULES
    binding = one(docs, "ClusterRoleBinding", f"{FULLNAME}-policy-rolebinding")
    assert binding["roleRef"]["name"] == f"{FULLNAME}-policy-role"
    assert binding["subjects"] == [
        {"kind": "ServiceAccount", "name": FULLNAME, "namespace": RELEASE_NAMESPACE}
    ]
    # No other role mentions the policy group (an explicit watch list never includes it).
    others = [d for d in docs if d["kind"] in ("ClusterRole", "Role") and d is not role]
    assert [d["metadata"]["name"] for d in others if grants_policies(d)] == []


def test_cluster_rbac_needs_no_extra_event_role(helm: Helm) -> None:
    assert [d["kind"] for d in policy_rbac(helm.render())] == ["ClusterRole", "ClusterRoleBinding"]


def test_namespaced_rbac_adds_events_in_default_only_when_missing(helm: Helm) -> None:
    namespaced = scope(watchResources=["configmaps"], watchNamespaces=["team-a"])
    docs = helm.render(namespaced)
    role = one(docs, "Role", f"{FULLNAME}-policy-events-role")
    assert role["metadata"]["namespace"] == "default"
    assert rules(role) == EVENT_RULES
    binding = one(docs, "RoleBinding", f"{FULLNAME}-policy-events-rolebinding")
    assert binding["metadata"]["namespace"] == "default"
    assert binding["roleRef"] == {
        "apiGroup": "rbac.authorization.k8s.io",
        "kind": "Role",
        "name": f"{FULLNAME}-policy-events-role",
    }
    # default watched: its manager Role has the Event rules; Namespaces watched: the
    # namespace-events Role in default has them.
    for values in (
        scope(watchResources=["configmaps"], watchNamespaces=["team-a", "default"]),
        scope(watchResources=["configmaps", "namespaces"], watchNamespaces=["team-a"]),
    ):
        docs = helm.render(values)
        assert not of_kind(policy_rbac(docs), "Role")
        in_default = [d for d in of_kind(docs, "Role") if d["metadata"]["namespace"] == "default"]
        assert any(all(r in rules(d) for r in EVENT_RULES) for d in in_default)


@pytest.mark.parametrize(
    "values", [{"rbac": {"policies": False}}, {"rbac": {"create": False}}], ids=["off", "no-rbac"]
)
def test_policy_rbac_can_be_left_out(helm: Helm, values: dict[str, Any]) -> None:
    for scoped in ({}, scope(watchResources=["configmaps"], watchNamespaces=["team-a"])):
        assert policy_rbac(helm.render(values | scoped)) == []


def test_rbac_policies_must_be_a_boolean(helm: Helm) -> None:
    error = helm.render_failure({"rbac": {"policies": "yes"}})
    assert "/rbac/policies" in error
