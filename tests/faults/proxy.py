"""A recording, fault-injecting HTTP proxy on loopback between a controller and the API server.

The controller talks plain HTTP to ``http://127.0.0.1:<port>`` (its kubeconfig from
:meth:`FaultProxy.kubeconfig`); the proxy re-terminates: it forwards every request over TLS to
the real API server with the controller user's client certificate, streaming the response
back (watches included). It records every request (method, path and query, ``Accept``,
status, response bytes, the fault injected) and, at ``rate``, injects one of ``faults``:

* ``429``: ``429 Too Many Requests`` with ``Retry-After: <retry_after>`` (not forwarded);
* ``500`` / ``503``: a Status body with that code (not forwarded);
* ``reset``: the connection is closed without an answer (not forwarded);
* ``lost``: forwarded (the API server carries it out), then the connection is closed
  before the answer, so the client cannot know it succeeded (the record keeps the API
  server's answer: whether the write it lost was done);
* ``slow``: forwarded after ``slow_seconds``.

Only requests that are not watches are faulted (a watch's faults are its stream ending,
covered elsewhere); ``rate`` can be changed while the proxy runs.
"""

from __future__ import annotations

import asyncio
import base64
import json
import random
import ssl
import tempfile
import time
from collections import Counter
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path

import aiohttp
import yaml
from aiohttp import web

HOP_BY_HOP = {
    "connection",
    "keep-alive",
    "transfer-encoding",
    "content-length",
    "content-encoding",
    "accept-encoding",
    "host",
    "authorization",
    "upgrade",
}


@dataclass
class Recorded:
    at: float
    method: str
    path: str
    accept: str
    status: int
    size: int
    fault: str | None


