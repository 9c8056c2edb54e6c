"""Restarts whose rollouts really happen: Pods replaced on fake nodes, then RolloutCompleted.

docs/behaviour.md#rollout-verification. On ``kwok_plane`` (tests/conftest.py) kube-scheduler
binds Pods to three fake Nodes and kwok makes them Running and Ready a second later, so the
Deployment, StatefulSet and DaemonSet controllers replace every Pod after a restart and the
controller's ``RolloutCompleted`` follows the last one; Pods labelled unready
(lifecycle_controller/devcluster/nodes.py) run but never become Ready, and the rollout
stalls for real. What the tests assert is read from the Pods themselves (names, nodes,
creation times, readiness, the template marker they carry), never from the controller's own
Events alone: a controller that stopped following rollouts, or judged one complete too
early, fails them.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any

import pytest

from lifecycle_controller.devcluster.nodes import UNREADY_LABEL
from lifecycle_controller.kube import KubeClient, ResourceType
from lifecycle_controller.kube.resources import PODS
from tests.integration.controller import StartController
from tests.integration.events import events_of, list_events, wait_event
from tests.integration.keys import RESTART_AT, RESTARTED_AT
from tests.integration.rollout_support import (
    PodTimeline,
    PodView,
    pod_timeline,
    pods_of,
    real_workload,
    rollout_seconds,
    wait_serving,
)
from tests.integration.scenario_support import get, sample, start_for, template_annotations
from tests.integration.support import DAEMONSETS, DEPLOYMENTS, STATEFULSETS, eventually
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


@dataclass(frozen=True)
class Followed:
    """A restart followed to its ``RolloutCompleted``."""

    #: The Pods serving before the restart, and once the Event is there.
    before: list[PodView]
    after: list[PodView]
    #: The seconds the Event says the rollout took.
    took: float
    #: The namespace's Pods from the restart patch to the Event.
    timeline: PodTimeline
    #: The states of the workload the controller evaluated while following, by source
    #: (``watch``: kept by its rollout watch, ``read``: a GET or list).
    states: dict[str, float]


async def _restart_and_follow(
    start_kwok_controller: StartController,
    kube: KubeClient,
    namespace: str,
    resource: ResourceType,
    body: dict[str, Any],
    *,
    count: int,
    replaced: int | None = None,
) -> Followed:
    """Create ``body``, wait until its ``count`` Pods serve, restart it through the controller
    and wait for ``RolloutCompleted``, recording the namespace's Pods from the restart on.
    ``replaced``: how many Pods the restart replaces (all by default), each then serving with
    the new template's marker."""
    name = body["metadata"]["name"]
    await kube.create(resource, namespace, body)
    before = await wait_serving(kube, resource, namespace, name, count=count)
    assert all(pod.restarted_at is None for pod in before)
    running = await start_for(start_kwok_controller, namespace, resource.key)
    async with pod_timeline(kube, namespace) as timeline:
        await kube.merge_patch(
            resource,
            namespace,
            name,
            {"metadata": {"annotations": {RESTART_AT: rfc3339(datetime.now(UTC))}}},
        )
        events = await wait_event(kube, namespace, name, "RolloutCompleted", within=90)
    # What the controller judged complete: the Pods replaced, each new one serving.
    obj = await get(kube, resource, namespace, name)
    marker = template_annotations(obj)[RESTARTED_AT]
    after = [pod for pod in await pods_of(kube, namespace, name) if not pod.deleting]
    assert len(after) == count, after
    assert all(pod.serving for pod in after), after
    new = [pod for pod in after if pod.restarted_at == marker]
    assert len(new) == (count if replaced is None else replaced), after
    note = next(note for _, reason, note in events if reason == "RolloutCompleted")
    states = {
        source: sample(running, "lifecycle_rollout_states_total", source=source) or 0.0
        for source in ("watch", "read")
    }
    return Followed(before, after, rollout_seconds(note), timeline, states)


async def test_a_restarted_deployment_replaces_its_pods_then_completes(
    start_kwok_controller: StartController, kwok_namespace: str, kwok_kube: KubeClient
) -> None:
    # Three replicas, RollingUpdate with maxSurge 1 and maxUnavailable 1.
    body = real_workload("Deployment", "web", replicas=3)
    followed = await _restart_and_follow(
        start_kwok_controller, kwok_kube, kwok_namespace, DEPLOYMENTS, body, count=3
    )
    before, after, timeline = followed.before, followed.after, followed.timeline
    assert not {pod.name for pod in before} & {pod.name for pod in after}
    # A rolling update, seen in the Pods: never more than replicas + maxSurge of them, never
    # fewer than replicas - maxUnavailable serving, and both templates serving at one moment.
    assert timeline.widest(lambda pods: len([p for p in pods if not p.deleting])) <= 4
    assert timeline.narrowest(lambda pods: len([p for p in pods if p.serving])) >= 2
    mixed = timeline.widest(lambda pods: len({p.restarted_at for p in pods if p.serving}))
    assert mixed == 2, "never saw old and new Pods serving side by side"
    # Each new Pod is Ready a second after it was bound, and at most two start at once.
    assert followed.took >= 1.0, followed.took
    # The status changes of the rollout came from the rollout watch, not from reads.
    assert followed.states["watch"] >= 1, followed.states
    assert followed.states["read"] <= followed.states["watch"], followed.states

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


