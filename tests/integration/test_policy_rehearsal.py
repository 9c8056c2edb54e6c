"""A rehearsal is counted once (docs/reliability.md#policy-audit, docs/policies.md#audit).

A dry-run policy over 60 ConfigMaps already due reports each once: ``status.actions.dryRun``
is 60, and ``actions.dryRunThrough`` says how far the reports go. A new controller (as after
a restart or a leader change) decides them all again: nothing is counted again and no place
in the limit's window is taken again, though ``lastActions`` keeps only 50 of them; its
window holds the 60 places the first one recorded before using them. A spec
edit that moves no due time re-queues everything: nothing is counted again either. Before,
the 10 reports past the kept 50 were counted again each time, and took limit places again.
"""

from __future__ import annotations

import asyncio
from typing import Any

from lifecycle_controller.core.policy.model import PolicyKind, PolicyRef
from lifecycle_controller.core.text.timestamps import parse_rfc3339
from lifecycle_controller.kube import KubeClient
from lifecycle_controller.kube.resources import POLICIES
from tests.integration.controller import RunningController, StartController
from tests.integration.policy_tools import create_configmap, labelled, namespaced_policy
from tests.integration.scenario_support import create, start_for
from tests.integration.support import eventually

REHEARSED = {"rehearsal-test": "yes"}
OBJECTS = 60


async def _status(kube: KubeClient, namespace: str) -> dict[str, Any]:
    policy = await kube.get(POLICIES, namespace, "rehearsal")
    status: dict[str, Any] = policy.get("status") or {}
    return status


async def _settled(running: RunningController, ref: PolicyRef, generation: int) -> None:
    """Wait until the controller has the policy's ``generation`` and has decided every
    object since: each one is decided by the policy, and nothing is queued or in flight."""
    pipeline = running.controller.pipeline
    assert pipeline is not None
    decisions = pipeline.reconciler.policies
    assert decisions is not None

    async def settled() -> bool:
        current = [p for p in decisions.store.current.valid if p.ref == ref]
        decided = sum(1 for tally in decisions.tallies.values() if ref in tally.decided_by)
        queue = pipeline.queue
        return (
            [p.generation for p in current] == [generation]
            and decided >= OBJECTS
            and not len(queue)
            and not queue.in_flight
        )

    await eventually(settled, within=60, what=f"every object decided under generation {generation}")


async def _one_more(kube: KubeClient, namespace: str, name: str, count: int) -> dict[str, Any]:
    """Create one more due object; the status once its report is in ``lastActions`` (every
    report made before it has been merged by then: entries are written in order)."""
    await create_configmap(kube, namespace, labelled(name, REHEARSED))

    async def listed() -> bool:
        last = (await _status(kube, namespace)).get("lastActions") or []
        return any(entry.get("name") == name for entry in last)

    await eventually(listed, within=30, what=f"{name} in lastActions")
    status = await _status(kube, namespace)
    assert status["actions"]["dryRun"] == count, status["actions"]
    return status


async def test_a_rehearsal_is_counted_once_across_a_restart_and_an_edit(
    policy_crds: None, start_controller: StartController, namespace: str, kube: KubeClient
) -> None:
    body = namespaced_policy(
        "rehearsal",
        namespace,
        resources=["configmaps"],
        selector={"matchLabels": REHEARSED},
        limit={"actions": 70, "window": "1h"},
        lifecycle={"delete-after": "1s", "dry-run": "true"},
    )
    created = await create(kube, POLICIES, namespace, body)
    ref = PolicyRef(PolicyKind.NAMESPACED, namespace, "rehearsal")
    for index in range(OBJECTS):
        await create_configmap(kube, namespace, labelled(f"due-{index:02}", REHEARSED))
    await asyncio.sleep(1.5)  # every one is due before the controller starts
    first = await start_for(start_controller, namespace)

    async def reported() -> bool:
        actions = (await _status(kube, namespace)).get("actions") or {}
        return actions.get("dryRun") == OBJECTS and "dryRunThrough" in actions

    await eventually(reported, within=60, what="60 dry-run reports, and how far they go")
    status = await _status(kube, namespace)
    assert len(status["lastActions"]) == 50
    newest = max(
        parse_rfc3339(item["metadata"]["creationTimestamp"])
        for item in (await kube.request("GET", f"/api/v1/namespaces/{namespace}/configmaps"))[
            "items"
        ]
        if item["metadata"].get("labels") == REHEARSED
    )
    # Every report is covered (due a second after creation, in whole seconds).
    assert parse_rfc3339(status["actions"]["dryRunThrough"]) >= newest
    await first.stop()

    second = await start_for(start_controller, namespace)
    generation = created["metadata"]["generation"]
    await _settled(second, ref, generation)
    pipeline = second.controller.pipeline
    assert pipeline is not None
    decisions = pipeline.reconciler.policies
    assert decisions is not None
    state = decisions.limits.state(ref, second.controller.clock.now_ns())
    assert state is not None
    assert (state.used, state.held) == (60, 0)  # the 60 recorded; no place taken again
    await _one_more(kube, namespace, "after-restart", OBJECTS + 1)

    # A spec edit that moves no due time: everything is decided again, nothing recounted.
    await kube.merge_patch(POLICIES, namespace, "rehearsal", {"spec": {"priority": 5}})
    await _settled(second, ref, generation + 1)
    await _one_more(kube, namespace, "after-edit", OBJECTS + 2)
    state = decisions.limits.state(ref, second.controller.clock.now_ns())
    assert state is not None
    assert (state.used, state.held) == (62, 0)
    await second.stop()
