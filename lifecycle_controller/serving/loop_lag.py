"""The event-loop lag probe behind ``lifecycle_event_loop_lag_seconds``.

One asyncio loop runs every informer, worker and probe, so a callback that holds it (a big
decode, a slow collector) delays everything else. The probe sleeps a short interval over and
over and records how late each wake-up was. A stall shows only if it covers a wake-up, so the
interval bounds how short a stall can go unseen: at ten wake-ups a second a stall of 100 ms
or more is always seen.

Ten wake-ups a second are not free, though: on an idle controller they were most of its CPU
(about 0.2 % of a core of the 0.27 % it spent doing nothing, 20,000 objects, on the
development machine; 0.067 % with this). Stalls come from work (lists, bursts of events and
actions), so the probe samples fast only while there is some: while ``busy()`` holds (the
caller's test: keys queued or being reconciled, Events pending, a first list running) or
while ``activity`` was set since the last wake-up (the caller sets it for every watch event
and queued key). With neither, it sleeps ``idle_interval`` (still recording how late that
wake-up was, so a long stall while idle shows too) and is woken early by ``activity``, so
the first samples of a burst are fast ones. The idle interval is 10 s: at 2 s its thirty
wake-ups a minute were still the largest share of an idle controller's loop turns, and a
stall comes with work, which wakes the probe anyway.
"""

from __future__ import annotations

import asyncio
import math
from collections.abc import Callable

from prometheus_client import Histogram

from lifecycle_controller.machinery.clock import Clock
from lifecycle_controller.machinery.tasks import sleep_or_wake

__all__ = ["LOOP_LAG_IDLE_INTERVAL", "LOOP_LAG_INTERVAL", "run_loop_lag_monitor"]

#: Seconds between the probe's wake-ups while there is work.
LOOP_LAG_INTERVAL = 0.1
#: Seconds between the probe's wake-ups while there is none.
LOOP_LAG_IDLE_INTERVAL = 10.0


def _always() -> bool:
    return True


async def run_loop_lag_monitor(
    histogram: Histogram,
    clock: Clock,
    *,
    interval: float = LOOP_LAG_INTERVAL,
    idle_interval: float = LOOP_LAG_IDLE_INTERVAL,
    busy: Callable[[], bool] = _always,
    activity: asyncio.Event | None = None,
) -> None:
    """Sleep on ``clock`` forever and observe how late each wake-up was: ``interval`` while
    ``busy()`` or ``activity`` was set since the last wake-up (which clears it), else
    ``idle_interval`` or until ``activity`` is set. The defaults sample fast always.

    Run as a task; cancel it to stop.
    """
    for name, value in (("interval", interval), ("idle_interval", idle_interval)):
        if not (value > 0 and math.isfinite(value)):
            raise ValueError(f"{name} must be a positive number of seconds, got {value}")
    woken = activity if activity is not None else asyncio.Event()
    while True:
        started = clock.monotonic()
        if woken.is_set() or busy():
            woken.clear()
            await clock.sleep(interval)
            histogram.observe(max(0.0, clock.monotonic() - started - interval))
        elif not await sleep_or_wake(clock, idle_interval, woken):
            histogram.observe(max(0.0, clock.monotonic() - started - idle_interval))
