"""The clock protocol, the real clock and the hand-driven FakeClock."""

from __future__ import annotations

import asyncio
import gc
import math
import time

import pytest

from lifecycle_controller.machinery.clock import Clock, RealClock, thread_cpu_ns
from lifecycle_controller.machinery.tasks import sleep_or_wake
from tests.doubles.fakeclock import (
    DEFAULT_START_MONOTONIC,
    DEFAULT_START_NS,
    FakeClock,
)

pytestmark = [pytest.mark.timeout(5), pytest.mark.usefixtures("no_leaked_tasks")]


class TestRealClock:
    def test_satisfies_the_protocol(self) -> None:
        assert isinstance(RealClock(), Clock)

    def test_now_ns_is_wall_clock_utc_nanoseconds(self) -> None:
        before = time.time_ns()
        now = RealClock().now_ns()
        after = time.time_ns()
        assert isinstance(now, int)
        assert before <= now <= after

    def test_monotonic_never_goes_backwards(self) -> None:
        clock = RealClock()
        readings = [clock.monotonic() for _ in range(100)]
        assert readings == sorted(readings)

    def test_monotonic_agrees_with_the_event_loop_time(self) -> None:
        async def main() -> float:
            return asyncio.get_running_loop().time() - RealClock().monotonic()

        assert abs(asyncio.run(main())) < 0.5

    async def test_sleep_zero_and_negative_return_at_once(self) -> None:
        clock = RealClock()
        async with asyncio.timeout(1):
            await clock.sleep(0)
            await clock.sleep(-5)


class TestFakeClock:
    def test_satisfies_the_protocol_and_starts_at_fixed_times(self) -> None:
        clock = FakeClock()
        assert isinstance(clock, Clock)
        assert clock.now_ns() == DEFAULT_START_NS
        assert clock.monotonic() == DEFAULT_START_MONOTONIC

    def test_custom_start(self) -> None:
        clock = FakeClock(start_ns=5, start_monotonic=7.5)
        assert (clock.now_ns(), clock.monotonic()) == (5, 7.5)

    async def test_time_stands_still_until_advanced(self, clock: FakeClock) -> None:
        await asyncio.sleep(0)
        assert clock.monotonic() == DEFAULT_START_MONOTONIC
        await clock.advance(1.5)
        assert clock.monotonic() == DEFAULT_START_MONOTONIC + 1.5
        assert clock.now_ns() == DEFAULT_START_NS + 1_500_000_000

    async def test_sleep_blocks_until_the_deadline(self, clock: FakeClock) -> None:
        woke: list[float] = []

        async def sleeper() -> None:
            await clock.sleep(5)
            woke.append(clock.monotonic())

        task = asyncio.create_task(sleeper())
        await clock.advance(4.999)
        assert woke == []
        await clock.advance(0.001)
        assert woke == [pytest.approx(DEFAULT_START_MONOTONIC + 5)]
        await task

    async def test_sleepers_wake_in_deadline_order_at_their_deadline(
        self, clock: FakeClock
    ) -> None:
        woke: list[tuple[str, float]] = []

        async def sleeper(name: str, seconds: float) -> None:
            await clock.sleep(seconds)
            woke.append((name, clock.monotonic() - DEFAULT_START_MONOTONIC))

        tasks = [asyncio.create_task(sleeper(n, s)) for n, s in [("c", 3), ("a", 1), ("b", 2)]]
        await clock.advance(10)
        assert woke == [("a", 1), ("b", 2), ("c", 3)]
        assert clock.monotonic() == DEFAULT_START_MONOTONIC + 10
        await asyncio.gather(*tasks)

    async def test_advance_steps_so_rearming_loops_run_each_period(self, clock: FakeClock) -> None:
        ticks: list[float] = []

        async def ticker() -> None:
            while True:
                await clock.sleep(10)
                ticks.append(clock.monotonic() - DEFAULT_START_MONOTONIC)

        task = asyncio.create_task(ticker())
        await clock.advance(100)
        assert ticks == [pytest.approx(10.0 * i) for i in range(1, 11)]
        task.cancel()
        with pytest.raises(asyncio.CancelledError):
            await task

    async def test_cancelled_sleeper_is_forgotten(self, clock: FakeClock) -> None:
        task = asyncio.create_task(clock.sleep(5))
        await clock.settle()
        assert clock.sleeper_deadlines() == [DEFAULT_START_MONOTONIC + 5]
        task.cancel()
        with pytest.raises(asyncio.CancelledError):
            await task
        assert clock.sleeper_deadlines() == []
        assert clock.next_deadline() is None
        await clock.advance(10)

    async def test_sleep_zero_does_not_block(self, clock: FakeClock) -> None:
        async with asyncio.timeout(1):
            await clock.sleep(0)
            await clock.sleep(-1)
        assert clock.sleeper_deadlines() == []

    async def test_advance_to_next(self, clock: FakeClock) -> None:
        assert await clock.advance_to_next() is None
        task = asyncio.create_task(clock.sleep(7))
        await clock.settle()
        assert clock.next_deadline() == DEFAULT_START_MONOTONIC + 7
        assert await clock.advance_to_next() == DEFAULT_START_MONOTONIC + 7
        assert clock.monotonic() == DEFAULT_START_MONOTONIC + 7
        assert task.done()

    async def test_float_rounding_does_not_strand_a_sleeper(self, clock: FakeClock) -> None:
        # now + (t - now) is not always t in floating point; the sleeper must still wake
        # when the test advances to exactly t.
        await clock.advance(0.1)
        target = clock.monotonic() + 0.2
        task = asyncio.create_task(clock.sleep(target - clock.monotonic()))
        await clock.advance(0.2)
        assert task.done()

    async def test_cannot_go_backwards(self, clock: FakeClock) -> None:
        with pytest.raises(ValueError, match="backwards"):
            await clock.advance(-1)

    async def test_jump_wall_moves_only_the_wall_clock(self, clock: FakeClock) -> None:
        task = asyncio.create_task(clock.sleep(1))
        clock.jump_wall(-3600)
        assert clock.now_ns() == DEFAULT_START_NS - 3600 * 10**9
        assert clock.monotonic() == DEFAULT_START_MONOTONIC
        await clock.settle()
        assert not task.done()
        await clock.advance(1)
        assert task.done()
        assert clock.now_ns() == DEFAULT_START_NS - 3599 * 10**9

    async def test_settle_runs_chains_of_ready_tasks(self, clock: FakeClock) -> None:
        events: list[int] = []

        async def chain(depth: int) -> None:
            events.append(depth)
            if depth < 50:
                await asyncio.create_task(chain(depth + 1))

        task = asyncio.create_task(chain(0))
        await clock.settle()
        assert task.done()
        assert events == list(range(51))

    async def test_settle_reports_a_busy_loop(self, clock: FakeClock) -> None:
        async def spin() -> None:
            while True:  # noqa: ASYNC110 (a deliberate busy loop)
                await asyncio.sleep(0)

        task = asyncio.create_task(spin())
        with pytest.raises(RuntimeError, match="busy"):
            await clock.settle()
        task.cancel()
        with pytest.raises(asyncio.CancelledError):
            await task


