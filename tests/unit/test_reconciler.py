"""The reconciler and its executor, through ``Reconciler.__call__``, on the fake API server.

Conflicts here are honest where they can be: the object changes in the API after the cache
saw it, and the guarded write meets 409 because its resourceVersion is stale. Persistent
conflicts and server errors are injected faults. Time is the fake clock's.
"""

from __future__ import annotations

import asyncio
from dataclasses import dataclass, field
from typing import Any

import pytest

from lifecycle_controller.controller.events.recorder import KubeEventRecorder
from lifecycle_controller.controller.reconcile.assembly import build_reconciler
from lifecycle_controller.controller.reconcile.reconciler import Reconciler
from lifecycle_controller.controller.watch.cache import CachedObject, MetadataCache
from lifecycle_controller.controller.work.result import NotLeading, Result
from lifecycle_controller.controller.work.workers import run_workers
from lifecycle_controller.core import Action, DecisionSettings, Event, Ledger, ObjectRef
from lifecycle_controller.core.objects import keys
from lifecycle_controller.core.objects.resources import ObjectKey, ResourceType
from lifecycle_controller.kube import EVENTS, Conflict, KubeClient, ServerError
from lifecycle_controller.machinery.budget import ActionBudget
from lifecycle_controller.machinery.ratelimit import default_controller_rate_limiter
from lifecycle_controller.machinery.workqueue import WorkQueue
from tests.doubles.fakeapi import CONFIGMAPS, DEPLOYMENTS, FakeApiServer
from tests.doubles.fakeclock import FakeClock
from tests.unit.support import annotated, eventually

HOUR = 3600.0
HOUR_NS = 3600 * 10**9


@dataclass
class Metrics:
    actions: list[tuple[str, str, str]] = field(default_factory=list)
    misconfigurations: list[tuple[str, str]] = field(default_factory=list)
    lateness: list[float] = field(default_factory=list)
    forgotten: list[str] = field(default_factory=list)

    def count_action_source(self, action: str, source: str, result: str) -> None:
        pass

    def count_action(self, action: str, kind: str, result: str) -> None:
        self.actions.append((action, kind, result))

    def count_misconfiguration(self, kind: str, reason: str) -> None:
        self.misconfigurations.append((kind, reason))

    def observe_lateness(self, seconds: float) -> None:
        self.lateness.append(seconds)

    def set_next_action(
        self, key_id: str, action: str, kind: str, namespace: str, due_ts: float | None
    ) -> None:
        pass

    def drop_object_series(self, key_id: str) -> None:
        self.forgotten.append(key_id)

    def set_ledger_arms(self, n: int) -> None:
        pass


@dataclass
class Rig:
    api: FakeApiServer
    cache: MetadataCache
    reconcile: Reconciler
    metrics: Metrics

    def cached(self, resource: ResourceType, namespace: str, body: dict[str, Any]) -> ObjectKey:
        """Create the object in the API and show it to the cache, as an informer would."""
        created = self.api.store.create(resource, namespace, body)
        key = ObjectKey(resource, namespace, created["metadata"]["name"])
        self.cache.put(key, CachedObject.from_metadata(created["metadata"]))
        return key

    def events(self) -> list[tuple[str, str]]:
        return [(e["type"], e["reason"]) for e in self.api.store.objects(EVENTS)]


def rig(
    api: FakeApiServer,
    kube: KubeClient,
    clock: FakeClock,
    *,
    deletes_per_minute: int = 0,
    may_write: bool = True,
    dry_run: bool = False,
) -> Rig:
    cache = MetadataCache()
    metrics = Metrics()
    reconciler = build_reconciler(
        api=kube,
        cache=cache,
        recorder=KubeEventRecorder(kube, clock=clock, reporting_instance="test"),
        clock=clock,
        ledger=Ledger(),
        settings=DecisionSettings(dry_run=dry_run),
        metrics=metrics,
        may_write=lambda: may_write,
        budgets={Action.DELETE: ActionBudget(deletes_per_minute, clock=clock)},
    )
    return Rig(api, cache, reconciler, metrics)


TTL = {keys.DELETE_AT: "2026-01-01T01:00:00Z"}  # one hour after the fake clock's start


