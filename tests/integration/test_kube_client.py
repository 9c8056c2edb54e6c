"""The API door (lifecycle_controller.kube) against the real API server."""

from __future__ import annotations

import asyncio
import contextlib
import gc
import warnings
from typing import Any

import aiohttp
import pytest
import yarl

from lifecycle_controller.devcluster import ControlPlane
from lifecycle_controller.kube import (
    AlreadyExists,
    Conflict,
    Forbidden,
    KubeClient,
    NotFound,
    TransportError,
    load_configuration,
)
from lifecycle_controller.kube.connector import LEAKS_TLS_SOCKETS, close_pool, new_connector
from lifecycle_controller.kube.resources import NAMESPACES
from tests.integration.support import CONFIGMAPS, configmap


async def test_list_watch_patch_delete_round_trip(kube: KubeClient, namespace: str) -> None:
    created = await kube.create(CONFIGMAPS, namespace, configmap("a", x="1"))
    with pytest.raises(AlreadyExists):
        await kube.create(CONFIGMAPS, namespace, configmap("a"))

    page = await kube.list_metadata(CONFIGMAPS, namespace=namespace, limit=1)
    assert page["kind"] == "PartialObjectMetadataList"
    assert [i["metadata"]["name"] for i in page["items"]] == ["a"]

    events: list[tuple[str, str]] = []

    async def watch() -> None:
        async for event in kube.watch_metadata(
            CONFIGMAPS,
            namespace=namespace,
            resource_version=page["metadata"]["resourceVersion"],
            timeout_seconds=30,
        ):
            obj: dict[str, Any] = event["object"]
            if event["type"] != "BOOKMARK":
                events.append((event["type"], obj["metadata"]["name"]))
            if len(events) == 2:
                return

    watcher = asyncio.create_task(watch())
    stale_rv = created["metadata"]["resourceVersion"]
    patched = await kube.merge_patch(
        CONFIGMAPS,
        namespace,
        "a",
        {"metadata": {"resourceVersion": stale_rv, "annotations": {"x": "2"}}},
    )
    assert patched["metadata"]["annotations"]["x"] == "2"
    with pytest.raises(Conflict):
        await kube.merge_patch(
            CONFIGMAPS, namespace, "a", {"metadata": {"resourceVersion": stale_rv}}
        )
    with pytest.raises(Conflict):
        await kube.delete(CONFIGMAPS, namespace, "a", uid="not-the-uid")
    await kube.delete(
        CONFIGMAPS,
        namespace,
        "a",
        uid=patched["metadata"]["uid"],
        resource_version=patched["metadata"]["resourceVersion"],
    )
    with pytest.raises(NotFound):
        await kube.delete(CONFIGMAPS, namespace, "a")
    async with asyncio.timeout(20):
        await watcher
    assert events == [("MODIFIED", "a"), ("DELETED", "a")]


async def test_forbidden_and_transport_errors(control_plane: ControlPlane, namespace: str) -> None:
    kubeconfig = control_plane.user_kubeconfig(f"nobody-{namespace}")
    async with await KubeClient.connect(str(kubeconfig)) as nobody:
        with pytest.raises(Forbidden):
            await nobody.list_metadata(CONFIGMAPS, namespace=namespace)

    configuration, _ = await load_configuration(str(control_plane.admin_kubeconfig))
    configuration.host = "https://127.0.0.1:1"
    async with KubeClient(configuration) as unreachable:
        with pytest.raises(TransportError):
            await unreachable.list_metadata(CONFIGMAPS, namespace=namespace)


def test_requests_cancelled_mid_flight_leak_no_socket(control_plane: ControlPlane) -> None:
    """A cancelled request, then the client closed and its event loop gone, leaves no open
    socket behind (on Python < 3.12.8 a TLS connection closed mid-goodbye used to; see
    lifecycle_controller/kube/connector.py). Each round runs in its own event loop, as a
    process that stops does; the cancellation points sweep the whole request."""
    kubeconfig = str(control_plane.admin_kubeconfig)

    async def cancelled_request(after: float) -> None:
        async with await KubeClient.connect(kubeconfig) as kube:
            request = asyncio.ensure_future(kube.get(NAMESPACES, None, "default"))
            await asyncio.sleep(after)
            request.cancel()
            with contextlib.suppress(asyncio.CancelledError, NotFound):
                await request

    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always", ResourceWarning)
        for step in range(200):
            asyncio.run(cancelled_request(step * 0.0001))
        gc.collect()  # once: a leaked socket is unreachable whenever it is collected
    leaks = [str(w.message) for w in caught if issubclass(w.category, ResourceWarning)]
    assert leaks == []


@pytest.mark.skipif(not LEAKS_TLS_SOCKETS, reason="this Python closes such sockets itself")
def test_a_connection_closed_before_the_pool_got_it_leaks_no_socket(
    control_plane: ControlPlane,
) -> None:
    """The rare case of the test above, made certain: a request cancelled right after its TLS
    handshake closes a connection the pool never handed out (its TLS goodbye under way), and
    the loop ends at once. The connector opens it here as the pool would, without the pool."""

    async def closed_before_the_pool_got_it() -> None:
        config, _ = await load_configuration(str(control_plane.admin_kubeconfig))
        url = yarl.URL(config.host)
        connector = new_connector(limit=4, ssl_context=config.ssl_context())
        session = aiohttp.ClientSession(connector=connector)
        loop = asyncio.get_running_loop()
        assert url.host is not None
        assert url.port is not None
        transport, _ = await loop.create_connection(
            connector._factory, url.host, url.port, ssl=config.ssl_context()
        )
        transport.close()  # the TLS goodbye starts; the API server's answer is not awaited
        await close_pool(session)

    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always", ResourceWarning)
        for _ in range(5):
            asyncio.run(closed_before_the_pool_got_it())
            gc.collect()
    leaks = [str(w.message) for w in caught if issubclass(w.category, ResourceWarning)]
    assert leaks == []


async def test_a_bounded_list_of_whole_objects_says_how_many_are_left(
    kube: KubeClient, namespace: str
) -> None:
    """What batched rollout reads rely on (controller/rollout/reads.py): a cut list carries a
    continue token and ``remainingItemCount``; an uncut one has neither."""
    for i in range(5):
        await kube.create(CONFIGMAPS, namespace, configmap(f"c{i}"))
    cut = await kube.list_objects(CONFIGMAPS, namespace=namespace, limit=2)
    assert all("data" in item for item in cut["items"])  # whole objects, not metadata
    assert cut["metadata"]["continue"]
    assert cut["metadata"]["remainingItemCount"] == 3
    whole = await kube.list_objects(CONFIGMAPS, namespace=namespace, limit=20)
    assert len(whole["items"]) == 5
    assert "continue" not in whole["metadata"]
    assert "remainingItemCount" not in whole["metadata"]
