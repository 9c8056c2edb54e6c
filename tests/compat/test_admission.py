"""The controller under the chart's admission policies as a user installs them, on the release
under test.

The chart's default install enforces three ValidatingAdmissionPolicies cluster-wide: the
annotation guard (setting a deletion needs the right to delete), the policy admission (a
policy's author needs the rights it exercises) and the controller guard (the controller's
ServiceAccount may change nothing but lifecycle annotations and its restart marker). They
are applied here exactly as rendered, with no selector added, while the controller runs as
the chart's ServiceAccount under the chart's RBAC: a ``ClusterLifecyclePolicy`` deletes a
ConfigMap and another restarts a Deployment (both admitted, with their Events), and the
guard refuses a user who may patch ConfigMaps but not delete them the ``delete-after`` that
would have the controller delete one. The policies are removed at the end: the session's
other tests share the control plane.
"""

from __future__ import annotations

import contextlib
import time
import uuid
from collections.abc import Callable
from pathlib import Path
from typing import Any

from lifecycle_controller.devcluster import ControlPlane
from lifecycle_controller.kube import KubeClient, NotFound
from lifecycle_controller.kube.resources import CLUSTER_POLICIES
from tests.chart.support import Helm, Identity, apply_chart_rbac, kubectl, to_yaml_stream
from tests.chart.test_least_privilege import chart_flags
from tests.integration.controller import StartController
from tests.integration.events import wait_event
from tests.integration.keys import DELETE_AFTER, RESTARTED_AT
from tests.integration.policy_crds import install_policy_crds
from tests.integration.policy_tools import cluster_policy
from tests.integration.scenario_support import template_annotations, wait_gone, workload
from tests.integration.support import CONFIGMAPS, DEPLOYMENTS, configmap, eventually
from tests.integration.timestamps import deadline_in, stamp

ADMISSION_KINDS = ("ValidatingAdmissionPolicy", "ValidatingAdmissionPolicyBinding")
MERGE = "application/merge-patch+json"


def _until(
    check: Callable[[], bool], what: str, seen: Callable[[], object], within: float = 60.0
) -> None:
    deadline = time.monotonic() + within
    while not check():
        assert time.monotonic() < deadline, f"timed out waiting for {what}; last: {seen()}"
        time.sleep(0.2)


async def test_a_cluster_policy_acts_and_the_guard_refuses_under_the_default_admission(
    control_plane: ControlPlane,
    helm: Helm,
    start_controller: StartController,
    kube: KubeClient,
    namespace: str,
) -> None:
    name = f"adm{uuid.uuid4().hex[:6]}"
    release_ns = f"{name}-system"
    scope = {"watchResources": ["configmaps", "deployments.apps"], "watchNamespaces": [namespace]}
    values: dict[str, Any] = {"controllerManager": {"scope": scope}}
    identity = apply_chart_rbac(control_plane, helm, values, release=name, namespace=release_ns)
    flags = chart_flags(helm, values, release=name, namespace=release_ns)
    install_policy_crds(control_plane)
    docs = helm.render(values, release=name, namespace=release_ns)
    admission = [d for d in docs if d["kind"] in ADMISSION_KINDS]
    assert len([d for d in admission if d["kind"] == ADMISSION_KINDS[0]]) == 3, admission
    stream = to_yaml_stream(admission)
    kubectl("apply", "-f", "-", kubeconfig=control_plane.admin_kubeconfig, stdin=stream)
    policies: list[dict[str, Any]] = []  # created below, deleted at the end
    try:
        await _guarded(control_plane, kube, start_controller, namespace, identity, flags, policies)
    finally:
        kubectl(
            "delete", "-f", "-", "--ignore-not-found", "--wait=false",
            kubeconfig=control_plane.admin_kubeconfig, stdin=stream,
        )  # fmt: skip
        for policy in policies:
            with contextlib.suppress(NotFound):
                path = CLUSTER_POLICIES.object_path(None, policy["metadata"]["name"])
                await kube.request("DELETE", path)


