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
    "values", [{}, NAMESPACED_VALUES, scope(watchResources=["*"])], ids=["cluster", "ns", "all"]
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


# --- policies installed with the release ----------------------------------------------------

CLEANUP: dict[str, Any] = {
    "resources": ["configmaps"],
    "selector": {"matchLabels": {"preview": "true", "shard": "0123"}},
    "lifecycle": {"delete-after": "72h", "dry-run": "false"},
}
RESTARTS: dict[str, Any] = {
    "resources": ["*.apps"],
    "namespaces": ["team-*"],
    "priority": 5,
    "includeOwned": False,
    "lifecycle": {"restart-cron": "0 3 * * *", "cron-timezone": "Europe/Warsaw"},
}


def rendered_policies(docs: list[Doc]) -> list[Doc]:
    return [d for d in docs if d["kind"] in ("ClusterLifecyclePolicy", "LifecyclePolicy")]


def test_no_policies_by_default(helm: Helm) -> None:
    assert rendered_policies(helm.render()) == []


def test_policies_are_rendered_as_given(helm: Helm) -> None:
    values = {
        "policies": [
            {"kind": "LifecyclePolicy", "name": "stale-previews", "spec": CLEANUP},
            {
                "kind": "LifecyclePolicy",
                "name": "elsewhere",
                "namespace": "team-a",
                "spec": CLEANUP,
            },
            {"kind": "ClusterLifecyclePolicy", "name": "nightly", "spec": RESTARTS},
        ]
    }
    # helm orders the documents by kind; this puts them back in the values' order.
    order = ["stale-previews", "elsewhere", "nightly"]
    policies = sorted(
        rendered_policies(helm.render(values)), key=lambda p: order.index(p["metadata"]["name"])
    )
    assert [(p["kind"], p["metadata"]["name"]) for p in policies] == [
        ("LifecyclePolicy", "stale-previews"),
        ("LifecyclePolicy", "elsewhere"),
        ("ClusterLifecyclePolicy", "nightly"),
    ]
    assert {p["apiVersion"] for p in policies} == {"lifecycle.cezary.dev/v1alpha1"}
    assert [p["metadata"].get("namespace") for p in policies] == [
        RELEASE_NAMESPACE,
        "team-a",
        None,
    ]
    # Strings that look like other types stay strings; nothing is added or dropped.
    assert [p["spec"] for p in policies] == [CLEANUP, CLEANUP, RESTARTS]
    labels = policies[0]["metadata"]["labels"]
    assert labels["app.kubernetes.io/instance"] == "rel"
    assert labels["app.kubernetes.io/component"] == "lifecycle-policy"


def test_a_cluster_policy_with_a_namespace_is_refused(helm: Helm) -> None:
    item = {"kind": "ClusterLifecyclePolicy", "name": "x", "namespace": "a", "spec": CLEANUP}
    error = helm.render_failure({"policies": [item]})
    assert (
        "policies[0] (x): a ClusterLifecyclePolicy is cluster-scoped and has no namespace" in error
    )


@pytest.mark.parametrize(
    ("item", "path"),
    [
        ({"kind": "Policy", "name": "x", "spec": CLEANUP}, "/policies/0/kind"),
        ({"kind": "LifecyclePolicy", "spec": CLEANUP}, "/policies/0"),
        ({"kind": "LifecyclePolicy", "name": "Not_A_Name", "spec": CLEANUP}, "/policies/0/name"),
        ({"kind": "LifecyclePolicy", "name": "x"}, "/policies/0"),
        ({"kind": "LifecyclePolicy", "name": "x", "spec": "delete-after: 1h"}, "/policies/0/spec"),
        ({"kind": "LifecyclePolicy", "name": "x", "spec": {"resources": ["configmaps"]}}, "spec"),
        (
            {"kind": "LifecyclePolicy", "name": "x", "spec": CLEANUP | {"resources": []}},
            "/policies/0/spec/resources",
        ),
        (
            {"kind": "LifecyclePolicy", "name": "x", "spec": CLEANUP | {"lifecycle": {"a": 1}}},
            "/policies/0/spec/lifecycle",
        ),
        ({"kind": "LifecyclePolicy", "name": "x", "spec": CLEANUP, "labels": {}}, "/policies/0"),
        (
            {"kind": "LifecyclePolicy", "name": "x", "namespace": "A B", "spec": CLEANUP},
            "namespace",
        ),
    ],
    ids=[
        "kind",
        "name-missing",
        "name-format",
        "spec-missing",
        "spec-type",
        "lifecycle-missing",
        "resources-empty",
        "lifecycle-value",
        "unknown-key",
        "namespace-format",
    ],
)
def test_the_schema_checks_each_policy_item(helm: Helm, item: dict[str, Any], path: str) -> None:
    error = helm.render_failure({"policies": [item]})
    assert "lifecycle-controller:" in error
    assert path in error


