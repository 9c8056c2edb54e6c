"""Helpers shared by the integration tests: raw API calls, polling, resource types, manifests."""

from __future__ import annotations

import asyncio
import json
import uuid
from collections.abc import AsyncIterator, Awaitable, Callable
from contextlib import asynccontextmanager
from typing import Any

import aiohttp
from kubernetes_asyncio import client, config

from lifecycle_controller.devcluster import ControlPlane
from lifecycle_controller.kube import KubeClient, ResourceType
from lifecycle_controller.kube.discovery import fetch_discovery

META_LIST = "application/json;as=PartialObjectMetadataList;g=meta.k8s.io;v=v1,application/json"
META_ONE = "application/json;as=PartialObjectMetadata;g=meta.k8s.io;v=v1,application/json"
MERGE_PATCH = "application/merge-patch+json"

# The resource types the tests act on (kube/ already has NAMESPACES, LEASES, EVENTS and CRDS).
CONFIGMAPS = ResourceType("", "v1", "configmaps", "ConfigMap", namespaced=True)
SECRETS = ResourceType("", "v1", "secrets", "Secret", namespaced=True)
DEPLOYMENTS = ResourceType("apps", "v1", "deployments", "Deployment", namespaced=True)
STATEFULSETS = ResourceType("apps", "v1", "statefulsets", "StatefulSet", namespaced=True)
DAEMONSETS = ResourceType("apps", "v1", "daemonsets", "DaemonSet", namespaced=True)
REPLICASETS = ResourceType("apps", "v1", "replicasets", "ReplicaSet", namespaced=True)
REVISIONS = ResourceType("apps", "v1", "controllerrevisions", "ControllerRevision", namespaced=True)

#: What the controller needs on ConfigMaps it watches, and on Events
#: (docs/behaviour.md#event-catalogue).
CONFIGMAP_RULE = {
    "apiGroups": [""],
    "resources": ["configmaps"],
    "verbs": ["get", "list", "watch", "patch", "delete"],
}
EVENT_RULE = {
    "apiGroups": ["", "events.k8s.io"],
    "resources": ["events"],
    "verbs": ["create", "patch"],
}


async def api_client_for(kubeconfig: str) -> client.ApiClient:
    """An ApiClient for ``kubeconfig``, configured without touching global defaults."""
    configuration = client.Configuration()
    await config.load_kube_config(
        config_file=kubeconfig, client_configuration=configuration, persist_config=False
    )
    return client.ApiClient(configuration=configuration)


async def call(
    api: client.ApiClient,
    method: str,
    path: str,
    *,
    body: Any = None,
    query: list[tuple[str, str]] | None = None,
    accept: str = "application/json",
    content_type: str = "application/json",
) -> tuple[int, dict[str, Any]]:
    """One raw request; returns the HTTP status and the decoded JSON body."""
    response = await api.call_api(
        path,
        method,
        query_params=query or [],
        header_params={"Accept": accept, "Content-Type": content_type},
        body=body,
        auth_settings=["BearerToken"],
        _return_http_data_only=True,
        _preload_content=False,
        _request_timeout=aiohttp.ClientTimeout(sock_connect=5, sock_read=30),
    )
    async with response:
        data = await response.read()
        return response.status, json.loads(data) if data else {}


async def eventually(
    condition: Callable[[], Awaitable[bool]],
    *,
    within: float,
    interval: float = 0.2,
    what: str = "condition",
) -> None:
    """Poll ``condition`` until it holds; fail with ``what`` after ``within`` seconds.

    Used for effects of other processes (the API server, kube-controller-manager, the
    controller under test) that offer nothing to wait on but polling.
    """
    loop = asyncio.get_running_loop()
    deadline = loop.time() + within
    while True:
        if await condition():
            return
        if loop.time() >= deadline:
            raise AssertionError(f"timed out after {within}s waiting for {what}")
        await asyncio.sleep(interval)


def configmap(name: str, **annotations: str) -> dict[str, Any]:
    return {
        "apiVersion": "v1",
        "kind": "ConfigMap",
        "metadata": {"name": name, "annotations": annotations},
        "data": {"k": "v"},
    }


def deployment(name: str, annotations: dict[str, str] | None = None) -> dict[str, Any]:
    labels = {"app": name}
    return {
        "apiVersion": "apps/v1",
        "kind": "Deployment",
        "metadata": {"name": name, "annotations": annotations or {}},
        "spec": {
            "replicas": 1,
            "selector": {"matchLabels": labels},
            "template": {
                "metadata": {"labels": labels},
                "spec": {"containers": [{"name": "app", "image": "registry.invalid/app:1"}]},
            },
        },
    }


def crd_manifest(group: str, plural: str, kind: str) -> dict[str, Any]:
    """A namespaced CRD ``<plural>.<group>`` serving v1 with any fields (singular: plural - s)."""
    return {
        "apiVersion": "apiextensions.k8s.io/v1",
        "kind": "CustomResourceDefinition",
        "metadata": {"name": f"{plural}.{group}"},
        "spec": {
            "group": group,
            "scope": "Namespaced",
            "names": {"plural": plural, "singular": plural[:-1], "kind": kind},
            "versions": [
                {
                    "name": "v1",
                    "served": True,
                    "storage": True,
                    "schema": {
                        "openAPIV3Schema": {
                            "type": "object",
                            "x-kubernetes-preserve-unknown-fields": True,
                        }
                    },
                }
            ],
        },
    }


async def group_fails(kube: KubeClient, group: str) -> bool:
    """Whether discovery reports a version of API ``group`` as failing."""
    snapshot = await fetch_discovery(kube)
    return any(gv.startswith(f"{group}/") for gv in snapshot.failed)


@asynccontextmanager
async def broken_api_group(control_plane: ControlPlane, kube: KubeClient) -> AsyncIterator[str]:
    """An aggregated API group whose backend does not exist: discovery reports it Stale / 503.

    Yields the group once discovery reports it failing; its APIService is deleted on exit.
    """
    group = f"broken-{uuid.uuid4().hex[:6]}.example.test"
    name = f"v1beta1.{group}"
    path = f"/apis/apiregistration.k8s.io/v1/apiservices/{name}"
    control_plane.apply(
        {
            "apiVersion": "apiregistration.k8s.io/v1",
            "kind": "APIService",
            "metadata": {"name": name},
            "spec": {
                "group": group,
                "version": "v1beta1",
                "groupPriorityMinimum": 100,
                "versionPriority": 100,
                "insecureSkipTLSVerify": True,
                "service": {"namespace": "default", "name": "nowhere", "port": 443},
            },
        },
        path=path,
    )

    async def failing() -> bool:
        return await group_fails(kube, group)

    await eventually(failing, within=20, what=f"{group} to fail discovery")
    yield group
    control_plane.request("DELETE", path)