def test_the_cpu_stopwatch_leaves_out_the_garbage_collectors_passes() -> None:
    """A full collection over a large heap (more than a condition's whole time budget in a
    controller holding tens of thousands of objects) is not blamed on what it interrupted."""
    heap = [[index] for index in range(400_000)]  # containers the collector must walk
    raw_started, started = time.thread_time_ns(), thread_cpu_ns()
    gc.collect()
    raw, timed = time.thread_time_ns() - raw_started, thread_cpu_ns() - started
    assert len(heap) == 400_000
    assert raw > 0
    assert timed < raw / 2


# --- sleep_or_wake on the real clock: the loop's own timer, no helper tasks ----------------


async def test_on_the_real_clock_the_time_up_returns_false() -> None:
    assert await sleep_or_wake(RealClock(), 0.0, asyncio.Event()) is False
    assert await sleep_or_wake(RealClock(), -1.0, asyncio.Event()) is False


@pytest.mark.parametrize("seconds", [5.0, math.inf])
async def test_on_the_real_clock_a_wake_returns_true_before_the_time_is_up(seconds: float) -> None:
    wake = asyncio.Event()
    task = asyncio.create_task(sleep_or_wake(RealClock(), seconds, wake))
    await _turns(2)
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
    await _turns(2)
    assert len(asyncio.all_tasks()) == before + 1  # the sleeper alone
    wake.set()
    await task


@pytest.mark.parametrize("ticks_before_cancel", range(4))
async def test_on_the_real_clock_a_cancel_at_any_moment_of_waking_is_raised(
    ticks_before_cancel: int,
) -> None:
    wake = asyncio.Event()
    task = asyncio.create_task(sleep_or_wake(RealClock(), 5.0, wake))
    await _turns(2)
    wake.set()
    await _turns(ticks_before_cancel)
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


async def _turns(n: int) -> None:
    for _ in range(n):
        await asyncio.sleep(0)
