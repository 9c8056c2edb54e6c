"""Restarts whose rollouts really happen: Pods replaced on fake nodes, then RolloutCompleted.

docs/behaviour.md#rollout-verification. On ``kwok_plane`` (tests/conftest.py) kube-scheduler
binds Pods to three fake Nodes and kwok makes them Running and Ready a second later, so the
Deployment, StatefulSet and DaemonSet controllers replace every Pod after a restart and the
controller's ``RolloutCompleted`` follows the last one; Pods labelled unready
(lifecycle_controller/devcluster/nodes.py) run but never become Ready, and the rollout
stalls for real.
"""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Any

import pytest

from lifecycle_controller.devcluster.nodes import UNREADY_LABEL
from lifecycle_controller.kube import KubeClient, ResourceType
from tests.integration.controller import StartController
from tests.integration.events import events_of, list_events, wait_event
from tests.integration.keys import RESTART_AT, RESTARTED_AT
from tests.integration.rollout_support import (
    PODS,
    PodView,
    pods_of,
    real_workload,
    wait_serving,
)
from tests.integration.scenario_support import get, sample, start_for, template_annotations
from tests.integration.support import (
    DAEMONSETS,
    DEPLOYMENTS,
    REPLICASETS,
    STATEFULSETS,
    eventually,
)
from tests.integration.timestamps import rfc3339

pytestmark = pytest.mark.integration

NODES = 3


async def test_fake_nodes_run_pods_and_keep_the_unready_ones_unready(
    kwok_namespace: str, kwok_kube: KubeClient
) -> None:
    for name, labels in (("plain", {}), ("unready", {UNREADY_LABEL: "true"})):
        pod = {
            "apiVersion": "v1",
            "kind": "Pod",
            "metadata": {"name": name, "labels": {"app": "probe", "probe": name, **labels}},
            "spec": {"containers": [{"name": "app", "image": "registry.invalid/app:1"}]},
        }
        await kwok_kube.create(PODS, kwok_namespace, pod)
    seen: list[PodView] = []

    async def both_running() -> bool:
        seen[:] = await pods_of(kwok_kube, kwok_namespace, "probe")
        return [pod.phase for pod in seen] == ["Running", "Running"]

    await eventually(both_running, within=20, what="both probe Pods Running")
    plain, unready = seen
    assert plain.node.startswith("kwok-node-")
    assert unready.node.startswith("kwok-node-")
    assert (plain.ready, unready.ready) == (True, False)
    # There is no kubelet: kwok finishes a deletion at once.
    await kwok_kube.request("DELETE", PODS.object_path(kwok_namespace, "plain"))

    async def plain_gone() -> bool:
        return [pod.name for pod in await pods_of(kwok_kube, kwok_namespace, "probe")] == [
            "unready"
        ]

    await eventually(plain_gone, within=10, what="the deleted Pod gone")


async def _restart_and_follow(
    start_kwok_controller: StartController,
    kube: KubeClient,
    namespace: str,
    resource: ResourceType,
    body: dict[str, Any],
    *,
    count: int,
) -> tuple[list[PodView], list[PodView]]:
    """Create ``body``, wait until its ``count`` Pods serve, restart it through the controller
    and wait for ``RolloutCompleted``; the Pods before and the Pods once the Event is there."""
    name = body["metadata"]["name"]
    await kube.create(resource, namespace, body)
    before = await wait_serving(kube, resource, namespace, name, count=count)
    assert all(pod.restarted_at is None for pod in before)
    await start_for(start_kwok_controller, namespace, resource.key)
    await kube.merge_patch(
        resource,
        namespace,
        name,
        {"metadata": {"annotations": {RESTART_AT: rfc3339(datetime.now(UTC))}}},
    )
    await wait_event(kube, namespace, name, "RolloutCompleted", within=90)
    # What the controller judged complete: every Pod replaced, each new one serving.
    obj = await get(kube, resource, namespace, name)
    marker = template_annotations(obj)[RESTARTED_AT]
    after = [pod for pod in await pods_of(kube, namespace, name) if not pod.deleting]
    assert len(after) == count, after
    assert all(pod.serving and pod.restarted_at == marker for pod in after), after
    return before, after


