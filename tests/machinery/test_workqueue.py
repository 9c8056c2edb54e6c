"""The work queue: client-go ``queue_test.go``, ``delaying_queue_test.go`` and
``rate_limiting_queue_test.go`` ported to asyncio with a fake clock, plus properties."""

from __future__ import annotations

import asyncio
import inspect
import random
from collections.abc import AsyncIterator, Awaitable, Callable, Hashable
from dataclasses import dataclass, field

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from structlog.testing import capture_logs

from lifecycle_controller.machinery.ratelimit import (
    ItemExponentialFailureRateLimiter,
    default_controller_rate_limiter,
)
from lifecycle_controller.machinery.workqueue import (
    DEFAULT_HEARTBEAT,
    NoopQueueMetrics,
    QueueMetrics,
    QueueShutDown,
    WorkQueue,
)
from tests.doubles.fakeclock import DEFAULT_START_MONOTONIC, FakeClock

pytestmark = [pytest.mark.timeout(5), pytest.mark.usefixtures("no_leaked_tasks")]

T0 = DEFAULT_START_MONOTONIC

Shutdown = Callable[[WorkQueue[int]], Awaitable[None]]


async def _shutdown(q: WorkQueue[int]) -> None:
    q.shutdown()


async def _shutdown_with_drain(q: WorkQueue[int]) -> None:
    await q.shutdown_with_drain()


SHUTDOWNS = pytest.mark.parametrize(
    "shut_down", [_shutdown, _shutdown_with_drain], ids=["shutdown", "drain"]
)


@pytest.fixture
async def q(clock: FakeClock) -> AsyncIterator[WorkQueue[str]]:
    async with WorkQueue[str](
        clock=clock, rate_limiter=default_controller_rate_limiter(clock), name="test"
    ) as queue:
        yield queue


def _started(coro: Awaitable[None]) -> asyncio.Task[None]:
    async def run() -> None:
        await coro

    return asyncio.create_task(run())


async def _settle() -> None:
    for _ in range(10):
        await asyncio.sleep(0)


# --- the basic queue (queue_test.go) --------------------------------------------------------


@SHUTDOWNS
async def test_basic_many_producers_and_consumers(shut_down: Shutdown) -> None:
    q = WorkQueue[int](rate_limiter=ItemExponentialFailureRateLimiter())
    rng = random.Random(1)
    processed: list[int] = []

    async def producer(i: int) -> None:
        for _ in range(50):
            q.add(i)
            await asyncio.sleep(0)

    async def consumer() -> None:
        while True:
            try:
                item = await q.get()
            except QueueShutDown:
                return
            for _ in range(rng.randrange(4)):
                await asyncio.sleep(0)
            processed.append(item)
            q.done(item)

    consumers = [asyncio.create_task(consumer()) for _ in range(10)]
    await asyncio.gather(*(producer(i) for i in range(50)))
    await shut_down(q)
    q.add(-1)  # added after shutdown: must never be handed out
    await asyncio.gather(*consumers)
    assert len(q) == 0
    assert -1 not in processed
    assert set(processed) == set(range(50))


@SHUTDOWNS
async def test_add_while_processing(shut_down: Shutdown) -> None:
    q = WorkQueue[int](rate_limiter=ItemExponentialFailureRateLimiter())
    for i in range(50):
        q.add(i)
    counts: dict[int, int] = {}

    async def consumer() -> None:
        seen: dict[int, int] = {}
        while True:
            try:
                item = await q.get()
            except QueueShutDown:
                return
            seen[item] = seen.get(item, 0) + 1
            counts[item] = counts.get(item, 0) + 1
            if seen[item] < 2:
                q.add(item)  # re-add while processing: must come back after done
            await asyncio.sleep(0)
            q.done(item)

    consumers = [asyncio.create_task(consumer()) for _ in range(10)]
    await _settle()
    await shut_down(q)
    await asyncio.gather(*consumers)
    assert len(q) == 0
    assert all(counts[i] >= 2 for i in range(50))


async def test_len_counts_distinct_queued_keys() -> None:
    q = WorkQueue[str](rate_limiter=ItemExponentialFailureRateLimiter())
    q.add("foo")
    assert len(q) == 1
    q.add("bar")
    assert len(q) == 2
    q.add("foo")  # dedupe: should not increase the length
    assert len(q) == 2


