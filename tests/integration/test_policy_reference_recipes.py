"""The ``referencedBy`` recipes of docs/policies.md#unused-objects, applied as written.

Each recipe's YAML block is read out of docs/policies.md after its marker, only its
namespace replaced by the test's; the policy's status must then count exactly the unused
objects as matched (their deletion is days away), the used ones not at all.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import yaml

from lifecycle_controller.core.objects.resources import ResourceType
from lifecycle_controller.devcluster import ControlPlane
from lifecycle_controller.kube import KubeClient
from lifecycle_controller.kube.resources import PODS, POLICIES
from tests.integration.controller import StartController
from tests.integration.scenario_support import create, read, run_cli, start_for
from tests.integration.support import (
    CONFIGMAPS,
    DEPLOYMENTS,
    SECRETS,
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


def _pvc(name: str) -> dict[str, Any]:
    return {
        "apiVersion": "v1",
        "kind": "PersistentVolumeClaim",
        "metadata": {"name": name},
        "spec": {"accessModes": ["ReadWriteOnce"], "resources": {"requests": {"storage": "1Gi"}}},
    }


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
        await create(kube, PVCS, namespace, _pvc(name))
    volume = {"name": "d", "persistentVolumeClaim": {"claimName": "mounted"}}
    await create(kube, PODS, namespace, _pod("db", {"volumes": [volume]}))
    await start_for(start_controller, namespace, "persistentvolumeclaims")
    await _matched(kube, namespace, "unused-pvcs", 1)
