"""``plan`` and ``explain`` over a condition that reads ``object.spec``: the manifests' whole
objects are judged, and the report says which field decided."""

from __future__ import annotations

from typing import Any

from lifecycle_controller.core.objects.resources import ResourceType
from lifecycle_controller.core.policy.field_paths import fields_of
from lifecycle_controller.tools.explain_policies import policy_lines, policy_report
from lifecycle_controller.tools.policy_view import PolicyDocs, PolicyVerdict, policy_docs

DEPLOYMENTS = ResourceType("apps", "v1", "deployments", "Deployment", namespaced=True)
NOW_NS = 1_764_669_600 * 10**9  # 2025-12-02T10:00:00Z


def _policy(condition: str) -> dict[str, Any]:
    return {
        "apiVersion": "lifecycle.cezary.dev/v1alpha1",
        "kind": "LifecyclePolicy",
        "metadata": {"name": "scaled-to-zero", "namespace": "staging"},
        "spec": {
            "resources": ["deployments.apps"],
            "condition": condition,
            "lifecycle": {"delete-after": "168h"},
        },
    }


def _deployment(replicas: int) -> dict[str, Any]:
    return {
        "apiVersion": "apps/v1",
        "kind": "Deployment",
        "metadata": {"name": "web", "namespace": "staging"},
        "spec": {"replicas": replicas, "template": {"spec": {"containers": []}}},
    }


def _docs(condition: str = "object.spec.replicas == 0") -> PolicyDocs:
    return policy_docs([_policy(condition)], now_ns=NOW_NS)


def test_a_refusal_names_the_field_the_condition_read() -> None:
    obj = _deployment(1)
    report = policy_report(
        _docs(), PolicyVerdict(), DEPLOYMENTS, obj["metadata"], fields=fields_of(obj)
    )
    assert report is not None
    (refused,) = report.not_matched
    assert refused["why"].endswith("(condition read object.spec.replicas = 1)")
    assert report.condition_read is None


def test_the_deciding_policy_shows_what_its_condition_read() -> None:
    obj = _deployment(0)
    verdict = PolicyVerdict(decided_by="LifecyclePolicy/staging/scaled-to-zero")
    report = policy_report(_docs(), verdict, DEPLOYMENTS, obj["metadata"], fields=fields_of(obj))
    assert report is not None
    assert report.not_matched == []
    assert report.condition_read == "condition read object.spec.replicas = 0"
    assert "Condition:    condition read object.spec.replicas = 0" in policy_lines(report)


def test_a_missing_field_is_said_to_be_absent() -> None:
    obj = _deployment(0)
    del obj["spec"]["replicas"]
    docs = _docs("has(object.spec.replicas) && object.spec.replicas == 0")
    report = policy_report(docs, PolicyVerdict(), DEPLOYMENTS, obj["metadata"], fields=obj)
    assert report is not None
    (refused,) = report.not_matched
    assert "object.spec.replicas is absent" in refused["why"]


def test_a_metadata_condition_adds_nothing() -> None:
    obj = _deployment(1)
    docs = _docs('object.metadata.name == "other"')
    report = policy_report(docs, PolicyVerdict(), DEPLOYMENTS, obj["metadata"], fields=obj)
    assert report is not None
    (refused,) = report.not_matched
    assert "condition read" not in refused["why"]
