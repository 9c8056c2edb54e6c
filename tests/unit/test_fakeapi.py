"""The fake API server is honest: resourceVersions, preconditions, pagination, watches, faults.

Each test goes through the project's real KubeClient, so it also pins what the client sends
and how it maps answers to the error tree.
"""

from __future__ import annotations

import asyncio
import contextlib
import dataclasses
from pathlib import Path
from typing import Any

import pytest

from lifecycle_controller.kube import (
    CRDS,
    AlreadyExists,
    ApiError,
    Conflict,
    Forbidden,
    Gone,
    KubeClient,
    NotFound,
    ServerError,
    TooManyRequests,
    TransportError,
    Unauthorized,
)
from lifecycle_controller.kube.client import Timeouts
from lifecycle_controller.kube.watch_protobuf import PROTOBUF, ProtobufError
from tests.doubles.fakeapi import (
    CONFIGMAPS,
    DEPLOYMENTS,
    FakeApiServer,
    merge_patch,
)
from tests.doubles.fakeclock import FakeClock


def configmap(name: str, **annotations: str) -> dict[str, Any]:
    return {"metadata": {"name": name, "annotations": annotations}, "data": {"k": "v"}}


async def collect(stream: Any, count: int) -> list[dict[str, Any]]:
    events: list[dict[str, Any]] = []
    async for event in stream:
        events.append(event)
        if len(events) == count:
            break
    return events


def test_merge_patch_follows_rfc_7386() -> None:
    target = {"a": 1, "b": {"c": 2, "d": 3}, "e": [1]}
    assert merge_patch(target, {"b": {"c": None, "x": 1}, "e": [2], "f": None}) == {
        "a": 1,
        "b": {"d": 3, "x": 1},
        "e": [2],
    }
    assert merge_patch(target, [1]) == [1]


async def test_every_write_takes_a_new_global_resource_version(
    api: FakeApiServer, kube: KubeClient, clock: FakeClock
) -> None:
    first = await kube.create(CONFIGMAPS, "default", configmap("a"))
    second = await kube.create(CONFIGMAPS, "other", configmap("b"))
    assert int(second["metadata"]["resourceVersion"]) > int(first["metadata"]["resourceVersion"])
    assert first["metadata"]["creationTimestamp"] == "2026-01-01T00:00:00Z"
    assert first["metadata"]["uid"] != second["metadata"]["uid"]
    patched = await kube.merge_patch(CONFIGMAPS, "default", "a", {"data": {"k": "w"}})
    assert int(patched["metadata"]["resourceVersion"]) > int(second["metadata"]["resourceVersion"])
    assert patched["data"] == {"k": "w"}
    # A no-op patch keeps the resourceVersion, as the real server does.
    same = await kube.merge_patch(CONFIGMAPS, "default", "a", {"data": {"k": "w"}})
    assert same["metadata"]["resourceVersion"] == patched["metadata"]["resourceVersion"]
    page = await kube.list_metadata(CONFIGMAPS)
    assert page["kind"] == "PartialObjectMetadataList"
    assert page["metadata"]["resourceVersion"] == patched["metadata"]["resourceVersion"]
    assert [item["kind"] for item in page["items"]] == ["PartialObjectMetadata"] * 2
    assert "data" not in page["items"][0]


async def test_guarded_patch_conflicts_on_a_stale_resource_version(kube: KubeClient) -> None:
    created = await kube.create(CONFIGMAPS, "default", configmap("a"))
    stale = created["metadata"]["resourceVersion"]
    await kube.merge_patch(CONFIGMAPS, "default", "a", {"data": {"k": "changed"}})
    with pytest.raises(Conflict) as caught:
        await kube.merge_patch(
            CONFIGMAPS, "default", "a", {"metadata": {"resourceVersion": stale}, "data": {}}
        )
    assert caught.value.reason == "Conflict"
    with pytest.raises(NotFound):
        await kube.merge_patch(CONFIGMAPS, "default", "missing", {"data": {}})
    with pytest.raises(AlreadyExists):
        await kube.create(CONFIGMAPS, "default", configmap("a"))


