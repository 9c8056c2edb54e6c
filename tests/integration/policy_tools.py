"""Helpers of the policy tools' tests: policies and objects in a test's namespace, the tools run
as the installed command does (a subprocess against the real API server)."""

from __future__ import annotations

import contextlib
import json
import subprocess
import sys
from collections.abc import AsyncIterator, Awaitable, Callable
from typing import Any

import pytest

from lifecycle_controller.devcluster import ControlPlane
from lifecycle_controller.kube import KubeClient, NotFound, ResourceType
from lifecycle_controller.kube.resources import CLUSTER_POLICIES, POLICIES
from tests.integration.processes import clean_environment
from tests.integration.scenario_support import create
from tests.integration.support import CONFIGMAPS, configmap, eventually

__all__ = [
    "cache_policies",
    "create_configmap",
    "labelled",
    "namespaced_policy",
    "run_tool",
    "tool_json",
]


def cluster_policy(name: str, **spec: Any) -> dict[str, Any]:
    return {
        "apiVersion": CLUSTER_POLICIES.api_version,
        "kind": CLUSTER_POLICIES.kind,
        "metadata": {"name": name},
        "spec": spec,
    }


def namespaced_policy(name: str, namespace: str, **spec: Any) -> dict[str, Any]:
    return {
        "apiVersion": "lifecycle.cezary.dev/v1alpha1",
        "kind": "LifecyclePolicy",
        "metadata": {"name": name, "namespace": namespace},
        "spec": spec,
    }


def labelled(name: str, labels: dict[str, str], **annotations: str) -> dict[str, Any]:
    body = configmap(name, **annotations)
    body["metadata"]["labels"] = labels
    return body


async def cache_policies(kube: KubeClient, namespace: str) -> None:
    """``cache`` (tier=cache, 48h, priority 10) over ``all-configmaps`` (every one, 96h)."""
    await create(
        kube,
        POLICIES,
        namespace,
        namespaced_policy(
            "cache",
            namespace,
            resources=["configmaps"],
            selector={"matchLabels": {"tier": "cache"}},
            priority=10,
            lifecycle={"delete-after": "48h"},
        ),
    )
    await create(
        kube,
        POLICIES,
        namespace,
        namespaced_policy(
            "all-configmaps", namespace, resources=["configmaps"], lifecycle={"delete-after": "96h"}
        ),
    )


async def create_configmap(kube: KubeClient, namespace: str, body: dict[str, Any]) -> str:
    """Create ``body``; its creationTimestamp."""
    created = await create(kube, CONFIGMAPS, namespace, body)
    return str(created["metadata"]["creationTimestamp"])


def run_tool(
    control_plane: ControlPlane, *args: str, stdin: str | None = None
) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "lifecycle_controller", *args],
        capture_output=True,
        text=True,
        input=stdin,
        timeout=120,
        env=clean_environment({"LIFECYCLE_KUBECONFIG": str(control_plane.admin_kubeconfig)}),
        check=False,
    )


def tool_json(control_plane: ControlPlane, *args: str, stdin: str | None = None) -> Any:
    result = run_tool(control_plane, *args, "-o", "json", stdin=stdin)
    assert result.returncode == 0, result.stderr
    return json.loads(result.stdout)


#: Creates a cluster policy: a whole manifest, or its name and then its spec's fields.
ClusterPolicies = Callable[..., Awaitable[None]]


@pytest.fixture
async def cluster_policies(policy_crds: None, kube: KubeClient) -> AsyncIterator[ClusterPolicies]:
    """Creates cluster policies (:data:`ClusterPolicies`); deleted when the test ends, so the
    controllers of later tests never see them."""
    names: list[str] = []

    async def add(name_or_manifest: str | dict[str, Any], **spec: Any) -> None:
        body = (
            name_or_manifest
            if isinstance(name_or_manifest, dict)
            else cluster_policy(name_or_manifest, **spec)
        )
        names.append(body["metadata"]["name"])
        await create(kube, CLUSTER_POLICIES, None, body)

    yield add
    for name in names:
        with contextlib.suppress(NotFound):
            await kube.request("DELETE", CLUSTER_POLICIES.object_path(None, name))


async def invalid_message(
    kube: KubeClient, resource: ResourceType, namespace: str | None, name: str
) -> str:
    """Wait for the policy's ``Invalid`` condition; its message."""
    found: list[str] = []

    async def reported() -> bool:
        status = (await kube.get(resource, namespace, name)).get("status") or {}
        for condition in status.get("conditions") or []:
            if condition["type"] == "Invalid" and condition["status"] == "True":
                found.append(str(condition.get("message", "")))
                return True
        return False

    await eventually(reported, within=30, what=f"{name} reported Invalid")
    return found[-1]
