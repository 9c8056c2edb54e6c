"""Fake nodes for the local control plane: kube-scheduler binds Pods, kwok plays their kubelet.

Without nodes a Pod stays Pending for ever, so a restarted Deployment with replicas never
completes its rollout. ``ControlPlane(nodes=N)`` adds kube-scheduler and kwok (out of cluster,
against the admin kubeconfig) and creates N Nodes annotated :data:`NODE_ANNOTATION`, which kwok
manages and no other Node: kwok marks them Ready, then plays the stages below on every Pod
bound to one. No container runs anywhere; the Deployment, StatefulSet and DaemonSet
controllers see Pods that become Running and Ready, and rollouts complete for real.

The stages (kwok's Stage API, given to kwok in its configuration file), after kwok's own
``node-initialize``, ``pod-ready`` and ``pod-delete``:

- a Pod on a fake node becomes Running and Ready :attr:`FakeNodes.pod_ready_delay` after it
  was bound (1 s by default, so a rolling update takes visible steps);
- a Pod labelled :data:`UNREADY_LABEL` ``"true"`` becomes Running but never Ready, so the
  rollout of a template carrying that label stalls (``RolloutStalled``);
- a Pod labelled :data:`FAIL_LABEL` ``"true"`` fails: its phase becomes ``Failed`` and each
  container ``terminated`` (exit code 1, ``finishedAt`` the moment it failed), as a crashed
  Pod with ``restartPolicy: Never`` does; one labelled :data:`SUCCEED_LABEL` ``"true"``
  succeeds the same way (phase ``Succeeded``, exit code 0), so a Job's Pod completes it;
- a Pod being deleted is removed at once (there is no kubelet to finish its grace period).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Protocol

from lifecycle_controller.devcluster.admin import ApiResponse, ControlPlaneError

__all__ = [
    "FAIL_LABEL",
    "NODE_ANNOTATION",
    "SUCCEED_LABEL",
    "UNREADY_LABEL",
    "FakeNodes",
    "create_fake_nodes",
    "fake_node",
    "fake_nodes_ready",
    "kwok_argv",
    "kwok_configuration",
    "scheduler_argv",
]

NODE_ANNOTATION = "kwok.x-k8s.io/node"
"""Set to ``fake`` on every Node that kwok manages (``--manage-nodes-with-annotation-selector``)."""

UNREADY_LABEL = "lifecycle-test/unready"
"""A Pod labelled with this key and ``"true"`` runs but never becomes Ready."""

FAIL_LABEL = "lifecycle-test/fail"
"""A Pod labelled with this key and ``"true"`` fails: phase ``Failed``, containers terminated."""

SUCCEED_LABEL = "lifecycle-test/succeed"
"""A Pod labelled with this key and ``"true"`` succeeds: phase ``Succeeded``, exit code 0."""


class AdminRequests(Protocol):
    """What the Node helpers need of the control plane: its admin requests."""

    def request(
        self,
        method: str,
        path: str,
        body: Mapping[str, Any] | None = None,
        *,
        content_type: str = "application/json",
        timeout: float = 30.0,
    ) -> ApiResponse: ...


@dataclass(frozen=True)
class FakeNodes:
    """How many fake Nodes to create and what each offers."""

    count: int
    cpu: str = "32"
    memory: str = "256Gi"
    pods: int = 110
    #: Seconds from a Pod's binding to it being Running and Ready.
    pod_ready_delay: float = 1.0

    def names(self) -> list[str]:
        return [f"kwok-node-{index}" for index in range(self.count)]


def fake_node(name: str, nodes: FakeNodes) -> dict[str, Any]:
    """A Node for kwok to manage: its annotation, a hostname label, capacity in its status."""
    resources = {"cpu": nodes.cpu, "memory": nodes.memory, "pods": str(nodes.pods)}
    return {
        "apiVersion": "v1",
        "kind": "Node",
        "metadata": {
            "name": name,
            "annotations": {NODE_ANNOTATION: "fake"},
            "labels": {
                "kubernetes.io/hostname": name,
                "kubernetes.io/os": "linux",
                "kubernetes.io/arch": "amd64",
                "type": "kwok",
            },
        },
        "spec": {},
        "status": {"allocatable": resources, "capacity": resources},
    }


def create_fake_nodes(admin: AdminRequests, nodes: FakeNodes) -> None:
    """Create the fake Nodes (those that exist already are left as they are), untainted.

    Admission (TaintNodesByCondition) taints a new Node not-ready; the node lifecycle
    controller, which would lift it, is not run (it would evict the Pods of Nodes that send no
    heartbeat), so the taint is lifted here, once.
    """
    for name in nodes.names():
        response = admin.request("POST", "/api/v1/nodes", fake_node(name, nodes))
        if response.status not in (201, 409):
            raise ControlPlaneError(f"creating Node {name}: {response.status} {response.body}")
        response = admin.request(
            "PATCH",
            f"/api/v1/nodes/{name}",
            {"spec": {"taints": None}},
            content_type="application/merge-patch+json",
        )
        if response.status != 200:
            raise ControlPlaneError(f"untainting Node {name}: {response.status} {response.body}")


def fake_nodes_ready(admin: AdminRequests, nodes: FakeNodes) -> bool:
    """Whether kwok has marked every fake Node Ready."""
    listing = admin.request("GET", "/api/v1/nodes", timeout=5).body
    ready = {
        item["metadata"]["name"]
        for item in listing.get("items", [])
        if any(
            condition.get("type") == "Ready" and condition.get("status") == "True"
            for condition in (item.get("status") or {}).get("conditions") or []
        )
    }
    return ready >= set(nodes.names())


def scheduler_argv(binary: Path, kubeconfig: Path, *, port: int, cert_dir: Path) -> list[str]:
    """kube-scheduler as the admin, no leader election, health on a loopback port."""
    return [
        str(binary),
        f"--kubeconfig={kubeconfig}",
        f"--authentication-kubeconfig={kubeconfig}",
        f"--authorization-kubeconfig={kubeconfig}",
        "--leader-elect=false",
        "--bind-address=127.0.0.1",
        f"--secure-port={port}",
        f"--cert-dir={cert_dir}",
    ]


def kwok_argv(binary: Path, kubeconfig: Path, configuration: Path) -> list[str]:
    """kwok out of cluster, managing only the Nodes annotated :data:`NODE_ANNOTATION`."""
    return [
        str(binary),
        f"--kubeconfig={kubeconfig}",
        f"--config={configuration}",
        "--manage-all-nodes=false",
        f"--manage-nodes-with-annotation-selector={NODE_ANNOTATION}=fake",
        "--node-lease-duration-seconds=0",
        # Addresses written into Node and Pod status only; nothing is reachable there.
        "--cidr=10.244.0.0/16",
        "--node-ip=10.244.255.1",
    ]


_NODE_INITIALIZE = """apiVersion: kwok.x-k8s.io/v1alpha1
kind: Stage
metadata:
  name: node-initialize