async def _guarded(
    control_plane: ControlPlane,
    kube: KubeClient,
    start_controller: StartController,
    namespace: str,
    identity: Path,
    flags: dict[str, Any],
    policies: list[dict[str, Any]],
) -> None:
    # A user who may patch ConfigMaps here, not delete them.
    patcher = Identity(
        control_plane.user_kubeconfig(
            f"patcher-{namespace}",
            namespaced_rules={
                namespace: [
                    {"apiGroups": [""], "resources": ["configmaps"], "verbs": ["get", "patch"]}
                ]
            },
        )
    )
    target = await kube.create(CONFIGMAPS, namespace, configmap("not-theirs"))
    path = f"/api/v1/namespaces/{namespace}/configmaps/not-theirs"
    schedule = {"metadata": {"annotations": {DELETE_AFTER: "1m"}}}
    # The guard takes effect a moment after it is stored: its refusal is waited for, with
    # dry runs (admission runs, nothing is stored while it is not in force yet).
    answers: list[Any] = []

    def refusing() -> bool:
        probe = patcher.request("PATCH", f"{path}?dryRun=All", schedule, content_type=MERGE)
        answers[:] = [probe]
        return bool(probe.status == 403)

    _until(refusing, "the annotation guard to refuse the patch-only user", lambda: answers)
    refused = patcher.request("PATCH", path, schedule, content_type=MERGE)
    message = str(refused.body.get("message", ""))
    assert "denied request: " in message, refused.body
    assert f"may not set, change or remove {DELETE_AFTER} on configmaps not-theirs" in message
    kept = await kube.get(CONFIGMAPS, namespace, "not-theirs")
    assert DELETE_AFTER not in (kept["metadata"].get("annotations") or {})
    assert kept["metadata"]["uid"] == target["metadata"]["uid"]
    patcher.close()

    await start_controller(kubeconfig=str(identity), **flags)
    await kube.create(CONFIGMAPS, namespace, configmap("clp-tmp-1"))
    created = await kube.create(
        DEPLOYMENTS, namespace, workload("Deployment", "clp-web", replicas=0)
    )
    # A restart-at policy restarts what was created before its time: a moment from now.
    policies += [
        cluster_policy(
            f"expire-{namespace}",
            resources=["configmaps"],
            namespaces=[namespace],
            names=["clp-tmp-*"],
            lifecycle={"delete-after": "1s"},
        ),
        cluster_policy(
            f"roll-{namespace}",
            resources=["deployments.apps"],
            namespaces=[namespace],
            names=["clp-web"],
            lifecycle={"restart-at": stamp(deadline_in(2))},
        ),
    ]
    for policy in policies:  # the admin may do what they ask: admitted
        await kube.create(CLUSTER_POLICIES, None, policy)
    await wait_gone(kube, CONFIGMAPS, namespace, "clp-tmp-1", within=30)
    deleted = await wait_event(kube, namespace, "clp-tmp-1", "Deleted")
    assert f"ClusterLifecyclePolicy/expire-{namespace}" in deleted[-1][2], deleted

    async def restarted() -> bool:
        web = await kube.get(DEPLOYMENTS, namespace, "clp-web")
        return RESTARTED_AT in template_annotations(web)

    await eventually(restarted, within=30, what="the cluster policy's restart, admitted")
    triggered = await wait_event(kube, namespace, "clp-web", "RestartTriggered")
    assert f"ClusterLifecyclePolicy/roll-{namespace}" in triggered[-1][2], triggered
    web = await kube.get(DEPLOYMENTS, namespace, "clp-web")
    assert web["metadata"]["uid"] == created["metadata"]["uid"]
    assert not await _gone(kube, namespace, "not-theirs")  # nothing acted on the refused one


async def _gone(kube: KubeClient, namespace: str, name: str) -> bool:
    try:
        await kube.get(CONFIGMAPS, namespace, name)
    except NotFound:
        return True
    return False
