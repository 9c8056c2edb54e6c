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
- a Pod being deleted is removed at once (there is no kubelet to finish its grace period).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

__all__ = [
    "NODE_ANNOTATION",
    "UNREADY_LABEL",
    "FakeNodes",
    "fake_node",
    "kwok_configuration",
]

NODE_ANNOTATION = "kwok.x-k8s.io/node"
"""Set to ``fake`` on every Node that kwok manages (``--manage-nodes-with-annotation-selector``)."""

UNREADY_LABEL = "lifecycle-test/unready"
"""A Pod labelled with this key and ``"true"`` runs but never becomes Ready."""


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

_POD_UNREADY = """apiVersion: kwok.x-k8s.io/v1alpha1
kind: Stage
metadata:
  name: pod-running-unready
spec:
  resourceRef:
    apiGroup: v1
    kind: Pod
  selector:
    matchLabels:
      {unready}: "true"
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
      - lastTransitionTime: {{{{ $now | Quote }}}}
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
    pod_ready = _POD_READY.format(unready=UNREADY_LABEL, delay_ms=delay_ms)
    pod_unready = _POD_UNREADY.format(unready=UNREADY_LABEL, delay_ms=delay_ms)
    documents = (_NODE_INITIALIZE, pod_ready, pod_unready, _POD_DELETE)
    return "---\n".join(documents)
