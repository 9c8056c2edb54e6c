"""What the fake API server answers, before any transport carries it.

The fake's handler turns a request into an :class:`Answer`: a status, headers and either a
whole body or, for a watch, a :class:`WatchStream` of chunks sent as events happen. Two
carriers deliver an answer: the in-process transport (:mod:`.inprocess`, what the unit
tests use) and the loopback HTTP server (:mod:`.http`, for tests of the HTTP layer itself).
"""

from __future__ import annotations

import asyncio
import json
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from tests.doubles.fakeapi.store import Store, Watcher, WatchEvent

__all__ = ["JSON", "Answer", "WatchStream", "json_answer"]

JSON = "application/json"


@dataclass
class Answer:
    """One answer: ``stream`` is set for a watch (its body is then sent as it comes)."""

    status: int
    headers: dict[str, str]
    body: bytes = b""
    stream: WatchStream | None = None

    @property
    def content_type(self) -> str:
        return self.headers.get("Content-Type", "").partition(";")[0].strip()


def json_answer(
    document: Any, *, status: int = 200, headers: dict[str, str] | None = None
) -> Answer:
    return Answer(status, {"Content-Type": JSON, **(headers or {})}, json.dumps(document).encode())


@dataclass(eq=False)
class WatchStream:
    """The lines of one open watch, one chunk per event, until the watch ends.

    It ends when the store sends ``None`` (the fake closed its watches, or after an ERROR)
    or ``timeoutSeconds`` pass; :meth:`aclose` (called by whoever carries it, whether or
    not it was read to the end) unregisters the watcher.
    """

    store: Store
    watcher: Watcher
    render: Callable[[WatchEvent | dict[str, Any]], dict[str, Any] | None]
    deadline: float | None = None
    _ended: bool = field(default=False, repr=False)

    def __aiter__(self) -> WatchStream:
        return self

    async def __anext__(self) -> bytes:
        loop = asyncio.get_running_loop()
        while not self._ended:
            remaining = None if self.deadline is None else self.deadline - loop.time()
            if remaining is not None and remaining <= 0:
                break
            try:
                async with asyncio.timeout(remaining):
                    item = await self.watcher.queue.get()
            except TimeoutError:
                break
            if item is None:
                break
            line = self.render(item)
            if line is not None:
                return json.dumps(line).encode() + b"\n"
        await self.aclose()
        raise StopAsyncIteration

    async def aclose(self) -> None:
        self._ended = True
        self.store.unwatch(self.watcher)
