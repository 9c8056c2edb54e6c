"""Small asyncio helpers shared by every long-running loop."""

from __future__ import annotations

import asyncio

__all__ = ["being_cancelled", "cancel_and_wait"]


def being_cancelled() -> bool:
    """True when the current task has a pending cancellation request.

    Loops that catch broad exceptions use it to tell "I am being cancelled" (re-raise) from
    a ``CancelledError`` that leaked out of something they awaited (a failure like any other).
    """
    task = asyncio.current_task()
    return task is not None and task.cancelling() > 0


async def cancel_and_wait(task: asyncio.Task[None]) -> None:
    """Cancel ``task`` and wait until it has finished, whatever it raised."""
    task.cancel()
    await asyncio.gather(task, return_exceptions=True)
