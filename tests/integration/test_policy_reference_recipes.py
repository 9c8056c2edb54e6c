"""The ``referencedBy`` recipes of docs/policies.md#unused-objects, applied as written.

Each recipe's YAML block is read out of docs/policies.md after its marker, only its
namespace replaced by the test's; the policy's status must then count exactly the unused
objects as matched (their deletion is days away), the used ones not at all. The claim of a
StatefulSet scaled to zero by the real StatefulSet controller is used by it (``explain`` and
``policies try`` say so too); a Secret only a storage driver is handed is used.
"""

from __future__ import annotations

import asyncio
from pathlib import Path
from typing import Any

import yaml

from lifecycle_controller.core.objects.resources import ResourceType
from lifecycle_controller.devcluster import ControlPlane
from lifecycle_controller.kube import KubeClient
from lifecycle_controller.kube.resources import PODS, POLICIES
from tests.integration.controller import StartController
from tests.integration.policy_tools import tool_json
from tests.integration.scenario_support import (
    create,
    gone,
    patch,
    read,
    run_cli,
    start_for,
    wait_for,
    wait_gone,
    workload,
)
from tests.integration.support import (
    CONFIGMAPS,
    DEPLOYMENTS,
    SECRETS,
    STATEFULSETS,
    configmap,
    deployment,
    eventually,
)

DOCS = Path(__file__).resolve().parents[2] / "docs" / "policies.md"
PVCS = ResourceType("", "v1", "persistentvolumeclaims", "PersistentVolumeClaim", True)


def recipe(marker: str, namespace: str) -> dict[str, Any]:
    text = DOCS.read_text().split(f"<!-- recipe: {marker} -->\n```yaml\n", 1)[1]
    policy: dict[str, Any] = yaml.safe_load(text.split("```", 1)[0])
    policy["metadata"]["namespace"] = namespace
    return policy


def _secret(name: str) -> dict[str, Any]:
    return {"apiVersion": "v1", "kind": "Secret", "metadata": {"name": name}, "data": {}}


def claim(name: str) -> dict[str, Any]:
    return {
        "apiVersion": "v1",
        "kind": "PersistentVolumeClaim",
        "metadata": {"name": name},
        "spec": {"accessModes": ["ReadWriteOnce"], "resources": {"requests": {"storage": "1Gi"}}},
    }


def claim_template(name: str) -> dict[str, Any]:
    """A StatefulSet's ``volumeClaimTemplates`` entry."""
    return {"metadata": {"name": name}, "spec": claim(name)["spec"]}


def _pod(name: str, spec: dict[str, Any]) -> dict[str, Any]:
    spec = {"containers": [{"name": "c", "image": "x"}], **spec}
    return {"apiVersion": "v1", "kind": "Pod", "metadata": {"name": name}, "spec": spec}


async def _matched(kube: KubeClient, namespace: str, name: str, expected: int) -> None:
    async def counted() -> bool:
        policy = await read(kube, POLICIES, namespace, name)
        status = (policy or {}).get("status") or {}
        return status.get("matched") == expected and status.get("held") == 0

    await eventually(counted, within=60, what=f"{name} matching {expected} objects")


async def test_the_unused_config_recipe_matches_only_unused_configmaps_and_secrets(
    policy_crds: None, start_controller: StartController, namespace: str, kube: KubeClient
) -> None:
    await create(kube, POLICIES, namespace, recipe("unused-configmaps-and-secrets", namespace))
    app = deployment("app")
    app["spec"]["replicas"] = 0
    app["spec"]["template"]["spec"]["volumes"] = [{"name": "v", "configMap": {"name": "used"}}]
    await create(kube, DEPLOYMENTS, namespace, app)
    await create(kube, PODS, namespace, _pod("p", {"imagePullSecrets": [{"name": "pull"}]}))
    for name in ("used", "orphan"):
        await create(kube, CONFIGMAPS, namespace, configmap(name))
    for name in ("pull", "orphan-secret", "sh.helm.release.v1.app.v1"):
        await create(kube, SECRETS, namespace, _secret(name))
    await start_for(start_controller, namespace, "configmaps", "secrets")
    await _matched(kube, namespace, "unused-config", 2)  # orphan, orphan-secret


