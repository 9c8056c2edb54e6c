"""``sleep_or_wake``: woken early, or not; and a cancel of the caller is never swallowed.

The last case is why the helper exists: the loops that sleep-but-can-be-woken used to wind
their two helper tasks down under ``suppress(CancelledError)``, which also swallowed a cancel
of the loop itself that arrived in that moment; shutdown then waited for the loop forever.
The test cancels the caller at every point of the wind-down in turn. On the real clock the
helper waits under one timeout instead: the same answers, checked the same way in
``test_clock.py`` (the fast tier's only home of the real clock).
"""

from __future__ import annotations

import asyncio

import pytest

from lifecycle_controller.machinery.tasks import sleep_or_wake
from tests.doubles.fakeclock import FakeClock


async def _ticks(n: int) -> None:
    for _ in range(n):
        await asyncio.sleep(0)


async def test_returns_false_when_the_time_is_up() -> None:
    clock = FakeClock()
    wake = asyncio.Event()
    task = asyncio.create_task(sleep_or_wake(clock, 5.0, wake))
    await _ticks(3)
    assert not task.done()
    await clock.advance(5.0)
    assert await task is False


async def test_returns_true_when_woken_before_the_time_is_up() -> None:
    clock = FakeClock()
    wake = asyncio.Event()
    task = asyncio.create_task(sleep_or_wake(clock, 5.0, wake))
    await _ticks(3)
    wake.set()
    assert await task is True
    assert clock.monotonic() == pytest.approx(FakeClock().monotonic())


async def test_an_event_already_set_returns_at_once() -> None:
    wake = asyncio.Event()
    wake.set()
    assert await sleep_or_wake(FakeClock(), 5.0, wake) is True


@pytest.mark.parametrize("ticks_before_cancel", range(8))
async def test_a_cancel_at_any_moment_of_waking_is_raised(ticks_before_cancel: int) -> None:
    clock = FakeClock()
    wake = asyncio.Event()
    task = asyncio.create_task(sleep_or_wake(clock, 5.0, wake))
    await _ticks(2)
    wake.set()
    await _ticks(ticks_before_cancel)
    if task.done():
        assert task.result() is True  # woken before the cancel: nothing to swallow
        return
    task.cancel()
    with pytest.raises(asyncio.CancelledError):
        await task


class _BrokenClock(FakeClock):
    async def sleep(self, seconds: float) -> None:
        raise RuntimeError("clock is broken")


async def test_a_failing_clock_is_raised() -> None:
    with pytest.raises(RuntimeError, match="clock is broken"):
        await sleep_or_wake(_BrokenClock(), 1.0, asyncio.Event())
