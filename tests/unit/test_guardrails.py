"""The blast-radius gates of the executor on the fake API server and the fake clock.

docs/behaviour.md#blast-radius-controls: the circuit breaker trips before the (N+1)th action
and latches in its ConfigMap, a reset releases the held objects; the restart guard defers a
restart inside ``--min-restart-interval``; the jitter delays one; the rollout tracker limits
rollouts in progress, follows them and reports completion or a stall.
"""

from __future__ import annotations

import asyncio
from typing import Any

from lifecycle_controller.controller.events.recorder import KubeEventRecorder
from lifecycle_controller.controller.guardrails.breaker import CircuitBreaker
from lifecycle_controller.controller.guardrails.state import RestartPacing
from lifecycle_controller.controller.reconcile.assembly import build_reconciler
from lifecycle_controller.controller.reconcile.reconciler import Reconciler
from lifecycle_controller.controller.rollout.tracker import (
    FORCED_READ_TICKS,
    MAX_DEFERRED_TICKS,
    MAX_FORCED_READ_TICKS,
    RolloutTracker,
)
from lifecycle_controller.controller.watch.cache import CachedObject, MetadataCache
from lifecycle_controller.controller.work.result import Result
from lifecycle_controller.core import Action, DecisionSettings, Delete, Failure, Ledger
from lifecycle_controller.core.decision.guardrails import GuardrailFacts, HoldReason, check
from lifecycle_controller.core.decision.pacing import restart_jitter_ns
from lifecycle_controller.core.objects import keys
from lifecycle_controller.core.objects.resources import ObjectKey, ResourceType
from lifecycle_controller.core.text.timestamps import parse_rfc3339
from lifecycle_controller.kube import EVENTS, KubeClient
from lifecycle_controller.kube.breaker_store import read_breaker, reset_breaker
from tests.doubles.fakeapi import CONFIGMAPS, DEPLOYMENTS, FakeApiServer
from tests.doubles.fakeclock import FakeClock
from tests.unit.support import annotated, eventually

DUE = "2025-12-31T23:00:00Z"  # an hour before the fake clock's start
FAILURE = Failure(reason="DeletionFailed", message_prefix="")


class Metrics:
    def __init__(self) -> None:
        self.open: list[bool] = []
        self.trips = 0
        self.rollouts: list[tuple[str, str]] = []
        self.in_progress = 0
        self.states: list[str] = []

    def count_action_source(self, action: str, source: str, result: str) -> None:
        pass

    def count_action(self, action: str, kind: str, result: str) -> None: ...
    def count_misconfiguration(self, kind: str, reason: str) -> None: ...
    def observe_lateness(self, seconds: float) -> None: ...
    def set_next_action(self, *args: Any) -> None: ...
    def drop_object_series(self, key_id: str) -> None: ...
    def set_ledger_arms(self, n: int) -> None: ...

    def set_breaker_open(self, open_: bool) -> None:
        self.open.append(open_)

    def count_breaker_trip(self) -> None:
        self.trips += 1

    def observe_rollout(self, kind: str, result: str, seconds: float) -> None:
        self.rollouts.append((kind, result))

    def set_rollouts_in_progress(self, count: int) -> None:
        self.in_progress = count

    def count_rollout_state(self, source: str) -> None:
        self.states.append(source)


def build(
    kube: KubeClient,
    clock: FakeClock,
    *,
    breaker: CircuitBreaker | None = None,
    pacing: RestartPacing | None = None,
    rollouts: RolloutTracker | None = None,
) -> tuple[Reconciler, MetadataCache]:
    cache = MetadataCache()
    reconciler = build_reconciler(
        api=kube,
        cache=cache,
        recorder=KubeEventRecorder(kube, clock=clock, reporting_instance="test"),
        clock=clock,
        ledger=Ledger(),
        settings=DecisionSettings(),
        metrics=Metrics(),
        breaker=breaker,
        pacing=pacing,
        rollouts=rollouts,
    )
    return reconciler, cache


def put(
    api: FakeApiServer, cache: MetadataCache, resource: ResourceType, body: dict[str, Any]
) -> ObjectKey:
    created = api.store.create(resource, "team", body)
    key = ObjectKey(resource, "team", created["metadata"]["name"])
    cache.put(key, CachedObject.from_metadata(created["metadata"]))
    return key


def reasons(api: FakeApiServer, name: str) -> list[str]:
    return [e["reason"] for e in api.store.objects(EVENTS) if e["regarding"]["name"] == name]