async def test_an_object_not_yet_due_is_requeued_for_its_due_time(
    api: FakeApiServer, kube: KubeClient, clock: FakeClock
) -> None:
    r = rig(api, kube, clock)
    key = r.cached(CONFIGMAPS, "team", annotated("cm", TTL))
    await clock.advance(600)
    result = await r.reconcile(key)
    assert result == Result(requeue_after=HOUR - 600)
    assert api.requests == []  # decided from the cache alone


async def test_delete_after_is_converted_to_delete_at_by_a_guarded_patch(
    api: FakeApiServer, kube: KubeClient, clock: FakeClock
) -> None:
    r = rig(api, kube, clock)
    key = r.cached(CONFIGMAPS, "team", annotated("cm", {keys.DELETE_AFTER: "1h"}))
    cached = r.cache.get(key)
    assert cached is not None
    await clock.advance(600)
    result = await r.reconcile(key)
    (patch,) = api.requests_to("PATCH")
    assert patch.body["metadata"]["resourceVersion"] == cached.resource_version
    annotations = api.store.get(CONFIGMAPS, "team", "cm")["metadata"]["annotations"]
    assert annotations == {
        keys.DELETE_AT: "2026-01-01T01:10:00Z",
        keys.MANAGED_BY: keys.MANAGED_BY_VALUE,
    }
    # The write changed what decides: decided again at once, now waiting for the deadline.
    assert result == Result(requeue_after=HOUR)
    fresh = r.cache.get(key)
    assert fresh is not None
    assert dict(fresh.annotations) == annotations


async def test_a_due_object_is_deleted_with_preconditions(
    api: FakeApiServer, kube: KubeClient, clock: FakeClock
) -> None:
    r = rig(api, kube, clock)
    key = r.cached(CONFIGMAPS, "team", annotated("cm", TTL))
    cached = r.cache.get(key)
    assert cached is not None
    await clock.advance(HOUR + 5)
    assert await r.reconcile(key) is None
    assert api.store.find(CONFIGMAPS, "team", "cm") is None
    (delete,) = api.requests_to("DELETE")
    assert delete.body["preconditions"] == {
        "uid": cached.uid,
        "resourceVersion": cached.resource_version,
    }
    assert r.events() == [("Normal", "Deleted")]
    assert r.metrics.actions == [("delete", "ConfigMap", "success")]
    assert r.metrics.lateness == [5.0]
    assert r.cache.get(key) is None


async def test_a_stale_cache_conflicts_then_rereads_and_succeeds_quietly(
    api: FakeApiServer, kube: KubeClient, clock: FakeClock
) -> None:
    r = rig(api, kube, clock)
    key = r.cached(CONFIGMAPS, "team", annotated("cm", TTL))
    # Someone else changes the object: the cached resourceVersion is now stale.
    api.store.patch(CONFIGMAPS, "team", "cm", {"metadata": {"labels": {"x": "y"}}})
    await clock.advance(HOUR)
    assert await r.reconcile(key) is None
    assert [(q.method, q.status) for q in api.requests if q.method != "POST"] == [
        ("DELETE", 409),
        ("GET", 200),
        ("DELETE", 200),
    ]
    assert api.requests[1].headers["Accept"].startswith("application/json;as=PartialObjectMetadata")
    assert r.events() == [("Normal", "Deleted")]  # no Warning for a conflict that resolved


async def test_persistent_conflicts_warn_after_the_quiet_retries_and_raise(
    api: FakeApiServer, kube: KubeClient, clock: FakeClock
) -> None:
    r = rig(api, kube, clock)
    key = r.cached(CONFIGMAPS, "team", annotated("cm", TTL))
    api.fail(409, method="DELETE", times=100)
    await clock.advance(HOUR)
    with pytest.raises(Conflict):
        await r.reconcile(key)
    assert len(api.requests_to("DELETE")) == 4  # the first try and three quiet retries
    assert len(api.requests_to("GET")) == 3
    assert r.events() == [("Warning", "DeletionFailed")]
    assert r.metrics.actions == [("delete", "ConfigMap", "error")]
    assert api.store.find(CONFIGMAPS, "team", "cm") is not None


async def test_another_api_error_warns_at_once_and_raises(
    api: FakeApiServer, kube: KubeClient, clock: FakeClock
) -> None:
    r = rig(api, kube, clock)
    key = r.cached(CONFIGMAPS, "team", annotated("cm", TTL))
    api.fail(500, method="DELETE", message="etcd is unhappy")
    await clock.advance(HOUR)
    with pytest.raises(ServerError):
        await r.reconcile(key)
    assert r.events() == [("Warning", "DeletionFailed")]
    (event,) = api.store.objects(EVENTS)
    assert "etcd is unhappy" in event["note"]