spec:
  resourceRef:
    apiGroup: v1
    kind: Node
  selector:
    matchExpressions:
    - key: '.status.conditions.[] | select( .type == "Ready" ) | .status'
      operator: 'NotIn'
      values: ['True']
  next:
    statusTemplate: |
      {{ $now := Now }}
      {{ $lastTransitionTime := or .metadata.creationTimestamp $now }}
      conditions:
      {{ range NodeConditions }}
      - lastHeartbeatTime: {{ $now | Quote }}
        lastTransitionTime: {{ $lastTransitionTime | Quote }}
        message: {{ .message | Quote }}
        reason: {{ .reason | Quote }}
        status: {{ .status | Quote }}
        type: {{ .type | Quote }}
      {{ end }}
      addresses:
      - address: {{ NodeIP | Quote }}
        type: InternalIP
      - address: {{ .metadata.name | Quote }}
        type: Hostname
      allocatable:
      {{ YAML .status.allocatable 1 }}
      capacity:
      {{ YAML .status.capacity 1 }}
      nodeInfo:
        architecture: amd64
        operatingSystem: linux
        kubeletVersion: {{ printf "kwok-%s" Version | Quote }}
        kubeProxyVersion: {{ printf "kwok-%s" Version | Quote }}
        containerRuntimeVersion: {{ printf "kwok-%s" Version | Quote }}
        kernelVersion: {{ printf "kwok-%s" Version | Quote }}
      phase: Running
"""

_POD_READY = """apiVersion: kwok.x-k8s.io/v1alpha1
kind: Stage
metadata:
  name: pod-ready
