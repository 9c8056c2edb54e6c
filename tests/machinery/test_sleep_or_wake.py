"""``sleep_or_wake``: woken early, or not; and a cancel of the caller is never swallowed.

The last case is why the helper exists: the loops that sleep-but-can-be-woken used to wind
their two helper tasks down under ``suppress(CancelledError)``, which also swallowed a cancel
of the loop itself that arrived in that moment; shutdown then waited for the loop forever.
The test cancels the caller at every point of the wind-down in turn. On the real clock the
helper waits under one timeout instead: the same answers, checked the same way.
"""

from __future__ import annotations

import asyncio
import math

import pytest

from lifecycle_controller.machinery.clock import RealClock
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


# --- on the real clock: the loop's own timer, no helper tasks -------------------------------


async def test_on_the_real_clock_the_time_up_returns_false() -> None:
    assert await sleep_or_wake(RealClock(), 0.0, asyncio.Event()) is False
    assert await sleep_or_wake(RealClock(), -1.0, asyncio.Event()) is False


@pytest.mark.parametrize("seconds", [5.0, math.inf])
async def test_on_the_real_clock_a_wake_returns_true_before_the_time_is_up(seconds: float) -> None:
    wake = asyncio.Event()
    task = asyncio.create_task(sleep_or_wake(RealClock(), seconds, wake))
    await _ticks(2)
    assert not task.done()
    wake.set()
    assert await task is True


async def test_on_the_real_clock_an_event_already_set_returns_at_once() -> None:
    wake = asyncio.Event()
    wake.set()
    assert await sleep_or_wake(RealClock(), 5.0, wake) is True


async def test_on_the_real_clock_a_wake_in_the_turn_the_time_is_up_counts_as_woken() -> None:
    """The wake-up and the timeout land in the same loop turn: woken, as the event says."""
    wake = asyncio.Event()
    asyncio.get_running_loop().call_soon(wake.set)  # runs before the zero timeout fires
    assert await sleep_or_wake(RealClock(), 0.0, wake) is True


async def test_on_the_real_clock_no_helper_task_is_started() -> None:
    wake = asyncio.Event()
    before = len(asyncio.all_tasks())
    task = asyncio.create_task(sleep_or_wake(RealClock(), 5.0, wake))
    await _ticks(2)
    assert len(asyncio.all_tasks()) == before + 1  # the sleeper alone
    wake.set()
    await task


@pytest.mark.parametrize("ticks_before_cancel", range(4))
async def test_on_the_real_clock_a_cancel_at_any_moment_of_waking_is_raised(
    ticks_before_cancel: int,
) -> None:
    wake = asyncio.Event()
    task = asyncio.create_task(sleep_or_wake(RealClock(), 5.0, wake))
    await _ticks(2)
    wake.set()
    await _ticks(ticks_before_cancel)
    if task.done():
        assert task.result() is True
        return
    task.cancel()
    with pytest.raises(asyncio.CancelledError):
        await task


async def test_on_the_real_clock_a_cancel_when_the_time_is_up_is_raised() -> None:
    """The caller is cancelled in the turn its timeout fires: the cancel wins, it is never
    taken for the timeout's own."""
    task = asyncio.create_task(sleep_or_wake(RealClock(), 0.0, asyncio.Event()))
    await asyncio.sleep(0)  # inside the wait, its zero timeout queued
    task.cancel()
    with pytest.raises(asyncio.CancelledError):
        await task