async def test_an_object_already_gone_counts_as_deleted(
    api: FakeApiServer, kube: KubeClient, clock: FakeClock
) -> None:
    r = rig(api, kube, clock)
    key = r.cached(CONFIGMAPS, "team", annotated("cm", TTL))
    api.store.delete(CONFIGMAPS, "team", "cm")  # the informer has not seen it yet
    await clock.advance(HOUR)
    assert await r.reconcile(key) is None
    assert [q.status for q in api.requests_to("DELETE")] == [404]
    assert r.metrics.actions == [("delete", "ConfigMap", "success")]
    assert r.cache.get(key) is None


async def test_a_key_missing_from_the_cache_is_forgotten(
    api: FakeApiServer, kube: KubeClient, clock: FakeClock
) -> None:
    r = rig(api, kube, clock)
    key = ObjectKey(CONFIGMAPS, "team", "never-seen")
    assert await r.reconcile(key) is None
    assert r.metrics.forgotten == [key.id]
    assert api.requests == []


async def test_the_budget_throttles_once_then_lets_the_delete_through(
    api: FakeApiServer, kube: KubeClient, clock: FakeClock
) -> None:
    r = rig(api, kube, clock, deletes_per_minute=1)
    first = r.cached(CONFIGMAPS, "team", annotated("a", TTL))
    second = r.cached(CONFIGMAPS, "team", annotated("b", TTL))
    await clock.advance(HOUR)
    assert await r.reconcile(first) is None
    throttled = await r.reconcile(second)
    assert throttled is not None
    assert throttled.requeue_after is not None
    assert 0 < throttled.requeue_after <= 60
    again = await r.reconcile(second)
    assert again is not None
    assert again.requeue_after is not None
    assert r.events().count(("Normal", "ActionThrottled")) == 1  # once per occurrence
    assert api.store.find(CONFIGMAPS, "team", "b") is not None
    await clock.advance(again.requeue_after)
    assert await r.reconcile(second) is None
    assert api.store.find(CONFIGMAPS, "team", "b") is None
    assert r.metrics.actions.count(("delete", "ConfigMap", "throttled")) == 2


async def test_no_write_without_a_fresh_lease(
    api: FakeApiServer, kube: KubeClient, clock: FakeClock
) -> None:
    r = rig(api, kube, clock, may_write=False)
    key = r.cached(CONFIGMAPS, "team", annotated("cm", TTL))
    await clock.advance(HOUR)
    with pytest.raises(NotLeading):
        await r.reconcile(key)
    assert not api.requests_to("DELETE")
    assert api.store.find(CONFIGMAPS, "team", "cm") is not None


async def test_dry_run_reports_without_writing(
    api: FakeApiServer, kube: KubeClient, clock: FakeClock
) -> None:
    r = rig(api, kube, clock, dry_run=True)
    key = r.cached(CONFIGMAPS, "team", annotated("cm", TTL))
    await clock.advance(HOUR)
    await r.reconcile(key)
    assert not api.requests_to("DELETE")
    assert r.events() == [("Normal", "DryRunDelete")]
    assert r.metrics.actions == [("delete", "ConfigMap", "dry_run")]


async def test_an_invalid_value_is_a_misconfiguration_without_writes(
    api: FakeApiServer, kube: KubeClient, clock: FakeClock
) -> None:
    r = rig(api, kube, clock)
    key = r.cached(CONFIGMAPS, "team", annotated("cm", {keys.DELETE_AFTER: "soon"}))
    assert await r.reconcile(key) is None
    assert r.events() == [("Warning", "InvalidAnnotation")]
    assert r.metrics.misconfigurations == [("ConfigMap", "invalid_annotation")]
    assert not [q for q in api.requests if q.method in ("PATCH", "DELETE")]


def deployment(name: str, annotations: dict[str, str], *, paused: bool) -> dict[str, Any]:
    body = annotated(name, annotations)
    body["spec"] = {"paused": paused, "template": {"metadata": {"annotations": {}}}}
    return body


