"""The metrics registry: next-action minimum bookkeeping, discovery reset, queue and reconcile
adapters, zeros for known label sets, loop-lag sampling."""

from __future__ import annotations

import asyncio
import contextlib
import math
import random
from collections.abc import Callable
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from prometheus_client import generate_latest

from lifecycle_controller.app.loop_activity import ActiveQueueMetrics
from lifecycle_controller.controller.work.result import ReconcileOutcome
from lifecycle_controller.machinery.ratelimit import ItemExponentialFailureRateLimiter
from lifecycle_controller.machinery.workqueue import NoopQueueMetrics, WorkQueue
from lifecycle_controller.serving.loop_lag import run_loop_lag_monitor
from lifecycle_controller.serving.metrics import Metrics
from tests.doubles.fakeclock import FakeClock

NEXT = "lifecycle_next_action_timestamp_seconds"


def sample(m: Metrics, metric: str, /, **labels: str) -> float | None:
    return m.registry.get_sample_value(metric, labels)


def next_action_series(m: Metrics) -> dict[tuple[str, str, str], float]:
    return {
        (s.labels["action"], s.labels["kind"], s.labels["namespace"]): s.value
        for family in m.registry.collect()
        if family.name == NEXT
        for s in family.samples
    }


@pytest.fixture
def metrics() -> Metrics:
    return Metrics(leader_election_id="lease-x", process_collectors=False)


# --- lifecycle_next_action_timestamp_seconds --------------------------------------------------


def test_next_action_is_minimum_over_objects_and_moves_when_the_minimum_leaves(
    metrics: Metrics,
) -> None:
    for i in range(1000):
        metrics.set_next_action(("cm", i), "delete", "ConfigMap", "ns", 10_000.0 + i)
    assert next_action_series(metrics) == {("delete", "ConfigMap", "ns"): 10_000.0}

    metrics.set_next_action(("cm", 0), "delete", "ConfigMap", "ns", None)  # done
    assert sample(metrics, NEXT, action="delete", kind="ConfigMap", namespace="ns") == 10_001.0

    metrics.set_next_action(("cm", 1), "delete", "ConfigMap", "ns", 50_000.0)  # postponed
    assert sample(metrics, NEXT, action="delete", kind="ConfigMap", namespace="ns") == 10_002.0

    metrics.set_next_action(("cm", 999), "delete", "ConfigMap", "ns", 5.0)  # brought forward
    assert sample(metrics, NEXT, action="delete", kind="ConfigMap", namespace="ns") == 5.0


def test_series_is_deleted_when_its_last_object_goes(metrics: Metrics) -> None:
    metrics.set_next_action("a", "restart", "Deployment", "ns", 100.0)
    metrics.set_next_action("b", "restart", "Deployment", "ns", 200.0)
    metrics.set_next_action("a", "restart", "Deployment", "ns", None)
    metrics.drop_object_series("b")
    assert next_action_series(metrics) == {}
    assert metrics.tracked_next_actions == 0
    text = generate_latest(metrics.registry).decode()
    assert not any(line.startswith(NEXT + "{") for line in text.splitlines())


def test_actions_of_one_object_are_tracked_separately(metrics: Metrics) -> None:
    metrics.set_next_action("d", "restart", "Deployment", "ns", 300.0)
    metrics.set_next_action("d", "delete", "Deployment", "ns", 100.0)
    assert next_action_series(metrics) == {
        ("restart", "Deployment", "ns"): 300.0,
        ("delete", "Deployment", "ns"): 100.0,
    }
    metrics.drop_object_series("d")
    assert next_action_series(metrics) == {}


def test_an_object_moving_to_another_label_set_leaves_the_old_one(metrics: Metrics) -> None:
    metrics.set_next_action("x", "delete", "ConfigMap", "a", 100.0)
    metrics.set_next_action("x", "delete", "ConfigMap", "b", 200.0)
    assert next_action_series(metrics) == {("delete", "ConfigMap", "b"): 200.0}