async def test_delete_honours_uid_and_resource_version_preconditions(
    api: FakeApiServer, kube: KubeClient
) -> None:
    created = await kube.create(CONFIGMAPS, "default", configmap("a"))
    meta = created["metadata"]
    with pytest.raises(Conflict):
        await kube.delete(CONFIGMAPS, "default", "a", uid="another-uid")
    with pytest.raises(Conflict):
        await kube.delete(CONFIGMAPS, "default", "a", uid=meta["uid"], resource_version="1")
    await kube.delete(
        CONFIGMAPS, "default", "a", uid=meta["uid"], resource_version=meta["resourceVersion"]
    )
    with pytest.raises(NotFound):
        await kube.delete(CONFIGMAPS, "default", "a")
    assert api.requests_to("DELETE")[0].body["preconditions"] == {"uid": "another-uid"}


async def test_finalizers_keep_a_deleted_object_until_they_are_removed(
    api: FakeApiServer, kube: KubeClient
) -> None:
    body = configmap("a")
    body["metadata"]["finalizers"] = ["example.com/hold"]
    await kube.create(CONFIGMAPS, "default", body)
    terminating = await kube.delete(CONFIGMAPS, "default", "a")
    assert terminating["metadata"]["deletionTimestamp"]
    assert api.store.find(CONFIGMAPS, "default", "a") is not None
    await kube.merge_patch(CONFIGMAPS, "default", "a", {"metadata": {"finalizers": None}})
    assert api.store.find(CONFIGMAPS, "default", "a") is None


async def test_put_needs_the_current_resource_version(kube: KubeClient) -> None:
    created = await kube.create(CONFIGMAPS, "default", configmap("a"))
    updated = await kube.replace(CONFIGMAPS, "default", "a", {**created, "data": {"k": "2"}})
    with pytest.raises(Conflict):
        await kube.replace(CONFIGMAPS, "default", "a", created)
    without = {**updated, "metadata": {"name": "a"}}
    with pytest.raises(ApiError) as invalid:
        await kube.replace(CONFIGMAPS, "default", "a", without)
    assert (invalid.value.status, invalid.value.reason) == (422, "Invalid")
    with pytest.raises(NotFound):
        await kube.replace(CONFIGMAPS, "default", "b", updated)


async def test_spec_changes_bump_the_generation(kube: KubeClient) -> None:
    created = await kube.create(DEPLOYMENTS, "default", {"metadata": {"name": "d"}, "spec": {}})
    assert created["metadata"]["generation"] == 1
    patched = await kube.merge_patch(DEPLOYMENTS, "default", "d", {"spec": {"paused": True}})
    assert patched["metadata"]["generation"] == 2
    annotated = await kube.merge_patch(
        DEPLOYMENTS, "default", "d", {"metadata": {"annotations": {"a": "b"}}}
    )
    assert annotated["metadata"]["generation"] == 2


async def test_pagination_serves_one_consistent_snapshot(
    api: FakeApiServer, kube: KubeClient
) -> None:
    for name in "abcde":
        api.store.create(CONFIGMAPS, "default", configmap(name))
    first = await kube.list_metadata(CONFIGMAPS, namespace="default", limit=2)
    version = first["metadata"]["resourceVersion"]
    api.store.create(CONFIGMAPS, "default", configmap("f"))  # after the snapshot
    names = [item["metadata"]["name"] for item in first["items"]]
    token = first["metadata"]["continue"]
    while token:
        page = await kube.list_metadata(CONFIGMAPS, namespace="default", continue_token=token)
        assert page["metadata"]["resourceVersion"] == version
        names += [item["metadata"]["name"] for item in page["items"]]
        token = page["metadata"].get("continue")
    assert names == list("abcde")
    assert api.requests_to("GET")[1].param("continue") == first["metadata"]["continue"]


async def test_an_expired_continue_token_is_gone(api: FakeApiServer, kube: KubeClient) -> None:
    for name in "abc":
        api.store.create(CONFIGMAPS, "default", configmap(name))
    first = await kube.list_metadata(CONFIGMAPS, limit=1)
    api.store.compact()
    with pytest.raises(Gone):
        await kube.list_metadata(CONFIGMAPS, continue_token=first["metadata"]["continue"])
    with pytest.raises(Gone):
        await kube.list_metadata(CONFIGMAPS, resource_version="1")


