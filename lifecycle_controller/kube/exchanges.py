"""The raw exchanges with the API server: one request and its whole answer, or a stream.

:class:`ApiExchanges` builds every request the same way (URL, headers, credentials,
deadlines), sends it through a :mod:`.transport`, counts its status for the metrics and
turns a non-2xx answer into the error :mod:`.errors` names. :class:`.client.KubeClient`
adds the typed helpers (lists, watches, patches) on top. Whole exchanges (:meth:`request`,
:meth:`send`) skip the context-manager layers a stream needs: every write of an action goes
through them (docs/architecture.md#raw-requests).

A watch answer's events are read in whichever encoding the API server chose
(:func:`watch_events`): watches ask for protobuf first and JSON second
(docs/architecture.md#protobuf-watches), and the answer's ``Content-Type`` says which came
back: protobuf frames are read by :mod:`.watch_protobuf`, JSON lines by :mod:`.watch_lines`.
Both yield the same dicts.
"""

from __future__ import annotations

import json
from collections.abc import AsyncGenerator, AsyncIterator, Awaitable, Callable, Iterable
from contextlib import AsyncExitStack, asynccontextmanager
from dataclasses import dataclass
from typing import Any, Protocol
from urllib.parse import urlencode

from lifecycle_controller import __version__
from lifecycle_controller.kube.collector import decode_json
from lifecycle_controller.kube.connection import ClusterConfig
from lifecycle_controller.kube.errors import TransportError, error_of_answer
from lifecycle_controller.kube.transport import (
    ConnectionFailed,
    Deadlines,
    HttpRequest,
    HttpResponse,
    Pool,
    ResponseBody,
    Transport,
)
from lifecycle_controller.kube.transport_aiohttp import AiohttpTransport
from lifecycle_controller.kube.watch_lines import EventFilter, is_added_line, json_lines
from lifecycle_controller.kube.watch_protobuf import PROTOBUF, is_added_frame, protobuf_events

__all__ = [
    "JSON",
    "USER_AGENT",
    "ApiExchanges",
    "EventFilter",
    "RequestObserver",
    "StreamedAnswer",
    "Timeouts",
    "is_added_event",
    "watch_events",
]

JSON = "application/json"
USER_AGENT = f"lifecycle-controller/{__version__}"

RequestObserver = Callable[[str, str], None]
"""Called with (HTTP method, status code or "<error>") after every request, for metrics."""


@dataclass(frozen=True)
class Timeouts:
    """Seconds. ``watch_idle`` is the longest silence tolerated on an open watch stream."""

    connect: float = 5.0
    request: float = 30.0
    watch_idle: float = 90.0


def _dumps(body: Any) -> bytes:
    return json.dumps(body, separators=(",", ":")).encode()