async def test_explain_reads_the_references_of_a_live_object(
    policy_crds: None, control_plane: ControlPlane, namespace: str, kube: KubeClient
) -> None:
    """No controller runs: ``explain`` reads the namespace's Pods and workloads itself."""
    await create(kube, POLICIES, namespace, recipe("unused-configmaps-and-secrets", namespace))
    app = deployment("app")
    app["spec"]["replicas"] = 0
    app["spec"]["template"]["spec"]["volumes"] = [{"name": "v", "configMap": {"name": "used"}}]
    await create(kube, DEPLOYMENTS, namespace, app)
    for name in ("used", "orphan"):
        await create(kube, CONFIGMAPS, namespace, configmap(name))
    decided = f"LifecyclePolicy/{namespace}/unused-config decides"
    orphan, _ = await run_cli(
        control_plane, namespace, "explain", "configmap/orphan", "-n", namespace
    )
    assert decided in orphan, orphan
    used, _ = await run_cli(control_plane, namespace, "explain", "configmap/used", "-n", namespace)
    assert decided not in used, used
    assert "condition is false for it (referencedBy: Deployment/app" in used, used


async def test_the_unused_pvcs_recipe_matches_only_claims_no_pod_mounts(
    policy_crds: None, start_controller: StartController, namespace: str, kube: KubeClient
) -> None:
    await create(kube, POLICIES, namespace, recipe("unused-pvcs", namespace))
    for name in ("mounted", "idle"):
        await create(kube, PVCS, namespace, claim(name))
    volume = {"name": "d", "persistentVolumeClaim": {"claimName": "mounted"}}
    await create(kube, PODS, namespace, _pod("db", {"volumes": [volume]}))
    await start_for(start_controller, namespace, "persistentvolumeclaims")
    await _matched(kube, namespace, "unused-pvcs", 1)


async def _scaled_to_zero(kube: KubeClient, namespace: str) -> None:
    """StatefulSet ``db`` with the claim template ``data``: the StatefulSet controller makes
    ``data-db-0`` and Pod ``db-0``; scaled to zero, the Pod goes and the claim stays."""
    db = workload("StatefulSet", "db")
    db["spec"]["podManagementPolicy"] = "Parallel"
    db["spec"]["volumeClaimTemplates"] = [claim_template("data")]
    await create(kube, STATEFULSETS, namespace, db)
    await wait_for(kube, PODS, namespace, "db-0", bool, within=60, what="Pod db-0")
    await wait_for(kube, PVCS, namespace, "data-db-0", bool, within=60, what="claim data-db-0")
    await patch(kube, STATEFULSETS, namespace, "db", {"spec": {"replicas": 0}})
    await wait_gone(kube, PODS, namespace, "db-0", within=60)