async def test_watch_replays_from_its_resource_version_then_follows(
    api: FakeApiServer, kube: KubeClient
) -> None:
    api.store.create(CONFIGMAPS, "default", configmap("old"))
    listed = await kube.list_metadata(CONFIGMAPS)
    version = listed["metadata"]["resourceVersion"]
    api.store.create(CONFIGMAPS, "default", configmap("missed"))
    api.store.create(CONFIGMAPS, "elsewhere", configmap("other-namespace"))
    stream = kube.watch_metadata(
        CONFIGMAPS, namespace="default", resource_version=version, timeout_seconds=300
    )
    task = asyncio.ensure_future(collect(stream, 4))
    await api.until(lambda: bool(api.store.watchers(CONFIGMAPS)))
    api.store.patch(CONFIGMAPS, "default", "old", {"data": {"k": "new"}})
    api.bookmark()
    api.store.delete(CONFIGMAPS, "default", "missed")
    events = await asyncio.wait_for(task, 5)
    assert [(e["type"], e["object"]["metadata"].get("name")) for e in events] == [
        ("ADDED", "missed"),
        ("MODIFIED", "old"),
        ("BOOKMARK", None),
        ("DELETED", "missed"),
    ]
    assert events[0]["object"]["kind"] == "PartialObjectMetadata"
    assert events[2]["object"]["metadata"]["resourceVersion"] == str(api.store.revision - 1)
    watch = api.requests_to("GET")[-1]
    assert watch.is_watch
    assert watch.param("allowWatchBookmarks") == "true"
    assert watch.param("resourceVersion") == version


async def test_a_compacted_resource_version_gets_error_410(
    api: FakeApiServer, kube: KubeClient
) -> None:
    api.store.create(CONFIGMAPS, "default", configmap("a"))
    old = str(api.store.revision)
    api.store.create(CONFIGMAPS, "default", configmap("b"))
    api.store.compact()
    stream = kube.watch_metadata(CONFIGMAPS, resource_version=old, timeout_seconds=300)
    events = [event async for event in stream]
    assert [e["type"] for e in events] == ["ERROR"]
    assert events[0]["object"]["code"] == 410


async def test_watch_errors_and_closes_end_open_streams(
    api: FakeApiServer, kube: KubeClient
) -> None:
    stream = kube.watch_metadata(CONFIGMAPS, resource_version="0", timeout_seconds=300)
    task = asyncio.ensure_future(collect(stream, 10))
    await api.until(lambda: bool(api.store.watchers()))
    api.watch_error(500, message="boom")
    events = await asyncio.wait_for(task, 5)
    assert events == [{"type": "ERROR", "object": events[0]["object"]}]
    assert events[0]["object"]["message"] == "boom"
    stream = kube.watch_metadata(CONFIGMAPS, resource_version="0", timeout_seconds=300)
    task = asyncio.ensure_future(collect(stream, 10))
    await api.until(lambda: bool(api.store.watchers()))
    api.close_watches()
    assert await asyncio.wait_for(task, 5) == []
    assert api.store.open_watches == 0


async def test_a_protobuf_watch_that_does_not_parse_is_watched_in_json_from_then_on(
    api: FakeApiServer, kube: KubeClient
) -> None:
    api.store.create(CONFIGMAPS, "default", configmap("a"))
    api.broken_protobuf_watches = 1
    with pytest.raises(ProtobufError):
        await collect(kube.watch_metadata(CONFIGMAPS, resource_version="0", timeout_seconds=9), 1)
    stream = kube.watch_metadata(CONFIGMAPS, resource_version="0", timeout_seconds=9)
    (added,) = await asyncio.wait_for(collect(stream, 1), 5)
    assert added["object"]["metadata"]["name"] == "a"
    first, second = (r.headers["Accept"] for r in api.requests_to("GET") if r.is_watch)
    assert first.startswith(PROTOBUF + ";as=PartialObjectMetadata")
    assert "protobuf" not in second
    other = kube.watch_metadata(DEPLOYMENTS, resource_version="0", timeout_seconds=9)
    task = asyncio.ensure_future(collect(other, 1))
    await api.until(lambda: bool(api.store.watchers(DEPLOYMENTS)))
    assert api.requests_to("GET")[-1].headers["Accept"].startswith(PROTOBUF)  # other types
    task.cancel()
    with contextlib.suppress(asyncio.CancelledError):
        await task