def test_repeated_updates_do_not_grow_without_bound(metrics: Metrics) -> None:
    rng = random.Random(7)
    for _ in range(20_000):
        metrics.set_next_action(rng.randrange(10), "delete", "Secret", "", rng.random() * 1e6)
    heaps = metrics._next_actions._sets  # white box: stale heap entries are compacted
    assert sum(len(h.heap) for h in heaps.values()) <= 2 * 10 + 16


def test_the_gauge_is_written_only_when_a_minimum_moves(metrics: Metrics) -> None:
    writes: list[tuple[str, ...]] = []
    labels = metrics.next_action_timestamp.labels

    def counting(*values: str) -> Any:
        writes.append(values)
        return labels(*values)

    metrics.next_action_timestamp.labels = counting  # type: ignore[method-assign,assignment]
    for i in range(100):  # a burst: one due time for all
        metrics.set_next_action(("cm", i), "delete", "ConfigMap", "ns", 500.0)
    for i in range(99):
        metrics.set_next_action(("cm", i), "delete", "ConfigMap", "ns", None)
    assert len(writes) == 1
    metrics.set_next_action(("cm", 99), "delete", "ConfigMap", "ns", 400.0)
    assert len(writes) == 2
    assert next_action_series(metrics) == {("delete", "ConfigMap", "ns"): 400.0}


def test_invalid_next_action_arguments_are_rejected(metrics: Metrics) -> None:
    with pytest.raises(ValueError, match="unknown action"):
        metrics.set_next_action("x", "scale", "Deployment", "ns", 1.0)
    with pytest.raises(ValueError, match="finite"):
        metrics.set_next_action("x", "delete", "Deployment", "ns", float("nan"))


_ops = st.lists(
    st.tuples(
        st.integers(0, 6),  # object
        st.sampled_from(["delete", "restart"]),
        st.sampled_from(["ConfigMap", "Deployment"]),
        st.sampled_from(["", "ns1"]),
        st.one_of(st.none(), st.integers(0, 50).map(float)),
    ),
    max_size=80,
)


@settings(max_examples=150, deadline=None)
@given(ops=_ops)
def test_next_action_matches_a_brute_force_model(
    ops: list[tuple[int, str, str, str, float | None]],
) -> None:
    m = Metrics(process_collectors=False)
    model: dict[tuple[int, str], tuple[tuple[str, str, str], float]] = {}
    for obj, action, kind, namespace, due in ops:
        m.set_next_action(obj, action, kind, namespace, due)
        if due is None:
            model.pop((obj, action), None)
        else:
            model[(obj, action)] = ((action, kind, namespace), due)
        expected: dict[tuple[str, str, str], float] = {}
        for labels, value in model.values():
            expected[labels] = min(value, expected.get(labels, value))
        assert next_action_series(m) == expected


# --- discovery ------------------------------------------------------------------------------


def test_discovery_resources_are_reset_on_every_attempt(metrics: Metrics) -> None:
    metrics.record_discovery_attempt(
        {("discovered", "watchable"): 12, ("failed", "group_discovery"): 1}
    )
    assert sample(metrics, "lifecycle_controller_discovery_resources",
                  result="discovered", reason="watchable") == 12  # fmt: skip
    metrics.record_discovery_attempt({("skipped", "subresource"): 30})
    names = {
        (s.labels["result"], s.labels["reason"]): s.value
        for f in metrics.registry.collect()
        if f.name == "lifecycle_controller_discovery_resources"
        for s in f.samples
    }
    assert names == {("skipped", "subresource"): 30}
    assert sample(metrics, "lifecycle_controller_discovery_ready") == 0
    metrics.set_discovery_ready(True)
    assert sample(metrics, "lifecycle_controller_discovery_ready") == 1


# --- queue and reconcile adapters -----------------------------------------------------------