def deployment(name: str, annotations: dict[str, str], **template: str) -> dict[str, Any]:
    body = annotated(name, annotations)
    body["spec"] = {
        "replicas": 0,
        "template": {"metadata": {"annotations": dict(template)}, "spec": {}},
    }
    return body


async def test_the_breaker_trips_latches_and_releases_on_reset(
    api: FakeApiServer, kube: KubeClient, clock: FakeClock
) -> None:
    metrics = Metrics()
    breaker = CircuitBreaker(
        kube,
        namespace="ops",
        name="lease-breaker",
        limit=2,
        window=600,
        clock=clock,
        metrics=metrics,
    )
    released: list[ObjectKey] = []
    breaker.on_release = released.append
    await breaker.load()
    reconcile, cache = build(kube, clock, breaker=breaker)
    keys_ = [
        put(api, cache, CONFIGMAPS, annotated(f"cm{i}", {keys.DELETE_AT: DUE})) for i in range(3)
    ]
    results = [await reconcile(key) for key in keys_]
    assert results[:2] == [None, None]
    assert results[2] == Result(requeue_after=30.0)
    assert [c["metadata"]["name"] for c in api.store.objects(CONFIGMAPS, "team")] == ["cm2"]
    assert reasons(api, "cm2") == ["ActionsHalted"]
    assert metrics.trips == 1
    state = await read_breaker(kube, "ops", "lease-breaker")
    assert state.open
    assert state.actions == 2
    assert state.window == "10m0s"
    # Held again: no second Event for the same trip, still nothing sent.
    assert await reconcile(keys_[2]) == Result(requeue_after=30.0)
    assert reasons(api, "cm2") == ["ActionsHalted"]
    # A new process reads the latched state before acting.
    again = CircuitBreaker(
        kube,
        namespace="ops",
        name="lease-breaker",
        limit=9,
        window=600,
        clock=clock,
        metrics=Metrics(),
    )
    await again.load()
    assert again.is_open
    facts = again.facts(keys_[0])
    assert facts is not None
    assert facts.open
    assert not facts.released
    await reset_breaker(kube, "ops", "lease-breaker", clock.now_ns())
    await breaker.load()
    assert released == [keys_[2]]
    assert not breaker.is_open
    assert await reconcile(keys_[2]) is None
    assert api.store.objects(CONFIGMAPS, "team") == []


async def test_the_breaker_poll_sees_a_reset(
    api: FakeApiServer, kube: KubeClient, clock: FakeClock
) -> None:
    breaker = CircuitBreaker(
        kube,
        namespace="ops",
        name="b",
        limit=1,
        window=60,
        clock=clock,
        metrics=Metrics(),
        poll_interval=5,
    )
    key = ObjectKey(CONFIGMAPS, "team", "cm")
    assert breaker.reserve(key)
    breaker.settle(key, counted=True, carried_out=True)
    await breaker.trip("2026-01-01T00:00:00Z")
    task = asyncio.create_task(breaker.run())
    try:
        await reset_breaker(kube, "ops", "b", clock.now_ns())
        await eventually(lambda: bool(clock.sleeper_deadlines()))
        await clock.advance(5)
        await eventually(lambda: not breaker.is_open)
        facts = breaker.facts(key)
        assert facts is not None
        assert not facts.open
        assert facts.in_window == 0  # a reset starts an empty window
    finally:
        task.cancel()


async def test_the_restart_guard_defers_a_restart_inside_the_interval(
    api: FakeApiServer, kube: KubeClient, clock: FakeClock
) -> None:
    reconcile, cache = build(kube, clock, pacing=RestartPacing(min_interval_ns=600 * 10**9))
    recent = "2025-12-31T23:55:00Z"  # five minutes before now
    key = put(
        api,
        cache,
        DEPLOYMENTS,
        deployment("web", {keys.RESTART_AT: DUE}, **{keys.RESTARTED_AT: recent}),
    )
    assert await reconcile(key) == Result(requeue_after=300.0)
    assert reasons(api, "web") == ["RestartDeferred"]
    assert await reconcile(key) == Result(requeue_after=300.0)
    assert reasons(api, "web") == ["RestartDeferred"]  # once per occurrence
    await clock.advance(300)
    assert await reconcile(key) is None
    marker = api.store.get(DEPLOYMENTS, "team", "web")["spec"]["template"]["metadata"]
    assert marker["annotations"][keys.RESTARTED_AT] > recent


