"""The production :class:`~lifecycle_controller.kube.transport.Transport`: aiohttp sessions.

One aiohttp session per connection pool (requests, watches, leases), each opened on first
use with the connector of :mod:`.connector` (which never leaks a closed TLS socket), so
long-running watches never starve ordinary requests or the Lease renewals
(docs/architecture.md#connection-pools). No ``trust_env``: the proxy is chosen once, when
the client is built (docs/architecture.md#raw-requests). aiohttp's exceptions stop here:
what fails below HTTP leaves as :class:`~lifecycle_controller.kube.transport.ConnectionFailed`.
"""

from __future__ import annotations

import asyncio
import ssl
from collections.abc import AsyncIterator, Mapping
from contextlib import asynccontextmanager
from typing import Any

import aiohttp
from yarl import URL

from lifecycle_controller.kube.connector import close_pool, new_connector
from lifecycle_controller.kube.transport import ConnectionFailed, HttpRequest, Pool

__all__ = ["AiohttpTransport"]

#: Seconds an idle connection to the API server stays open for the next request. The API
#: server closes a connection idle for 90 s (client-go keeps one as long); staying below that
#: avoids reusing a connection the server is closing, and a controller whose actions come in
#: waves a minute apart does not open its pool again (a TLS handshake each) for every wave.
#: Above the minute of the default ``--rediscovery-interval``: an idle controller's one
#: request of the minute reuses its connection (at 60 s it opened a new one every time, a
#: handshake costing more CPU than the two discovery reads).
API_KEEPALIVE_S = 75.0

#: What aiohttp raises when a request cannot be sent, and when its answer cannot be read.
_SEND_FAILURES = (aiohttp.ClientError, TimeoutError, OSError)
_READ_FAILURES = (aiohttp.ClientError, TimeoutError, ValueError)


def _failed(error: BaseException) -> ConnectionFailed:
    return ConnectionFailed(str(error) or type(error).__name__)


class _Body:
    """A streamed body; aiohttp's errors while reading become ConnectionFailed."""

    __slots__ = ("_reader", "_response")

    def __init__(self, response: aiohttp.ClientResponse) -> None:
        self._reader = response.content
        self._response = response

    async def readany(self) -> bytes:
        try:
            return await self._reader.readany()
        except _READ_FAILURES as error:
            raise _failed(error) from error

    async def rest(self, seconds: float) -> None:
        """Pause the connection's reading through aiohttp's own flow control (which also stops
        its idle timer meanwhile); over TLS, lower the TLS layer's read buffer to one byte as
        well, so that it stops reading the socket too once a record is waiting (pausing only
        the layer above leaves the TLS layer waking up for, and buffering, every record)."""
        connection = self._response.connection
        protocol = connection.protocol if connection is not None else None
        transport = protocol.transport if protocol is not None else None
        if protocol is None or transport is None or transport.is_closing():
            await asyncio.sleep(seconds)
            return
        tls_limits = getattr(transport, "set_read_buffer_limits", None)
        protocol.pause_reading()
        if tls_limits is not None:
            tls_limits(high=1)
        try:
            await asyncio.sleep(seconds)
        finally:
            if not transport.is_closing():
                if tls_limits is not None:
                    tls_limits()  # back to asyncio's defaults
                protocol.resume_reading()


class _Response:
    """An aiohttp answer in the shape of :class:`~.transport.HttpResponse`."""

    __slots__ = ("_response", "content")

    def __init__(self, response: aiohttp.ClientResponse) -> None:
        self._response = response
        self.content = _Body(response)

    @property
    def status(self) -> int:
        return self._response.status

    @property
    def content_type(self) -> str:
        return self._response.content_type

    def header(self, name: str) -> str | None:
        return self._response.headers.get(name)

    async def read(self) -> bytes:
        try:
            return await self._response.read()
        except _READ_FAILURES as error:
            raise _failed(error) from error


class AiohttpTransport:
    """Three pools of at most ``pool_sizes[pool]`` connections each, opened on first use.

    ``proxy`` is sent every request (credentials in it as ``Proxy-Authorization``);
    ``server_hostname`` overrides the name TLS verifies.
    """

    def __init__(
        self,
        *,
        ssl_context: ssl.SSLContext | bool,
        pool_sizes: Mapping[Pool, int],
        proxy: str | None = None,
        server_hostname: str | None = None,
    ) -> None:
        self._ssl = ssl_context
        self._sizes = dict(pool_sizes)
        self._sessions: dict[Pool, aiohttp.ClientSession] = {}
        self._closed = False
        self._extra: dict[str, Any] = {}
        if proxy:
            self._extra["proxy"] = proxy
        if server_hostname:
            self._extra["server_hostname"] = server_hostname

    def _session(self, pool: Pool) -> aiohttp.ClientSession:
        if self._closed:
            # A request after close() must not open a pool that nobody would close.
            raise ConnectionFailed("the transport is closed")
        session = self._sessions.get(pool)
        if session is None or session.closed:
            session = aiohttp.ClientSession(
                connector=new_connector(
                    limit=self._sizes[pool], ssl_context=self._ssl, keepalive=API_KEEPALIVE_S
                ),
                skip_auto_headers=("Content-Type",),
            )
            self._sessions[pool] = session
        return session

    @asynccontextmanager
    async def send(self, request: HttpRequest) -> AsyncIterator[_Response]:
        deadlines = request.deadlines
        try:
            response = await self._session(request.pool).request(
                request.method,
                URL(request.url, encoded=True),
                headers=request.headers,
                data=request.body,
                timeout=aiohttp.ClientTimeout(
                    total=deadlines.total,
                    sock_connect=deadlines.connect,
                    sock_read=deadlines.idle,
                ),
                **self._extra,
            )
        except _SEND_FAILURES as error:
            raise _failed(error) from error
        try:
            yield _Response(response)
        finally:
            response.release()

    async def close(self) -> None:
        self._closed = True
        sessions, self._sessions = list(self._sessions.values()), {}
        for session in sessions:
            await close_pool(session)