async def test_fifo_order() -> None:
    q = WorkQueue[str](rate_limiter=ItemExponentialFailureRateLimiter())
    for key in ["c", "a", "b", "a"]:
        q.add(key)
    assert [await q.get() for _ in range(3)] == ["c", "a", "b"]


async def test_reinsert_while_processing_comes_back_after_done() -> None:
    q = WorkQueue[str](rate_limiter=ItemExponentialFailureRateLimiter())
    q.add("foo")
    item = await q.get()
    assert item == "foo"
    q.add(item)  # while processing
    assert len(q) == 0  # not handed out twice: it waits for done
    q.done(item)
    assert len(q) == 1
    assert await q.get() == "foo"
    q.done("foo")
    assert len(q) == 0


async def test_many_adds_while_processing_collapse_into_one_more_run() -> None:
    q = WorkQueue[str](rate_limiter=ItemExponentialFailureRateLimiter())
    q.add("foo")
    await q.get()
    for _ in range(5):
        q.add("foo")
    q.done("foo")
    assert len(q) == 1
    await q.get()
    q.done("foo")
    assert len(q) == 0


async def test_get_waits_for_an_add() -> None:
    q = WorkQueue[str](rate_limiter=ItemExponentialFailureRateLimiter())
    getter = asyncio.create_task(q.get())
    await _settle()
    assert not getter.done()
    q.add("foo")
    assert await getter == "foo"


async def test_each_add_wakes_one_waiting_getter() -> None:
    q = WorkQueue[str](rate_limiter=ItemExponentialFailureRateLimiter())
    getters = [asyncio.create_task(q.get()) for _ in range(3)]
    await _settle()
    q.add("a")
    q.add("b")
    await _settle()
    assert sorted(g.result() for g in getters if g.done()) == ["a", "b"]
    q.shutdown()
    results = await asyncio.gather(*getters, return_exceptions=True)
    assert sum(isinstance(r, QueueShutDown) for r in results) == 1


async def test_a_cancelled_getter_does_not_swallow_a_wakeup() -> None:
    q = WorkQueue[str](rate_limiter=ItemExponentialFailureRateLimiter())
    first = asyncio.create_task(q.get())
    second = asyncio.create_task(q.get())
    await _settle()
    q.add("foo")  # wakes `first`...
    first.cancel()  # ...which is cancelled before it runs
    with pytest.raises(asyncio.CancelledError):
        await first
    assert await asyncio.wait_for(second, 1) == "foo"


async def test_done_for_a_key_not_processing_is_ignored() -> None:
    q = WorkQueue[str](rate_limiter=ItemExponentialFailureRateLimiter())
    q.done("never-got")
    q.add("foo")
    q.done("foo")  # queued, not processing: must not duplicate it
    assert len(q) == 1
    assert await q.get() == "foo"
    q.done("foo")
    q.done("foo")
    assert len(q) == 0


# --- shutdown (queue_test.go) ---------------------------------------------------------------


async def test_get_hands_out_queued_keys_after_shutdown_then_raises() -> None:
    q = WorkQueue[str](rate_limiter=ItemExponentialFailureRateLimiter())
    q.add("foo")
    q.add("bar")
    q.shutdown()
    q.add("baz")  # ignored
    assert q.shutting_down
    assert [await q.get(), await q.get()] == ["foo", "bar"]
    with pytest.raises(QueueShutDown):
        await q.get()
    with pytest.raises(QueueShutDown):
        await q.get()


async def test_shutdown_wakes_every_waiting_getter() -> None:
    q = WorkQueue[str](rate_limiter=ItemExponentialFailureRateLimiter())
    getters = [asyncio.create_task(q.get()) for _ in range(5)]
    await _settle()
    q.shutdown()
    for result in await asyncio.gather(*getters, return_exceptions=True):
        assert isinstance(result, QueueShutDown)


async def test_shutdown_is_idempotent() -> None:
    q = WorkQueue[str](rate_limiter=ItemExponentialFailureRateLimiter())
    q.shutdown()
    q.shutdown()
    await q.shutdown_with_drain()
    await q.aclose()
    await q.aclose()
    assert q.shutting_down


