"""Reconcile workers: controller-runtime result semantics, driven by a fake clock."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator, Awaitable, Callable
from dataclasses import dataclass, field
from typing import Any, cast

import pytest
from structlog.testing import capture_logs

from lifecycle_controller.controller.work.result import ReconcileOutcome, Result, TerminalError
from lifecycle_controller.controller.work.workers import (
    NoopReconcileObserver,
    ReconcileObserver,
    process_next_item,
    run_workers,
)
from lifecycle_controller.machinery.log_context import current_item_fields
from lifecycle_controller.machinery.ratelimit import default_controller_rate_limiter
from lifecycle_controller.machinery.workqueue import WorkQueue
from tests.doubles.fakeclock import DEFAULT_START_MONOTONIC, FakeClock
from tests.machinery.loop_ticks import LoopTicks

pytestmark = [pytest.mark.timeout(5), pytest.mark.usefixtures("no_leaked_tasks")]

T0 = DEFAULT_START_MONOTONIC


@dataclass
class Script:
    """A fake reconciler: records calls, then returns or raises what each step says."""

    clock: FakeClock
    steps: dict[str, list[Any]] = field(default_factory=dict)
    calls: list[tuple[str, float]] = field(default_factory=list)
    contexts: list[dict[str, Any]] = field(default_factory=list)

    async def __call__(self, key: str) -> Result | None:
        self.calls.append((key, self.clock.monotonic() - T0))
        self.contexts.append(current_item_fields())
        queue = self.steps.get(key, [])
        step = queue.pop(0) if queue else None
        if isinstance(step, BaseException):
            raise step
        if callable(step):
            step = await step()
        return cast(Result | None, step)

    def times(self, key: str) -> list[float]:
        return [t for k, t in self.calls if k == key]


@dataclass
class RecordingObserver:
    seen: list[tuple[ReconcileOutcome, float]] = field(default_factory=list)

    def observe(self, outcome: ReconcileOutcome, seconds: float) -> None:
        self.seen.append((outcome, seconds))


@pytest.fixture
async def q(clock: FakeClock) -> AsyncIterator[WorkQueue[str]]:
    async with WorkQueue[str](
        clock=clock, rate_limiter=default_controller_rate_limiter(clock), name="test"
    ) as queue:
        yield queue


@pytest.fixture
async def workers(
    q: WorkQueue[str], clock: FakeClock
) -> AsyncIterator[Callable[..., asyncio.Task[None]]]:
    """Start ``run_workers`` in the background; shut the queue down and join afterwards."""
    tasks: list[asyncio.Task[None]] = []

    def start(
        reconcile: Callable[[str], Awaitable[Result | None]], n: int = 1, **kw: Any
    ) -> asyncio.Task[None]:
        task = asyncio.create_task(run_workers(q, reconcile, n, name="ctl", **kw))
        tasks.append(task)
        return task

    yield start
    q.shutdown()
    await clock.settle()
    for task in tasks:
        if not task.done():
            task.cancel()
    await asyncio.gather(*tasks, return_exceptions=True)


# --- result semantics -------------------------------------------------------------------------


async def test_success_forgets_and_does_not_requeue(
    clock: FakeClock, q: WorkQueue[str], workers: Callable[..., asyncio.Task[None]]
) -> None:
    script = Script(clock, {"k": [RuntimeError("boom"), Result()]})
    workers(script)
    q.add("k")
    await clock.settle()
    assert q.num_requeues("k") == 1
    await clock.advance(0.005)
    assert script.times("k") == [0, pytest.approx(0.005)]
    assert q.num_requeues("k") == 0  # success forgot the backoff
    await clock.advance(3600)
    assert len(script.calls) == 2
    assert q.longest_running_processor_seconds() == 0  # done was called


async def test_none_means_success(
    clock: FakeClock, q: WorkQueue[str], workers: Callable[..., asyncio.Task[None]]
) -> None:
    observer = RecordingObserver()
    script = Script(clock, {"k": [None]})
    workers(script, observer=observer)
    q.add("k")
    await clock.advance(100)
    assert script.times("k") == [0]
    assert observer.seen == [(ReconcileOutcome.SUCCESS, 0.0)]


async def test_error_retries_with_exponential_backoff(
    clock: FakeClock, q: WorkQueue[str], workers: Callable[..., asyncio.Task[None]]
) -> None:
    script = Script(clock, {"k": [ValueError(str(i)) for i in range(5)]})
    workers(script)
    q.add("k")
    await clock.advance(1)
    # failures at 0, then after 5 ms, 10 ms, 20 ms, 40 ms; the 6th call succeeds
    assert script.times("k") == pytest.approx([0, 0.005, 0.015, 0.035, 0.075, 0.155])
    assert q.num_requeues("k") == 0


class Throttled(Exception):
    """Like kube's TooManyRequests: the server asked to wait ``retry_after`` seconds."""

    def __init__(self, retry_after: float | None) -> None:
        super().__init__("429")
        self.retry_after = retry_after


