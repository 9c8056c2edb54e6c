"""Smoke tests: the facts the controller relies on, checked on the real control plane.

These use kubernetes-asyncio's raw ``call_api`` exactly the way the controller's API layer does
(metadata-only Accept headers, merge patches guarded by resourceVersion, preconditioned
deletes), so a change in the server or the client library shows up here first.
"""

from __future__ import annotations

import asyncio
import json
import time
from typing import Any

import aiohttp
import pytest
from kubernetes_asyncio import client

from lifecycle_controller.devcluster import KUBERNETES_VERSION, ControlPlane
from tests.integration.support import (
    MERGE_PATCH,
    META_LIST,
    META_ONE,
    api_client_for,
    call,
    configmap,
    deployment,
    eventually,
)


async def test_server_reports_pinned_version(admin_api: client.ApiClient) -> None:
    status, body = await call(admin_api, "GET", "/version")
    assert status == 200
    assert body["gitVersion"] == KUBERNETES_VERSION


async def test_metadata_only_list_and_watch_see_added_modified_deleted(
    admin_api: client.ApiClient, namespace: str
) -> None:
    base = f"/api/v1/namespaces/{namespace}/configmaps"
    status, _ = await call(admin_api, "POST", base, body=configmap("first", a="1"))
    assert status == 201

    status, listing = await call(admin_api, "GET", base, query=[("limit", "500")], accept=META_LIST)
    assert status == 200
    assert listing["kind"] == "PartialObjectMetadataList"
    assert [item["metadata"]["name"] for item in listing["items"]] == ["first"]
    assert "data" not in listing["items"][0]
    list_rv = listing["metadata"]["resourceVersion"]

    response = await admin_api.call_api(
        base,
        "GET",
        query_params=[
            ("watch", "true"),
            ("allowWatchBookmarks", "true"),
            ("resourceVersion", list_rv),
            ("timeoutSeconds", "60"),
        ],
        header_params={"Accept": META_ONE},
        auth_settings=["BearerToken"],
        _return_http_data_only=True,
        _preload_content=False,
        _request_timeout=aiohttp.ClientTimeout(sock_connect=5, sock_read=90),
    )
    assert response.status == 200

    async def mutate() -> None:
        assert (await call(admin_api, "POST", base, body=configmap("second")))[0] == 201
        patch = {"metadata": {"annotations": {"changed": "yes"}}}
        status, _ = await call(
            admin_api, "PATCH", f"{base}/second", body=patch, content_type=MERGE_PATCH
        )
        assert status == 200
        assert (await call(admin_api, "DELETE", f"{base}/second"))[0] == 200

    seen: list[tuple[str, str, str]] = []
    async with response, asyncio.timeout(30):
        writer = asyncio.create_task(mutate())
        while len(seen) < 3:
            line = await response.content.readline()
            event = json.loads(line)
            if event["type"] == "BOOKMARK":
                continue
            obj = event["object"]
            seen.append((event["type"], obj["kind"], obj["metadata"]["name"]))
        await writer
    assert seen == [
        ("ADDED", "PartialObjectMetadata", "second"),
        ("MODIFIED", "PartialObjectMetadata", "second"),
        ("DELETED", "PartialObjectMetadata", "second"),
    ]


async def test_guarded_merge_patch_and_new_replicaset(
    admin_api: client.ApiClient, namespace: str
) -> None:
    base = f"/apis/apps/v1/namespaces/{namespace}/deployments"
    status, created = await call(admin_api, "POST", base, body=deployment("web"))
    assert status == 201
    stale_rv = created["metadata"]["resourceVersion"]

    async def replicasets() -> list[dict[str, Any]]:
        status, body = await call(
            admin_api, "GET", f"/apis/apps/v1/namespaces/{namespace}/replicasets"
        )
        assert status == 200
        return list(body["items"])

    async def count_is(n: int) -> bool:
        return len(await replicasets()) == n

    await eventually(lambda: count_is(1), within=30, what="the first ReplicaSet")

    marker = {"spec": {"template": {"metadata": {"annotations": {"restartedAt": "now"}}}}}
    # The deployment controller writes status concurrently, so a guarded write can meet a
    # fresh conflict: re-read and retry a few times, as the controller itself does.
    statuses = []
    for _attempt in range(10):
        _, current = await call(admin_api, "GET", f"{base}/web")
        patch = {"metadata": {"resourceVersion": current["metadata"]["resourceVersion"]}, **marker}
        status, _ = await call(
            admin_api, "PATCH", f"{base}/web", body=patch, content_type=MERGE_PATCH
        )
        statuses.append(status)
        if status != 409:
            break
    assert statuses[-1] == 200, statuses

    stale = {"metadata": {"resourceVersion": stale_rv}, **marker}
    status, body = await call(
        admin_api, "PATCH", f"{base}/web", body=stale, content_type=MERGE_PATCH
    )
    assert status == 409, body
    assert body["reason"] == "Conflict"

    await eventually(lambda: count_is(2), within=30, what="a second ReplicaSet")