async def test_a_restarted_deployment_replaces_its_pods_then_completes(
    start_kwok_controller: StartController, kwok_namespace: str, kwok_kube: KubeClient
) -> None:
    body = real_workload("Deployment", "web", replicas=3)
    before, after = await _restart_and_follow(
        start_kwok_controller, kwok_kube, kwok_namespace, DEPLOYMENTS, body, count=3
    )
    assert not {pod.name for pod in before} & {pod.name for pod in after}

    async def old_pods_gone() -> bool:
        names = {pod.name for pod in await pods_of(kwok_kube, kwok_namespace, "web")}
        return not names & {pod.name for pod in before}

    await eventually(old_pods_gone, within=10, what="the Pods from before the restart gone")
    obj = await get(kwok_kube, DEPLOYMENTS, kwok_namespace, "web")
    status = obj["status"]
    assert (status["updatedReplicas"], status["readyReplicas"], status["availableReplicas"]) == (
        3,
        3,
        3,
    )
    events = await events_of(kwok_kube, kwok_namespace, "web", rollouts=True)
    reasons = [reason for _, reason, _ in events]
    assert reasons == ["RestartTriggered", "RolloutCompleted"], events
    note = events[-1][2]
    assert note.startswith("Rollout after the restart completed in "), note


async def test_a_restarted_statefulset_replaces_its_pods_in_order_then_completes(
    start_kwok_controller: StartController, kwok_namespace: str, kwok_kube: KubeClient
) -> None:
    body = real_workload("StatefulSet", "db", replicas=3)
    before, after = await _restart_and_follow(
        start_kwok_controller, kwok_kube, kwok_namespace, STATEFULSETS, body, count=3
    )
    # A StatefulSet keeps its Pod names; each one is a new Pod carrying the new template,
    # replaced from the highest ordinal down, each once the one before it was Ready (kwok
    # takes a second), so their creation times are whole seconds apart.
    assert [pod.name for pod in before] == [pod.name for pod in after] == ["db-0", "db-1", "db-2"]
    assert all(old.created < new.created for old, new in zip(before, after, strict=True))
    assert after[2].created < after[1].created < after[0].created, after
    obj = await get(kwok_kube, STATEFULSETS, kwok_namespace, "db")
    status = obj["status"]
    assert status["currentRevision"] == status["updateRevision"]
    assert status["readyReplicas"] == 3


async def test_a_restarted_daemonset_replaces_its_pod_on_every_node_then_completes(
    start_kwok_controller: StartController, kwok_namespace: str, kwok_kube: KubeClient
) -> None:
    body = real_workload("DaemonSet", "agent")
    before, after = await _restart_and_follow(
        start_kwok_controller, kwok_kube, kwok_namespace, DAEMONSETS, body, count=NODES
    )
    assert len({pod.node for pod in before}) == NODES
    assert {pod.node for pod in after} == {pod.node for pod in before}
    assert not {pod.name for pod in before} & {pod.name for pod in after}
    status = (await get(kwok_kube, DAEMONSETS, kwok_namespace, "agent"))["status"]
    assert status["numberAvailable"] == status["updatedNumberScheduled"] == NODES