async def test_an_error_with_retry_after_waits_at_least_that_long(
    clock: FakeClock, q: WorkQueue[str], workers: Callable[..., asyncio.Task[None]]
) -> None:
    script = Script(clock, {"k": [Throttled(2.0), Throttled(None), Throttled(0.001)]})
    workers(script)
    q.add("k")
    await clock.advance(10)
    # Retry-After 2 s instead of the 5 ms backoff; none: the backoff (10 ms); shorter than the
    # backoff: the backoff (20 ms).
    assert script.times("k") == pytest.approx([0, 2.0, 2.01, 2.03])


async def test_error_ignores_nothing_else_and_keeps_counting(
    clock: FakeClock, q: WorkQueue[str], workers: Callable[..., asyncio.Task[None]]
) -> None:
    script = Script(clock, {"k": [RuntimeError("a"), RuntimeError("b"), RuntimeError("c")]})
    workers(script)
    q.add("k")
    await clock.settle()
    assert q.num_requeues("k") == 1
    await clock.advance(0.005)
    assert q.num_requeues("k") == 2


async def test_terminal_error_is_not_retried_and_not_forgotten(
    clock: FakeClock, q: WorkQueue[str], workers: Callable[..., asyncio.Task[None]]
) -> None:
    observer = RecordingObserver()
    script = Script(clock, {"k": [RuntimeError("transient"), TerminalError("bad spec")]})
    workers(script, observer=observer)
    q.add("k")
    await clock.advance(3600)
    assert script.times("k") == [0, pytest.approx(0.005)]
    assert q.num_requeues("k") == 1  # controller-runtime does not forget on terminal errors
    assert [o for o, _ in observer.seen] == [ReconcileOutcome.ERROR, ReconcileOutcome.TERMINAL]


async def test_requeue_after_forgets_then_adds_after(
    clock: FakeClock, q: WorkQueue[str], workers: Callable[..., asyncio.Task[None]]
) -> None:
    script = Script(clock, {"k": [RuntimeError("x"), Result(requeue_after=30), Result()]})
    workers(script)
    q.add("k")
    await clock.advance(0.005)
    assert q.num_requeues("k") == 0  # forgotten before the add_after
    await clock.advance(29.99)
    assert len(script.calls) == 2
    await clock.advance(0.01)
    assert script.times("k") == pytest.approx([0, 0.005, 30.005])


async def test_requeue_zero_is_plain_success(
    clock: FakeClock, q: WorkQueue[str], workers: Callable[..., asyncio.Task[None]]
) -> None:
    script = Script(clock, {"k": [Result(requeue_after=0)]})
    workers(script)
    q.add("k")
    await clock.advance(100)
    assert script.times("k") == [0]


async def test_event_before_requeue_after_runs_now_and_earliest_wins(
    clock: FakeClock, q: WorkQueue[str], workers: Callable[..., asyncio.Task[None]]
) -> None:
    script = Script(clock, {"k": [Result(requeue_after=60), Result(requeue_after=600)]})
    workers(script)
    q.add("k")
    await clock.advance(10)
    q.add("k")  # a watch event: immediate run, which asks for +600 s
    await clock.advance(50)
    # The old +60 s wake-up still fires (earliest wins; reconcile must be idempotent).
    assert script.times("k") == [0, 10, 60]


async def test_wrong_return_type_is_an_error(
    clock: FakeClock, q: WorkQueue[str], workers: Callable[..., asyncio.Task[None]]
) -> None:
    script = Script(clock, {"k": ["not a result"]})
    workers(script)
    with capture_logs() as logs:
        q.add("k")
        await clock.settle()
    assert q.num_requeues("k") == 1
    assert "must return Result" in logs[0]["error"]


