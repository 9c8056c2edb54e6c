"""The clock protocol, the real clock and the hand-driven FakeClock."""

from __future__ import annotations

import asyncio
import gc
import time

import pytest

from lifecycle_controller.machinery.clock import Clock, RealClock, thread_cpu_ns
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
