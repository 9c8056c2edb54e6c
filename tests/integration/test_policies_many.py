"""More lifecycle policies than one list page holds, on the real API server: every one is in
force.

520 LifecyclePolicies in the test's namespace, each matching one ConfigMap by name, the
last one by name (``p0519``) a ConfigMap that exists. The API server lists policies 500 to a
page, in name order within a namespace, so whatever other tests left in the cluster, the
last 20 of these are never on the first page. ``status`` (the tools' policy read) names
``p0519`` as the policy deciding that ConfigMap, and the running controller deletes it (the
Event names the policy).

Caught: the controller and the tools (``status``, ``policies try``) kept the first page of
500 only, so the 501st policy and those after it were silently not in force.
"""

from __future__ import annotations

import asyncio

from lifecycle_controller.devcluster import ControlPlane
from lifecycle_controller.kube import KubeClient
from lifecycle_controller.kube.resources import POLICIES
from tests.integration.controller import StartController
from tests.integration.events import wait_event
from tests.integration.policy_tools import labelled, namespaced_policy, tool_json
from tests.integration.scenario_support import create, gone, start_for, wait_gone
from tests.integration.support import CONFIGMAPS

COUNT = 520
LAST = f"p{COUNT - 1:04d}"


async def create_policies(kube: KubeClient, namespace: str) -> None:
    """``p0000`` … ``p0519``, created a few at a time (the machine may be loaded)."""
    gate = asyncio.Semaphore(16)

    async def one(number: int) -> None:
        name = f"p{number:04d}"
        target = "doomed" if name == LAST else f"absent-{number}"
        lifecycle = {"delete-after": "2s" if name == LAST else "1h"}
        body = namespaced_policy(
            name, namespace, resources=["configmaps"], names=[target], lifecycle=lifecycle
        )
        async with gate:
            await create(kube, POLICIES, namespace, body)

    await asyncio.gather(*(one(number) for number in range(COUNT)))


async def test_the_policy_past_the_first_page_is_in_force(
    policy_crds: None,
    control_plane: ControlPlane,
    start_controller: StartController,
    namespace: str,
    kube: KubeClient,
) -> None:
    await create_policies(kube, namespace)
    await create(kube, CONFIGMAPS, namespace, labelled("doomed", {}))
    await create(kube, CONFIGMAPS, namespace, labelled("kept", {}))

    rows = tool_json(control_plane, "status", "-n", namespace, "--watch-resource", "configmaps")
    decided = {row["name"]: row["policy"] for row in rows}
    assert decided == {"doomed": f"LifecyclePolicy/{namespace}/{LAST}"}

    await start_for(start_controller, namespace)
    await wait_gone(kube, CONFIGMAPS, namespace, "doomed", within=90)
    deleted = await wait_event(kube, namespace, "doomed", "Deleted", within=30)
    assert f"LifecyclePolicy/{namespace}/{LAST}" in deleted[-1][2]
    assert not await gone(kube, CONFIGMAPS, namespace, "kept")
