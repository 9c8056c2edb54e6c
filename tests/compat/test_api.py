"""The API features the controller leans on, against the release under test: discovery both
ways, the informers' list path, protobuf and JSON watches, and the relist after 410 Gone.

What to expect is asked of the server itself (its discovery answer, its feature gates in
``/metrics``), so each check holds on a release that serves a feature and on one that does
not, and the path taken is recorded in the release's result.
"""

from __future__ import annotations

import re
from typing import Any
from urllib.parse import parse_qs, urlsplit

import aiohttp

from lifecycle_controller.devcluster import ControlPlane
from lifecycle_controller.kube import KubeClient, load_configuration
from lifecycle_controller.kube.client import (
    ACCEPT_AGGREGATED_DISCOVERY,
    ACCEPT_METADATA,
    ACCEPT_METADATA_WATCH,
)
from lifecycle_controller.kube.discovery import fetch_discovery
from lifecycle_controller.kube.exchanges import USER_AGENT, watch_events
from lifecycle_controller.kube.watch_protobuf import PROTOBUF
from tests.compat.matrix import CompatResult
from tests.integration.controller import StartController
from tests.integration.keys import DELETE_AFTER
from tests.integration.support import CONFIGMAPS, configmap, eventually
from tests.integration.test_informers import (
    EVENTS,
    PAGED,
    Interruptible,
    Metrics,
    Recorder,
    compact_etcd,
    core_event,
    make_informer,
    running,
    wait_until,
)

_FEATURE = re.compile(r'^kubernetes_feature_enabled\{name="(\w+)",stage="(\w*)"\} (\d)', re.M)


def feature_gates(plane: ControlPlane) -> dict[str, bool]:
    """The API server's feature gates, as its ``/metrics`` reports them."""
    response = plane.request("GET", "/metrics")
    assert response.status == 200, response.body
    return {name: value == "1" for name, _stage, value in _FEATURE.findall(response.body["raw"])}


def serves_streaming_lists(plane: ControlPlane) -> bool:
    """Whether the server answers ``sendInitialEvents`` watches (its WatchList gate)."""
    gates = feature_gates(plane)
    assert gates, "the API server reports no feature gates in /metrics"
    # A gate locked to on and then removed is no longer reported: served since.
    return gates.get("WatchList", True)


def test_the_release_under_test_is_serving(control_plane: ControlPlane) -> None:
    version = control_plane.request("GET", "/version").body
    assert version["gitVersion"] == control_plane.kubernetes
    assert version["minor"] == control_plane.kubernetes.split(".")[1]


async def test_aggregated_and_legacy_discovery_agree(
    kube: KubeClient, compat_result: CompatResult
) -> None:
    answer = await kube.request("GET", "/apis", accept=ACCEPT_AGGREGATED_DISCOVERY)
    served = answer.get("kind") == "APIGroupDiscoveryList"
    aggregated = await fetch_discovery(kube)
    legacy = await fetch_discovery(kube, aggregated=False)
    assert aggregated.aggregated is served
    assert not legacy.aggregated
    assert not aggregated.failed
    assert not legacy.failed
    assert set(aggregated.resources) == set(legacy.resources)
    keys = {resource.key for resource in aggregated.resources}
    assert {"configmaps", "deployments.apps", "leases.coordination.k8s.io"} <= keys
    assert "events.events.k8s.io" in keys
    if not served:
        compat_result.notes.append("no aggregated discovery: the legacy documents are read")


def _controller_lists(plane: ControlPlane, namespace: str) -> list[dict[str, Any]]:
    """The controller's requests for the ConfigMaps of ``namespace`` (list or watch)."""
    path = CONFIGMAPS.collection_path(namespace)
    return [
        event
        for event in plane.audit_events()
        if event.get("userAgent", "").startswith(USER_AGENT.split("/")[0])
        and urlsplit(event.get("requestURI", "")).path == path
    ]