async def test_drain_waits_for_keys_being_processed() -> None:
    q = WorkQueue[str](rate_limiter=ItemExponentialFailureRateLimiter())
    q.add("foo")
    q.add("bar")
    first, second = await q.get(), await q.get()
    drain = _started(q.shutdown_with_drain())
    await _settle()
    with pytest.raises(QueueShutDown):
        await q.get()
    assert not drain.done()
    q.done(first)
    await _settle()
    assert not drain.done()
    q.done(second)
    await asyncio.wait_for(drain, 1)


async def test_shutdown_does_not_wait_for_keys_being_processed(clock: FakeClock) -> None:
    q = WorkQueue[str](clock=clock, rate_limiter=ItemExponentialFailureRateLimiter())
    q.add("foo")
    q.add("bar")
    await q.get()
    await q.get()
    waiting = asyncio.create_task(q.get())
    await _settle()
    assert not waiting.done()
    q.shutdown()  # synchronous: it returns with both keys still being processed
    assert q.shutting_down
    await clock.advance(1)
    assert q.unfinished_work_seconds() == 2.0  # still in flight, one second each
    with pytest.raises(QueueShutDown):
        await asyncio.wait_for(waiting, 1)  # the idle getter was woken at once


async def test_shutdown_forces_a_pending_drain_to_return() -> None:
    q = WorkQueue[str](rate_limiter=ItemExponentialFailureRateLimiter())
    q.add("foo")
    q.add("bar")
    await q.get()
    await q.get()
    drain = _started(q.shutdown_with_drain())
    await _settle()
    with pytest.raises(QueueShutDown):
        await q.get()
    assert not drain.done()
    q.shutdown()  # e.g. a second SIGTERM
    await asyncio.wait_for(drain, 1)


async def test_drain_waits_for_a_dirty_key_to_run_again() -> None:
    q = WorkQueue[str](rate_limiter=ItemExponentialFailureRateLimiter())
    q.add("foo")
    gotten = await q.get()
    q.add("foo")
    drain = _started(q.shutdown_with_drain())
    await _settle()
    assert not drain.done()
    q.done(gotten)  # re-queues foo, even though the queue is shutting down
    await _settle()
    assert not drain.done()
    again = await q.get()
    assert again == "foo"
    q.done(again)
    with pytest.raises(QueueShutDown):
        await q.get()
    await asyncio.wait_for(drain, 1)


async def test_drain_of_an_idle_queue_returns_at_once() -> None:
    q = WorkQueue[str](rate_limiter=ItemExponentialFailureRateLimiter())
    await asyncio.wait_for(q.shutdown_with_drain(), 1)


# --- lifecycle ------------------------------------------------------------------------------


async def test_start_twice_or_after_shutdown_is_refused(clock: FakeClock) -> None:
    q = WorkQueue[str](clock=clock, rate_limiter=default_controller_rate_limiter(clock))
    q.start()
    with pytest.raises(RuntimeError, match="already started"):
        q.start()
    await q.aclose()
    late = WorkQueue[str](clock=clock, rate_limiter=default_controller_rate_limiter(clock))
    late.shutdown()
    with pytest.raises(RuntimeError, match="shut down"):
        late.start()


async def test_aclose_stops_the_timer_task(clock: FakeClock) -> None:
    q = WorkQueue[str](clock=clock, rate_limiter=default_controller_rate_limiter(clock))
    q.start()
    q.add_after("foo", 60)
    await clock.settle()
    assert clock.sleeper_deadlines()
    await q.aclose()
    assert clock.sleeper_deadlines() == []
    assert q.delayed_len() == 0  # delayed keys are dropped on shutdown


async def test_cancelling_the_timer_leaves_nothing_behind(clock: FakeClock) -> None:
    q = WorkQueue[str](clock=clock, rate_limiter=default_controller_rate_limiter(clock))
    q.start()
    await clock.settle()
    for task in asyncio.all_tasks():
        if task.get_name().startswith("workqueue-timer"):
            task.cancel()
    await q.aclose()  # the timer's cancellation is not the caller's
    await clock.settle()
    assert clock.sleeper_deadlines() == []


def test_rejects_a_bad_heartbeat() -> None:
    with pytest.raises(ValueError, match="heartbeat"):
        WorkQueue[str](rate_limiter=ItemExponentialFailureRateLimiter(), heartbeat=0)


# --- the delaying queue (delaying_queue_test.go) ----------------------------------------------


