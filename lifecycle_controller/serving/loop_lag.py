"""The event-loop lag probe behind ``lifecycle_event_loop_lag_seconds``.

One asyncio loop runs every informer, worker and probe, so a callback that holds it (a big
decode, a slow collector) delays everything else. The probe sleeps a short interval over and
over and records how late each wake-up was. A stall shows only if it covers a wake-up, so the
interval bounds how short a stall can go unseen: at ten wake-ups a second a stall of 100 ms
or more is always seen, and the probe costs nothing measurable.
"""

from __future__ import annotations

import math

from prometheus_client import Histogram

from lifecycle_controller.machinery.clock import Clock

__all__ = ["LOOP_LAG_INTERVAL", "run_loop_lag_monitor"]

#: Seconds between the probe's wake-ups.
LOOP_LAG_INTERVAL = 0.1


async def run_loop_lag_monitor(
    histogram: Histogram, clock: Clock, *, interval: float = LOOP_LAG_INTERVAL
) -> None:
    """Sleep ``interval`` on ``clock`` forever and observe how late each wake-up was.

    Run as a task; cancel it to stop.
    """
    if not (interval > 0 and math.isfinite(interval)):
        raise ValueError(f"interval must be a positive number of seconds, got {interval}")
    while True:
        started = clock.monotonic()
        await clock.sleep(interval)
        histogram.observe(max(0.0, clock.monotonic() - started - interval))