async def test_a_restarted_statefulset_replaces_its_pods_in_order_then_completes(
    start_kwok_controller: StartController, kwok_namespace: str, kwok_kube: KubeClient
) -> None:
    body = real_workload("StatefulSet", "db", replicas=3)
    followed = await _restart_and_follow(
        start_kwok_controller, kwok_kube, kwok_namespace, STATEFULSETS, body, count=3
    )
    before, after = followed.before, followed.after
    # A StatefulSet keeps its Pod names; each one is a new Pod carrying the new template,
    # replaced from the highest ordinal down, each once the one before it was Ready (kwok
    # takes a second), so their creation times are whole seconds apart.
    assert [pod.name for pod in before] == [pod.name for pod in after] == ["db-0", "db-1", "db-2"]
    assert all(old.created < new.created for old, new in zip(before, after, strict=True))
    assert after[2].created < after[1].created < after[0].created, after
    assert followed.took >= 2.0, (
        followed.took
    )  # three Pods one after another, each Ready a second later
    obj = await get(kwok_kube, STATEFULSETS, kwok_namespace, "db")
    status = obj["status"]
    assert status["currentRevision"] == status["updateRevision"]
    assert status["readyReplicas"] == 3


async def test_a_partitioned_statefulset_restart_replaces_the_pods_above_the_partition(
    start_kwok_controller: StartController, kwok_namespace: str, kwok_kube: KubeClient
) -> None:
    # A staged rollout: with partition 1, db-2 and db-1 take the restarted template and db-0
    # keeps the old one; the rollout is complete when those two serve (not stalled, although
    # the two revisions never meet).
    body = real_workload("StatefulSet", "db", replicas=3, partition=1)
    followed = await _restart_and_follow(
        start_kwok_controller, kwok_kube, kwok_namespace, STATEFULSETS, body, count=3, replaced=2
    )
    before, after = followed.before, followed.after
    assert [pod.name for pod in after] == ["db-0", "db-1", "db-2"]
    assert after[0] == before[0]  # the same Pod, untouched
    assert after[0].restarted_at is None
    assert after[2].created < after[1].created, after
    assert all(old.created < new.created for old, new in zip(before[1:], after[1:], strict=True))
    events = await events_of(kwok_kube, kwok_namespace, "db", rollouts=True)
    assert [reason for _, reason, _ in events] == [
        "RestartTriggered",
        "RolloutBlocked",
        "RolloutCompleted",
    ], events
    assert "the StatefulSet has a rolling-update partition of 1" in events[1][2]
    status = (await get(kwok_kube, STATEFULSETS, kwok_namespace, "db"))["status"]
    assert status["currentRevision"] != status["updateRevision"]
    assert (status["updatedReplicas"], status["readyReplicas"]) == (2, 3)


async def test_a_restarted_daemonset_replaces_its_pod_on_every_node_then_completes(
    start_kwok_controller: StartController, kwok_namespace: str, kwok_kube: KubeClient
) -> None:
    body = real_workload("DaemonSet", "agent")
    followed = await _restart_and_follow(
        start_kwok_controller, kwok_kube, kwok_namespace, DAEMONSETS, body, count=NODES
    )
    before, after = followed.before, followed.after
    assert len({pod.node for pod in before}) == NODES
    assert {pod.node for pod in after} == {pod.node for pod in before}
    assert not {pod.name for pod in before} & {pod.name for pod in after}
    status = (await get(kwok_kube, DAEMONSETS, kwok_namespace, "agent"))["status"]
    assert status["numberAvailable"] == status["updatedNumberScheduled"] == NODES