async def test_simple_delayed_add(clock: FakeClock, q: WorkQueue[str]) -> None:
    q.add_after("foo", 0.050)
    await clock.settle()
    assert len(q) == 0
    assert q.delayed_len() == 1

    await clock.advance(0.060)
    assert len(q) == 1
    item = await q.get()
    q.done(item)

    await clock.advance(DEFAULT_HEARTBEAT)  # step past the next heartbeat
    assert len(q) == 0
    assert q.delayed_len() == 0


async def test_delayed_add_fires_exactly_at_its_time(clock: FakeClock, q: WorkQueue[str]) -> None:
    q.add_after("foo", 3)
    await clock.advance(2.999)
    assert len(q) == 0
    await clock.advance(0.001)
    assert len(q) == 1


async def test_deduping_earliest_time_wins(clock: FakeClock, q: WorkQueue[str]) -> None:
    q.add_after("foo", 0.050)
    q.add_after("foo", 0.070)  # later: must not postpone
    await clock.settle()
    assert len(q) == 0

    await clock.advance(0.060)  # past the first time: fires
    assert len(q) == 1
    item = await q.get()
    q.done(item)

    await clock.advance(0.020)  # past the second time: nothing more
    assert len(q) == 0

    # This time the earlier request overrides the later one.
    q.add_after("foo", 0.050)
    q.add_after("foo", 0.030)
    await clock.settle()
    assert len(q) == 0
    await clock.advance(0.040)
    assert len(q) == 1
    item = await q.get()
    q.done(item)
    await clock.advance(0.020)
    assert len(q) == 0

    # A key being processed can be scheduled; it comes back after done.
    q.add("foo")
    assert await q.get() == "foo"
    q.add_after("foo", 0.005)
    await clock.advance(0.005)
    assert len(q) == 0
    q.done("foo")
    assert len(q) == 1


async def test_a_later_add_after_does_not_postpone(clock: FakeClock, q: WorkQueue[str]) -> None:
    q.add_after("foo", 10)
    await clock.advance(5)
    q.add_after("foo", 3600)
    await clock.advance(5)
    assert len(q) == 1
    assert q.delayed_len() == 0


async def test_add_two_fire_early(clock: FakeClock, q: WorkQueue[str]) -> None:
    q.add_after("foo", 1)
    q.add_after("bar", 0.050)
    await clock.settle()
    assert len(q) == 0

    await clock.advance(0.060)
    assert len(q) == 1
    assert await q.get() == "bar"

    q.add_after("baz", 2)
    await clock.advance(1)
    assert len(q) == 1
    assert await q.get() == "foo"

    await clock.advance(2)
    assert len(q) == 1
    assert await q.get() == "baz"


async def test_copy_shifting_fires_in_time_order(clock: FakeClock, q: WorkQueue[str]) -> None:
    q.add_after("foo", 1)
    q.add_after("bar", 0.5)
    q.add_after("baz", 0.25)
    await clock.settle()
    assert len(q) == 0
    await clock.advance(2)
    assert len(q) == 3
    assert [await q.get() for _ in range(3)] == ["baz", "bar", "foo"]


async def test_ties_fire_in_request_order(clock: FakeClock, q: WorkQueue[str]) -> None:
    for key in ["c", "a", "b"]:
        q.add_after(key, 1)
    await clock.advance(1)
    assert [await q.get() for _ in range(3)] == ["c", "a", "b"]


async def test_delayed_key_already_queued_is_deduped(clock: FakeClock, q: WorkQueue[str]) -> None:
    q.add("foo")
    q.add_after("foo", 1)
    await clock.advance(1)
    assert len(q) == 1


async def test_heartbeat_bounds_every_timer_sleep(clock: FakeClock, q: WorkQueue[str]) -> None:
    await clock.settle()
    assert clock.sleeper_deadlines() == [T0 + DEFAULT_HEARTBEAT]  # idle: heartbeat only
    q.add_after("foo", 25)
    await clock.settle()
    assert clock.sleeper_deadlines() == [T0 + 10]
    await clock.advance(10)
    assert clock.sleeper_deadlines() == [T0 + 20]
    await clock.advance(10)
    assert clock.sleeper_deadlines() == [T0 + 25]
    assert len(q) == 0
    await clock.advance(5)
    assert len(q) == 1
    assert clock.sleeper_deadlines() == [T0 + 25 + DEFAULT_HEARTBEAT]


