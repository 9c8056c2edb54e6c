"""The blast-radius controls under the chart's least-privilege RBAC, on the real API.

The controller runs as the chart's ServiceAccount with the arguments the chart renders for
``breaker.maxActions`` (tests/chart/test_least_privilege.py explains the set-up). It must be
able to latch the breaker in its ConfigMap beside the Lease (the chart's breaker Role) and
to follow a restart's rollout (``get`` on the workload), and nothing more on ConfigMaps of
that namespace than the Role names (docs/operator-guide.md#blast-radius-controls).
"""

from __future__ import annotations

import uuid

import pytest

from lifecycle_controller.devcluster import ControlPlane
from lifecycle_controller.kube import KubeClient
from lifecycle_controller.kube.breaker_store import breaker_name, read_breaker
from tests.chart.support import Helm, apply_chart_rbac, can_i
from tests.chart.test_least_privilege import chart_flags
from tests.integration.controller import StartController
from tests.integration.events import wait_event
from tests.integration.keys import RESTART_AT, RESTARTED_AT
from tests.integration.scenario_support import workload
from tests.integration.support import DEPLOYMENTS, eventually

pytestmark = pytest.mark.integration

VALUES = {
    "controllerManager": {
        "breaker": {"maxActions": 2},
        "scope": {"watchResources": ["deployments.apps"]},
    }
}


async def test_breaker_and_rollouts_work_with_the_charts_rbac(
    control_plane: ControlPlane, helm: Helm, start_controller: StartController, namespace: str
) -> None:
    release = f"bk{uuid.uuid4().hex[:6]}"
    release_ns = f"{release}-system"
    kubeconfig = apply_chart_rbac(
        control_plane, helm, VALUES, release=release, namespace=release_ns
    )
    flags = chart_flags(helm, VALUES, release=release, namespace=release_ns)
    flags["watch_namespace"] = [namespace]
    await start_controller(kubeconfig=str(kubeconfig), **flags)
    name = breaker_name(flags["leader_election_id"])

    async with await KubeClient.connect(str(control_plane.admin_kubeconfig)) as admin:
        await admin.create(
            DEPLOYMENTS,
            namespace,
            workload("Deployment", "web", {RESTART_AT: "2020-01-01T00:00:00Z"}, replicas=0),
        )
        await wait_event(admin, namespace, "web", "RolloutCompleted", within=30)
        for i in range(2):
            await admin.create(
                DEPLOYMENTS,
                namespace,
                workload("Deployment", f"app{i}", {RESTART_AT: "2020-01-01T00:00:00Z"}, replicas=0),
            )

        async def tripped() -> bool:
            return (await read_breaker(admin, release_ns, name)).open

        await eventually(tripped, within=20, what="the breaker latched by the chart's identity")

        async def halted() -> int:
            count = 0
            for i in range(2):
                obj = await admin.get(DEPLOYMENTS, namespace, f"app{i}")
                template = obj["spec"]["template"]["metadata"].get("annotations") or {}
                count += RESTARTED_AT not in template
            return count

        async def second_action_landed() -> bool:
            # The breaker may trip while the second action's PATCH is still in flight.
            return await halted() <= 1

        await eventually(second_action_landed, within=10, what="the second action's restart")
        assert await halted() == 1  # "web" was the first action, one of the two the second

    assert can_i(kubeconfig, "patch", f"configmaps/{name}", namespace=release_ns)
    assert can_i(kubeconfig, "get", f"configmaps/{name}", namespace=release_ns)
    assert not can_i(kubeconfig, "patch", "configmaps/other", namespace=release_ns)
    assert not can_i(kubeconfig, "delete", f"configmaps/{name}", namespace=release_ns)
    assert not can_i(kubeconfig, "get", "configmaps/other", namespace=release_ns)