async def test_the_jitter_delays_a_restart_deterministically(
    api: FakeApiServer, kube: KubeClient, clock: FakeClock
) -> None:
    jitter_ns = 7200 * 10**9
    reconcile, cache = build(kube, clock, pacing=RestartPacing(jitter_ns=jitter_ns))
    due = "2026-01-01T00:00:00Z"  # due now: any jitter delays it
    key = put(api, cache, DEPLOYMENTS, deployment("web", {keys.RESTART_AT: due}))
    obj = cache.get(key)
    assert obj is not None
    delay = restart_jitter_ns(obj.uid, parse_rfc3339(due), jitter_ns) / 10**9
    assert delay > 0
    assert await reconcile(key) == Result(requeue_after=delay)
    assert reasons(api, "web") == []  # a jitter wait is logged, not reported
    await clock.advance(delay)
    assert await reconcile(key) is None
    assert reasons(api, "web") == ["RestartTriggered"]


async def test_a_slot_kept_across_a_conflict_goes_back_when_the_new_decision_does_not_restart(
    api: FakeApiServer, kube: KubeClient, clock: FakeClock
) -> None:
    recorder = KubeEventRecorder(kube, clock=clock, reporting_instance="test")
    tracker = RolloutTracker(kube, recorder, clock, Metrics(), limit=1)
    reconcile, cache = build(kube, clock, rollouts=tracker)
    key = put(api, cache, DEPLOYMENTS, deployment("web", {keys.RESTART_AT: DUE}))
    # Someone takes the annotation off after the cache saw it: the guarded patch meets 409,
    # the re-read finds nothing to do, and the slot the restart reserved is free again.
    api.store.patch(DEPLOYMENTS, "team", "web", {"metadata": {"annotations": None}})
    assert await reconcile(key) is None
    assert [r.method for r in api.requests if r.method in ("PATCH", "GET")] == ["PATCH", "GET"]
    assert tracker.in_progress == 0
    assert tracker.has_turn(ObjectKey(DEPLOYMENTS, "team", "other"), None)
    assert reasons(api, "web") == []


async def test_rollouts_are_limited_followed_and_reported(
    api: FakeApiServer, kube: KubeClient, clock: FakeClock
) -> None:
    recorder = KubeEventRecorder(kube, clock=clock, reporting_instance="test")
    metrics = Metrics()
    tracker = RolloutTracker(kube, recorder, clock, metrics, limit=1, timeout=10, poll_interval=1)
    woken: list[ObjectKey] = []
    tracker.wake = woken.append
    reconcile, cache = build(kube, clock, rollouts=tracker)
    done = put(api, cache, DEPLOYMENTS, deployment("done", {keys.RESTART_AT: DUE}))
    stuck = put(
        api, cache, DEPLOYMENTS, deployment("stuck", {keys.RESTART_AT: "2025-12-31T23:30:00Z"})
    )
    assert await reconcile(done) is None
    assert tracker.in_progress == 1
    assert await reconcile(stuck) == Result(requeue_after=30.0)
    assert reasons(api, "stuck") == ["RestartQueued"]
    obj = api.store.get(DEPLOYMENTS, "team", "done")
    generation = obj["metadata"].get("generation", 0)
    # The fake API has no Deployment controller: write the status it would.
    api.store.patch(DEPLOYMENTS, "team", "done", {"status": {"observedGeneration": generation}})
    await eventually(lambda: bool(clock.sleeper_deadlines()))
    await clock.advance(1)
    await eventually(lambda: "RolloutCompleted" in reasons(api, "done"))
    await eventually(lambda: tracker.in_progress == 0)
    assert woken == [stuck]
    assert await reconcile(stuck) is None
    # "stuck" has replicas 1 and no status: it stalls after the timeout.
    api.store.patch(DEPLOYMENTS, "team", "stuck", {"spec": {"replicas": 1}})
    for _ in range(12):
        await eventually(lambda: bool(clock.sleeper_deadlines()) or tracker.in_progress == 0)
        await clock.advance(1)
    await eventually(lambda: "RolloutStalled" in reasons(api, "stuck"))
    assert metrics.rollouts == [("Deployment", "completed"), ("Deployment", "stalled")]
    await tracker.aclose()


def following(
    kube: KubeClient, clock: FakeClock, *, timeout: float, cached: bool = True
) -> tuple[RolloutTracker, Reconciler, MetadataCache]:
    """A tracker ticking every second, its reconciler and cache (versions read from the cache
    when ``cached``)."""
    recorder = KubeEventRecorder(kube, clock=clock, reporting_instance="test")
    tracker = RolloutTracker(kube, recorder, clock, Metrics(), timeout=timeout, poll_interval=1)
    reconcile, cache = build(kube, clock, rollouts=tracker)
    if cached:
        tracker.version_of = lambda key: o.resource_version if (o := cache.get(key)) else None
    return tracker, reconcile, cache