async def test_custom_heartbeat(clock: FakeClock) -> None:
    async with WorkQueue[str](
        clock=clock, rate_limiter=default_controller_rate_limiter(clock), heartbeat=2.5
    ):
        await clock.settle()
        assert clock.sleeper_deadlines() == [T0 + 2.5]


async def test_earlier_add_after_rearms_the_sleeping_timer(
    clock: FakeClock, q: WorkQueue[str]
) -> None:
    q.add_after("late", 8)
    await clock.settle()
    assert clock.sleeper_deadlines() == [T0 + 8]
    q.add_after("early", 2)
    await clock.settle()
    assert clock.sleeper_deadlines() == [T0 + 2]
    await clock.advance(2)
    assert await q.get() == "early"


async def test_many_delayed_keys_share_one_timer(clock: FakeClock, q: WorkQueue[str]) -> None:
    for i in range(1000):
        q.add_after(f"k{i}", 1 + (i % 100) / 10)
    await clock.settle()
    assert len(clock.sleeper_deadlines()) == 1
    await clock.advance(11)
    assert len(q) == 1000


async def test_non_positive_delay_adds_now(q: WorkQueue[str]) -> None:
    q.add_after("zero", 0)
    q.add_after("negative", -5)
    assert len(q) == 2
    assert q.delayed_len() == 0


@pytest.mark.parametrize("delay", [float("nan"), float("inf")])
async def test_non_finite_delay_is_refused(q: WorkQueue[str], delay: float) -> None:
    with pytest.raises(ValueError, match="finite"):
        q.add_after("foo", delay)


async def test_add_after_before_start_fires_once_started(clock: FakeClock) -> None:
    q = WorkQueue[str](clock=clock, rate_limiter=default_controller_rate_limiter(clock))
    q.add_after("foo", 1)
    await clock.advance(5)
    assert len(q) == 0
    async with q:
        await clock.settle()
        assert len(q) == 1


async def test_add_after_is_ignored_after_shutdown(clock: FakeClock, q: WorkQueue[str]) -> None:
    q.shutdown()
    q.add_after("foo", 1)
    q.add_after("bar", 0)
    q.add_rate_limited("baz")
    await clock.advance(2)
    assert len(q) == 0
    assert q.delayed_len() == 0


# --- the rate-limiting queue (rate_limiting_queue_test.go) --------------------------------------


async def _fires_after(clock: FakeClock, q: WorkQueue[str], seconds: float) -> None:
    """Assert the one pending delayed key fires after exactly ``seconds``, then take it."""
    await clock.advance(seconds * 0.999)
    assert len(q) == 0
    await clock.advance(seconds * 0.001)
    assert len(q) == 1
    q.done(await q.get())


async def test_rate_limited_adds(clock: FakeClock) -> None:
    limiter = ItemExponentialFailureRateLimiter(0.001, 1.0)
    async with WorkQueue[str](clock=clock, rate_limiter=limiter) as q:
        q.add_rate_limited("one")
        await _fires_after(clock, q, 0.001)
        q.add_rate_limited("one")
        await _fires_after(clock, q, 0.002)
        assert q.num_requeues("one") == 2

        q.add_rate_limited("two")
        await _fires_after(clock, q, 0.001)
        q.add_rate_limited("two")
        await _fires_after(clock, q, 0.002)

        q.forget("one")
        assert q.num_requeues("one") == 0
        assert q.num_requeues("two") == 2
        q.add_rate_limited("one")
        await _fires_after(clock, q, 0.001)


async def test_forget_does_not_dequeue(clock: FakeClock, q: WorkQueue[str]) -> None:
    q.add_rate_limited("foo")
    q.forget("foo")
    await clock.advance(1)
    assert len(q) == 1


async def test_default_rate_limiter_is_the_controller_default(clock: FakeClock) -> None:
    async with WorkQueue[str](
        clock=clock, rate_limiter=default_controller_rate_limiter(clock)
    ) as q:
        q.add_rate_limited("foo")
        await _fires_after(clock, q, 0.005)
        q.add_rate_limited("foo")
        await _fires_after(clock, q, 0.010)


# --- metrics --------------------------------------------------------------------------------


