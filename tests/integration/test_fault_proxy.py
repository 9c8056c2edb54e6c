"""The recording proxy of the fault scenarios (tests/faults/proxy.py) on the real API server.

A watch through the proxy ends when the proxy stops, even once its client has gone away:
the proxy's handler waits on the API server's stream and would notice a gone client only at
its next write, so the web server's graceful shutdown waited its full 60 seconds for it, and
every test behind the proxy (the fault scenarios, the scoped-list tests) took a minute more.
"""

from __future__ import annotations

import asyncio
import time
from pathlib import Path

import aiohttp

from lifecycle_controller.devcluster import ControlPlane
from tests.faults.proxy import FaultProxy
from tests.faults.support import controller_kubeconfig

#: Seconds the proxy may take to stop (the graceful shutdown's own timeout is 60).
STOPS_WITHIN = 10.0


async def test_the_proxy_stops_at_once_with_a_watch_open_and_records_it(
    control_plane: ControlPlane, namespace: str
) -> None:
    path = f"/api/v1/namespaces/{namespace}/configmaps?watch=true"
    upstream = Path(await asyncio.to_thread(controller_kubeconfig, control_plane))
    async with FaultProxy(upstream) as proxy:
        async with (
            aiohttp.ClientSession() as session,
            session.get(f"http://127.0.0.1:{proxy.port}{path}") as response,
        ):
            assert response.status == 200  # the watch is open, its stream forwarded
            assert [method for method, target, _ in proxy.arrived if target == path] == ["GET"]
        # its client gone, as a stopped controller's is; the API server's stream goes on
        leaving = time.monotonic()
    took = time.monotonic() - leaving
    assert took < STOPS_WITHIN, f"the proxy took {took:.1f}s to stop"
    assert [record.status for record in proxy.records if record.path == path] == [200]
