"""Persisted ``never`` observations through the reconciler, on the fake API server.

docs/behaviour.md#persisted-observations: one guarded record patch per observed
occurrence, none when already recorded, a failed write changes nothing else (the Wait's
requeue stands, the in-memory observation still lets this process act), a new process that
finds the record executes the due occurrence, and a garbled record is only logged.
"""

from __future__ import annotations

from dataclasses import dataclass, field

import pytest
import structlog

from lifecycle_controller.controller.act.observations import garbled_observation
from lifecycle_controller.controller.events.recorder import KubeEventRecorder
from lifecycle_controller.controller.reconcile.assembly import build_reconciler
from lifecycle_controller.controller.reconcile.reconciler import Reconciler
from lifecycle_controller.controller.watch.cache import CachedObject, MetadataCache
from lifecycle_controller.controller.work.result import Result
from lifecycle_controller.core import Action, DecisionSettings, Ledger
from lifecycle_controller.core.decision.observed import decode_observation
from lifecycle_controller.core.objects import keys
from lifecycle_controller.core.objects.resources import ObjectKey
from lifecycle_controller.kube import KubeClient
from lifecycle_controller.machinery.budget import ActionBudget
from tests.doubles.fakeapi import CONFIGMAPS, FakeApiServer
from tests.doubles.fakeclock import FakeClock
from tests.unit.support import annotated
from tests.unit.test_reconciler import Metrics

HOUR = 3600.0
NEVER_TTL = {keys.DELETE_AT: "2026-01-01T01:00:00Z", keys.CATCH_UP: "never"}


@dataclass
class Counted:
    results: list[str] = field(default_factory=list)

    def count_observation_persisted(self, result: str) -> None:
        self.results.append(result)


@dataclass
class Rig:
    api: FakeApiServer
    cache: MetadataCache
    reconcile: Reconciler
    counted: Counted
    ledger: Ledger


def rig(
    api: FakeApiServer,
    kube: KubeClient,
    clock: FakeClock,
    *,
    persist: bool = True,
    cache: MetadataCache | None = None,
) -> Rig:
    cache = cache or MetadataCache()
    counted = Counted()
    ledger = Ledger()
    reconciler = build_reconciler(
        api=kube,
        cache=cache,
        recorder=KubeEventRecorder(kube, clock=clock, reporting_instance="test"),
        clock=clock,
        ledger=ledger,
        settings=DecisionSettings(persist_observations=persist),
        metrics=Metrics(),
        budgets={Action.DELETE: ActionBudget(0, clock=clock)},
        observation_metrics=counted,
    )
    return Rig(api, cache, reconciler, counted, ledger)


def cached(r: Rig, body: dict[str, object]) -> ObjectKey:
    created = r.api.store.create(CONFIGMAPS, "team", body)
    key = ObjectKey(CONFIGMAPS, "team", created["metadata"]["name"])
    r.cache.put(key, CachedObject.from_metadata(created["metadata"]))
    return key


def stored(api: FakeApiServer) -> dict[str, str]:
    annotations: dict[str, str] = api.store.get(CONFIGMAPS, "team", "cm")["metadata"]["annotations"]
    return annotations


async def test_one_guarded_record_patch_then_none(
    api: FakeApiServer, kube: KubeClient, clock: FakeClock
) -> None:
    r = rig(api, kube, clock)
    key = cached(r, annotated("cm", NEVER_TTL))
    before = r.cache.get(key)
    assert before is not None
    assert await r.reconcile(key) == Result(requeue_after=HOUR)
    (patch,) = api.requests_to("PATCH")
    assert patch.body["metadata"]["resourceVersion"] == before.resource_version
    assert patch.body["metadata"]["uid"] == before.uid
    record = decode_observation(stored(api)[keys.OBSERVED])
    assert record.due_ns == 1_767_229_200 * 10**9
    assert r.counted.results == ["written"]
    fresh = r.cache.get(key)
    assert fresh is not None
    assert fresh.annotations[keys.OBSERVED] == stored(api)[keys.OBSERVED]  # cache refreshed
    await clock.advance(60)
    assert await r.reconcile(key) == Result(requeue_after=HOUR - 60)
    assert len(api.requests_to("PATCH")) == 1  # already recorded: nothing more