@dataclass
class RecordingMetrics:
    adds: int = 0
    retries: int = 0
    depths: list[int] = field(default_factory=list)
    gets: list[tuple[Hashable, float]] = field(default_factory=list)
    dones: list[tuple[Hashable, float]] = field(default_factory=list)

    def add(self) -> None:
        self.adds += 1

    def depth(self, n: int) -> None:
        self.depths.append(n)

    def get(self, key: Hashable, queued_for_s: float) -> None:
        self.gets.append((key, queued_for_s))

    def done(self, key: Hashable, worked_for_s: float) -> None:
        self.dones.append((key, worked_for_s))

    def retry(self) -> None:
        self.retries += 1


async def test_metrics_hooks_see_adds_depth_and_durations(clock: FakeClock) -> None:
    metrics = RecordingMetrics()
    _protocol_check: QueueMetrics = metrics
    async with WorkQueue[str](
        clock=clock, rate_limiter=default_controller_rate_limiter(clock), metrics=metrics
    ) as q:
        q.add("a")
        q.add("a")  # deduped: not an add
        q.add("b")
        assert (metrics.adds, metrics.depths) == (2, [1, 2])

        await clock.advance(2)
        assert await q.get() == "a"
        assert metrics.gets == [("a", 2.0)]
        assert metrics.depths[-1] == 1

        await clock.advance(3)
        assert q.unfinished_work_seconds() == 3.0
        assert q.longest_running_processor_seconds() == 3.0
        assert await q.get() == "b"
        await clock.advance(1)
        assert q.unfinished_work_seconds() == 5.0  # 4 s + 1 s
        assert q.longest_running_processor_seconds() == 4.0

        q.done("a")
        q.done("b")
        assert metrics.dones == [("a", 4.0), ("b", 1.0)]
        assert q.unfinished_work_seconds() == 0.0
        assert q.longest_running_processor_seconds() == 0.0

        q.add_after("c", 1)
        q.add_rate_limited("d")
        assert metrics.retries == 2


async def test_readd_while_processing_counts_queue_time_from_the_add(clock: FakeClock) -> None:
    metrics = RecordingMetrics()
    q = WorkQueue[str](
        clock=clock, rate_limiter=default_controller_rate_limiter(clock), metrics=metrics
    )
    q.add("a")
    await q.get()
    await clock.advance(1)
    q.add("a")
    await clock.advance(2)
    q.done("a")
    await q.get()
    assert metrics.gets == [("a", 0.0), ("a", 2.0)]


def test_noop_metrics_satisfy_the_protocol() -> None:
    hooks = [
        name
        for name, member in vars(QueueMetrics).items()
        if inspect.isfunction(member) and not name.startswith("_")
    ]
    assert hooks
    for name in hooks:
        implemented = getattr(NoopQueueMetrics, name, None)
        assert implemented is not None, name
        assert inspect.signature(implemented) == inspect.signature(getattr(QueueMetrics, name))
    noop: QueueMetrics = NoopQueueMetrics()
    noop.add()
    noop.depth(1)
    noop.get("k", 0.0)
    noop.done("k", 0.0)
    noop.retry()
    assert not hasattr(noop, "__dict__")  # records nothing: it has no state at all


# --- properties -----------------------------------------------------------------------------

KEYS = st.integers(min_value=0, max_value=4)
OPS = st.lists(
    st.one_of(
        st.tuples(st.just("add"), KEYS),
        st.tuples(st.just("get"), st.just(0)),
        st.tuples(st.just("done"), st.integers(min_value=0, max_value=10)),
    ),
    max_size=60,
)


@settings(max_examples=300, deadline=None)
@given(OPS)
def test_property_sequential_ops_never_double_hand_and_never_lose(
    ops: list[tuple[str, int]],
) -> None:
    """Random add/get/done sequences: no key is held by two consumers at once, and every
    key is handed out after its last add."""

    async def scenario() -> None:
        q = WorkQueue[int](rate_limiter=ItemExponentialFailureRateLimiter())
        held: list[int] = []  # keys handed out and not yet done, in hand-out order
        step = 0
        last_add: dict[int, int] = {}
        last_get: dict[int, int] = {}

        async def take() -> None:
            nonlocal step
            key = await q.get()
            assert key not in held, f"{key} handed out while held"
            held.append(key)
            last_get[key] = step
            step += 1

        for op, arg in ops:
            if op == "add":
                q.add(arg)
                last_add[arg] = step
                step += 1
            elif op == "get" and len(q) > 0:
                await take()
            elif op == "done" and held:
                q.done(held.pop(arg % len(held)))
            assert len(q) <= 5  # deduped: at most one entry per distinct key

        # Finish: consumers complete their work and the queue is drained.
        while held or len(q):
            while held:
                q.done(held.pop())
            while len(q):
                await take()
        for key, added_at in last_add.items():
            assert last_get.get(key, -1) > added_at, f"{key} not processed after its last add"
        q.shutdown()
        with pytest.raises(QueueShutDown):
            await q.get()

    asyncio.run(scenario())


