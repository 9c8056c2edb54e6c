"""The fake nodes' pieces without a cluster: kwok's stages, the Node manifests, the arguments.

The integration tests (tests/integration/test_real_rollouts.py) prove that kwok plays these
stages; here the configuration is read back as kwok reads it (YAML documents), so a stage
lost or mis-keyed in an edit fails in seconds, and the Node creation is checked against a
recording stand-in for the admin client.
"""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path
from typing import Any

import pytest
import yaml

from lifecycle_controller.devcluster.admin import ApiResponse, ControlPlaneError
from lifecycle_controller.devcluster.nodes import (
    FAIL_LABEL,
    NODE_ANNOTATION,
    SUCCEED_LABEL,
    UNREADY_LABEL,
    FakeNodes,
    create_fake_nodes,
    fake_node,
    fake_nodes_ready,
    kwok_argv,
    kwok_configuration,
)


def _stages(nodes: FakeNodes) -> dict[str, dict[str, Any]]:
    documents = list(yaml.safe_load_all(kwok_configuration(nodes)))
    assert all(doc["kind"] == "Stage" for doc in documents)
    return {doc["metadata"]["name"]: doc["spec"] for doc in documents}


def test_the_stages_kwok_plays() -> None:
    stages = _stages(FakeNodes(3, pod_ready_delay=1.5))
    assert sorted(stages) == [
        "node-initialize",
        "pod-delete",
        "pod-failed",
        "pod-ready",
        "pod-running-unready",
        "pod-succeeded",
    ]
    assert stages["node-initialize"]["resourceRef"] == {"apiGroup": "v1", "kind": "Node"}
    ready, unready = stages["pod-ready"], stages["pod-running-unready"]
    assert ready["delay"] == unready["delay"] == {"durationMilliseconds": 1500}
    # Exclusive: a Pod labelled unready never matches the stage that makes Pods Ready.
    keys = {(e["key"], e["operator"]) for e in ready["selector"]["matchExpressions"]}
    assert (f'.metadata.labels["{UNREADY_LABEL}"]', "DoesNotExist") in keys
    assert unready["selector"]["matchLabels"] == {UNREADY_LABEL: "true"}
    assert (
        '  status: "False"\n  reason: ContainersNotReady\n  type: Ready\n'
        in (unready["next"]["statusTemplate"])
    )
    assert "type: Ready" in ready["next"]["statusTemplate"]
    assert stages["pod-delete"]["next"] == {"delete": True}


def test_a_pod_labelled_to_fail_fails_and_never_becomes_ready() -> None:
    stages = _stages(FakeNodes(1, pod_ready_delay=0.5))
    ready, failed = stages["pod-ready"], stages["pod-failed"]
    keys = {(e["key"], e["operator"]) for e in ready["selector"]["matchExpressions"]}
    assert (f'.metadata.labels["{FAIL_LABEL}"]', "DoesNotExist") in keys
    assert failed["selector"]["matchLabels"] == {FAIL_LABEL: "true"}
    assert failed["delay"] == {"durationMilliseconds": 500}
    template = failed["next"]["statusTemplate"]
    assert "phase: Failed" in template
    assert "exitCode: 1" in template
    assert "finishedAt: {{ $now | Quote }}" in template
    succeeded = stages["pod-succeeded"]
    assert succeeded["selector"]["matchLabels"] == {SUCCEED_LABEL: "true"}
    assert "phase: Succeeded" in succeeded["next"]["statusTemplate"]
    assert "exitCode: 0" in succeeded["next"]["statusTemplate"]
    assert (f'.metadata.labels["{SUCCEED_LABEL}"]', "DoesNotExist") in keys


def test_a_node_for_kwok() -> None:
    nodes = FakeNodes(2, cpu="4", memory="8Gi", pods=20)
    assert nodes.names() == ["kwok-node-0", "kwok-node-1"]
    node = fake_node("kwok-node-1", nodes)
    assert node["metadata"]["annotations"] == {NODE_ANNOTATION: "fake"}
    assert node["metadata"]["labels"]["kubernetes.io/hostname"] == "kwok-node-1"
    assert node["status"]["allocatable"] == {"cpu": "4", "memory": "8Gi", "pods": "20"}
    argv = kwok_argv(Path("kwok"), Path("admin.kubeconfig"), Path("kwok.yaml"))
    assert f"--manage-nodes-with-annotation-selector={NODE_ANNOTATION}=fake" in argv
    assert "--manage-all-nodes=false" in argv


class RecordingAdmin:
    """Answers like the API server would, and records each request."""

    def __init__(self, answers: dict[str, int], nodes: list[dict[str, Any]]) -> None:
        self.answers = answers
        self.nodes = nodes
        self.requests: list[tuple[str, str, Mapping[str, Any] | None]] = []

    def request(
        self,
        method: str,
        path: str,
        body: Mapping[str, Any] | None = None,
        *,
        content_type: str = "application/json",
        timeout: float = 30.0,
    ) -> ApiResponse:
        self.requests.append((method, path, body))
        if method == "GET":
            return ApiResponse(200, {"items": self.nodes})
        return ApiResponse(self.answers.get(method, 200), {})


def test_nodes_are_created_then_untainted() -> None:
    admin = RecordingAdmin({"POST": 409}, [])
    create_fake_nodes(admin, FakeNodes(2))
    assert [(method, path) for method, path, _ in admin.requests] == [
        ("POST", "/api/v1/nodes"),
        ("PATCH", "/api/v1/nodes/kwok-node-0"),
        ("POST", "/api/v1/nodes"),
        ("PATCH", "/api/v1/nodes/kwok-node-1"),
    ]
    assert admin.requests[1][2] == {"spec": {"taints": None}}
    with pytest.raises(ControlPlaneError, match="creating Node kwok-node-0: 403"):
        create_fake_nodes(RecordingAdmin({"POST": 403}, []), FakeNodes(1))


def test_ready_once_every_node_is() -> None:
    def node(name: str, ready: str) -> dict[str, Any]:
        return {
            "metadata": {"name": name},
            "status": {"conditions": [{"type": "Ready", "status": ready}]},
        }

    nodes = FakeNodes(2)
    half = RecordingAdmin({}, [node("kwok-node-0", "True"), node("kwok-node-1", "False")])
    assert not fake_nodes_ready(half, nodes)
    full = RecordingAdmin({}, [node("kwok-node-0", "True"), node("kwok-node-1", "True")])
    assert fake_nodes_ready(full, nodes)
