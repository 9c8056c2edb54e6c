"""``referencedBy`` on the real control plane (docs/policies.md#unused-objects).

The reference index is opened only because a policy reads ``referencedBy`` (the controller
is told to act on ConfigMaps only): a ConfigMap used only by the template of a Deployment
scaled to zero is kept, an unused one is deleted, and one a Pod created after the controller
started uses is kept too.
"""

from __future__ import annotations

from typing import Any

from lifecycle_controller.kube import KubeClient
from lifecycle_controller.kube.resources import PODS, POLICIES
from tests.integration.controller import StartController
from tests.integration.policy_tools import namespaced_policy
from tests.integration.scenario_support import create, gone, sample, settle, start_for, wait_gone
from tests.integration.support import CONFIGMAPS, DEPLOYMENTS, configmap, deployment


def _pod(name: str, uses: str) -> dict[str, Any]:
    return {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {"name": name},
        "spec": {
            "containers": [
                {"name": "c", "image": "x", "envFrom": [{"configMapRef": {"name": uses}}]}
            ]
        },
    }


async def test_unused_configmaps_go_and_used_ones_stay(
    policy_crds: None, start_controller: StartController, namespace: str, kube: KubeClient
) -> None:
    await create(
        kube,
        POLICIES,
        namespace,
        namespaced_policy(
            "unused",
            namespace,
            resources=["configmaps"],
            condition="size(referencedBy) == 0",
            lifecycle={"delete-after": "15s"},
        ),
    )
    app = deployment("app")
    app["spec"]["replicas"] = 0
    app["spec"]["template"]["spec"]["volumes"] = [{"name": "v", "configMap": {"name": "used"}}]
    await create(kube, DEPLOYMENTS, namespace, app)
    for name in ("used", "orphan", "late"):
        await create(kube, CONFIGMAPS, namespace, configmap(name))
    running = await start_for(start_controller, namespace, "configmaps")
    await create(kube, PODS, namespace, _pod("late-user", "late"))
    await wait_gone(kube, CONFIGMAPS, namespace, "orphan", within=60)
    await settle(3)
    assert not await gone(kube, CONFIGMAPS, namespace, "used")
    assert not await gone(kube, CONFIGMAPS, namespace, "late")
    added = sample(
        running,
        "lifecycle_watch_events_total",
        resource="pods",
        purpose="references",
        type="ADDED",
    )
    assert added is not None
    assert added >= 1  # the Pod came through the reflector, purpose "references"
