"""The restart guard, rollout orchestration and verification on the real control plane.

docs/behaviour.md#restart-guard and #rollout-verification. kube-controller-manager runs
the Deployment controller, so a restarted Deployment with ``replicas: 0`` completes its
rollout for real, while one with ``replicas: 1`` never does (no kubelet: Pods stay Pending).
"""

from __future__ import annotations

import asyncio
import itertools
from datetime import UTC, datetime
from typing import Any

import pytest

from lifecycle_controller.controller.rollouts import RolloutTracker
from lifecycle_controller.core import ObjectRef
from lifecycle_controller.kube import KubeClient
from tests.integration.controller import RunningController, StartController
from tests.integration.events import events_of, wait_event
from tests.integration.keys import RESTART_AT, RESTARTED_AT
from tests.integration.scenario_support import (
    get,
    sample,
    start_for,
    template_annotations,
    workload,
)
from tests.integration.support import DEPLOYMENTS, eventually
from tests.integration.timestamps import parse_utc, rfc3339

pytestmark = pytest.mark.integration


def _tracker(running: RunningController) -> RolloutTracker:
    pipeline = running.controller.pipeline
    assert pipeline is not None
    rollouts = pipeline.reconciler.executor.rollouts
    assert rollouts is not None
    return rollouts


async def test_min_restart_interval_keeps_restarts_ten_seconds_apart(
    start_controller: StartController, namespace: str, kube: KubeClient
) -> None:
    # A flapping trigger: restart-at is set to "now" every 2 s (restart-every has a one-minute
    # minimum in the grammar, docs/annotations.md), so without the guard every one restarts.
    await start_for(start_controller, namespace, "deployments.apps", min_restart_interval="10s")
    await kube.create(DEPLOYMENTS, namespace, workload("Deployment", "flappy", replicas=0))
    markers: list[str] = []
    seen_at: list[float] = []
    loop = asyncio.get_running_loop()
    deadline = loop.time() + 25
    next_trigger = loop.time()
    while loop.time() < deadline:
        if loop.time() >= next_trigger:
            when = rfc3339(datetime.now(UTC))
            await kube.merge_patch(
                DEPLOYMENTS, namespace, "flappy", {"metadata": {"annotations": {RESTART_AT: when}}}
            )
            next_trigger += 2
        obj = await get(kube, DEPLOYMENTS, namespace, "flappy")
        marker = template_annotations(obj).get(RESTARTED_AT)
        if marker is not None and (not markers or marker != markers[-1]):
            markers.append(marker)
            seen_at.append(loop.time())
        await asyncio.sleep(0.2)
    assert len(markers) >= 2, markers
    instants = [parse_utc(marker) for marker in markers]
    gaps = [(b - a).total_seconds() for a, b in itertools.pairwise(instants)]
    assert all(gap >= 10 for gap in gaps), gaps
    observed = [b - a for a, b in itertools.pairwise(seen_at)]
    assert all(gap >= 9.5 for gap in observed), observed
    notes = [
        note
        for _, reason, note in await events_of(kube, namespace, "flappy")
        if reason == "RestartDeferred"
    ]
    assert notes, "no RestartDeferred Event"
    assert "(--min-restart-interval); it will run at " in notes[0]


async def test_max_concurrent_rollouts_restarts_in_pairs_each_completed(
    start_controller: StartController,
    namespace: str,
    kube: KubeClient,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    names = [f"app-{i}" for i in range(6)]
    for i, name in enumerate(names):
        due = f"2020-01-0{i + 1}T00:00:00Z"
        await kube.create(
            DEPLOYMENTS, namespace, workload("Deployment", name, {RESTART_AT: due}, replicas=0)
        )
    started: list[str] = []
    widest: list[int] = [0]
    follow = RolloutTracker.follow

    def spy(self: RolloutTracker, ref: ObjectRef, response: dict[str, Any]) -> None:
        follow(self, ref, response)
        started.append(ref.key.name)
        widest[0] = max(widest[0], self.in_progress)

    # On the class, before the controller starts: the first restarts begin as soon as it is
    # ready, before a test could patch the running instance.
    monkeypatch.setattr(RolloutTracker, "follow", spy)
    running = await start_for(
        start_controller, namespace, "deployments.apps", max_concurrent_rollouts=2, workers=4
    )

    async def all_completed() -> bool:
        for name in names:
            if "RolloutCompleted" not in [
                r for _, r, _ in await events_of(kube, namespace, name, rollouts=True)
            ]:
                return False
        return True

    await eventually(all_completed, within=60, what="RolloutCompleted on all six")
    assert sorted(started) == names
    assert widest[0] <= 2
    assert started[:2] == names[:2] or sorted(started[:2]) == names[:2]  # earliest due first
    queued = [
        name
        for name in names
        if "RestartQueued" in [r for _, r, _ in await events_of(kube, namespace, name)]
    ]
    assert len(queued) >= 2
    for name in names:
        reasons = [r for _, r, _ in await events_of(kube, namespace, name, rollouts=True)]
        assert reasons.count("RestartQueued") <= 1
        assert reasons.count("RolloutCompleted") == 1
    assert sample(running, "lifecycle_rollouts_total", kind="Deployment", result="completed") == 6
    assert sample(running, "lifecycle_rollout_duration_seconds_count") == 6


async def test_a_stalled_rollout_is_reported_and_the_queue_moves_on(
    start_controller: StartController, namespace: str, kube: KubeClient
) -> None:
    running = await start_for(
        start_controller,
        namespace,
        "deployments.apps",
        max_concurrent_rollouts=1,
        rollout_timeout="4s",
    )
    await kube.create(
        DEPLOYMENTS,
        namespace,
        workload("Deployment", "stuck", {RESTART_AT: "2020-01-01T00:00:00Z"}, replicas=1),
    )
    await wait_event(kube, namespace, "stuck", "RestartTriggered", within=15)
    await kube.create(
        DEPLOYMENTS,
        namespace,
        workload("Deployment", "next", {RESTART_AT: "2020-01-02T00:00:00Z"}, replicas=0),
    )
    await wait_event(kube, namespace, "next", "RestartQueued", within=15)
    events = await wait_event(kube, namespace, "stuck", "RolloutStalled", within=20)
    note = next(note for _, reason, note in events if reason == "RolloutStalled")
    assert note.startswith("Rollout after the restart not complete after 4s (--rollout-timeout): ")
    assert "availableReplicas=0" in note
    await wait_event(kube, namespace, "next", "RolloutCompleted", within=20)
    stalled = sample(running, "lifecycle_rollouts_total", kind="Deployment", result="stalled")
    assert stalled == 1
    obj = await get(kube, DEPLOYMENTS, namespace, "next")
    assert RESTARTED_AT in template_annotations(obj)