class ApiExchanges:
    """Requests by path over one transport (default: aiohttp, three connection pools),
    with ``configuration``'s credentials; :meth:`close` closes the transport."""

    def __init__(
        self,
        configuration: ClusterConfig | Any,
        *,
        timeouts: Timeouts | None = None,
        observe: RequestObserver | None = None,
        watch_pool_size: int = 512,
        user_agent: str = USER_AGENT,
        transport: Transport | None = None,
    ) -> None:
        self.user_agent = user_agent
        self.timeouts = timeouts or Timeouts()
        self._observe = observe
        self._config = (
            configuration
            if isinstance(configuration, ClusterConfig)
            else ClusterConfig.from_kubernetes_asyncio(configuration)
        )
        self._base = self._config.host.rstrip("/")
        self._transport = transport or AiohttpTransport(
            ssl_context=self._config.ssl_context(),
            pool_sizes={"requests": 64, "watches": watch_pool_size, "leases": 4},
            proxy=self._config.request_proxy(),  # credentials in it go as Proxy-Authorization
            server_hostname=self._config.tls_server_name,
        )
        self._closed = False

    async def close(self) -> None:
        self._closed = True
        await self._transport.close()

    def _http_request(
        self,
        method: str,
        path: str,
        query: Iterable[tuple[str, str]],
        body: Any,
        content_type: str,
        accept: str,
        authorization: str | None,
        deadlines: Deadlines,
        pool: Pool,
    ) -> HttpRequest:
        if self._closed:
            # A request after close() (a straggling background task) must not open a new
            # connection pool that nobody would close.
            raise TransportError("the API client is closed")
        url = self._base + path
        params = list(query)
        if params:
            url += "?" + urlencode(params)
        headers = {"Accept": accept, "Content-Type": content_type, "User-Agent": self.user_agent}
        if authorization:
            headers["Authorization"] = authorization
        return HttpRequest(
            method, url, headers, None if body is None else _dumps(body), deadlines, pool
        )

    @asynccontextmanager
    async def _open(
        self,
        method: str,
        path: str,
        *,
        query: Iterable[tuple[str, str]] = (),
        body: Any = None,
        content_type: str = JSON,
        accept: str = JSON,
        deadlines: Deadlines,
        pool: Pool,
    ) -> AsyncIterator[HttpResponse]:
        """A streamed answer (a watch): its body is read by the caller, chunk by chunk."""
        async with AsyncExitStack() as exchange:
            try:
                request = self._http_request(
                    method,
                    path,
                    query,
                    body,
                    content_type,
                    accept,
                    await self._config.authorization_header(),
                    deadlines,
                    pool,
                )
                response = await exchange.enter_async_context(self._transport.send(request))
            except (ConnectionFailed, TimeoutError, OSError) as error:
                raise self._unsent(method, path, error) from error
            self._record(method, str(response.status))
            try:
                if response.status >= 300:
                    raise await error_of_answer(response, method, path)
                yield response
            except ConnectionFailed as error:
                raise TransportError(f"{method} {path}: {error}") from error

    def _record(self, method: str, code: str) -> None:
        if self._observe is not None:
            self._observe(method, code)

    def _unsent(self, method: str, path: str, error: BaseException) -> TransportError:
        """A request that got no answer: counted as ``<error>``, told as a TransportError."""
        self._record(method, "<error>")
        return TransportError(f"{method} {path}: {error or type(error).__name__}")

    async def _exchange(
        self,
        method: str,
        path: str,
        query: Iterable[tuple[str, str]],
        body: Any,
        content_type: str,
        accept: str,
        timeout: float | None,
        pool: Pool,
    ) -> bytes:
        """One whole exchange: the answer's body, read at once; a non-2xx answer raises.

        The same steps as :meth:`_open` without its two context-manager layers: every write
        of an action goes through here, and those layers cost more than the rest of it.
        """
        deadlines = Deadlines(timeout or self.timeouts.request, self.timeouts.connect)
        authorization = await self._config.authorization_header()
        request = self._http_request(
            method, path, query, body, content_type, accept, authorization, deadlines, pool
        )
        sent = False
        try:
            async with self._transport.send(request) as response:
                sent = True
                status = response.status
                self._record(method, str(status))
                if status >= 300:
                    raise await error_of_answer(response, method, path)
                try:
                    return await response.read()
                except ConnectionFailed as error:
                    raise TransportError(f"{method} {path}: reading the body failed") from error
        except (ConnectionFailed, TimeoutError, OSError) as error:
            if sent:
                raise TransportError(f"{method} {path}: {error}") from error
            raise self._unsent(method, path, error) from error

    async def request(
        self,
        method: str,
        path: str,
        *,
        query: Iterable[tuple[str, str]] = (),
        body: Any = None,
        content_type: str = JSON,
        accept: str = JSON,
        timeout: float | None = None,
        pool: Pool = "requests",
    ) -> dict[str, Any]:
        """One request; returns the decoded JSON body ({} when empty). Raises KubeError."""
        raw = await self._exchange(method, path, query, body, content_type, accept, timeout, pool)
        if not raw:
            return {}
        try:
            decoded = decode_json(raw)
        except json.JSONDecodeError as error:
            raise TransportError(f"{method} {path}: answer is not JSON") from error
        return decoded if isinstance(decoded, dict) else {"items": decoded}

    async def send(
        self,
        method: str,
        path: str,
        *,
        body: Any = None,
        content_type: str = JSON,
        timeout: float | None = None,
        pool: Pool = "requests",
    ) -> None:
        """One request whose answer nobody reads (a delete, an Event): its body is not
        decoded. Raises KubeError like :meth:`request`."""
        await self._exchange(method, path, (), body, content_type, JSON, timeout, pool)

    async def stream(
        self,
        path: str,
        *,
        query: Iterable[tuple[str, str]] = (),
        accept: str = JSON,
        idle_timeout: float | None = None,
        decode_if: EventFilter | None = None,
        before_reading: Callable[[], Awaitable[None]] | None = None,
    ) -> AsyncGenerator[dict[str, Any], None]:
        """Open a watch and yield each event; a silence over ``idle_timeout`` ends it.

        The events are read as the server sent them, JSON lines or protobuf frames; those
        refused by ``decode_if`` are dropped undecoded (:func:`watch_events`). Once the
        server has answered, ``before_reading`` (if given) is awaited before anything of the
        body is read: meanwhile the server streams into the connection's buffers and its
        owner decides what ``decode_if`` refuses. Ends normally when the server closes the
        stream; raises TransportError when the connection breaks or stays silent too long,
        and KubeError for a non-2xx answer.
        """
        idle = idle_timeout or self.timeouts.watch_idle
        async with self._open(
            "GET",
            path,
            query=query,
            accept=accept,
            deadlines=Deadlines(None, self.timeouts.connect, idle),
            pool="watches",
        ) as response:
            if before_reading is not None:
                await before_reading()
            async for event in watch_events(response, what=f"watch {path}", decode_if=decode_if):
                yield event


class StreamedAnswer(Protocol):
    """What the readers need of an answer (a transport's response; aiohttp's fits too)."""

    @property
    def content_type(self) -> str: ...

    @property
    def content(self) -> ResponseBody: ...


def is_added_event(raw: bytes | bytearray, start: int = 0) -> bool:
    """True when the raw event at ``start`` (a JSON line or a protobuf frame) is an ADDED."""
    return is_added_frame(raw, start) or is_added_line(raw, start)


def watch_events(
    response: StreamedAnswer, *, what: str, decode_if: EventFilter | None = None
) -> AsyncIterator[dict[str, Any]]:
    """The events of a watch answer, read as the server encoded them."""
    if response.content_type == PROTOBUF:
        return protobuf_events(response.content, what=what, decode_if=decode_if)
    return json_lines(response.content, what=what, decode_if=decode_if)