@pytest.mark.parametrize("bad", [-1.0, float("nan"), float("inf")])
def test_result_validates_requeue_after(bad: float) -> None:
    with pytest.raises(ValueError, match="requeue_after"):
        Result(requeue_after=bad)


def test_result_defaults_to_no_requeue() -> None:
    assert Result().requeue_after is None
    assert Result(requeue_after=1.5).requeue_after == 1.5


# --- robustness ---------------------------------------------------------------------------------


async def test_exceptions_never_kill_a_worker(
    clock: FakeClock, q: WorkQueue[str], workers: Callable[..., asyncio.Task[None]]
) -> None:
    script = Script(clock, {f"k{i}": [RuntimeError(f"boom {i}")] for i in range(20)})
    task = workers(script, 1)
    for i in range(20):
        q.add(f"k{i}")
    with capture_logs():  # 20 rendered tracebacks would take seconds on a slow machine
        await clock.advance(1)
    assert not task.done()
    assert len(script.calls) == 40  # every key failed once, then succeeded on retry


async def test_a_stray_cancelled_error_from_reconcile_is_a_failure(
    clock: FakeClock, q: WorkQueue[str], workers: Callable[..., asyncio.Task[None]]
) -> None:
    script = Script(clock, {"k": [asyncio.CancelledError()]})
    task = workers(script)
    q.add("k")
    await clock.advance(0.005)
    assert not task.done()
    assert script.times("k") == [0, pytest.approx(0.005)]


async def test_observer_failure_does_not_kill_the_worker(
    clock: FakeClock, q: WorkQueue[str], workers: Callable[..., asyncio.Task[None]]
) -> None:
    class Broken:
        def observe(self, outcome: ReconcileOutcome, seconds: float) -> None:
            raise RuntimeError("metrics down")

    script = Script(clock)
    task = workers(script, observer=Broken())
    with capture_logs() as logs:
        q.add("a")
        q.add("b")
        await clock.settle()
    assert [k for k, _ in script.calls] == ["a", "b"]
    assert not task.done()
    assert any(e["event"] == "reconcile observer failed" for e in logs)


async def test_never_two_reconciles_of_one_key_at_once(
    clock: FakeClock, q: WorkQueue[str], workers: Callable[..., asyncio.Task[None]]
) -> None:
    in_flight: set[str] = set()
    overlaps: list[str] = []
    runs: list[str] = []

    async def slow(key: str) -> None:
        if key in in_flight:
            overlaps.append(key)
        in_flight.add(key)
        runs.append(key)
        await clock.sleep(1)
        in_flight.discard(key)

    workers(slow, 4)
    q.add("k")
    await clock.settle()
    for _ in range(5):
        q.add("k")  # while processing: collapses into exactly one more run
    q.add("other")
    await clock.advance(5)
    assert overlaps == []
    assert sorted(runs) == ["k", "k", "other"]


async def test_a_worker_lets_the_loop_run_between_reconciles_that_never_suspend(
    q: WorkQueue[str], workers: Callable[..., asyncio.Task[None]]
) -> None:
    seen: list[int] = []
    all_seen = asyncio.Event()
    async with LoopTicks() as ticks:

        async def instant(key: str) -> None:  # decides to wait: nothing to await
            seen.append(ticks.count)
            if len(seen) == 50:
                all_seen.set()

        for i in range(50):
            q.add(f"k{i}")
        workers(instant, 1)
        await all_seen.wait()
    assert len(set(seen)) == 50  # the other task ran between every two reconciles


async def test_observer_gets_outcomes_and_durations(
    clock: FakeClock, q: WorkQueue[str], workers: Callable[..., asyncio.Task[None]]
) -> None:
    observer = RecordingObserver()

    async def slow_success() -> Result:
        await clock.sleep(2)
        return Result(requeue_after=100)

    script = Script(clock, {"k": [slow_success, RuntimeError("x"), TerminalError("t")]})
    workers(script, observer=observer)
    q.add("k")
    await clock.advance(2)
    await clock.advance(100)
    await clock.advance(0.005)
    assert observer.seen == [
        (ReconcileOutcome.REQUEUE_AFTER, 2.0),
        (ReconcileOutcome.ERROR, 0.0),
        (ReconcileOutcome.TERMINAL, 0.0),
    ]
    _check: ReconcileObserver = NoopReconcileObserver()
    _check.observe(ReconcileOutcome.SUCCESS, 0.0)


# --- logging --------------------------------------------------------------------------------


