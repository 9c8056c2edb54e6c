"""A webhook receiver on loopback for the notification tests (docs/notifications.md).

The fixture ``receiver`` (registered in tests/integration/conftest.py) is an aiohttp server on
127.0.0.1 that records every document POSTed to it and can answer with chosen statuses first
or hang, so tests see what the controller sends and how it retries.
"""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from dataclasses import dataclass, field
from typing import Any

import pytest
from aiohttp import web

from tests.integration.support import eventually
from tests.loopback import served

__all__ = ["Receiver", "receiver", "wait_documents"]


@dataclass
class Receiver:
    """A webhook receiver: what it got (200 answers only), and how it answers."""

    url: str = ""
    received: list[dict[str, Any]] = field(default_factory=list)
    requests: int = 0
    #: Statuses answered first, in order, before 200s.
    statuses: list[int] = field(default_factory=list)
    #: While set to an unset Event, every request waits for it (a hung receiver).
    hang: asyncio.Event | None = None

    def reasons(self) -> list[str]:
        return [str(document["reason"]) for document in self.received]


@pytest.fixture
async def receiver() -> AsyncIterator[Receiver]:
    state = Receiver()

    async def hook(request: web.Request) -> web.Response:
        state.requests += 1
        if state.hang is not None:
            await state.hang.wait()
        status = state.statuses.pop(0) if state.statuses else 200
        if status == 200:
            state.received.append(await request.json())
        return web.Response(status=status)

    app = web.Application()
    app.router.add_post("/hook", hook)
    async with served(app, shutdown_timeout=1.0) as base:
        state.url = f"{base}/hook"
        yield state
        if state.hang is not None:
            state.hang.set()


async def wait_documents(receiver: Receiver, count: int, *, within: float) -> None:
    async def enough() -> bool:
        return len(receiver.received) >= count

    await eventually(enough, within=within, interval=0.1, what=f"{count} notification(s)")
