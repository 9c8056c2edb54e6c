"""The seam below KubeClient: the in-process transport and the aiohttp one carry the same.

Most unit tests reach the fake API server in process; these check that what they see is
what the production transport sends and reads over loopback HTTP (the same request, the
same watch stream, the same error mapping), and what the in-process transport refuses.
"""

from __future__ import annotations

import asyncio
from collections.abc import Mapping

import aiohttp
import pytest

from lifecycle_controller.kube import Conflict, KubeClient, TooManyRequests, TransportError
from lifecycle_controller.kube.connector import LEAKS_TLS_SOCKETS, new_connector
from lifecycle_controller.kube.transport_aiohttp import API_KEEPALIVE_S, AiohttpTransport
from tests.doubles.fakeapi import CONFIGMAPS, FakeApiServer, RecordedRequest

#: Headers only an HTTP connection adds (aiohttp's own); everything else is the client's.
CONNECTION_HEADERS = {"host", "content-length", "accept-encoding"}


def sent(request: RecordedRequest) -> tuple[object, ...]:
    headers: Mapping[str, str] = {
        k.lower(): v for k, v in request.headers.items() if k.lower() not in CONNECTION_HEADERS
    }
    return request.method, request.path, request.query, request.body, sorted(headers.items())


async def calls(kube: KubeClient) -> None:
    await kube.create(CONFIGMAPS, "default", {"metadata": {"name": "a"}})
    await kube.merge_patch(CONFIGMAPS, "default", "a", {"metadata": {"labels": {"x": "1"}}})
    await kube.list_metadata(CONFIGMAPS, limit=1, field_selector="metadata.name=a")
    await kube.delete(CONFIGMAPS, "default", "a", resource_version="1")  # 409: stale


async def test_both_transports_send_the_same_requests(
    api: FakeApiServer, kube: KubeClient, loopback_api: FakeApiServer
) -> None:
    with pytest.raises(Conflict):
        await calls(kube)
    async with loopback_api.client() as over_http:
        with pytest.raises(Conflict):
            await calls(over_http)
    assert [sent(r) for r in api.requests] == [sent(r) for r in loopback_api.requests]
    assert [r.status for r in api.requests] == [201, 200, 200, 409]


async def test_a_watch_streams_over_loopback_http_until_the_server_ends_it(
    loopback_api: FakeApiServer,
) -> None:
    api = loopback_api
    api.store.create(CONFIGMAPS, "default", {"metadata": {"name": "a"}})
    async with api.client() as kube:
        events = kube.watch_list_metadata(CONFIGMAPS, timeout_seconds=300)
        first = await anext(events)
        assert (first["type"], first["object"]["metadata"]["name"]) == ("ADDED", "a")
        assert (await anext(events))["type"] == "BOOKMARK"
        api.store.create(CONFIGMAPS, "default", {"metadata": {"name": "b"}})
        assert (await anext(events))["object"]["metadata"]["name"] == "b"
        api.close_watches()
        assert [event async for event in events] == []
        assert api.store.open_watches == 0
        api.fail(429, method="GET", retry_after=7)
        with pytest.raises(TooManyRequests) as caught:
            await kube.get(CONFIGMAPS, "default", "a")
        assert caught.value.retry_after == 7.0


async def test_an_abandoned_in_process_watch_is_unregistered(
    api: FakeApiServer, kube: KubeClient
) -> None:
    events = kube.watch_list_metadata(CONFIGMAPS, timeout_seconds=300)
    assert (await anext(events))["type"] == "BOOKMARK"
    assert api.store.open_watches == 1
    await events.aclose()  # type: ignore[attr-defined]
    assert api.store.open_watches == 0


async def test_the_in_process_transport_refuses_a_closed_client_and_a_stopped_server(
    api: FakeApiServer,
) -> None:
    kube = api.client()
    await kube.close()
    with pytest.raises(TransportError, match="closed"):
        await kube.list_metadata(CONFIGMAPS)
    async with KubeClient(api.configuration(), transport=api.transport()) as other:
        await api.stop()
        with pytest.raises(TransportError, match=r"GET /api/v1/configmaps: .*stopped"):
            await other.list_metadata(CONFIGMAPS)


async def test_idle_api_connections_outlive_a_minute_long_pause_but_not_the_servers_limit() -> None:
    """Requests to the API server reuse idle connections for 75 s (the server closes them at
    90 s), so the minute-apart rediscovery finds its connection open; other pools built by
    new_connector keep aiohttp's default."""
    transport = AiohttpTransport(ssl_context=False, pool_sizes={"requests": 4})
    try:
        connector = transport._session("requests").connector
        assert isinstance(connector, aiohttp.TCPConnector)
        assert connector._keepalive_timeout == API_KEEPALIVE_S == 75.0
    finally:
        await transport.close()
    default = new_connector(limit=1, ssl_context=False)
    try:
        assert default._keepalive_timeout == 15.0
    finally:
        await default.close()


@pytest.mark.skipif(not LEAKS_TLS_SOCKETS, reason="aiohttp keeps no closed connections here")
async def test_closed_connections_are_aborted_every_minute_not_every_two_seconds() -> None:
    """aiohttp's timer that aborts the closed TLS connections it keeps fires whether or not
    any wait: once a minute, not every 2 s, so an idle pool does not wake the loop."""
    connector = new_connector(limit=1, ssl_context=False)
    try:
        handle = connector._cleanup_closed_handle
        assert handle is not None
        assert handle.when() - asyncio.get_running_loop().time() == pytest.approx(60.0, abs=1.0)
    finally:
        await connector.close()
