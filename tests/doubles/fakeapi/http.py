"""The fake API server on a loopback port, for the tests of the HTTP layer itself.

Most unit tests reach the fake through the in-process transport (:mod:`.inprocess`). A few
test what only real HTTP shows (kubeconfigs read by the real loader, connection pools,
proxies, a server that went away): for them :class:`LoopbackSite` serves the same handler
as an aiohttp app on ``127.0.0.1``, streaming a watch's chunks as they come.
"""

from __future__ import annotations

import contextlib
from collections.abc import Awaitable, Callable, Iterable, Mapping

from aiohttp import web

from tests.doubles.fakeapi.answers import Answer

__all__ = ["Handler", "LoopbackSite"]

#: What the fake answers with: (method, path, query, headers, body) to an Answer.
Handler = Callable[
    [str, str, Iterable[tuple[str, str]], Mapping[str, str], bytes], Awaitable[Answer]
]


class LoopbackSite:
    """Serves ``handler`` on a free loopback port between :meth:`start` and :meth:`stop`."""

    def __init__(self, handler: Handler) -> None:
        self._handler = handler
        self._runner: web.AppRunner | None = None

    async def start(self) -> str:
        """Start serving; return the base URL (``http://127.0.0.1:PORT``)."""
        app = web.Application()
        app.router.add_route("*", "/{tail:.*}", self._serve)
        self._runner = web.AppRunner(app, access_log=None, shutdown_timeout=0.5)
        await self._runner.setup()
        await web.TCPSite(self._runner, "127.0.0.1", 0).start()
        return f"http://127.0.0.1:{self._runner.addresses[0][1]}"

    async def stop(self) -> None:
        runner, self._runner = self._runner, None
        if runner is not None:
            await runner.cleanup()

    async def _serve(self, request: web.Request) -> web.StreamResponse:
        answer = await self._handler(
            request.method,
            request.path,
            request.query.items(),
            request.headers,
            await request.read(),
        )
        if answer.stream is None:
            return web.Response(status=answer.status, headers=answer.headers, body=answer.body)
        response = web.StreamResponse(status=answer.status, headers=answer.headers)
        await response.prepare(request)
        try:
            async for chunk in answer.stream:
                await response.write(chunk)
        finally:
            await answer.stream.aclose()
        with contextlib.suppress(ConnectionResetError):
            await response.write_eof()
        return response
