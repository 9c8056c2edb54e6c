"""An aiohttp application served on loopback for one test (a webhook receiver, a proxy
stand-in, an endpoint that misbehaves on purpose); not a test module."""

from __future__ import annotations

from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from typing import Any

from aiohttp import web

__all__ = ["served"]


@asynccontextmanager
async def served(app: web.Application, **runner_options: Any) -> AsyncIterator[str]:
    """Serve ``app`` on a free loopback port; yields its base URL (``http://127.0.0.1:N``)."""
    runner = web.AppRunner(app, **runner_options)
    await runner.setup()
    try:
        site = web.TCPSite(runner, "127.0.0.1", 0)
        await site.start()
        yield f"http://127.0.0.1:{runner.addresses[0][1]}"
    finally:
        await runner.cleanup()
