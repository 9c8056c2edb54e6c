"""Least privilege, proven: the controller runs as the chart's ServiceAccount on the real API.

The chart's rendered RBAC is applied to the real API server, the controller is started with
exactly the arguments the chart renders (only listen addresses and the Lease namespace are
adapted: outside a Pod there is no POD_NAMESPACE), authenticated with a bound token of the
chart's ServiceAccount. Discovery, watches, guarded patches, preconditioned deletes, Events
and the Lease must all work; anything outside the watch list must be forbidden to it.

With the chart's policy CRDs installed, the controller must also read lifecycle policies of
both kinds, carry them out, write their status and warn about an invalid one (its Event about
a ClusterLifecyclePolicy lands in ``default``), while it may not change a policy's spec.
"""

from __future__ import annotations

import uuid
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any

import pytest

from lifecycle_controller.devcluster import ControlPlane
from lifecycle_controller.kube import LEASES, Forbidden, KubeClient, NotFound
from lifecycle_controller.kube.resources import CLUSTER_POLICIES, NAMESPACES, POLICIES
from tests.chart.support import (
    Helm,
    apply_chart_rbac,
    args_of,
    can_i,
    kubectl,
    parse_run_args,
    to_yaml_stream,
)
from tests.integration.controller import StartController
from tests.integration.events import events_of, wait_event
from tests.integration.keys import DELETE_AFTER, DELETE_AT, RESTART_AT, RESTARTED_AT
from tests.integration.policy_crds import install_policy_crds
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


def policy(kind: str, name: str, namespace: str | None, spec: dict[str, Any]) -> dict[str, Any]:
    metadata = {"name": name} | ({"namespace": namespace} if namespace else {})
    return {
        "apiVersion": "lifecycle.cezary.dev/v1alpha1",
        "kind": kind,
        "metadata": metadata,
        "spec": spec,
    }


BROKEN = {
    "resources": ["configmaps"],
    "names": ["lifecycle-test-matches-nothing"],
    "condition": "object.metadata.labels[",
    "lifecycle": {"delete-after": "1h"},
}


@asynccontextmanager
async def policies(kube: KubeClient, namespace: str, tag: str) -> AsyncIterator[str]:
    """A working and a broken LifecyclePolicy in ``namespace`` and a broken
    ClusterLifecyclePolicy (it matches nothing); all deleted afterwards. Yields the latter's
    name."""
    cluster_name = f"{tag}-broken"
    created = [
        (POLICIES, namespace, "expire-tmp"),
        (POLICIES, namespace, "broken"),
        (CLUSTER_POLICIES, None, cluster_name),
    ]
    spec = {"resources": ["configmaps"], "names": ["policy-tmp-*"]}
    await kube.create(
        POLICIES,
        namespace,
        policy(
            "LifecyclePolicy", "expire-tmp", namespace, spec | {"lifecycle": {"delete-after": "1s"}}
        ),
    )
    await kube.create(POLICIES, namespace, policy("LifecyclePolicy", "broken", namespace, BROKEN))
    await kube.create(
        CLUSTER_POLICIES, None, policy("ClusterLifecyclePolicy", cluster_name, None, BROKEN)
    )
    try:
        yield cluster_name
    finally:
        for resource, ns, name in created:
            await kube.request("DELETE", resource.object_path(ns, name))


async def exercise_policies(kube: KubeClient, namespace: str, cluster_policy: str) -> None:
    """The policy carried out, its status written, both invalid policies warned about."""
    await kube.create(CONFIGMAPS, namespace, configmap("policy-tmp-1"))

    async def deleted() -> bool:
        try:
            await kube.get(CONFIGMAPS, namespace, "policy-tmp-1")
        except NotFound:
            return True
        return False

    async def reported() -> bool:
        status = (await kube.get(POLICIES, namespace, "expire-tmp")).get("status") or {}
        ready = [c for c in status.get("conditions") or () if c.get("type") == "Ready"]
        return status.get("observedGeneration") == 1 and [c["status"] for c in ready] == ["True"]

    async def invalid() -> bool:
        status = (await kube.get(CLUSTER_POLICIES, None, cluster_policy)).get("status") or {}
        kinds = {c["type"]: c["status"] for c in status.get("conditions") or ()}
        return kinds.get("Invalid") == "True"

    await eventually(deleted, within=20, what="the policy's deletion")
    await eventually(reported, within=20, what="the policy's status")
    await eventually(invalid, within=20, what="the cluster policy's Invalid condition")
    await wait_event(kube, namespace, "broken", "InvalidLifecyclePolicy", within=20)
    await wait_event(kube, "default", cluster_policy, "InvalidLifecyclePolicy", within=20)


