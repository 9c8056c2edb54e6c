"""A watch that rests leaves its connection unread, over TLS, on the real API server.

After a read whose every event the informer dropped, a protobuf watch leaves its connection
unread for a moment so that the next events come in one read
(docs/performance.md#the-cost-of-churn).
Here the production transport's body rests while the API server sends the events of twenty
new ConfigMaps: nothing reaches the reader meanwhile, the TLS layer holds at most the first
of their records (the rest wait in the socket), and once the rest ends (cut short, as when
the informer stops) every event is read, in at most two reads, with the connection's read
limits as they were. A rest that ends on its own is the second test's.

These tests wait in real time: the API server's clock cannot be injected, and what is
checked is how a real socket is read.
"""

from __future__ import annotations

import asyncio
import contextlib
import struct
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from typing import Any

from lifecycle_controller.devcluster import ControlPlane
from lifecycle_controller.kube import KubeClient, load_configuration
from lifecycle_controller.kube.client import ACCEPT_METADATA_WATCH
from lifecycle_controller.kube.transport import Deadlines, HttpRequest, RestingBody
from lifecycle_controller.kube.transport_aiohttp import AiohttpTransport
from lifecycle_controller.kube.watch_protobuf import PROTOBUF
from tests.integration.support import CONFIGMAPS, configmap, eventually

OBJECTS = 20
#: Longer than any setup takes: the first test ends its rest itself once it has checked.
REST_S = 600.0
#: What the first test waits, after the first event reached the TLS layer, for the others.
SETTLE_S = 0.5


async def version_now(kube: KubeClient, namespace: str) -> str:
    listed = await kube.list_metadata(CONFIGMAPS, namespace=namespace, limit=1)
    return str(listed["metadata"]["resourceVersion"])


@asynccontextmanager
async def watch(
    control_plane: ControlPlane,
    kube: KubeClient,
    namespace: str,
    timeout: int = 60,
    version: str | None = None,
) -> AsyncIterator[tuple[Any, RestingBody]]:
    """A protobuf metadata watch of ``namespace``'s ConfigMaps from ``version`` (default:
    now), through the production transport: the aiohttp response and its body."""
    version = version or await version_now(kube, namespace)
    config, _ = await load_configuration(str(control_plane.admin_kubeconfig))
    headers = {"Accept": ACCEPT_METADATA_WATCH}
    authorization = await config.authorization_header()
    if authorization:
        headers["Authorization"] = authorization
    url = (
        f"{config.host}/api/v1/namespaces/{namespace}/configmaps"
        f"?watch=true&resourceVersion={version}&timeoutSeconds={timeout}"
    )
    transport = AiohttpTransport(
        ssl_context=config.ssl_context(), pool_sizes={"requests": 1, "watches": 1, "leases": 1}
    )
    request = HttpRequest("GET", url, headers, None, Deadlines(None, 5.0, 60.0), "watches")
    try:
        async with transport.send(request) as response:
            assert response.status == 200
            assert response.content_type == PROTOBUF
            body = response.content
            assert isinstance(body, RestingBody)
            yield response, body
    finally:
        await transport.close()


def frames_in(data: bytes) -> int:
    """How many whole length-prefixed frames ``data`` holds."""
    count = position = 0
    while position + 4 <= len(data):
        (length,) = struct.unpack_from(">I", data, position)
        position += 4 + length
        count += 1
    assert position == len(data), "a read ended inside a frame"
    return count


async def test_nothing_is_read_while_the_watch_rests_then_everything_at_once(
    control_plane: ControlPlane, kube: KubeClient, namespace: str
) -> None:
    async with watch(control_plane, kube, namespace) as (response, body):
        tls = response._response.connection.transport
        limits = tls.get_read_buffer_limits()
        resting = asyncio.create_task(body.rest(REST_S))
        await asyncio.sleep(0)  # the rest begins
        waiting = asyncio.create_task(body.readany())
        for i in range(OBJECTS):
            await kube.create(CONFIGMAPS, namespace, configmap(f"cm-{i:02d}"))

        async def reached_tls() -> bool:
            return bool(tls.get_read_buffer_size() > 0)

        await eventually(reached_tls, within=30, what="an event at the TLS layer")
        await asyncio.sleep(SETTLE_S)  # the other events, had they been read, would be by now
        held_by_tls = tls.get_read_buffer_size()
        assert not waiting.done(), "a chunk reached the reader while the watch rested"
        assert not resting.done()
        resting.cancel()  # ends the rest as a stopping informer does: reading resumes
        with contextlib.suppress(asyncio.CancelledError):
            await resting

        data, reads = await asyncio.wait_for(waiting, 10), 1
        while frames_in(data) < OBJECTS:
            data += await asyncio.wait_for(body.readany(), 10)
            reads += 1
        assert frames_in(data) == OBJECTS
        assert reads <= 2, f"{reads} reads for what arrived during one rest"
        assert held_by_tls * 4 < len(data), "the TLS layer went on reading the socket"
        assert tls.get_read_buffer_limits() == limits

        await kube.create(CONFIGMAPS, namespace, configmap("after"))
        assert frames_in(await asyncio.wait_for(body.readany(), 10)) == 1


async def test_a_stream_the_server_ends_during_a_rest_ends_cleanly(
    control_plane: ControlPlane, kube: KubeClient, namespace: str
) -> None:
    version = await version_now(kube, namespace)
    await kube.create(CONFIGMAPS, namespace, configmap("during"))  # before the watch opens
    async with watch(control_plane, kube, namespace, timeout=1, version=version) as (_, body):
        await body.rest(3.0)  # the server's timeoutSeconds (1 s from now) ends the watch
        data = b""
        while chunk := await asyncio.wait_for(body.readany(), 10):
            data += chunk
        assert frames_in(data) == 1