async def test_a_stalled_rollout_is_reported_and_the_next_queued_restart_starts(
    start_kwok_controller: StartController, kwok_namespace: str, kwok_kube: KubeClient
) -> None:
    # "next" serves before anything restarts; "sick" runs Pods that never become Ready.
    await kwok_kube.create(
        DEPLOYMENTS, kwok_namespace, real_workload("Deployment", "next", replicas=2)
    )
    before = await wait_serving(kwok_kube, DEPLOYMENTS, kwok_namespace, "next", count=2)
    running = await start_for(
        start_kwok_controller,
        kwok_namespace,
        "deployments.apps",
        rollout_timeout="6s",
        max_concurrent_rollouts=1,
    )
    sick = real_workload(
        "Deployment", "sick", {RESTART_AT: "2020-01-01T00:00:00Z"}, replicas=2, unready=True
    )
    await kwok_kube.create(DEPLOYMENTS, kwok_namespace, sick)
    await wait_event(kwok_kube, kwok_namespace, "sick", "RestartTriggered", within=15)
    patch = {"metadata": {"annotations": {RESTART_AT: "2020-01-02T00:00:00Z"}}}
    await kwok_kube.merge_patch(DEPLOYMENTS, kwok_namespace, "next", patch)
    await wait_event(kwok_kube, kwok_namespace, "next", "RestartQueued", within=15)
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
    # The stall gave the slot back: the queued restart runs and its Pods are all replaced.
    await wait_event(kwok_kube, kwok_namespace, "next", "RolloutCompleted", within=60)
    after = [p for p in await pods_of(kwok_kube, kwok_namespace, "next") if not p.deleting]
    assert len(after) == 2, after
    assert all(pod.serving and pod.restarted_at for pod in after), after
    assert not {pod.name for pod in before} & {pod.name for pod in after}
    sick_events = await list_events(kwok_kube, kwok_namespace, "sick")
    next_events = await list_events(kwok_kube, kwok_namespace, "next")
    stalled_at = next(e["eventTime"] for e in sick_events if e["reason"] == "RolloutStalled")
    started_at = next(e["eventTime"] for e in next_events if e["reason"] == "RestartTriggered")
    assert started_at >= stalled_at
    reasons = [r for _, r, _ in await events_of(kwok_kube, kwok_namespace, "sick", rollouts=True)]
    assert "RolloutCompleted" not in reasons
    stalled = sample(running, "lifecycle_rollouts_total", kind="Deployment", result="stalled")
    assert stalled == 1


def _mid_rollout(pods: list[PodView], replicas: int) -> set[str]:
    """The workloads mid-rollout after a restart, read from their Pods: some Pod carries the
    restart marker, and either an older Pod still runs or fewer than ``replicas`` new ones
    serve."""
    busy = set()
    for app in {pod.app for pod in pods}:
        live = [pod for pod in pods if pod.app == app and not pod.deleting]
        new = [pod for pod in live if pod.restarted_at]
        if not new:
            continue  # not restarted yet
        old = [pod for pod in live if not pod.restarted_at]
        if old or len([pod for pod in new if pod.serving]) < replicas:
            busy.add(app)
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
    running = await start_for(
        start_kwok_controller, kwok_namespace, "deployments.apps", max_concurrent_rollouts=2
    )

    async def all_completed() -> bool:
        for name in names:
            events = await list_events(kwok_kube, kwok_namespace, name)
            if "RolloutCompleted" not in [event["reason"] for event in events]:
                return False
        return True

    async with pod_timeline(kwok_kube, kwok_namespace) as timeline:
        for i, name in enumerate(names):
            due = f"2020-01-0{i + 1}T00:00:00Z"
            await kwok_kube.merge_patch(
                DEPLOYMENTS, kwok_namespace, name, {"metadata": {"annotations": {RESTART_AT: due}}}
            )
        await eventually(all_completed, within=120, what="RolloutCompleted on all six")
        seen = len(timeline.snapshots)

        async def settled_snapshot() -> bool:
            return len(timeline.snapshots) > seen + 1  # a whole snapshot after the last Event

        await eventually(settled_snapshot, within=10, what="a snapshot of the settled Pods")
    busy = [_mid_rollout(pods, 2) for pods in timeline.snapshots]
    assert max(len(apps) for apps in busy) == 2, busy  # two at once, never three
    order: list[str] = []
    for apps in busy:
        order.extend(sorted(apps - set(order)))
    assert sorted(order) == names
    assert sorted(order[:2]) == names[:2]  # the earliest due first
    assert not busy[-1]
    for name in names:
        pods = [pod for pod in timeline.snapshots[-1] if pod.app == name]
        assert len([pod for pod in pods if pod.serving and pod.restarted_at]) == 2, pods
        reasons = [r for _, r, _ in await events_of(kwok_kube, kwok_namespace, name, rollouts=True)]
        assert reasons.count("RestartQueued") <= 1
        assert reasons.count("RolloutCompleted") == 1
    queued = [
        name
        for name in names
        if "RestartQueued" in [r for _, r, _ in await events_of(kwok_kube, kwok_namespace, name)]
    ]
    assert len(queued) >= 2, queued
    assert sample(running, "lifecycle_rollouts_total", kind="Deployment", result="completed") == 6
    assert sample(running, "lifecycle_rollout_duration_seconds_count") == 6