async def test_queue_adapter_follows_a_work_queue(clock: FakeClock) -> None:
    metrics = Metrics(process_collectors=False)
    adapter = metrics.queue_metrics()
    async with WorkQueue[str](
        clock=clock,
        rate_limiter=ItemExponentialFailureRateLimiter(),
        metrics=adapter,
        name="lifecycle",
    ) as queue:
        adapter.attach(queue)
        queue.add("a")
        queue.add("a")  # deduplicated: not an add
        queue.add("b")
        assert sample(metrics, "workqueue_adds_total", name="lifecycle") == 2
        assert sample(metrics, "workqueue_depth", name="lifecycle") == 2

        await clock.advance(3)
        key = await queue.get()
        assert sample(metrics, "workqueue_depth", name="lifecycle") == 1
        assert sample(metrics, "controller_runtime_active_workers", controller="lifecycle") == 1
        assert sample(metrics, "workqueue_queue_duration_seconds_sum", name="lifecycle") == 3

        await clock.advance(2)
        assert sample(metrics, "workqueue_unfinished_work_seconds", name="lifecycle") == 2
        assert sample(metrics, "workqueue_longest_running_processor_seconds",
                      name="lifecycle") == 2  # fmt: skip
        queue.done(key)
        assert sample(metrics, "controller_runtime_active_workers", controller="lifecycle") == 0
        assert sample(metrics, "workqueue_work_duration_seconds_sum", name="lifecycle") == 2
        assert sample(metrics, "workqueue_unfinished_work_seconds", name="lifecycle") == 0

        queue.add_rate_limited("c")
        queue.add_after("d", 10)
        assert sample(metrics, "workqueue_retries_total", name="lifecycle") == 2


def test_reconcile_adapter_counts_results_errors_and_time(metrics: Metrics) -> None:
    observer = metrics.reconcile_metrics()
    observer.observe(ReconcileOutcome.SUCCESS, 0.01)
    observer.observe(ReconcileOutcome.REQUEUE_AFTER, 0.02)
    observer.observe(ReconcileOutcome.ERROR, 0.03)
    observer.observe(ReconcileOutcome.TERMINAL, 0.04)
    labels = {"controller": "lifecycle"}
    for result in ("success", "requeue_after", "error", "terminal"):
        assert sample(metrics, "controller_runtime_reconcile_total", result=result, **labels) == 1
    assert sample(metrics, "controller_runtime_reconcile_errors_total", **labels) == 2
    assert sample(metrics, "controller_runtime_reconcile_time_seconds_count", **labels) == 4


# --- the rest -------------------------------------------------------------------------------


def test_known_label_sets_export_zeros(metrics: Metrics) -> None:
    metrics.declare_kind("Deployment")
    metrics.declare_kind("ConfigMap", actions=["delete"])
    text = generate_latest(metrics.registry).decode()
    for line in (
        'controller_runtime_reconcile_total{controller="lifecycle",result="terminal"} 0.0',
        'controller_runtime_max_concurrent_reconciles{controller="lifecycle"} 1.0',
        'leader_election_master_status{name="lease-x"} 0.0',
        'workqueue_depth{name="lifecycle"} 0.0',
        'workqueue_retries_total{name="lifecycle"} 0.0',
        'lifecycle_actions_total{action="restart",kind="Deployment",result="throttled"} 0.0',
        'lifecycle_actions_total{action="delete",kind="ConfigMap",result="dry_run"} 0.0',
        'lifecycle_misconfigurations_total{kind="ConfigMap",reason="invalid_timezone"} 0.0',
        "lifecycle_controller_discovery_ready 0.0",
    ):
        assert line in text
    assert 'action="restart",kind="ConfigMap"' not in text


