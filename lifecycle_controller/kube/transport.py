"""The seam below :class:`~lifecycle_controller.kube.client.KubeClient`: one HTTP exchange.

``KubeClient`` builds every request itself (URL and query, headers, credentials, body,
timeouts, which connection pool) and reads every answer itself (status to the error tree,
JSON bodies, watch streams split chunk by chunk); a :class:`Transport` only carries the
request and hands back the answer. Production uses the aiohttp one
(:mod:`.transport_aiohttp`: the three connection pools, proxies, TLS). The unit tests plug
in a transport that hands the request straight to the fake API server's handler, with no
socket, the way httpx's ``MockTransport`` works, so they exercise the client's real request
building and answer handling without loopback HTTP.

The contract a transport keeps:

* :meth:`Transport.send` is an async context manager: entering it sends the request and
  waits for the status and headers (at most ``total`` seconds, connecting at most
  ``connect``); leaving it releases the answer (the connection goes back to its pool, an
  unfinished stream is closed);
* :meth:`HttpResponse.read` reads the whole body; ``content.readany()`` the next chunk of a
  streamed body (``b""`` at its end), waiting at most ``idle`` seconds for it;
* anything that fails below HTTP (connecting, TLS, a timeout, a broken stream) is raised as
  :class:`ConnectionFailed`, never as the HTTP library's own exceptions: the client turns it
  into a :class:`~lifecycle_controller.kube.errors.TransportError` that names the request.
"""

from __future__ import annotations

from collections.abc import Mapping
from contextlib import AbstractAsyncContextManager
from dataclasses import dataclass
from typing import Literal, Protocol, runtime_checkable

__all__ = [
    "ConnectionFailed",
    "Deadlines",
    "HttpRequest",
    "HttpResponse",
    "Pool",
    "ResponseBody",
    "RestingBody",
    "Transport",
]

Pool = Literal["requests", "watches", "leases"]


class ConnectionFailed(Exception):
    """The exchange failed below HTTP; the message says how (the cause is chained)."""


@dataclass(frozen=True, slots=True)
class Deadlines:
    """Seconds: the whole exchange (None: unbounded), connecting, the wait for a chunk."""

    total: float | None
    connect: float
    idle: float | None = None


@dataclass(frozen=True, slots=True)
class HttpRequest:
    """One request as the client built it; ``url`` is absolute, its query already encoded."""

    method: str
    url: str
    headers: Mapping[str, str]
    body: bytes | None
    deadlines: Deadlines
    pool: Pool = "requests"


class ResponseBody(Protocol):
    """A body read as it arrives (aiohttp's ``StreamReader`` has this shape)."""

    async def readany(self) -> bytes:
        """The next chunk, ``b""`` at the end; ConnectionFailed when reading fails."""
        ...


@runtime_checkable
class RestingBody(ResponseBody, Protocol):
    """A body whose connection can be left unread for a while (the transports' bodies)."""

    async def rest(self, seconds: float) -> None:
        """Leave the connection unread for ``seconds``: what the server sends meanwhile waits
        in the socket and comes in one read afterwards, for one wake-up instead of one per
        event (docs/performance.md#the-cost-of-churn)."""
        ...


class HttpResponse(Protocol):
    """An answer: its status and headers at once, its body on demand."""

    @property
    def status(self) -> int: ...

    @property
    def content_type(self) -> str:
        """The media type of ``Content-Type``, without parameters."""
        ...

    @property
    def content(self) -> ResponseBody: ...

    def header(self, name: str) -> str | None: ...

    async def read(self) -> bytes:
        """The whole body; ConnectionFailed when reading fails."""
        ...


class Transport(Protocol):
    """Carries requests to the API server; one per client, closed with it."""

    def send(self, request: HttpRequest) -> AbstractAsyncContextManager[HttpResponse]: ...

    async def close(self) -> None: ...
