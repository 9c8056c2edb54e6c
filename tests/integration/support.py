"""Helpers shared by the integration tests: raw API calls, polling, small manifests."""

from __future__ import annotations

import asyncio
import json
from collections.abc import Awaitable, Callable
from typing import Any

import aiohttp
from kubernetes_asyncio import client, config

META_LIST = "application/json;as=PartialObjectMetadataList;g=meta.k8s.io;v=v1,application/json"
META_ONE = "application/json;as=PartialObjectMetadata;g=meta.k8s.io;v=v1,application/json"
MERGE_PATCH = "application/merge-patch+json"


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
