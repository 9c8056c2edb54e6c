"""A spent one-off policy stops contending (docs/policies.md#precedence), on the real API
server with the running controller.

A ``LifecyclePolicy`` whose ``delete-at`` has passed leaves the ConfigMaps created since
alone, and one whose ``restart-at`` restarted a Deployment is done with it: neither is a
contender for those objects any more, so the next one, a ``ClusterLifecyclePolicy``, decides
them. The spent policy's status says so (``Spent``, neither matched nor overlapped), and
``explain`` and ``policies try`` name it and why.

Caught: the spent policy still won its family, left the object alone, and so kept the cluster
policy (a ``delete-after`` sweep, a recurring restart) away from that namespace's new objects
for good.
"""

from __future__ import annotations

import time
from typing import Any

import pytest
import yaml

from lifecycle_controller.devcluster import ControlPlane
from lifecycle_controller.kube import KubeClient
from lifecycle_controller.kube.resources import POLICIES
from tests.integration.controller import StartController
from tests.integration.events import events_of, wait_event
from tests.integration.keys import P
from tests.integration.policy_tools import (
    ClusterPolicies,
    labelled,
    namespaced_policy,
    run_tool,
    tool_json,
)
from tests.integration.scenario_support import create, start_for, wait_gone, workload
from tests.integration.support import CONFIGMAPS, DEPLOYMENTS, eventually
from tests.integration.timestamps import stamp


async def spent_condition(
    kube: KubeClient, namespace: str, name: str, reason: str
) -> dict[str, Any]:
    """The policy's status once it shows a ``Spent`` condition with ``reason``."""
    seen: dict[str, Any] = {}

    async def shown() -> bool:
        status = (await kube.get(POLICIES, namespace, name)).get("status") or {}
        seen.clear()
        seen.update(status)
        return any(
            c.get("type") == "Spent" and c.get("status") == "True" and c.get("reason") == reason
            for c in status.get("conditions") or ()
        )

    await eventually(shown, within=30, what=f"{name}'s Spent condition ({reason})")
    return seen


async def test_a_spent_delete_at_gives_way_to_a_cluster_delete_after(
    cluster_policies: ClusterPolicies,
    start_controller: StartController,
    control_plane: ControlPlane,
    namespace: str,
    kube: KubeClient,
) -> None:
    ended = stamp(time.time() - 3600)  # the sprint ended an hour ago
    sprint = namespaced_policy(
        "sprint", namespace, resources=["configmaps"], lifecycle={"delete-at": ended}
    )
    await create(kube, POLICIES, namespace, sprint)
    sweep = f"{namespace}-previews"
    await cluster_policies(
        sweep,
        namespaces=[namespace],
        resources=["configmaps"],
        names=["tmp-*"],
        lifecycle={"delete-after": "3s"},
    )
    await start_for(start_controller, namespace)
    await create(kube, CONFIGMAPS, namespace, labelled("tmp-report", {}))
    kept = await create(kube, CONFIGMAPS, namespace, labelled("keep", {}))

    await wait_gone(kube, CONFIGMAPS, namespace, "tmp-report", within=30)
    deleted = await wait_event(kube, namespace, "tmp-report", "Deleted", within=30)
    assert f"(based on ClusterLifecyclePolicy/{sweep}: delete-after 3s)" in deleted[-1][2]

    # The sprint policy decides nothing and overlaps nothing: it leaves "keep" alone.
    status = await spent_condition(kube, namespace, "sprint", "DeleteAtPassed")
    (spent,) = [c for c in status["conditions"] if c["type"] == "Spent"]
    assert spent["message"] == (
        f"it leaves alone 1 object it matches, created at or after its delete-at {ended}: the "
        "next policy (or its own annotations) decides for it; nothing is left for it to do: "
        "delete it, or move its delete-at to cover it"
    )
    assert (status["matched"], status["overlapped"]) == (0, 0)

    why = f"created {kept['metadata']['creationTimestamp']}, at or after its delete-at {ended}"
    ref = f"LifecyclePolicy/{namespace}/sprint"
    explained = tool_json(control_plane, "explain", "cm/keep", "-n", namespace)
    assert explained["policies"]["decided_by"] is None
    assert explained["policies"]["left_alone"] == [{"policy": ref, "why": why}]
    text = run_tool(control_plane, "explain", "cm/keep", "-n", namespace).stdout
    assert f"Left alone:   by {ref}: {why} (the next one decides)" in text

    args = ("policies", "try", "-f", "-", "-n", namespace, "--watch-resource", "configmaps")
    tried = tool_json(control_plane, *args, stdin=yaml.safe_dump(sprint))
    assert tried["totals"][ref]["spent"] == 1
    assert tried["totals"][ref]["decides"] == 0
    (row,) = tried["objects"]
    assert row["left_alone"] == [{"policy": ref, "why": why}]
    table = run_tool(control_plane, *args, stdin=yaml.safe_dump(sprint)).stdout
    assert f"left alone: 1 created at or after its delete-at {ended}" in table


def _template_marker(deployment: dict[str, Any]) -> str | None:
    annotations = deployment["spec"]["template"]["metadata"].get("annotations") or {}
    marker = annotations.get(P + "restartedAt")
    return str(marker) if marker else None


@pytest.mark.long  # a recurring restart's next minute
async def test_a_done_restart_at_gives_way_to_a_recurring_cluster_restart(
    cluster_policies: ClusterPolicies,
    start_controller: StartController,
    namespace: str,
    kube: KubeClient,
) -> None:
    """The one-off restart goes a few seconds before a minute starts, so the cluster policy's
    every-minute cron (the shortest a recurring restart can be) is due at that minute: the
    wait is real time, at most about a minute and a quarter."""
    await create(kube, DEPLOYMENTS, namespace, workload("Deployment", "web", replicas=0))
    minute = (int(time.time()) + 15) // 60 * 60 + 60
    await create(
        kube,
        POLICIES,
        namespace,
        namespaced_policy(
            "once",
            namespace,
            resources=["deployments.apps"],
            lifecycle={"restart-at": stamp(minute - 6)},
        ),
    )
    every = f"{namespace}-every-minute"
    await cluster_policies(
        every,
        namespaces=[namespace],
        resources=["deployments.apps"],
        lifecycle={"restart-cron": "* * * * *"},
    )
    await start_for(start_controller, namespace, "deployments.apps")

    first = await wait_event(kube, namespace, "web", "RestartTriggered", within=90)
    assert f"(based on LifecyclePolicy/{namespace}/once: restart-at" in first[-1][2]

    by_cluster = f"(based on ClusterLifecyclePolicy/{every}: restart-cron * * * * *)"

    async def restarted_by_the_cluster_policy() -> bool:
        notes = [
            e[2] for e in await events_of(kube, namespace, "web") if e[1] == "RestartTriggered"
        ]
        return any(by_cluster in note for note in notes)

    await eventually(
        restarted_by_the_cluster_policy, within=150, what="a restart by the cluster policy"
    )
    assert _template_marker(await kube.get(DEPLOYMENTS, namespace, "web")) is not None

    status = await spent_condition(kube, namespace, "once", "RestartAtDone")
    assert (status["matched"], status["overlapped"]) == (0, 0)