@dataclass
class FaultProxy:
    """See the module docstring. ``async with FaultProxy(...)`` starts and stops it."""

    upstream_kubeconfig: Path
    rate: float = 0.0
    faults: Sequence[str] = ("429", "500", "503", "reset", "lost", "slow")
    retry_after: int = 1
    slow_seconds: float = 2.0
    seed: int = 8
    records: list[Recorded] = field(default_factory=list)
    #: (method, path and query, Accept) of every request, recorded when it arrives (a watch
    #: is in :attr:`records` only once its stream has ended).
    arrived: list[tuple[str, str, str]] = field(default_factory=list)
    #: Response bytes passed on so far, per path and query (open watches included).
    bytes_streamed: Counter[str] = field(default_factory=Counter)
    #: (arrival time, method, path and query) of every request.
    arrivals: list[tuple[float, str, str]] = field(default_factory=list)
    port: int = 0
    #: While set, watch streams forward nothing (events and bookmarks are dropped), as a
    #: stalled connection would; :meth:`cut_watches` then ends every open watch.
    frozen: bool = False
    _cut: int = 0
    _open_watches: set[asyncio.BaseTransport] = field(default_factory=set)
    _open_upstreams: set[aiohttp.ClientResponse] = field(default_factory=set)

    async def __aenter__(self) -> FaultProxy:
        config = yaml.safe_load(self.upstream_kubeconfig.read_text())
        cluster = config["clusters"][0]["cluster"]
        user = config["users"][0]["user"]
        self._server = str(cluster["server"]).rstrip("/")
        self._dir = tempfile.TemporaryDirectory(prefix="faultproxy-")
        cert = Path(self._dir.name) / "tls.crt"
        key = Path(self._dir.name) / "tls.key"
        cert.write_bytes(base64.b64decode(user["client-certificate-data"]))
        key.write_bytes(base64.b64decode(user["client-key-data"]))
        context = ssl.create_default_context(
            cadata=base64.b64decode(cluster["certificate-authority-data"]).decode()
        )
        context.load_cert_chain(str(cert), str(key))
        self._rng = random.Random(self.seed)
        self._session = aiohttp.ClientSession(
            connector=aiohttp.TCPConnector(ssl=context, limit=0),
            timeout=aiohttp.ClientTimeout(total=None),
            auto_decompress=False,
        )
        app = web.Application(client_max_size=16 * 1024 * 1024)
        app.router.add_route("*", "/{tail:.*}", self._handle)
        self._runner = web.AppRunner(app, access_log=None)
        await self._runner.setup()
        site = web.TCPSite(self._runner, "127.0.0.1", 0)
        await site.start()
        self.port = int(site._server.sockets[0].getsockname()[1])  # type: ignore[union-attr]
        return self

    async def __aexit__(self, *exc: object) -> None:
        # A watch's handler waits on the API server's stream and notices a client that went
        # away only when it next writes, so the server's graceful shutdown would wait its
        # full 60 seconds for every watch still open: their upstream streams end first.
        for upstream in list(self._open_upstreams):
            upstream.close()
        await self._runner.cleanup()
        await self._session.close()
        self._dir.cleanup()

    def kubeconfig(self, path: Path) -> str:
        """A kubeconfig for the controller: plain HTTP to the proxy (a dummy token)."""
        config = {
            "apiVersion": "v1",
            "kind": "Config",
            "clusters": [{"name": "proxy", "cluster": {"server": f"http://127.0.0.1:{self.port}"}}],
            "users": [{"name": "proxy", "user": {"token": "proxied"}}],
            "contexts": [{"name": "proxy", "context": {"cluster": "proxy", "user": "proxy"}}],
            "current-context": "proxy",
        }
        path.write_text(yaml.safe_dump(config))
        return str(path)

    def cut_watches(self) -> None:
        """End every open watch stream (the client re-watches) and stop freezing."""
        self._cut += 1
        self.frozen = False
        for transport in list(self._open_watches):
            transport.close()

    def per_second(self) -> dict[int, int]:
        """Requests per whole second of the proxy's clock (every request, faulted or not)."""
        counts: dict[int, int] = {}
        for record in self.records:
            counts[int(record.at)] = counts.get(int(record.at), 0) + 1
        return counts

    def _pick(self, request: web.Request) -> str | None:
        if "watch=true" in request.query_string or "watch=1" in request.query_string:
            return None
        if self.rate <= 0 or self._rng.random() >= self.rate:
            return None
        return self._rng.choice(list(self.faults))

    async def _handle(self, request: web.Request) -> web.StreamResponse:
        fault = self._pick(request)
        accept = request.headers.get("Accept", "")
        path = request.path_qs
        self.arrived.append((request.method, path, accept))
        self.arrivals.append((time.time(), request.method, path))

        def record(status: int, size: int) -> None:
            self.records.append(
                Recorded(time.time(), request.method, path, accept, status, size, fault)
            )

        if fault in ("429", "500", "503"):
            code = int(fault)
            body = json.dumps(
                {"kind": "Status", "apiVersion": "v1", "status": "Failure", "code": code}
            )
            headers = {"Retry-After": str(self.retry_after)} if code == 429 else {}
            record(code, len(body))
            return web.Response(
                status=code, text=body, content_type="application/json", headers=headers
            )
        if fault == "reset":
            record(0, 0)
            assert request.transport is not None
            request.transport.close()
            raise ConnectionResetError
        if fault == "slow":
            await asyncio.sleep(self.slow_seconds)
        body_in = await request.read()
        headers = {k: v for k, v in request.headers.items() if k.lower() not in HOP_BY_HOP}
        async with self._session.request(
            request.method, self._server + path, headers=headers, data=body_in or None
        ) as upstream:
            if fault == "lost":
                await upstream.read()
                record(upstream.status, 0)
                assert request.transport is not None
                request.transport.close()
                raise ConnectionResetError
            out = web.StreamResponse(status=upstream.status)
            for name, value in upstream.headers.items():
                if name.lower() not in HOP_BY_HOP:
                    out.headers[name] = value
            await out.prepare(request)
            size = 0
            watch = "watch=" in request.query_string
            generation = self._cut
            if watch:
                self._open_upstreams.add(upstream)
            if watch and request.transport is not None:
                self._open_watches.add(request.transport)
            try:
                async for chunk in upstream.content.iter_any():
                    if watch and generation != self._cut:
                        break
                    if watch and self.frozen:
                        continue
                    size += len(chunk)
                    self.bytes_streamed[path] += len(chunk)
                    await out.write(chunk)
                await out.write_eof()
            except (ConnectionError, aiohttp.ClientError):
                pass  # the client went away (a watch it ended, or its shutdown)
            finally:
                record(upstream.status, size)
                self._open_upstreams.discard(upstream)
                if request.transport is not None:
                    self._open_watches.discard(request.transport)
            return out
