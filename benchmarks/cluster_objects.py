"""The objects the cluster benchmark creates, and the small helpers that create them.

Shared by :mod:`benchmarks.cluster` (the run), :mod:`benchmarks.cluster_floors` (the floors
beside it) and the benchmarks built on them, so that every one of them creates the same
ConfigMaps and Deployments.
"""

from __future__ import annotations

import asyncio
import math
import time
from datetime import UTC, datetime
from typing import Any

from lifecycle_controller.kube import ResourceType

__all__ = [
    "CONFIGMAPS",
    "DEPLOYMENTS",
    "DEPLOYMENT_COUNT",
    "FAR",
    "NAMESPACE_COUNT",
    "PAYLOAD",
    "SECRETS",
    "SECRET_COUNT",
    "WATCHED",
    "WORKERS",
    "configmap",
    "deployment",
    "due_time",
    "gather_limited",
]

CONFIGMAPS = ResourceType("", "v1", "configmaps", "ConfigMap", namespaced=True)
SECRETS = ResourceType("", "v1", "secrets", "Secret", namespaced=True)
DEPLOYMENTS = ResourceType("apps", "v1", "deployments", "Deployment", namespaced=True)
WATCHED = (CONFIGMAPS, SECRETS, DEPLOYMENTS)
NAMESPACE_COUNT = 50
DEPLOYMENT_COUNT = 500
SECRET_COUNT = 200
FAR = "2099-01-01T00:00:00Z"
WORKERS = 4  # the controller's default --workers
PAYLOAD = {"payload": "x" * 512}


def configmap(namespace: str, name: str, annotations: dict[str, str]) -> dict[str, Any]:
    """A ConfigMap of 512 bytes with ``annotations``."""
    return {
        "apiVersion": "v1",
        "kind": "ConfigMap",
        "metadata": {"name": name, "namespace": namespace, "annotations": annotations},
        "data": dict(PAYLOAD),
    }


def deployment(namespace: str, name: str, annotations: dict[str, str]) -> dict[str, Any]:
    """A Deployment of no replicas (its rollouts complete without a node)."""
    labels = {"app": name}
    return {
        "apiVersion": "apps/v1",
        "kind": "Deployment",
        "metadata": {"name": name, "namespace": namespace, "annotations": annotations},
        "spec": {
            "replicas": 0,
            "selector": {"matchLabels": labels},
            "template": {
                "metadata": {"labels": labels},
                "spec": {"containers": [{"name": "app", "image": "registry.invalid/app:1"}]},
            },
        },
    }


async def gather_limited(coroutines: list[Any], limit: int = 48) -> None:
    """Await ``coroutines``, at most ``limit`` at a time."""
    semaphore = asyncio.Semaphore(limit)

    async def one(coroutine: Any) -> None:
        async with semaphore:
            await coroutine

    await asyncio.gather(*(one(c) for c in coroutines))


def due_time(seconds_ahead: float) -> tuple[float, str]:
    """A whole second at least ``seconds_ahead`` from now, and its RFC 3339 text."""
    second = math.ceil(time.time() + seconds_ahead)
    return second, datetime.fromtimestamp(second, UTC).strftime("%Y-%m-%dT%H:%M:%SZ")