async def test_a_due_restart_patches_the_template_once_and_warns_of_a_paused_rollout(
    api: FakeApiServer, kube: KubeClient, clock: FakeClock
) -> None:
    r = rig(api, kube, clock)
    key = r.cached(
        DEPLOYMENTS,
        "team",
        deployment("web", {keys.RESTART_AT: "2025-12-31T23:00:00Z"}, paused=True),
    )
    cached = r.cache.get(key)
    assert cached is not None
    await r.reconcile(key)
    (patch,) = api.requests_to("PATCH")
    assert patch.headers["Content-Type"] == "application/merge-patch+json"
    assert patch.body["metadata"]["resourceVersion"] == cached.resource_version
    patched = api.store.get(DEPLOYMENTS, "team", "web")
    marker = patched["spec"]["template"]["metadata"]["annotations"][keys.RESTARTED_AT]
    assert marker
    assert patched["metadata"]["annotations"][keys.MANAGED_BY] == keys.MANAGED_BY_VALUE
    assert patched["metadata"]["generation"] == 2
    assert ("Normal", "RestartTriggered") in r.events()
    assert ("Warning", "RolloutBlocked") in r.events()
    # Reconciling again (the informer's event for our own write) does not restart twice.
    await r.reconcile(key)
    assert len(api.requests_to("PATCH")) == 1


async def test_a_patch_of_an_object_gone_meanwhile_forgets_it(
    api: FakeApiServer, kube: KubeClient, clock: FakeClock
) -> None:
    r = rig(api, kube, clock)
    key = r.cached(
        DEPLOYMENTS,
        "team",
        deployment("web", {keys.RESTART_AT: "2025-12-31T23:00:00Z"}, paused=False),
    )
    api.store.delete(DEPLOYMENTS, "team", "web")
    assert await r.reconcile(key) is None
    assert [q.status for q in api.requests_to("PATCH")] == [404]
    assert r.metrics.forgotten


async def test_workers_map_the_reconciler_outcomes_onto_the_queue(
    api: FakeApiServer, kube: KubeClient, clock: FakeClock
) -> None:
    """Not due → requeue at the due time; NotLeading → rate-limited retries; then the delete."""
    leading = [False]
    r = rig(api, kube, clock)
    r.reconcile.writer.may_write = lambda: leading[0]
    key = r.cached(CONFIGMAPS, "team", annotated("cm", TTL))
    queue: WorkQueue[ObjectKey] = WorkQueue(
        rate_limiter=default_controller_rate_limiter(clock), clock=clock
    )
    queue.start()
    workers = asyncio.create_task(run_workers(queue, r.reconcile, 2))
    queue.add(key)
    await clock.settle()  # not due: decided from the cache, no I/O, requeued for the due time
    assert len(queue) == 0
    await clock.advance(HOUR - 1)
    assert queue.num_requeues(key) == 0
    assert api.requests == []
    await clock.advance(1)
    await eventually(lambda: queue.num_requeues(key) == 1)  # retried after 5 ms, 10 ms, ...
    await clock.advance(0.005)
    await eventually(lambda: queue.num_requeues(key) == 2)
    assert not api.requests_to("DELETE")
    leading[0] = True
    await clock.advance(0.01)
    await eventually(lambda: api.store.find(CONFIGMAPS, "team", "cm") is None)
    await eventually(lambda: queue.num_requeues(key) == 0)  # success forgets the backoff
    queue.shutdown()
    await asyncio.wait_for(workers, 5)
    await queue.aclose()


async def test_a_requeue_aims_at_the_due_instant_however_long_the_pass_took(
    api: FakeApiServer, kube: KubeClient, clock: FakeClock
) -> None:
    """Keys deferred to one instant must come due together: the time a pass spends after
    deciding (here, Events that take 2 s to write) is taken off its requeue."""

    class SlowRecorder:
        async def record(self, ref: ObjectRef, event: Event) -> None:
            await clock.advance(2)

    cache = MetadataCache()
    reconcile = build_reconciler(
        api=kube,
        cache=cache,
        recorder=SlowRecorder(),
        clock=clock,
        ledger=Ledger(),
        settings=DecisionSettings(warn_before_ns=HOUR_NS),  # an Upcoming Event at once
    )
    created = api.store.create(CONFIGMAPS, "team", annotated("cm", TTL))
    key = ObjectKey(CONFIGMAPS, "team", "cm")
    cache.put(key, CachedObject.from_metadata(created["metadata"]))
    before = clock.now_ns()
    result = await reconcile(key)
    assert clock.now_ns() - before == 2 * 10**9  # the Event took its time
    assert result == Result(requeue_after=HOUR - 2)  # due at the delete-at all the same