spec:
  resourceRef:
    apiGroup: v1
    kind: Pod
  selector:
    matchExpressions:
    - key: '.metadata.deletionTimestamp'
      operator: 'DoesNotExist'
    - key: '.metadata.labels["{unready}"]'
      operator: 'DoesNotExist'
    - key: '.metadata.labels["{fail}"]'
      operator: 'DoesNotExist'
    - key: '.metadata.labels["{succeed}"]'
      operator: 'DoesNotExist'
    - key: '.status.phase'
      operator: 'In'
      values: ['Pending']
  delay:
    durationMilliseconds: {delay_ms}
  next:
    statusTemplate: |
      {{{{ $now := Now }}}}
      conditions:
      - lastTransitionTime: {{{{ $now | Quote }}}}
        status: "True"
        type: Initialized
      - lastTransitionTime: {{{{ $now | Quote }}}}
        status: "True"
        type: Ready
      - lastTransitionTime: {{{{ $now | Quote }}}}
        status: "True"
        type: ContainersReady
      containerStatuses:
      {{{{ range .spec.containers }}}}
      - image: {{{{ .image | Quote }}}}
        name: {{{{ .name | Quote }}}}
        ready: true
        started: true
        restartCount: 0
        state:
          running:
            startedAt: {{{{ $now | Quote }}}}
      {{{{ end }}}}
      hostIP: {{{{ NodeIPWith .spec.nodeName | Quote }}}}
      {{{{ $pod := .metadata }}}}
      podIP: {{{{ PodIPWith .spec.nodeName ( or .spec.hostNetwork false ) ( or $pod.uid "" )
        ( or $pod.name "" ) ( or $pod.namespace "" ) | Quote }}}}
      phase: Running
      startTime: {{{{ $now | Quote }}}}
"""

#: The start of a stage for the Pods labelled ``{label}``: they leave Pending after the
#: delay, initialized; the rest of the status is the stage's own.
_POD_LABELLED = """apiVersion: kwok.x-k8s.io/v1alpha1
kind: Stage
metadata:
  name: {name}
spec:
  resourceRef:
    apiGroup: v1
    kind: Pod
  selector:
    matchLabels:
      {label}: "true"
    matchExpressions:
    - key: '.metadata.deletionTimestamp'
      operator: 'DoesNotExist'
    - key: '.status.phase'
      operator: 'In'
      values: ['Pending']
  delay:
    durationMilliseconds: {delay_ms}
  next:
    statusTemplate: |
      {{{{ $now := Now }}}}
      conditions:
      - lastTransitionTime: {{{{ $now | Quote }}}}
        status: "True"
        type: Initialized
"""

_POD_UNREADY = (
    _POD_LABELLED
    + """      - lastTransitionTime: {{{{ $now | Quote }}}}
        status: "False"
        reason: ContainersNotReady
        type: Ready
      - lastTransitionTime: {{{{ $now | Quote }}}}
        status: "False"
        reason: ContainersNotReady
        type: ContainersReady
      containerStatuses:
      {{{{ range .spec.containers }}}}
      - image: {{{{ .image | Quote }}}}
        name: {{{{ .name | Quote }}}}
        ready: false
        started: true
        restartCount: 0
        state:
          running:
            startedAt: {{{{ $now | Quote }}}}
      {{{{ end }}}}
      phase: Running
      startTime: {{{{ $now | Quote }}}}
"""
)

_POD_FINISHED = (
    _POD_LABELLED
    + """      - lastTransitionTime: {{{{ $now | Quote }}}}
        status: "False"
        reason: {reason}
        type: Ready
      containerStatuses:
      {{{{ range .spec.containers }}}}
      - image: {{{{ .image | Quote }}}}
        name: {{{{ .name | Quote }}}}
        ready: false
        started: false
        restartCount: 0
        state:
          terminated:
            exitCode: {exit_code}
            reason: {reason}
            startedAt: {{{{ $now | Quote }}}}
            finishedAt: {{{{ $now | Quote }}}}
      {{{{ end }}}}
      phase: {phase}
      startTime: {{{{ $now | Quote }}}}
"""
)

_POD_DELETE = """apiVersion: kwok.x-k8s.io/v1alpha1
kind: Stage
metadata:
  name: pod-delete
spec:
  resourceRef:
    apiGroup: v1
    kind: Pod
  selector:
    matchExpressions:
    - key: '.metadata.deletionTimestamp'
      operator: 'Exists'
  next:
    delete: true
"""


def kwok_configuration(nodes: FakeNodes) -> str:
    """kwok's configuration file: the stages it plays (module docstring)."""
    delay_ms = max(int(nodes.pod_ready_delay * 1000), 0)
    pod_ready = _POD_READY.format(
        unready=UNREADY_LABEL, fail=FAIL_LABEL, succeed=SUCCEED_LABEL, delay_ms=delay_ms
    )
    pod_unready = _POD_UNREADY.format(
        name="pod-running-unready", label=UNREADY_LABEL, delay_ms=delay_ms
    )
    finished = [
        _POD_FINISHED.format(
            name=name, label=label, phase=phase, exit_code=code, reason=reason, delay_ms=delay_ms
        )
        for name, label, phase, code, reason in (
            ("pod-failed", FAIL_LABEL, "Failed", 1, "Error"),
            ("pod-succeeded", SUCCEED_LABEL, "Succeeded", 0, "Completed"),
        )
    ]
    documents = (_NODE_INITIALIZE, pod_ready, pod_unready, *finished, _POD_DELETE)
    return "---\n".join(documents)