@settings(max_examples=100, deadline=None)
@given(
    workers=st.integers(min_value=1, max_value=4),
    adds=st.lists(st.tuples(KEYS, st.integers(min_value=0, max_value=3)), max_size=40),
    work_yields=st.lists(st.integers(min_value=0, max_value=3), min_size=1, max_size=10),
)
def test_property_concurrent_consumers_never_overlap_on_a_key(
    workers: int, adds: list[tuple[int, int]], work_yields: list[int]
) -> None:
    """Concurrent producers and consumers with random interleavings: no key is processed by
    two consumers at once, and each key's last processing starts after its last add."""

    async def scenario() -> None:
        q = WorkQueue[int](rate_limiter=ItemExponentialFailureRateLimiter())
        in_flight: set[int] = set()
        started_after: dict[int, int] = {}  # key -> add counter when its last run started
        add_counter: dict[int, int] = {}
        runs = 0

        async def consumer() -> None:
            nonlocal runs
            while True:
                try:
                    key = await q.get()
                except QueueShutDown:
                    return
                assert key not in in_flight, f"{key} processed twice at once"
                in_flight.add(key)
                started_after[key] = add_counter.get(key, 0)
                for _ in range(work_yields[runs % len(work_yields)]):
                    await asyncio.sleep(0)
                runs += 1
                in_flight.discard(key)
                q.done(key)

        async def producer() -> None:
            for key, pause in adds:
                add_counter[key] = add_counter.get(key, 0) + 1
                q.add(key)
                for _ in range(pause):
                    await asyncio.sleep(0)

        consumers = [asyncio.create_task(consumer()) for _ in range(workers)]
        await producer()
        await asyncio.wait_for(q.shutdown_with_drain(), 5)
        await asyncio.gather(*consumers)
        for key, count in add_counter.items():
            assert started_after.get(key) == count, f"{key}: last add not processed"

    asyncio.run(scenario())


class _BrokenClock(FakeClock):
    async def sleep(self, seconds: float) -> None:
        raise RuntimeError("clock broke")


async def test_a_crashed_timer_is_logged_and_reported_by_aclose() -> None:
    q = WorkQueue[str](
        clock=_BrokenClock(), rate_limiter=ItemExponentialFailureRateLimiter(), name="broken"
    )
    with capture_logs() as logs:
        q.start()
        await _settle()
    assert logs[0]["event"] == "workqueue timer crashed; delayed keys will not fire"
    assert logs[0]["queue"] == "broken"
    with pytest.raises(RuntimeError, match="clock broke"):
        await q.aclose()


async def test_keys_due_together_enter_the_queue_by_their_order(
    clock: FakeClock, q: WorkQueue[str]
) -> None:
    """Actions deferred to one window opening: requeued at (almost) the same instant, in any
    order, they are handed out by ``order`` (their scheduled times), not by arrival."""
    q.add_after("due-third", 10.000003, order=300)
    q.add_after("due-first", 10.000002, order=100)
    q.add_after("due-second", 10.000001, order=200)
    q.add_after("later", 11, order=0)
    await clock.advance(10.5)
    handed_out = [await q.get() for _ in range(3)]
    assert handed_out == ["due-first", "due-second", "due-third"]
    assert q.delayed_len() == 1


async def test_without_an_order_keys_due_together_keep_earliest_first(
    clock: FakeClock, q: WorkQueue[str]
) -> None:
    for name, delay in (("b", 5.2), ("a", 5.1), ("c", 5.3)):
        q.add_after(name, delay)
    await clock.advance(6)
    assert [await q.get() for _ in range(3)] == ["a", "b", "c"]