async def test_informers_take_the_list_path_the_server_serves(
    control_plane: ControlPlane,
    start_controller: StartController,
    namespace: str,
    compat_result: CompatResult,
) -> None:
    streaming = serves_streaming_lists(control_plane)
    running_controller = await start_controller(
        watch_resource=["configmaps"], watch_namespace=[namespace]
    )
    await running_controller.kube.create(
        CONFIGMAPS, namespace, configmap("listed", **{DELETE_AFTER: "1h"})
    )

    def with_initial_events(event: dict[str, Any]) -> bool:
        query = parse_qs(urlsplit(event["requestURI"]).query)
        return query.get("sendInitialEvents") == ["true"]

    async def listed() -> bool:
        return any(
            e["verb"] == "list" or with_initial_events(e)
            for e in _controller_lists(control_plane, namespace)
            if e.get("responseStatus", {}).get("code") == 200
        )

    await eventually(listed, within=30, what="the informer's list in the audit log")
    requests = _controller_lists(control_plane, namespace)
    streamed = [e for e in requests if e["verb"] == "watch" and with_initial_events(e)]
    paged = [e for e in requests if e["verb"] == "list"]
    if streaming:
        assert streamed
        assert all(e["responseStatus"]["code"] == 200 for e in streamed)
        assert not paged, [e["requestURI"] for e in paged]
        compat_result.list_path = "streaming"
    else:
        # Asked once, refused, then pages (with a limit) from then on.
        assert streamed
        assert {e["responseStatus"]["code"] for e in streamed} <= {400, 422}
        assert paged
        assert all("limit=" in e["requestURI"] for e in paged)
        compat_result.list_path = "paged"
        compat_result.notes.append("WatchList off: streaming list refused, paged list used")


async def _first_change(
    plane: ControlPlane, path: str, accept: str, resource_version: str
) -> tuple[str, dict[str, Any]]:
    """The media type of a watch from ``resource_version`` and its first non-bookmark event."""
    config, _ = await load_configuration(str(plane.admin_kubeconfig))
    headers = {"Accept": accept}
    authorization = await config.authorization_header()
    if authorization:
        headers["Authorization"] = authorization
    query = {"watch": "true", "resourceVersion": resource_version, "timeoutSeconds": "10"}
    async with (
        aiohttp.ClientSession(connector=aiohttp.TCPConnector(ssl=config.ssl_context())) as http,
        http.get(config.host + path, params=query, headers=headers) as response,
    ):
        assert response.status == 200, await response.text()
        async for event in watch_events(response, what=path):
            if event["type"] != "BOOKMARK":
                event["object"]["metadata"].pop("managedFields", None)
                return response.content_type, event
    raise AssertionError(f"no change seen on {path}")


async def test_protobuf_and_json_watches_read_the_same_change(
    control_plane: ControlPlane, kube: KubeClient, namespace: str
) -> None:
    await kube.create(CONFIGMAPS, namespace, configmap("watched", note="ünï ✓"))
    before = (await kube.list_metadata(CONFIGMAPS, namespace=namespace))["metadata"]
    await kube.merge_patch(
        CONFIGMAPS, namespace, "watched", {"metadata": {"annotations": {DELETE_AFTER: "2h"}}}
    )
    path = CONFIGMAPS.collection_path(namespace)
    version = before["resourceVersion"]
    json_type, as_json = await _first_change(control_plane, path, ACCEPT_METADATA, version)
    proto_type, as_protobuf = await _first_change(
        control_plane, path, ACCEPT_METADATA_WATCH, version
    )
    assert (json_type, proto_type) == ("application/json", PROTOBUF)
    assert as_json["type"] == "MODIFIED"
    assert as_protobuf == as_json
    assert as_json["object"]["metadata"]["annotations"] == {"note": "ünï ✓", DELETE_AFTER: "2h"}


async def test_relist_after_410_synthesises_deletes(
    control_plane: ControlPlane, kube: KubeClient, namespace: str
) -> None:
    """core/v1 Events skip the watch cache, so a compaction makes etcd answer 410.

    History is compacted past the delete (one more write after it): a compaction that ends
    at the delete itself leaves a resumed watch at a DELETE whose previous value is gone,
    which every release reports as a 500 error event instead."""
    await kube.create(EVENTS, namespace, core_event("stays", namespace, **{DELETE_AFTER: "1h"}))
    await kube.create(EVENTS, namespace, core_event("goes", namespace, **{DELETE_AFTER: "1h"}))
    source, recorder, metrics = Interruptible(kube), Recorder(), Metrics()
    informer = make_informer(
        source, EVENTS, namespace, recorder=recorder, metrics=metrics, settings=PAGED
    )
    async with running(informer):
        await wait_until(lambda: informer.synced, "the first list")
        source.open.clear()
        source.cut.set()
        await wait_until(lambda: len(source.watch_versions) == 2, "a re-watch attempt")
        await kube.delete(EVENTS, namespace, "goes")
        await kube.create(EVENTS, namespace, core_event("new", namespace, **{DELETE_AFTER: "1h"}))
        await compact_etcd(control_plane, kube, namespace)
        source.cut.clear()
        source.open.set()
        await wait_until(lambda: metrics.relists == 1, "the relist")
        await wait_until(lambda: recorder.of("goes")[-1][0] == "delete", "the synthesised delete")
    assert metrics.restarts[:2] == ["transport", "expired"]
    assert metrics.relists == 1
    assert recorder.of("new") == [("add", None, {DELETE_AFTER: "1h"})]
    assert recorder.of("stays") == [("add", None, {DELETE_AFTER: "1h"})]
