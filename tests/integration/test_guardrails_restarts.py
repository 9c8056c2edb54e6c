"""The restart guard on the real control plane (docs/behaviour.md#restart-guard).

Rollout verification and ``--max-concurrent-rollouts`` are tested with real Pods on the
control plane with fake nodes (test_real_rollouts.py), where rollouts take visible steps.
"""

from __future__ import annotations

import asyncio
import itertools
from datetime import UTC, datetime

import pytest

from lifecycle_controller.kube import KubeClient
from tests.integration.controller import StartController
from tests.integration.events import events_of
from tests.integration.keys import RESTART_AT, RESTARTED_AT
from tests.integration.scenario_support import (
    get,
    start_for,
    template_annotations,
    workload,
)
from tests.integration.support import DEPLOYMENTS
from tests.integration.timestamps import parse_utc, rfc3339

pytestmark = pytest.mark.integration


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