def test_counters_and_gauges_of_the_engines(metrics: Metrics) -> None:
    metrics.count_action("delete", "ConfigMap", "success")
    metrics.count_misconfiguration("Deployment", "invalid_annotation")
    metrics.observe_lateness(0.3)
    metrics.observe_lateness(-1)  # early completion counts as on time
    metrics.observe_request("get", "200")
    metrics.observe_request("POST", "<error>")
    metrics.set_leader(True)
    metrics.set_max_concurrent_reconciles(4)
    metrics.count_watch_restart("deployments.apps", "expired")
    metrics.count_relist("deployments.apps")
    metrics.set_cache_objects("deployments.apps", 7)
    metrics.set_ledger_arms(3)
    assert sample(metrics, "lifecycle_actions_total",
                  action="delete", kind="ConfigMap", result="success") == 1  # fmt: skip
    assert sample(metrics, "lifecycle_misconfigurations_total",
                  kind="Deployment", reason="invalid_annotation") == 1  # fmt: skip
    assert sample(metrics, "lifecycle_action_lateness_seconds_sum") == pytest.approx(0.3)
    assert sample(metrics, "lifecycle_action_lateness_seconds_bucket", le="0.05") == 1
    assert sample(metrics, "rest_client_requests_total", code="200", method="GET") == 1
    assert sample(metrics, "rest_client_requests_total", code="<error>", method="POST") == 1
    assert sample(metrics, "leader_election_master_status", name="lease-x") == 1
    assert sample(metrics, "controller_runtime_max_concurrent_reconciles",
                  controller="lifecycle") == 4  # fmt: skip
    assert sample(metrics, "lifecycle_watch_restarts_total",
                  resource="deployments.apps", reason="expired") == 1  # fmt: skip
    assert sample(metrics, "lifecycle_relists_total", resource="deployments.apps") == 1
    assert sample(metrics, "lifecycle_cache_objects", resource="deployments.apps") == 7
    metrics.drop_resource_series("deployments.apps")
    assert sample(metrics, "lifecycle_cache_objects", resource="deployments.apps") is None
    metrics.set_cache_objects("deployments.apps", 2)  # watched again: the series is back
    assert sample(metrics, "lifecycle_cache_objects", resource="deployments.apps") == 2
    assert sample(metrics, "lifecycle_ledger_arms") == 3
    metrics.set_ledger_arms(3)
    metrics.set_ledger_arms(0)
    assert sample(metrics, "lifecycle_ledger_arms") == 0


def test_no_per_object_labels() -> None:
    allowed = {"action", "kind", "namespace", "result", "reason", "controller", "name",
               "code", "method", "resource", "le", "source"}  # fmt: skip
    metrics = Metrics()
    metrics.set_next_action("x", "delete", "ConfigMap", "ns", 1.0)
    metrics.declare_kind("ConfigMap")
    labels = {
        label for family in metrics.registry.collect()
        if not family.name.startswith(("python_", "process_"))
        for s in family.samples for label in s.labels
    }  # fmt: skip
    assert labels <= allowed
    text = generate_latest(metrics.registry).decode()
    assert "process_cpu_seconds_total" in text or "python_info" in text


def test_no_created_series(metrics: Metrics) -> None:
    """prometheus-client's ``*_created`` start times (one per counter, histogram and child)
    are not exported."""
    metrics.declare_kind("ConfigMap")
    metrics.count_action("delete", "ConfigMap", "success")
    metrics.observe_lateness(3.0)
    metrics.observe_request("GET", "200")
    text = generate_latest(metrics.registry).decode()
    assert "lifecycle_actions_total{" in text
    assert "_created" not in text


def test_the_next_action_gauge_is_named_in_seconds(metrics: Metrics) -> None:
    metrics.set_next_action("x", "delete", "ConfigMap", "ns", 1234.0)
    text = generate_latest(metrics.registry).decode()
    line = (
        'lifecycle_next_action_timestamp_seconds{action="delete",kind="ConfigMap",namespace="ns"}'
    )
    assert f"{line} 1234.0" in text
    assert "lifecycle_next_action_timestamp{" not in text


def test_no_leader_series_without_leader_election() -> None:
    metrics = Metrics(leader_election_id="", process_collectors=False)
    metrics.set_leader(True)  # not called without an elector; harmless if it were
    text = generate_latest(metrics.registry).decode()
    assert "leader_election_master_status{" not in text
    assert "# TYPE leader_election_master_status gauge" in text  # the family is still declared


class _LateClock(FakeClock):
    """Wakes every sleeper ``lag`` seconds late, like a busy event loop."""

    lag = 0.25

    async def sleep(self, seconds: float) -> None:
        await super().sleep(seconds + self.lag)


async def test_loop_lag_monitor_records_late_wakeups(metrics: Metrics) -> None:
    clock = _LateClock()
    task = asyncio.create_task(run_loop_lag_monitor(metrics.event_loop_lag, clock, interval=1.0))
    await clock.advance(3 * 1.25)
    task.cancel()
    with contextlib.suppress(asyncio.CancelledError):
        await task
    assert sample(metrics, "lifecycle_event_loop_lag_seconds_count") == 3
    assert sample(metrics, "lifecycle_event_loop_lag_seconds_sum") == pytest.approx(0.75)
    with pytest.raises(ValueError, match="interval"):
        await run_loop_lag_monitor(metrics.event_loop_lag, clock, interval=0)
    with pytest.raises(ValueError, match="idle_interval"):
        await run_loop_lag_monitor(metrics.event_loop_lag, clock, idle_interval=math.inf)