# --- the admission check of policies (proven on the API server: test_policy_admission.py) ----

CHECK = f"{FULLNAME}-policies"


def test_the_policy_check_is_on_by_default(helm: Helm) -> None:
    docs = helm.render()
    policy = one(docs, "ValidatingAdmissionPolicy", CHECK)
    assert policy["spec"]["failurePolicy"] == "Fail"
    assert policy["spec"]["matchConstraints"]["resourceRules"] == [
        {
            "apiGroups": [GROUP],
            "apiVersions": ["*"],
            "operations": ["CREATE", "UPDATE"],
            "resources": ["clusterlifecyclepolicies", "lifecyclepolicies"],
            "scope": "*",
        }
    ]
    binding = one(docs, "ValidatingAdmissionPolicyBinding", CHECK)
    assert binding["spec"] == {"policyName": CHECK, "validationActions": ["Deny"]}
    reasons = [v["reason"] for v in policy["spec"]["validations"]]
    # The authorization comes first: every resource named, globs, then enforce.
    assert reasons[:18] == ["Forbidden"] * 18
    assert set(reasons[18:]) == {"Invalid"}


def test_the_policy_check_follows_its_values(helm: Helm) -> None:
    selector = {"matchLabels": {"team": "0123"}}
    values = {
        "policyAdmission": {
            "validationActions": ["Warn", "Audit"],
            "failurePolicy": "Ignore",
            "namespaceSelector": selector,
        }
    }
    docs = helm.render(values)
    assert one(docs, "ValidatingAdmissionPolicy", CHECK)["spec"]["failurePolicy"] == "Ignore"
    binding = one(docs, "ValidatingAdmissionPolicyBinding", CHECK)["spec"]
    assert binding["validationActions"] == ["Warn", "Audit"]
    assert binding["matchResources"] == {"namespaceSelector": selector}
    # No object selector: a policy's author sets its labels, and would switch the check off.
    with_labels = {"policyAdmission": {"objectSelector": selector}}
    assert "additional properties 'objectSelector' not allowed" in helm.render_failure(with_labels)
    off = helm.render({"policyAdmission": {"enabled": False}})
    assert [d for d in off if d["metadata"]["name"] == CHECK] == []


@pytest.mark.parametrize(
    ("values", "path"),
    [
        ({"policyAdmission": {"enabled": "yes"}}, "/policyAdmission/enabled"),
        ({"policyAdmission": {"validationActions": ["Block"]}}, "/policyAdmission"),
        ({"policyAdmission": {"failurePolicy": "Retry"}}, "/policyAdmission/failurePolicy"),
        ({"policyAdmission": {"rejectUnknownKeys": True}}, "/policyAdmission"),
    ],
)
def test_the_policy_check_values_are_validated(
    helm: Helm, values: dict[str, Any], path: str
) -> None:
    assert path in helm.render_failure(values)


def test_the_notes_tell_how_to_list_policies_and_upgrade_the_crds(helm: Helm) -> None:
    notes = helm.notes()
    assert "kubectl get clusterlifecyclepolicies,lifecyclepolicies -A" in notes
    assert "never upgrades them" in notes
    assert "check of lifecycle policies is off" not in notes
    item = {"kind": "LifecyclePolicy", "name": "a", "spec": CLEANUP}
    notes = helm.notes({"policies": [item, item | {"name": "b"}]})
    assert "Lifecycle policies (2 installed with this release):" in notes
    off = helm.notes({"policyAdmission": {"enabled": False}})
    assert "The check of lifecycle policies is off" in off
    assert "lifecyclepolicies" not in helm.notes({"rbac": {"policies": False}})
