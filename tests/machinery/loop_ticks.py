"""Counting event-loop iterations, to show that code under test lets the loop run.

``async with LoopTicks() as ticks:`` starts a task that adds one to ``ticks.count`` on every
iteration of the loop; a test reads ``count`` before and after a step to see whether other
tasks got a turn in between.
"""

from __future__ import annotations

import asyncio
import contextlib


class LoopTicks:
    """A background task counting the loop's iterations while the block runs."""

    def __init__(self) -> None:
        self.count = 0
        self._task: asyncio.Task[None] | None = None

    async def _tick(self) -> None:
        while True:
            self.count += 1
            await asyncio.sleep(0)

    async def __aenter__(self) -> LoopTicks:
        self._task = asyncio.create_task(self._tick())
        await asyncio.sleep(0)
        return self

    async def __aexit__(self, *exc: object) -> None:
        assert self._task is not None
        self._task.cancel()
        with contextlib.suppress(asyncio.CancelledError):
            await self._task
