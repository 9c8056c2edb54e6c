"""Least privilege, proven: the controller runs as the chart's ServiceAccount on the real API.

The chart's rendered RBAC is applied to the real API server, the controller is started with
exactly the arguments the chart renders (only listen addresses and the Lease namespace are
adapted: outside a Pod there is no POD_NAMESPACE), authenticated with a bound token of the
chart's ServiceAccount. Discovery, watches, guarded patches, preconditioned deletes, Events
and the Lease must all work; anything outside the watch list must be forbidden to it.
"""

from __future__ import annotations

import uuid
from typing import Any

import pytest

from lifecycle_controller.devcluster import ControlPlane
from lifecycle_controller.kube import LEASES, KubeClient, NotFound
from lifecycle_controller.kube.resources import NAMESPACES
from tests.chart.support import Helm, apply_chart_rbac, args_of, can_i, parse_run_args
from tests.integration.controller import StartController
from tests.integration.events import events_of
from tests.integration.keys import DELETE_AFTER, DELETE_AT, RESTART_AT, RESTARTED_AT
from tests.integration.support import CONFIGMAPS, DEPLOYMENTS, configmap, deployment, eventually
from tests.integration.timestamps import PAST

pytestmark = pytest.mark.integration


def chart_flags(
    helm: Helm, values: dict[str, Any], *, release: str, namespace: str
) -> dict[str, Any]:
    params = parse_run_args(args_of(helm.render(values, release=release, namespace=namespace)))
    params.pop("kubeconfig", None)
    params["health_probe_bind_address"] = "127.0.0.1:0"
    params["metrics_bind_address"] = "127.0.0.1:0"
    params["leader_election_namespace"] = namespace
    return params


async def exercise(kube: KubeClient, namespace: str) -> None:
    """A delete and a restart carried out, with their Events, in ``namespace``."""
    await kube.create(CONFIGMAPS, namespace, configmap("expiring", **{DELETE_AFTER: "1s"}))
    await kube.create(DEPLOYMENTS, namespace, deployment("web", {RESTART_AT: PAST}))

    async def deleted() -> bool:
        try:
            await kube.get(CONFIGMAPS, namespace, "expiring")
        except NotFound:
            return True
        return False

    async def restarted() -> bool:
        obj = await kube.get(DEPLOYMENTS, namespace, "web")
        return RESTARTED_AT in (obj["spec"]["template"]["metadata"].get("annotations") or {})

    await eventually(deleted, within=20, what="the ConfigMap deletion")
    await eventually(restarted, within=20, what="the Deployment restart")
    reasons = [
        reason for _, reason, _ in await events_of(kube, namespace, "expiring", reporter=None)
    ]
    assert "Deleted" in reasons
    reasons = [reason for _, reason, _ in await events_of(kube, namespace, "web", reporter=None)]
    assert "RestartTriggered" in reasons


async def assert_leads(kube: KubeClient, namespace: str, lease: str, identity: str) -> None:
    record = await kube.get(LEASES, namespace, lease)
    assert record["spec"]["holderIdentity"] == identity


async def test_default_values_least_privilege(
    control_plane: ControlPlane, helm: Helm, start_controller: StartController, namespace: str
) -> None:
    release = f"lp{uuid.uuid4().hex[:6]}"
    release_ns = f"{release}-system"
    kubeconfig = apply_chart_rbac(control_plane, helm, {}, release=release, namespace=release_ns)
    flags = chart_flags(helm, {}, release=release, namespace=release_ns)
    running = await start_controller(kubeconfig=str(kubeconfig), **flags)

    async with await KubeClient.connect(str(control_plane.admin_kubeconfig)) as admin:
        await exercise(admin, namespace)
        await assert_leads(
            admin, release_ns, flags["leader_election_id"], running.controller.identity
        )

    # Outside the watch list, and verbs the controller never needs, are refused.
    assert not can_i(kubeconfig, "get", "secrets", namespace=namespace)
    assert not can_i(kubeconfig, "delete", "secrets", namespace=namespace)
    assert not can_i(kubeconfig, "update", "configmaps", namespace=namespace)
    assert not can_i(kubeconfig, "create", "configmaps", namespace=namespace)
    assert can_i(kubeconfig, "patch", "deployments.apps", namespace=namespace)


async def test_namespaced_values_least_privilege(
    control_plane: ControlPlane, helm: Helm, start_controller: StartController, namespace: str
) -> None:
    release = f"lp{uuid.uuid4().hex[:6]}"
    release_ns = f"{release}-system"
    watched = f"{release}-team"
    values = {
        "controllerManager": {
            "scope": {
                "watchResources": ["configmaps", "deployments.apps"],
                "watchNamespaces": [watched],
            }
        }
    }
    kubeconfig = apply_chart_rbac(
        control_plane, helm, values, release=release, namespace=release_ns
    )
    flags = chart_flags(helm, values, release=release, namespace=release_ns)
    running = await start_controller(kubeconfig=str(kubeconfig), **flags)

    async with await KubeClient.connect(str(control_plane.admin_kubeconfig)) as admin:
        # The same annotation in a namespace outside the watch list must be left alone.
        await admin.create(CONFIGMAPS, namespace, configmap("outside", **{DELETE_AT: PAST}))
        await exercise(admin, watched)
        lease = flags["leader_election_id"]
        await assert_leads(admin, release_ns, lease, running.controller.identity)
        await admin.get(CONFIGMAPS, namespace, "outside")  # raises NotFound if it was deleted

    # Namespaced Roles only: no cluster-wide reads, nothing outside the watched namespace.
    assert not can_i(kubeconfig, "list", "configmaps")
    assert not can_i(kubeconfig, "list", "configmaps", namespace=namespace)
    assert not can_i(kubeconfig, "delete", "configmaps", namespace=namespace)
    assert not can_i(kubeconfig, "get", "secrets", namespace=watched)
    assert can_i(kubeconfig, "delete", "configmaps", namespace=watched)

    # Namespace defaults: only the watched Namespace object is readable, by name.
    assert not can_i(kubeconfig, "list", "namespaces")
    async with await KubeClient.connect(str(kubeconfig)) as own:
        selector = f"metadata.name={watched}"
        listed = await own.list_metadata(NAMESPACES, field_selector=selector)
        assert [item["metadata"]["name"] for item in listed["items"]] == [watched]
    store = running.controller.pipeline.namespaces if running.controller.pipeline else None
    assert store is not None
    assert store.synced()
    assert store.disconnected() == []
