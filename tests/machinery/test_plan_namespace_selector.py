"""``plan -f`` and ``explain``'s words with a ``namespaceSelector``
(docs/policies.md#namespaceselector): the labels of the Namespace manifests among the input
decide, an object whose Namespace is not among them is held, and the namespace selector's
part is shown."""

from __future__ import annotations

import json
from typing import Any

import yaml
from click.testing import CliRunner

from lifecycle_controller.cli import cli
from lifecycle_controller.core.objects.resources import ResourceType
from lifecycle_controller.core.policy.match import ObjectView
from lifecycle_controller.tools.explain_policies import PolicyReport, policy_lines, policy_report
from lifecycle_controller.tools.policy_view import PolicyVerdict, policy_docs
from tests.integration.policy_tools import cluster_policy

NOW = "2026-12-02T10:00:00Z"
CREATED = "2026-12-01T10:00:00Z"
CONFIGMAPS = ResourceType("", "v1", "configmaps", "ConfigMap", True)
POLICY = cluster_policy(
    "previews",
    resources=["configmaps"],
    namespaceSelector={"matchLabels": {"env": "preview"}},
    lifecycle={"delete-after": "72h"},
)


def namespace(name: str, **labels: str) -> dict[str, Any]:
    return {"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": name, "labels": labels}}


def configmap(name: str, space: str) -> dict[str, Any]:
    metadata = {"name": name, "namespace": space, "creationTimestamp": CREATED}
    return {"apiVersion": "v1", "kind": "ConfigMap", "metadata": metadata}


def plan(docs: list[dict[str, Any]]) -> tuple[dict[str, dict[str, Any]], str]:
    text = yaml.safe_dump_all(docs)
    runner = CliRunner()
    as_json = runner.invoke(cli, ["plan", "-f", "-", "--now", NOW, "-o", "json"], input=text)
    table = runner.invoke(cli, ["plan", "-f", "-", "--now", NOW], input=text)
    assert as_json.exit_code == 0, as_json.output
    rows = {f"{row['namespace']}/{row['name']}": row for row in json.loads(as_json.stdout)}
    return rows, table.stdout


def test_plan_reads_the_namespace_labels_among_its_manifests() -> None:
    rows, table = plan(
        [
            POLICY,
            namespace("team-a", env="preview"),
            namespace("team-b", env="prod"),
            configmap("a", "team-a"),
            configmap("b", "team-b"),
            configmap("c", "team-c"),  # its Namespace is not among the manifests
            configmap("s", "kube-system"),
        ]
    )
    assert rows["team-a/a"]["policy"] == "ClusterLifecyclePolicy/previews"
    assert rows["team-a/a"]["next"] == "2026-12-04T10:00:00Z"
    assert rows["team-a/a"]["namespace_selection"] == "namespace team-a labels match env=preview"
    assert "team-b/b" not in rows
    assert rows["team-c/c"]["policy"] == ""
    assert "labels are not known" in rows["team-c/c"]["held"]
    assert "kube-system/s" not in rows  # protected, never held
    assert "namespace team-a labels match env=preview" in table


def test_explain_says_why_the_namespace_selector_refused_or_decided() -> None:
    docs = policy_docs([POLICY], now_ns=0).with_namespaces(
        [namespace("team-a", env="preview"), namespace("team-b")]
    )
    refused = policy_report(docs, PolicyVerdict(), CONFIGMAPS, configmap("b", "team-b")["metadata"])
    assert refused is not None
    assert refused.not_matched == [
        {
            "policy": "ClusterLifecyclePolicy/previews",
            "why": "its namespace's labels do not match the policy's namespaceSelector: "
            "namespace team-b labels do not match env=preview",
        }
    ]
    view = docs.view(CONFIGMAPS, configmap("a", "team-a")["metadata"])
    assert isinstance(view, ObjectView)
    assert view.namespace_labels == {"env": "preview"}
    lines = policy_lines(
        PolicyReport(
            decided_by="ClusterLifecyclePolicy/previews",
            based_on="based on ClusterLifecyclePolicy/previews: delete-after 72h",
            overlapped=[],
            exempt=False,
            own_action=False,
            namespace_selection="namespace team-a labels match env=preview",
        )
    )
    assert lines[1] == "Namespace:    namespace team-a labels match env=preview (namespaceSelector)"