async def test_delete_preconditions(admin_api: client.ApiClient, namespace: str) -> None:
    base = f"/api/v1/namespaces/{namespace}/configmaps"
    status, created = await call(admin_api, "POST", base, body=configmap("doomed"))
    assert status == 201
    meta = created["metadata"]

    wrong = {"preconditions": {"uid": "00000000-0000-0000-0000-000000000000"}}
    status, body = await call(admin_api, "DELETE", f"{base}/doomed", body=wrong)
    assert status == 409, body

    right = {"preconditions": {"uid": meta["uid"], "resourceVersion": meta["resourceVersion"]}}
    status, _ = await call(admin_api, "DELETE", f"{base}/doomed", body=right)
    assert status == 200
    status, _ = await call(admin_api, "GET", f"{base}/doomed")
    assert status == 404


async def test_namespace_deletion_completes(
    admin_api: client.ApiClient, control_plane: ControlPlane
) -> None:
    name = f"ns-delete-{int(time.time() * 1000)}"
    namespace = {"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": name}}
    assert (await call(admin_api, "POST", "/api/v1/namespaces", body=namespace))[0] == 201
    status, _ = await call(
        admin_api, "POST", f"/api/v1/namespaces/{name}/configmaps", body=configmap("content")
    )
    assert status == 201
    assert (await call(admin_api, "DELETE", f"/api/v1/namespaces/{name}"))[0] == 200

    async def gone() -> bool:
        return (await call(admin_api, "GET", f"/api/v1/namespaces/{name}"))[0] == 404

    await eventually(gone, within=60, interval=0.5, what=f"namespace {name} to disappear")


async def test_non_admin_identity_is_limited_to_its_rbac(
    control_plane: ControlPlane, namespace: str
) -> None:
    kubeconfig = control_plane.user_kubeconfig(
        f"reader-{namespace}",
        namespaced_rules={
            namespace: [{"apiGroups": [""], "resources": ["configmaps"], "verbs": ["list"]}]
        },
    )
    api = await api_client_for(str(kubeconfig))
    async with api:
        inside = await call(api, "GET", f"/api/v1/namespaces/{namespace}/configmaps")
        assert inside[0] == 200
        other_resource = await call(api, "GET", f"/api/v1/namespaces/{namespace}/secrets")
        assert other_resource[0] == 403
        cluster_wide = await call(api, "GET", "/api/v1/configmaps")
        assert cluster_wide[0] == 403


@pytest.mark.parametrize("verb", ["get", "list"])
async def test_service_account_token_identity(
    control_plane: ControlPlane, namespace: str, verb: str
) -> None:
    control_plane.grant(
        {"kind": "ServiceAccount", "name": "robot", "namespace": namespace},
        name=f"robot-{verb}",
        namespaced_rules={
            namespace: [{"apiGroups": [""], "resources": ["configmaps"], "verbs": [verb]}]
        },
    )
    kubeconfig = control_plane.service_account_kubeconfig(namespace, "robot")
    api = await api_client_for(str(kubeconfig))
    async with api:
        listing = await call(api, "GET", f"/api/v1/namespaces/{namespace}/configmaps")
        assert listing[0] == (200 if verb == "list" else 403)


def test_the_default_control_plane_has_no_node_and_no_scheduler(
    control_plane: ControlPlane,
) -> None:
    """Fake nodes are opt-in (ControlPlane(nodes=N)); the tests here expect Pending Pods."""
    assert control_plane.nodes.count == 0
    assert control_plane.request("GET", "/api/v1/nodes").body["items"] == []
    assert not (control_plane.logs_dir / "kube-scheduler.log").exists()
    assert not (control_plane.logs_dir / "kwok.log").exists()