def status_reads(api: FakeApiServer) -> int:
    """The Deployment reads sent so far (watches aside)."""
    return len([r for r in api.requests_to("GET") if "/deployments" in r.path and not r.is_watch])


async def restarted_and_rolled_out(
    api: FakeApiServer, kube: KubeClient, clock: FakeClock, *, timeout: float, cached: bool
) -> tuple[RolloutTracker, MetadataCache, ObjectKey]:
    """Restart "web" through a tracker (its versions read from the cache when ``cached``),
    then write the status the Deployment controller would: the rollout is complete in the
    store. The fake has no Deployment controller and no informer: the cache still holds the
    patched state."""
    tracker, reconcile, cache = following(kube, clock, timeout=timeout, cached=cached)
    key = put(api, cache, DEPLOYMENTS, deployment("web", {keys.RESTART_AT: DUE}))
    assert await reconcile(key) is None  # the patch's answer is in the cache (refresh)
    generation = api.store.get(DEPLOYMENTS, "team", "web")["metadata"].get("generation", 0)
    api.store.patch(DEPLOYMENTS, "team", "web", {"status": {"observedGeneration": generation}})
    return tracker, cache, key


async def tick(clock: FakeClock) -> None:
    """Advance to the tracker's next one-second tick."""
    await eventually(lambda: bool(clock.sleeper_deadlines()))
    await clock.advance(1)


async def test_a_rollout_is_read_only_after_its_cached_version_moves(
    api: FakeApiServer, kube: KubeClient, clock: FakeClock
) -> None:
    tracker, cache, key = await restarted_and_rolled_out(api, kube, clock, timeout=60, cached=True)

    for _ in range(3):
        await tick(clock)
        await asyncio.sleep(0)
    assert status_reads(api) == 0  # unchanged cached version: nothing to read
    moved = api.store.get(DEPLOYMENTS, "team", "web")
    cache.put(key, CachedObject.from_metadata(moved["metadata"]))  # the watch event arrives
    tracker.moved(key)  # and the informer's change handler tells the tracker
    await tick(clock)
    await eventually(lambda: "RolloutCompleted" in reasons(api, "web"))
    assert status_reads(api) == 1
    await tracker.aclose()


async def test_a_follower_s_versions_are_compared_only_after_its_workload_moved(
    api: FakeApiServer, kube: KubeClient, clock: FakeClock
) -> None:
    tracker, _, key = await restarted_and_rolled_out(api, kube, clock, timeout=60, cached=True)
    looked: list[ObjectKey] = []
    cached_version = tracker.version_of

    def version_of(looked_at: ObjectKey) -> str | None:
        looked.append(looked_at)
        return cached_version(looked_at)

    tracker.version_of = version_of

    await tick(clock)  # the first tick compares them (nothing is known yet) and they match
    await eventually(lambda: tracker.awaiting_turn == 1)
    assert looked == [key]
    for _ in range(3):
        await tick(clock)
        await eventually(lambda: tracker.awaiting_turn == 1)
    assert looked == [key], "a workload that did not move is not looked at"

    tracker.moved(key)  # a change the cache delivered, with the version it had: no turn
    await tick(clock)
    await eventually(lambda: tracker.awaiting_turn == 1)
    assert looked == [key, key]
    assert status_reads(api) == 0
    await tracker.aclose()


async def test_a_rollout_is_read_now_and_then_when_the_cache_does_not_move(
    api: FakeApiServer, kube: KubeClient, clock: FakeClock
) -> None:
    tracker, _, _ = await restarted_and_rolled_out(api, kube, clock, timeout=60, cached=True)
    for _ in range(FORCED_READ_TICKS - 1):  # a watch that is down: the cache never moves
        await tick(clock)
    assert "RolloutCompleted" not in reasons(api, "web")
    await tick(clock)
    await eventually(lambda: "RolloutCompleted" in reasons(api, "web"))
    await tracker.aclose()


