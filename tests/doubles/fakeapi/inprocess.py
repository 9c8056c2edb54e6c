"""The in-process transport: the unit tests' seam below ``KubeClient``, no socket involved.

:class:`InProcessTransport` keeps the contract of
:class:`~lifecycle_controller.kube.transport.Transport` (httpx's ``MockTransport`` is the
model): each request goes straight to :meth:`FakeApiServer.answer`, and the answer comes
back as a response whose body the client reads as it would read one off the network, a
watch chunk by chunk while its events happen. The timeouts hold as on a connection (the
whole exchange, the wait for the next chunk of a watch), and what would fail below HTTP
(a stopped server, a timeout) is raised as ``ConnectionFailed``.

Nothing waits on I/O, so everything a request causes is done once the event loop has run
the tasks it made runnable: a test can wait for a condition by settling the loop.
"""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from typing import TYPE_CHECKING

from yarl import URL

from lifecycle_controller.kube.transport import ConnectionFailed, HttpRequest
from tests.doubles.fakeapi.answers import Answer

if TYPE_CHECKING:
    from tests.doubles.fakeapi.server import FakeApiServer

__all__ = ["InProcessTransport"]


class _Body:
    """An answer's body: whole at once, or a watch's chunks as they are sent."""

    def __init__(self, answer: Answer, idle: float | None) -> None:
        self._answer = answer
        self._idle = idle
        self._whole: bytes | None = answer.body

    async def readany(self) -> bytes:
        if self._answer.stream is None:
            whole, self._whole = self._whole, None
            return whole or b""
        try:
            async with asyncio.timeout(self._idle):
                return await anext(self._answer.stream)
        except StopAsyncIteration:
            return b""
        except TimeoutError as error:
            raise ConnectionFailed("Timeout on reading data from socket") from error

    async def rest(self, seconds: float) -> None:
        """Nothing waits in a socket here (the chunks are handed over one by one): only a
        yield to the loop, so no test waits in real time."""
        del seconds
        await asyncio.sleep(0)


class _Response:
    """An :class:`Answer` in the shape of ``HttpResponse``."""

    def __init__(self, answer: Answer, idle: float | None) -> None:
        self._answer = answer
        self.content = _Body(answer, idle)

    @property
    def status(self) -> int:
        return self._answer.status

    @property
    def content_type(self) -> str:
        return self._answer.content_type

    def header(self, name: str) -> str | None:
        lowered = name.lower()
        return next((v for k, v in self._answer.headers.items() if k.lower() == lowered), None)

    async def read(self) -> bytes:
        chunks = []
        while chunk := await self.content.readany():
            chunks.append(chunk)
        return b"".join(chunks)


class InProcessTransport:
    """Hands every request to ``server`` (see the module docstring)."""

    def __init__(self, server: FakeApiServer) -> None:
        self._server = server
        self._closed = False

    @asynccontextmanager
    async def send(self, request: HttpRequest) -> AsyncIterator[_Response]:
        if self._closed:
            raise ConnectionFailed("the transport is closed")
        if not self._server.serving:
            raise ConnectionFailed("Cannot connect to the fake API server: it is stopped")
        url = URL(request.url, encoded=True)
        try:
            async with asyncio.timeout(request.deadlines.total):
                answer = await self._server.answer(
                    request.method,
                    url.path,
                    url.query.items(),
                    request.headers,
                    request.body or b"",
                )
        except TimeoutError as error:
            raise ConnectionFailed("TimeoutError") from error
        try:
            yield _Response(answer, request.deadlines.idle)
        finally:
            if answer.stream is not None:
                await answer.stream.aclose()

    async def close(self) -> None:
        self._closed = True