@dataclass(frozen=True)
class ObjKey:
    namespace: str
    name: str

    def log_context(self) -> dict[str, Any]:
        return {"namespace": self.namespace, "name": self.name}


@dataclass(frozen=True)
class BrokenKey:
    name: str

    def log_context(self) -> dict[str, Any]:
        raise RuntimeError("no context")


async def test_key_context_is_bound_per_item_and_cleared_after(clock: FakeClock) -> None:
    contexts: list[dict[str, Any]] = []

    async def record(key: object) -> None:
        contexts.append(current_item_fields())

    q = WorkQueue[object](clock=clock, rate_limiter=default_controller_rate_limiter(clock))
    q.add(ObjKey("ns", "a"))
    q.add("plain")
    q.add(BrokenKey("b"))
    with capture_logs() as logs:
        for _ in range(3):
            assert await process_next_item(q, record, name="ctl")
    ids = [context.pop("reconcile_id") for context in contexts]
    assert len(set(ids)) == 3, "every reconcile has its own id"
    assert contexts[0] == {"controller": "ctl", "namespace": "ns", "name": "a"}
    assert contexts[1] == {"controller": "ctl", "key": "plain"}
    assert contexts[2] == {"controller": "ctl", "key": "BrokenKey(name='b')"}
    assert [e["event"] for e in logs if e["log_level"] != "debug"] == ["key.log_context() failed"]
    assert current_item_fields() == {}


async def test_errors_are_logged_with_the_key_context(
    clock: FakeClock, q: WorkQueue[str], workers: Callable[..., asyncio.Task[None]]
) -> None:
    script = Script(clock, {"k": [RuntimeError("boom"), TerminalError("bad")]})
    workers(script)
    with capture_logs() as logs:
        q.add("k")
        await clock.advance(0.005)
    errors = [e for e in logs if e["log_level"] == "error"]
    assert [e["event"] for e in errors] == [
        "reconcile failed; retrying with backoff",
        "reconcile failed permanently; not retrying",
    ]
    assert errors[0]["error"] == "boom"
    assert errors[0]["requeues"] == 1
    assert isinstance(errors[0]["exc_info"], RuntimeError)
    assert script.contexts[0].pop("reconcile_id")
    assert script.contexts[0] == {"controller": "ctl", "key": "k"}


# --- stopping -------------------------------------------------------------------------------


async def test_workers_stop_when_the_queue_shuts_down(clock: FakeClock, q: WorkQueue[str]) -> None:
    script = Script(clock)
    task = asyncio.create_task(run_workers(q, script, 3))
    q.add("a")
    await clock.settle()
    q.shutdown()
    await asyncio.wait_for(task, 1)
    assert script.times("a") == [0]


async def test_drain_lets_in_flight_and_queued_keys_finish(
    clock: FakeClock, q: WorkQueue[str]
) -> None:
    finished: list[str] = []

    async def slow(key: str) -> None:
        await clock.sleep(1)
        finished.append(key)

    task = asyncio.create_task(run_workers(q, slow, 2))
    for key in "abcd":
        q.add(key)
    await clock.settle()
    drain = asyncio.create_task(q.shutdown_with_drain())
    await clock.advance(1)
    assert not drain.done()
    await clock.advance(1)
    await asyncio.wait_for(drain, 1)
    await asyncio.wait_for(task, 1)
    assert sorted(finished) == ["a", "b", "c", "d"]


async def test_cancelling_workers_still_marks_keys_done(
    clock: FakeClock, q: WorkQueue[str]
) -> None:
    async def forever(key: str) -> None:
        await clock.sleep(3600)

    task = asyncio.create_task(run_workers(q, forever, 2))
    q.add("a")
    q.add("b")
    await clock.advance(1)
    assert q.longest_running_processor_seconds() == 1.0
    task.cancel()
    with pytest.raises(asyncio.CancelledError):
        await task
    assert q.longest_running_processor_seconds() == 0.0
    assert q.num_requeues("a") == 0  # cancellation is not a failure


async def test_process_next_item_reports_shutdown(clock: FakeClock) -> None:
    q = WorkQueue[str](clock=clock, rate_limiter=default_controller_rate_limiter(clock))
    q.shutdown()
    assert await process_next_item(q, Script(clock)) is False


async def test_needs_at_least_one_worker(q: WorkQueue[str], clock: FakeClock) -> None:
    with pytest.raises(ValueError, match="at least one worker"):
        await run_workers(q, Script(clock), 0)
