"""The controller's own work on the release under test: one controller, elected through a
Lease and running as the chart's ServiceAccount under exactly the RBAC the chart renders
(least privilege, on this release's authorizer), deletes and restarts each kind it acts on,
carries out a LifecyclePolicy (the chart's CRDs installed) and reports with
``events.k8s.io/v1`` Events; then the ``status`` and ``explain`` commands read the same
objects."""

from __future__ import annotations

import uuid
from typing import Any

from lifecycle_controller.devcluster import ControlPlane
from lifecycle_controller.kube import KubeClient, NotFound, ResourceType
from lifecycle_controller.kube.resources import LEASES, POLICIES
from tests.chart.support import Helm, apply_chart_rbac
from tests.chart.test_least_privilege import chart_flags
from tests.integration.controller import StartController
from tests.integration.events import wait_event
from tests.integration.keys import CONTROLLER, DELETE_AFTER, DELETE_AT, RESTART_AT, RESTARTED_AT
from tests.integration.policy_crds import install_policy_crds
from tests.integration.policy_tools import namespaced_policy, tool_json
from tests.integration.scenario_support import workload
from tests.integration.support import (
    CONFIGMAPS,
    DAEMONSETS,
    DEPLOYMENTS,
    SECRETS,
    STATEFULSETS,
    configmap,
    eventually,
)
from tests.integration.timestamps import PAST

WATCHED = [
    "configmaps",
    "secrets",
    "deployments.apps",
    "statefulsets.apps",
    "daemonsets.apps",
]


def secret(name: str, **annotations: str) -> dict[str, Any]:
    return {
        "apiVersion": "v1",
        "kind": "Secret",
        "metadata": {"name": name, "annotations": annotations},
        "stringData": {"k": "v"},
    }


async def _gone(kube: KubeClient, resource: ResourceType, namespace: str, name: str) -> bool:
    try:
        await kube.get(resource, namespace, name)
    except NotFound:
        return True
    return False


async def test_an_elected_controller_deletes_and_restarts_each_kind(
    control_plane: ControlPlane,
    helm: Helm,
    start_controller: StartController,
    kube: KubeClient,
    namespace: str,
) -> None:
    release = f"compat{uuid.uuid4().hex[:6]}"
    release_ns = f"{release}-system"
    values = {"controllerManager": {"scope": {"watchResources": WATCHED}}}
    values["controllerManager"]["scope"]["watchNamespaces"] = [namespace]
    identity = apply_chart_rbac(control_plane, helm, values, release=release, namespace=release_ns)
    flags = chart_flags(helm, values, release=release, namespace=release_ns)
    install_policy_crds(control_plane)
    expire = namespaced_policy(
        "expire-tmp",
        namespace,
        resources=["configmaps"],
        names=["policy-tmp-*"],
        lifecycle={"delete-after": "1s"},
    )
    await kube.create(POLICIES, namespace, expire)
    await start_controller(kubeconfig=str(identity), **flags)

    async def lease_held() -> bool:
        items = (await kube.request("GET", LEASES.collection_path(release_ns)))["items"]
        return any(item["spec"].get("holderIdentity") for item in items)

    await eventually(lease_held, within=20, what="the controller to take the Lease")
    leases = (await kube.request("GET", LEASES.collection_path(release_ns)))["items"]
    assert len(leases) == 1
    assert leases[0]["spec"]["holderIdentity"]
    assert leases[0]["spec"]["renewTime"].endswith("Z")

    deleted = {
        CONFIGMAPS: configmap("short-lived", **{DELETE_AFTER: "1s"}),
        SECRETS: secret("short-lived-secret", **{DELETE_AFTER: "1s"}),
    }
    for resource, body in deleted.items():
        await kube.create(resource, namespace, body)
    restarted = {
        DEPLOYMENTS: "web",
        STATEFULSETS: "db",
        DAEMONSETS: "agent",
    }
    for resource, name in restarted.items():
        await kube.create(
            resource, namespace, workload(resource.kind, name, {RESTART_AT: PAST}, replicas=0)
        )

    for resource, body in deleted.items():
        name = body["metadata"]["name"]

        async def gone(resource: ResourceType = resource, name: str = name) -> bool:
            return await _gone(kube, resource, namespace, name)

        await eventually(gone, within=20, what=f"the {resource.kind} deletion")
        await wait_event(kube, namespace, name, "Deleted")

    for resource, name in restarted.items():

        async def marked(resource: ResourceType = resource, name: str = name) -> bool:
            template = (await kube.get(resource, namespace, name))["spec"]["template"]
            return RESTARTED_AT in (template["metadata"].get("annotations") or {})

        await eventually(marked, within=20, what=f"the {resource.kind} restart marker")
        await wait_event(kube, namespace, name, "RestartTriggered")

    # The policy, carried out under the chart's RBAC: the deletion, its Event, the status.
    await kube.create(CONFIGMAPS, namespace, configmap("policy-tmp-1"))

    async def policy_deleted() -> bool:
        return await _gone(kube, CONFIGMAPS, namespace, "policy-tmp-1")

    await eventually(policy_deleted, within=30, what="the policy's deletion")
    deleted_by_policy = await wait_event(kube, namespace, "policy-tmp-1", "Deleted")
    assert f"LifecyclePolicy/{namespace}/expire-tmp" in deleted_by_policy[-1][2]

    async def reported() -> bool:
        status = (await kube.get(POLICIES, namespace, "expire-tmp")).get("status") or {}
        ready = [c for c in status.get("conditions") or () if c.get("type") == "Ready"]
        return status.get("observedGeneration") == 1 and [c["status"] for c in ready] == ["True"]

    await eventually(reported, within=30, what="the policy's status")

    events = await kube.request("GET", f"/apis/events.k8s.io/v1/namespaces/{namespace}/events")
    assert events["apiVersion"] == "events.k8s.io/v1"
    ours = [e for e in events["items"] if e.get("reportingController") == CONTROLLER]
    kinds = {e["regarding"]["kind"] for e in ours}
    assert kinds == {"ConfigMap", "Secret", "Deployment", "StatefulSet", "DaemonSet"}
    assert all(e["eventTime"] for e in ours)


async def test_status_and_explain_read_the_release(
    control_plane: ControlPlane, kube: KubeClient, namespace: str
) -> None:
    install_policy_crds(control_plane)
    await kube.create(
        CONFIGMAPS, namespace, configmap("later", **{DELETE_AT: "2099-01-01T00:00:00Z"})
    )
    await kube.create(CONFIGMAPS, namespace, configmap("bad", **{DELETE_AT: "tomorrow"}))
    rows = tool_json(control_plane, "status", "-n", namespace, "--watch-resource", "configmaps")
    by_name = {row["name"]: row for row in rows}
    assert sorted(by_name) == ["bad", "later"]
    assert by_name["later"]["next"] == "2099-01-01T00:00:00Z"
    assert by_name["bad"]["problems"][0].startswith("InvalidAnnotation: ")
    report = tool_json(control_plane, "explain", "cm/later", "-n", namespace)
    assert report["action"] == "delete"
