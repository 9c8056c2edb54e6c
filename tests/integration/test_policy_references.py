"""``referencedBy`` on the real control plane (docs/policies.md#unused-objects).

The reference index is opened only because a policy reads ``referencedBy`` (the controller
is told to act on ConfigMaps only): a ConfigMap used only by the template of a Deployment
scaled to zero is kept, an unused one is deleted, and one a Pod created after the controller
started uses is kept too. A StatefulSet created or deleted while the controller runs
re-decides every claim of its templates. A controller that may not list Pods holds, says why
in the policy's status (``Held``, ``ReferencesUnknown``) and metrics (``references-unknown``),
and stays ready, with a ``/readyz`` note (readiness is about the controller, not a tenant's
policy). Caught: /readyz answered 503 for as long as such a policy existed.
"""

from __future__ import annotations

import asyncio
from typing import Any

import aiohttp

from lifecycle_controller.devcluster import ControlPlane
from lifecycle_controller.kube import KubeClient
from lifecycle_controller.kube.resources import PODS, POLICIES
from tests.integration.controller import StartController, wait_ready
from tests.integration.events import wait_for_event
from tests.integration.policy_tools import namespaced_policy
from tests.integration.scenario_support import (
    create,
    gone,
    read,
    sample,
    settle,
    start_for,
    wait_gone,
    workload,
)
from tests.integration.support import (
    CONFIGMAPS,
    DEPLOYMENTS,
    STATEFULSETS,
    configmap,
    deployment,
    eventually,
)
from tests.integration.test_policy_reference_recipes import PVCS, claim, claim_template
from tests.integration.test_scenarios_recurring_catchup import (
    POLICY_READER_RULES,
    controller_rules,
)


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
    pipeline = running.controller.pipeline
    assert pipeline is not None
    assert pipeline.references is not None
    assert pipeline.references.synced  # ready only once the reference index had synced
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


def _statefulset(name: str) -> dict[str, Any]:
    """``name`` scaled to zero, with the claim template ``data``."""
    obj = workload("StatefulSet", name, replicas=0)
    obj["spec"]["volumeClaimTemplates"] = [claim_template("data")]
    return obj


async def test_a_statefulset_created_or_deleted_re_decides_the_claims_of_its_templates(
    policy_crds: None, start_controller: StartController, namespace: str, kube: KubeClient
) -> None:
    """Claims of no StatefulSet yet (``data-late-0``, ``data-late-3``) are unused; ``late``
    created with the template ``data`` uses them both at once, with no Pod; ``db`` deleted
    leaves ``data-db-0`` unused (the policy's matched count follows; nothing is due)."""
    await create(
        kube,
        POLICIES,
        namespace,
        namespaced_policy(
            "unused-claims",
            namespace,
            resources=["persistentvolumeclaims"],
            condition="size(referencedBy) == 0",
            lifecycle={"delete-after": "87600h"},
        ),
    )
    await create(kube, STATEFULSETS, namespace, _statefulset("db"))
    for name in ("data-db-0", "data-late-0", "data-late-3"):
        await create(kube, PVCS, namespace, claim(name))
    await start_for(start_controller, namespace, "persistentvolumeclaims")

    async def matched(expected: int, what: str) -> None:
        async def counted() -> bool:
            policy = await read(kube, POLICIES, namespace, "unused-claims")
            return ((policy or {}).get("status") or {}).get("matched") == expected

        await eventually(counted, within=60, what=what)

    await matched(2, "data-late-0 and data-late-3 unused")
    await create(kube, STATEFULSETS, namespace, _statefulset("late"))
    await matched(0, "StatefulSet/late using its claims")
    await kube.delete(STATEFULSETS, namespace, "db")
    await matched(1, "data-db-0 unused once its StatefulSet is deleted")


async def test_without_the_rights_to_read_pods_the_policy_holds_and_says_why(
    policy_crds: None,
    start_controller: StartController,
    control_plane: ControlPlane,
    namespace: str,
    kube: KubeClient,
) -> None:
    """The controller may act on ConfigMaps but not list Pods or workloads (the chart's
    ``rbac.readReferences: false``): nothing is deleted as unused, the policy's status counts
    the objects it holds and says why (its ``Held`` condition naming the RBAC switch, the
    metric's own reason), and ``/readyz`` stays 200 (a tenant's policy does not take the
    controller out of its Service) with a note line saying why the policy holds."""
    await create(
        kube,
        POLICIES,
        namespace,
        namespaced_policy(
            "unused",
            namespace,
            resources=["configmaps"],
            condition="size(referencedBy) == 0",
            lifecycle={"delete-after": "2s"},
        ),
    )
    await create(kube, CONFIGMAPS, namespace, configmap("orphan"))
    kubeconfig = await asyncio.to_thread(
        control_plane.user_kubeconfig,
        f"refs-{namespace}",
        cluster_rules=POLICY_READER_RULES,
        namespaced_rules={namespace: controller_rules(delete=True)},
    )
    running = await start_for(
        start_controller, namespace, "configmaps", kubeconfig=str(kubeconfig), ready=False
    )

    async def held() -> bool:
        policy = await read(kube, POLICIES, namespace, "unused")
        return ((policy or {}).get("status") or {}).get("held") == 1

    await eventually(held, within=60, what="the policy holding the ConfigMap")
    await settle(3)
    assert not await gone(kube, CONFIGMAPS, namespace, "orphan")
    event = await wait_for_event(kube, namespace, "unused", "PolicyConditionFailed")
    assert "may not list and watch" in event.note, event.note
    status = (await read(kube, POLICIES, namespace, "unused") or {})["status"]
    (condition,) = [c for c in status["conditions"] if c["type"] == "Held"]
    assert (condition["status"], condition["reason"]) == ("True", "ReferencesUnknown")
    assert condition["message"].startswith("1 held: what uses them is not known"), condition
    assert "may not list and watch" in condition["message"]
    policy = f"LifecyclePolicy/{namespace}/unused"
    metric = "lifecycle_policy_held_objects"
    assert sample(running, metric, policy=policy, reason="references-unknown") == 1
    assert sample(running, metric, policy=policy, reason="condition-error") is None
    assert "rbac.readReferences" in condition["message"]
    await wait_ready(running)
    probes = running.controller.probes
    assert probes is not None
    assert probes.port is not None
    async with (
        aiohttp.ClientSession() as http,
        http.get(f"http://127.0.0.1:{probes.port}/readyz") as response,
    ):
        assert response.status == 200
        notes = [line for line in (await response.text()).splitlines() if line.startswith("[!]")]
    assert len(notes) == 1, notes
    assert notes[0].startswith("[!]policies reading referencedBy hold: references unknown")
    assert "rbac.readReferences" in notes[0]