async def test_forced_reads_that_find_nothing_new_back_off(
    api: FakeApiServer, kube: KubeClient, clock: FakeClock
) -> None:
    tracker, reconcile, cache = following(kube, clock, timeout=600)
    key = put(api, cache, DEPLOYMENTS, deployment("web", {keys.RESTART_AT: DUE}))
    assert await reconcile(key) is None  # followed; its status never completes
    api.store.patch(DEPLOYMENTS, "team", "web", {"spec": {"replicas": 1}})
    cache.put(
        key, CachedObject.from_metadata(api.store.get(DEPLOYMENTS, "team", "web")["metadata"])
    )

    reads_at: list[int] = []
    for number in range(1, 1 + 1 + 10 + 20 + 40 + 60 + 60):
        await tick(clock)
        await eventually(lambda: tracker.awaiting_turn == 1)  # this tick's read is done
        if status_reads(api) > len(reads_at):
            reads_at.append(number)
    # The moved version is read at once; then the cache stays right and the waits double.
    assert reads_at == [1, 11, 31, 71, 131, 191]
    assert MAX_FORCED_READ_TICKS == 60
    await tracker.aclose()


async def test_one_timer_serves_every_followed_rollout(
    api: FakeApiServer, kube: KubeClient, clock: FakeClock
) -> None:
    tracker, reconcile, cache = following(kube, clock, timeout=600)
    for i in range(20):
        assert (
            await reconcile(
                put(api, cache, DEPLOYMENTS, deployment(f"web-{i}", {keys.RESTART_AT: DUE}))
            )
            is None
        )
    assert tracker.in_progress == 20
    await tick(clock)
    await tick(clock)
    assert len(clock.sleeper_deadlines()) == 1  # the ticker's, not one per rollout
    await tracker.aclose()


async def test_rollout_reads_wait_while_actions_queue_but_not_forever(
    api: FakeApiServer, kube: KubeClient, clock: FakeClock
) -> None:
    tracker, _, _ = await restarted_and_rolled_out(api, kube, clock, timeout=120, cached=False)
    tracker.busy = lambda: True  # a storm: keys always waiting for a worker
    for _ in range(MAX_DEFERRED_TICKS):
        await tick(clock)
    assert "RolloutCompleted" not in reasons(api, "web")  # deferred: actions come first
    await tick(clock)
    await eventually(lambda: "RolloutCompleted" in reasons(api, "web"))  # but not forever
    await tracker.aclose()


async def test_the_breaker_waits_for_actions_in_flight_before_it_trips(
    kube: KubeClient, clock: FakeClock
) -> None:
    breaker = CircuitBreaker(
        kube, namespace="ops", name="b", limit=1, window=60, clock=clock, metrics=Metrics()
    )
    first, second = (ObjectKey(CONFIGMAPS, "team", name) for name in ("a", "b"))
    delete = Delete(uid="u", resource_version="1", action=Action.DELETE, failure=FAILURE)

    def verdict(key: ObjectKey) -> HoldReason | None:
        hold = check(delete, GuardrailFacts(now_ns=clock.now_ns(), breaker=breaker.facts(key)))
        return None if hold is None else hold.reason

    assert verdict(first) is None
    assert breaker.reserve(first)
    assert verdict(second) is HoldReason.BREAKER_SETTLING  # full only with one in flight
    breaker.settle(first, counted=True, carried_out=False)  # its write failed: place back
    assert verdict(second) is None
    assert breaker.reserve(second)
    breaker.settle(second, counted=True, carried_out=True)
    assert verdict(first) is HoldReason.BREAKER_TRIPPED  # now the (N+1)th: trip
    assert not breaker.is_open  # the check only says so; trip() opens it


async def test_a_trip_is_announced_once_on_the_breaker_configmap_with_the_reset_command(
    api: FakeApiServer, kube: KubeClient, clock: FakeClock
) -> None:
    breaker = CircuitBreaker(
        kube,
        namespace="ops",
        name="lease-breaker",
        limit=2,
        window=600,
        clock=clock,
        metrics=Metrics(),
        recorder=KubeEventRecorder(kube, clock=clock, reporting_instance="test"),
        reset_command="lifecycle-controller breaker reset --leader-election-id lease",
    )
    await breaker.load()
    reconcile, cache = build(kube, clock, breaker=breaker)
    for i in range(4):
        await reconcile(put(api, cache, CONFIGMAPS, annotated(f"cm{i}", {keys.DELETE_AT: DUE})))
    (trip,) = [e for e in api.store.objects(EVENTS) if e["reason"] == "CircuitBreakerTripped"]
    assert trip["regarding"]["name"] == "lease-breaker"
    assert trip["regarding"]["namespace"] == "ops"
    assert trip["note"] == (
        "Circuit breaker tripped: 2 actions within 10m0s; every further deletion and restart "
        "is held until `lifecycle-controller breaker reset --leader-election-id lease`"
    )
    assert reasons(api, "cm2") == reasons(api, "cm3") == ["ActionsHalted"]