async def test_a_deployment_whose_new_pods_never_become_ready_stalls(
    start_kwok_controller: StartController, kwok_namespace: str, kwok_kube: KubeClient
) -> None:
    running = await start_for(
        start_kwok_controller, kwok_namespace, "deployments.apps", rollout_timeout="6s"
    )
    due = rfc3339(datetime.now(UTC))
    body = real_workload("Deployment", "sick", {RESTART_AT: due}, replicas=2, unready=True)
    await kwok_kube.create(DEPLOYMENTS, kwok_namespace, body)
    events = await wait_event(kwok_kube, kwok_namespace, "sick", "RolloutStalled", within=30)
    note = next(note for _, reason, note in events if reason == "RolloutStalled")
    assert note.startswith("Rollout after the restart not complete after 6s (--rollout-timeout): ")
    assert "availableReplicas=0" in note
    # Stalled for real: the restarted template's Pods are scheduled and running, not Ready.
    obj = await get(kwok_kube, DEPLOYMENTS, kwok_namespace, "sick")
    marker = template_annotations(obj)[RESTARTED_AT]
    new = [
        pod
        for pod in await pods_of(kwok_kube, kwok_namespace, "sick")
        if pod.restarted_at == marker and not pod.deleting
    ]
    assert new, "no Pod of the restarted template"
    assert all(pod.node and pod.phase == "Running" and not pod.ready for pod in new), new
    reasons = [r for _, r, _ in await events_of(kwok_kube, kwok_namespace, "sick", rollouts=True)]
    assert "RolloutCompleted" not in reasons
    stalled = sample(running, "lifecycle_rollouts_total", kind="Deployment", result="stalled")
    assert stalled == 1


async def _in_progress(kube: KubeClient, namespace: str, replicas: int) -> set[str]:
    """The Deployments mid-rollout after a restart, by their ReplicaSets: the one of the
    restarted template not yet fully available, or an older one still holding Pods."""
    listing = await kube.request("GET", REPLICASETS.collection_path(namespace))
    sets: dict[str, list[dict[str, Any]]] = {}
    for item in listing["items"]:
        for owner in item["metadata"].get("ownerReferences") or []:
            if owner.get("kind") == "Deployment":
                sets.setdefault(owner["name"], []).append(item)
    busy = set()
    for name, owned in sets.items():
        restarted = [rs for rs in owned if RESTARTED_AT in template_annotations(rs)]
        if not restarted:
            continue  # not restarted yet
        older = [rs for rs in owned if RESTARTED_AT not in template_annotations(rs)]
        new_available = int((restarted[0].get("status") or {}).get("availableReplicas") or 0)
        old_pods = sum(int((rs.get("status") or {}).get("replicas") or 0) for rs in older)
        if new_available < replicas or old_pods > 0:
            busy.add(name)
    return busy


async def test_max_concurrent_rollouts_holds_for_real_pods(
    start_kwok_controller: StartController, kwok_namespace: str, kwok_kube: KubeClient
) -> None:
    names = [f"app-{i}" for i in range(6)]
    for name in names:
        await kwok_kube.create(
            DEPLOYMENTS, kwok_namespace, real_workload("Deployment", name, replicas=2)
        )
    for name in names:
        await wait_serving(kwok_kube, DEPLOYMENTS, kwok_namespace, name, count=2)
    await start_for(
        start_kwok_controller, kwok_namespace, "deployments.apps", max_concurrent_rollouts=2
    )
    for i, name in enumerate(names):
        due = f"2020-01-0{i + 1}T00:00:00Z"
        await kwok_kube.merge_patch(
            DEPLOYMENTS, kwok_namespace, name, {"metadata": {"annotations": {RESTART_AT: due}}}
        )
    widest: list[set[str]] = [set()]
    order: list[str] = []

    async def all_completed() -> bool:
        busy = await _in_progress(kwok_kube, kwok_namespace, 2)
        order.extend(sorted(busy - set(order)))
        if len(busy) > len(widest[0]):
            widest[0] = busy
        for name in names:
            events = await list_events(kwok_kube, kwok_namespace, name)
            if "RolloutCompleted" not in [event["reason"] for event in events]:
                return False
        return True

    await eventually(all_completed, within=120, interval=0.1, what="RolloutCompleted on all six")
    assert len(widest[0]) == 2, widest  # two at once, never three
    assert sorted(order) == names
    assert sorted(order[:2]) == names[:2]  # the earliest due first
    for name in names:
        pods = await pods_of(kwok_kube, kwok_namespace, name)
        assert len([pod for pod in pods if pod.serving and pod.restarted_at]) == 2, pods