async def test_the_unused_pvcs_recipe_keeps_the_claims_of_a_statefulset_scaled_to_zero(
    policy_crds: None,
    start_controller: StartController,
    control_plane: ControlPlane,
    namespace: str,
    kube: KubeClient,
) -> None:
    """``data-db-0`` has no Pod once ``db`` is scaled to zero: it is used by
    ``StatefulSet/db``, for the controller, ``explain`` and ``policies try`` alike; so is the
    claim of a Pod's generic ephemeral volume. ``idle`` and ``data-db-01`` (a leading zero:
    no ordinal of ``db``) are unused."""
    await _scaled_to_zero(kube, namespace)
    ephemeral = {"volumeClaimTemplate": {"spec": claim("x")["spec"]}}
    await create(
        kube, PODS, namespace, _pod("p", {"volumes": [{"name": "scratch", "ephemeral": ephemeral}]})
    )
    for name in ("idle", "data-db-01", "p-scratch"):
        await create(kube, PVCS, namespace, claim(name))
    policy = recipe("unused-pvcs", namespace)
    await create(kube, POLICIES, namespace, policy)
    await start_for(start_controller, namespace, "persistentvolumeclaims")
    await _matched(kube, namespace, "unused-pvcs", 2)  # idle, data-db-01

    decided = f"LifecyclePolicy/{namespace}/unused-pvcs decides"
    used, _ = await run_cli(
        control_plane, namespace, "explain", "persistentvolumeclaim/data-db-0", "-n", namespace
    )
    assert decided not in used, used
    assert "condition is false for it (referencedBy: StatefulSet/db)" in used, used
    idle, _ = await run_cli(
        control_plane, namespace, "explain", "persistentvolumeclaim/idle", "-n", namespace
    )
    assert decided in idle, idle

    args = ("policies", "try", "-f", "-", "-n", namespace)
    tried = await asyncio.to_thread(
        tool_json, control_plane, *args, "--watch-resource", "persistentvolumeclaims",
        stdin=yaml.safe_dump({**policy, "metadata": {**policy["metadata"], "name": "tried"}}),
    )  # fmt: skip
    assert sorted(row["name"] for row in tried["objects"]) == ["data-db-01", "idle"]
    totals = tried["totals"][f"LifecyclePolicy/{namespace}/tried"]
    assert (totals["matched"], totals["held"]) == (2, 0)
    assert not await gone(kube, PVCS, namespace, "data-db-0")


def _driver_volumes() -> list[dict[str, Any]]:
    """A volume of every source that hands its driver a Secret (fields the API requires)."""
    ref = {"secretRef": {"name": "from-secret-ref"}}
    return [
        {"name": "csi", "csi": {"driver": "secrets-store.csi.k8s.io",
                                "nodePublishSecretRef": {"name": "csi-credentials"}}},
        {"name": "rbd", "rbd": {"monitors": ["10.0.0.1:6789"], "image": "i", **ref}},
        {"name": "azure", "azureFile": {"secretName": "azure-account", "shareName": "s"}},
    ]  # fmt: skip


def _template_volumes() -> list[dict[str, Any]]:
    return [
        {"name": "cephfs", "cephfs": {"monitors": ["10.0.0.1:6789"],
                                      "secretRef": {"name": "cephfs-key"}}},
        {"name": "iscsi", "iscsi": {"targetPortal": "10.0.0.2:3260", "lun": 0,
                                    "iqn": "iqn.2001-04.com.example:storage",
                                    "secretRef": {"name": "iscsi-chap"}}},
        {"name": "flex", "flexVolume": {"driver": "example.com/flex",
                                        "secretRef": {"name": "flex-credentials"}}},
        {"name": "scaleio", "scaleIO": {"gateway": "https://gw", "system": "s",
                                        "volumeName": "v",
                                        "secretRef": {"name": "scaleio-login"}}},
    ]  # fmt: skip


async def test_the_unused_config_recipe_keeps_the_secrets_storage_drivers_are_handed(
    policy_crds: None, start_controller: StartController, namespace: str, kube: KubeClient
) -> None:
    """A Pod's CSI ``nodePublishSecretRef`` (the secrets-store driver), ``rbd`` ``secretRef``
    and ``azureFile`` ``secretName``, and a Deployment template's ``cephfs``, ``iscsi``,
    ``flexVolume`` and ``scaleIO`` ``secretRef``: each Secret is used; only the orphan is
    matched."""
    await create(kube, POLICIES, namespace, recipe("unused-configmaps-and-secrets", namespace))
    await create(kube, PODS, namespace, _pod("p", {"volumes": _driver_volumes()}))
    app = deployment("app")
    app["spec"]["replicas"] = 0
    app["spec"]["template"]["spec"]["volumes"] = _template_volumes()
    await create(kube, DEPLOYMENTS, namespace, app)
    used = [
        "from-secret-ref", "csi-credentials", "azure-account", "cephfs-key", "iscsi-chap",
        "flex-credentials", "scaleio-login",
    ]  # fmt: skip
    for name in (*used, "orphan"):
        await create(kube, SECRETS, namespace, _secret(name))
    await start_for(start_controller, namespace, "secrets")
    await _matched(kube, namespace, "unused-config", 1)