def assert_policies_read_only(kubeconfig: Path, namespace: str) -> None:
    """The controller reads policies and writes their status, never their spec."""
    for resource in ("lifecyclepolicies", "clusterlifecyclepolicies"):
        full = f"{resource}.lifecycle.cezary.dev"
        assert can_i(kubeconfig, "watch", full)
        for verb in ("create", "update", "patch", "delete"):
            assert not can_i(kubeconfig, verb, full, namespace=namespace), (verb, resource)


async def assert_leads(kube: KubeClient, namespace: str, lease: str, identity: str) -> None:
    record = await kube.get(LEASES, namespace, lease)
    assert record["spec"]["holderIdentity"] == identity


async def test_default_values_least_privilege(
    control_plane: ControlPlane, helm: Helm, start_controller: StartController, namespace: str
) -> None:
    """With the chart's controller guard installed (bound to this release's ServiceAccount
    only): every write the controller makes passes it."""
    release = f"lp{uuid.uuid4().hex[:6]}"
    release_ns = f"{release}-system"
    kubeconfig = apply_chart_rbac(control_plane, helm, {}, release=release, namespace=release_ns)
    flags = chart_flags(helm, {}, release=release, namespace=release_ns)
    install_policy_crds(control_plane)
    guard = [
        d
        for d in helm.render({}, release=release, namespace=release_ns)
        if d["kind"] in ("ValidatingAdmissionPolicy", "ValidatingAdmissionPolicyBinding")
        and d["metadata"]["name"].endswith("-controller-guard")
    ]
    assert len(guard) == 2
    admin_kubeconfig = control_plane.admin_kubeconfig
    kubectl("apply", "-f", "-", kubeconfig=admin_kubeconfig, stdin=to_yaml_stream(guard))

    try:
        async with (
            await KubeClient.connect(str(control_plane.admin_kubeconfig)) as admin,
            await KubeClient.connect(str(kubeconfig)) as own,
            policies(admin, namespace, release) as cluster_policy,
        ):
            await admin.create(CONFIGMAPS, namespace, configmap("probe"))

            async def enforced() -> bool:
                # A new value each time: a patch that changes nothing is no change to refuse.
                label = {"metadata": {"labels": {"probe": uuid.uuid4().hex}}}
                try:
                    await own.merge_patch(CONFIGMAPS, namespace, "probe", label)
                except Forbidden:
                    return True
                return False

            await eventually(enforced, within=60, what="the controller guard to be enforced")
            running = await start_controller(kubeconfig=str(kubeconfig), **flags)
            await exercise(admin, namespace)
            await exercise_policies(admin, namespace, cluster_policy)
            await assert_leads(
                admin, release_ns, flags["leader_election_id"], running.controller.identity
            )
    finally:
        kubectl("delete", "-f", "-", "--ignore-not-found", "--wait=false",
                kubeconfig=admin_kubeconfig, stdin=to_yaml_stream(guard))  # fmt: skip
    assert_policies_read_only(kubeconfig, namespace)

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
    install_policy_crds(control_plane)

    async with (
        await KubeClient.connect(str(control_plane.admin_kubeconfig)) as admin,
        policies(admin, watched, release) as cluster_policy,
    ):
        running = await start_controller(kubeconfig=str(kubeconfig), **flags)
        # The same annotation in a namespace outside the watch list must be left alone.
        await admin.create(CONFIGMAPS, namespace, configmap("outside", **{DELETE_AT: PAST}))
        await exercise(admin, watched)
        # Namespaced RBAC: policies are still read cluster-wide, and the Warning about a
        # cluster policy needs the chart's Role for Events in default.
        await exercise_policies(admin, watched, cluster_policy)
        lease = flags["leader_election_id"]
        await assert_leads(admin, release_ns, lease, running.controller.identity)
        await admin.get(CONFIGMAPS, namespace, "outside")  # raises NotFound if it was deleted
    assert_policies_read_only(kubeconfig, watched)

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