async def test_faults_answer_the_next_matching_requests(
    api: FakeApiServer, kube: KubeClient
) -> None:
    api.store.create(CONFIGMAPS, "default", configmap("a"))
    throttled = api.fail(429, method="GET", path="/configmaps/a$", retry_after=7)
    with pytest.raises(TooManyRequests) as caught:
        await kube.get(CONFIGMAPS, "default", "a")
    assert caught.value.retry_after == 7.0
    assert throttled.exhausted
    assert (await kube.get(CONFIGMAPS, "default", "a"))["metadata"]["name"] == "a"
    api.fail(403, path="configmaps", times=2)
    for _ in range(2):
        with pytest.raises(Forbidden):
            await kube.list_metadata(CONFIGMAPS)
    api.fail(503)
    with pytest.raises(ServerError):
        await kube.list_metadata(CONFIGMAPS)
    api.fail(410, when=lambda r: r.param("limit") == "1")
    with pytest.raises(Gone):
        await kube.list_metadata(CONFIGMAPS, limit=1)
    assert [r.status for r in api.requests] == [429, 200, 403, 403, 503, 410]


async def test_a_hung_request_waits_for_release(api: FakeApiServer, kube: KubeClient) -> None:
    hung = api.fail(500, method="GET", hang=True)
    task = asyncio.ensure_future(kube.list_metadata(CONFIGMAPS))
    await api.until(lambda: hung.hits > 0)
    assert not task.done()
    hung.release()
    with pytest.raises(ServerError):
        await asyncio.wait_for(task, 5)


async def test_a_wrong_token_is_unauthorized(api: FakeApiServer) -> None:
    configuration = dataclasses.replace(api.configuration(), token="wrong")
    async with KubeClient(configuration, transport=api.transport()) as client:
        with pytest.raises(Unauthorized):
            await client.list_metadata(CONFIGMAPS)


async def test_a_stopped_server_is_a_transport_error(clock: FakeClock) -> None:
    server = FakeApiServer(now_ns=clock.now_ns)
    await server.start()
    client = server.client(timeouts=Timeouts(connect=1.0, request=2.0))
    await server.stop()
    try:
        with pytest.raises(TransportError):
            await client.list_metadata(CONFIGMAPS)
    finally:
        await client.close()
    with pytest.raises(RuntimeError):
        _ = server.url


async def test_kubeconfig_connects_the_real_loader(
    loopback_api: FakeApiServer, tmp_path: Path
) -> None:
    path = loopback_api.write_kubeconfig(tmp_path / "config", namespace="team")
    async with await KubeClient.connect(str(path)) as client:
        assert client.default_namespace == "team"
        assert (await client.list_metadata(CONFIGMAPS))["items"] == []


async def test_discovery_documents_aggregated_and_legacy(
    api: FakeApiServer, kube: KubeClient
) -> None:
    from lifecycle_controller.kube import ACCEPT_AGGREGATED_DISCOVERY

    core = await kube.request("GET", "/api", accept=ACCEPT_AGGREGATED_DISCOVERY)
    assert core["kind"] == "APIGroupDiscoveryList"
    assert core["items"][0]["metadata"]["name"] == ""
    groups = await kube.request("GET", "/apis")
    assert groups["kind"] == "APIGroupList"
    assert "apps" in {g["name"] for g in groups["groups"]}
    apps = await kube.request("GET", "/apis/apps/v1")
    assert "deployments/status" in {r["name"] for r in apps["resources"]}
    api.catalogue.unavailable.add("apps/v1")
    with pytest.raises(ServerError):
        await kube.request("GET", "/apis/apps/v1")
    aggregated = await kube.request("GET", "/apis", accept=ACCEPT_AGGREGATED_DISCOVERY)
    apps_entry = next(i for i in aggregated["items"] if i["metadata"]["name"] == "apps")
    assert apps_entry["versions"][0]["freshness"] == "Stale"
    api.unserve(CRDS)
    with pytest.raises(NotFound):
        await kube.list_metadata(CRDS)
    with pytest.raises(NotFound):
        await kube.request("GET", "/apis/nothing.example.com/v1")
    with pytest.raises(NotFound):
        await kube.request("GET", "/healthz")