async def test_a_new_process_executes_the_recorded_occurrence(
    api: FakeApiServer, kube: KubeClient, clock: FakeClock
) -> None:
    first = rig(api, kube, clock)
    key = cached(first, annotated("cm", NEVER_TTL))
    await first.reconcile(key)
    await clock.advance(HOUR + 30)  # nobody led while it fell due
    second = rig(api, kube, clock)
    second.cache.put(
        key, CachedObject.from_metadata(api.store.get(CONFIGMAPS, "team", "cm")["metadata"])
    )
    assert await second.reconcile(key) is None
    assert api.store.find(CONFIGMAPS, "team", "cm") is None


async def test_without_the_flag_a_new_process_skips(
    api: FakeApiServer, kube: KubeClient, clock: FakeClock
) -> None:
    first = rig(api, kube, clock, persist=False)
    key = cached(first, annotated("cm", NEVER_TTL))
    await first.reconcile(key)
    assert api.requests_to("PATCH") == []
    await clock.advance(HOUR + 30)
    second = rig(api, kube, clock, persist=False)
    second.cache.put(
        key, CachedObject.from_metadata(api.store.get(CONFIGMAPS, "team", "cm")["metadata"])
    )
    await second.reconcile(key)
    assert keys.DELETE_AT not in stored(api)  # skipped and acknowledged


@pytest.mark.parametrize(
    ("status", "result"), [(403, "forbidden"), (409, "conflict"), (422, "invalid"), (500, "error")]
)
async def test_a_failed_record_write_blocks_nothing(
    api: FakeApiServer, kube: KubeClient, clock: FakeClock, status: int, result: str
) -> None:
    r = rig(api, kube, clock)
    key = cached(r, annotated("cm", NEVER_TTL))
    api.fail(status, method="PATCH", times=100)
    with structlog.testing.capture_logs() as logs:
        assert await r.reconcile(key) == Result(requeue_after=HOUR)
    assert set(r.counted.results) == {result}
    assert len(r.counted.results) == (4 if status == 409 else 1)  # conflicts: 3 quiet retries
    assert any(entry["event"].startswith("observation not persisted") for entry in logs)
    assert keys.OBSERVED not in stored(api)
    assert len(r.ledger) == 1  # the in-memory observation stays
    await clock.advance(HOUR)
    assert await r.reconcile(key) is None  # this process still acts on it
    assert api.store.find(CONFIGMAPS, "team", "cm") is None


async def test_a_garbled_record_is_logged_replaced_and_never_acted_on(
    api: FakeApiServer, kube: KubeClient, clock: FakeClock
) -> None:
    r = rig(api, kube, clock)
    key = cached(r, annotated("cm", {**NEVER_TTL, keys.OBSERVED: "soon, promise"}))
    with structlog.testing.capture_logs() as logs:
        await r.reconcile(key)
    assert any(entry["event"] == "ignoring an invalid observed annotation" for entry in logs)
    decode_observation(stored(api)[keys.OBSERVED])  # replaced by a valid record

    late = rig(api, kube, clock)
    other = ObjectKey(CONFIGMAPS, "team", "late")
    body = annotated("late", {**NEVER_TTL, keys.OBSERVED: "soon, promise"})
    created = api.store.create(CONFIGMAPS, "team", body)
    late.cache.put(other, CachedObject.from_metadata(created["metadata"]))
    await clock.advance(HOUR + 30)
    await late.reconcile(other)
    annotations = api.store.get(CONFIGMAPS, "team", "late")["metadata"]["annotations"]
    assert keys.DELETE_AT not in annotations  # skipped, not deleted
    assert keys.OBSERVED not in annotations  # and the garbage cleared with the skip


def test_garbled_observation_reports_only_bad_values() -> None:
    assert garbled_observation({}) is None
    assert garbled_observation({keys.OBSERVED: "2026-01-01T01:00:00Z;v1-0123456789abcdef"}) is None
    assert garbled_observation({keys.OBSERVED: "x"}) is not None


async def test_a_conflicting_record_write_rereads_and_writes_once_more(
    api: FakeApiServer, kube: KubeClient, clock: FakeClock
) -> None:
    r = rig(api, kube, clock)
    key = cached(r, annotated("cm", NEVER_TTL))
    api.store.patch(CONFIGMAPS, "team", "cm", {"metadata": {"labels": {"x": "y"}}})  # stale cache
    assert await r.reconcile(key) == Result(requeue_after=HOUR)
    assert r.counted.results == ["conflict", "written"]
    assert [q.method for q in api.requests] == ["PATCH", "GET", "PATCH"]
    decode_observation(stored(api)[keys.OBSERVED])
