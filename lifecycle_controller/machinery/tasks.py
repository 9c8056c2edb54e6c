"""Small asyncio helpers shared by every long-running loop."""

from __future__ import annotations

import asyncio
import math
from collections.abc import Coroutine
from typing import Any

from lifecycle_controller.machinery.clock import Clock, RealClock

__all__ = ["being_cancelled", "cancel_and_wait", "run_or_wake", "sleep_or_wake"]


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


async def sleep_or_wake(clock: Clock, seconds: float, wake: asyncio.Event) -> bool:
    """Sleep ``seconds`` on ``clock``, or less when ``wake`` is set; True when woken.

    Every loop that sleeps but can be woken (a backoff that learns the API server answers,
    rediscovery on a CRD change, the work queue's add-after timer) waits here
    (:func:`run_or_wake`). A failing clock is raised rather than spun on.

    On the real clock the sleep is the event loop's own timer, so it waits without helper
    tasks (:func:`_sleep_or_wake_on_loop`).
    """
    if type(clock) is RealClock:
        return await _sleep_or_wake_on_loop(seconds, wake)
    return await run_or_wake(clock.sleep(seconds), wake)


async def _sleep_or_wake_on_loop(seconds: float, wake: asyncio.Event) -> bool:
    """:func:`sleep_or_wake` on the loop's clock: the wait for ``wake`` under one timeout.

    The same answers as :func:`run_or_wake` over ``asyncio.sleep``, for about half the CPU
    of each wake-up and fewer turns of the loop: the general path starts two helper tasks
    and waits for them twice, and on an idle controller the timers that sleep here (the
    event-loop lag probe, the work queue's heartbeat, rediscovery) were a third of what woke
    the process (docs/performance.md#what-wakes-an-idle-controller). ``asyncio.timeout``
    tells its own cancellation from one of the caller, which is raised, never swallowed.
    """
    if wake.is_set():
        return True
    delay = None if seconds == math.inf else max(0.0, seconds)
    try:
        async with asyncio.timeout(delay):
            await wake.wait()
    except TimeoutError:
        return wake.is_set()  # set in the same turn as the timeout fired: woken all the same
    return True


async def run_or_wake(work: Coroutine[Any, Any, object], wake: asyncio.Event) -> bool:
    """Run ``work`` until it ends, or until ``wake`` is set, which cancels it; True when woken
    (an informer listing again from scratch when what it keeps changed, a sleep cut short).

    One implementation gets cancellation right: a cancel of the caller that arrives while the
    two helper tasks wind down is raised, never swallowed. (Awaiting each cancelled helper
    under ``suppress(CancelledError)`` cannot tell the helper's own cancellation from the
    caller's, and a swallowed cancel leaves a loop running that shutdown waits for.) What
    ``work`` raised is raised.
    """
    if wake.is_set():
        work.close()
        return True
    runner = asyncio.ensure_future(work)
    woken = asyncio.ensure_future(wake.wait())
    helpers = {runner, woken}
    try:
        await asyncio.wait(helpers, return_when=asyncio.FIRST_COMPLETED)
    finally:
        for task in helpers:
            task.cancel()
        # Raises CancelledError only when this task is cancelled; the helpers' own
        # cancellations stay in them.
        await asyncio.wait(helpers)
    if runner.done() and not runner.cancelled() and runner.exception() is not None:
        runner.result()
    return woken.done() and not woken.cancelled()