def _lag_count(metrics: Metrics) -> float | None:
    return sample(metrics, "lifecycle_event_loop_lag_seconds_count")


def _start_probe(
    metrics: Metrics, clock: _LateClock, *, busy: Callable[[], bool], activity: asyncio.Event
) -> asyncio.Task[None]:
    """The probe as a task: a sample every 1 s while there is work, every 10 s without."""
    probe = run_loop_lag_monitor(
        metrics.event_loop_lag,
        clock,
        interval=1.0,
        idle_interval=10.0,
        busy=busy,
        activity=activity,
    )
    return asyncio.create_task(probe)


async def test_loop_lag_monitor_samples_slowly_while_idle_and_fast_while_busy(
    metrics: Metrics,
) -> None:
    """Idle (not busy, no activity): one sample per idle interval, still measuring how late
    it was; busy: one per interval; idle again: back to the idle interval."""
    clock = _LateClock()
    working = False
    task = _start_probe(metrics, clock, busy=lambda: working, activity=asyncio.Event())
    await clock.advance(2 * 10.25)
    assert _lag_count(metrics) == 2
    assert sample(metrics, "lifecycle_event_loop_lag_seconds_sum") == pytest.approx(0.5)
    working = True
    await clock.advance(10.25)  # the idle sleep in progress ends first
    assert _lag_count(metrics) == 3
    await clock.advance(4 * 1.25)
    assert _lag_count(metrics) == 7
    working = False
    await clock.advance(1.25)  # the fast sleep in progress
    assert _lag_count(metrics) == 8
    await clock.advance(5 * 1.25)
    assert _lag_count(metrics) == 8  # idle again: nothing until the idle interval is up
    await clock.advance(10.25 - 5 * 1.25)
    assert _lag_count(metrics) == 9
    task.cancel()
    with contextlib.suppress(asyncio.CancelledError):
        await task


async def test_loop_lag_monitor_is_woken_by_activity(metrics: Metrics) -> None:
    """Activity ends an idle sleep at once (that wake-up is not a sample: it was not late)
    and buys fast samples until a wake-up finds no new activity."""
    clock = _LateClock()
    activity = asyncio.Event()
    task = _start_probe(metrics, clock, busy=lambda: False, activity=activity)
    await clock.advance(3.0)
    assert _lag_count(metrics) is None or _lag_count(metrics) == 0
    activity.set()
    await clock.advance(1.25)
    assert _lag_count(metrics) == 1  # the fast sample after the wake-up
    activity.set()  # more work arrived meanwhile
    await clock.advance(1.25)
    assert _lag_count(metrics) == 2
    await clock.advance(1.25)  # no activity since: the idle sleep began
    await clock.advance(5 * 1.25)
    assert _lag_count(metrics) == 2
    task.cancel()
    with contextlib.suppress(asyncio.CancelledError):
        await task


async def test_queued_keys_tell_the_lag_probe_work_arrived() -> None:
    """A key added, or coming due on the queue's own timer (no watch event announces it),
    sets the probe's activity; the queue counts keys in flight for its busy test."""
    clock = FakeClock()
    activity = asyncio.Event()
    queue = WorkQueue[str](
        rate_limiter=ItemExponentialFailureRateLimiter(),
        clock=clock,
        metrics=ActiveQueueMetrics(NoopQueueMetrics(), activity),
    )
    async with queue as q:
        q.add_after("later", 5.0)
        assert not activity.is_set()
        await clock.advance(5.0)
        assert activity.is_set()
        assert len(q) == 1
        activity.clear()
        q.add("now")
        assert activity.is_set()
        assert q.in_flight == 0
        key = await q.get()
        assert q.in_flight == 1
        q.done(key)
        assert q.in_flight == 0
