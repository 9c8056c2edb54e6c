"""A restart policy's anchor lives in the cache, and goes with the object.

A recurring policy restart counts from the later of the Pod template's marker and an
occurrence the policy skipped (catch-up), acknowledged in memory rather than on the object
(docs/architecture.md#policy-anchors). Both are restart facts of the cache, by UID.

Caught: the acknowledgements were kept by the reconciler's policy step, by UID, and never
dropped (the object's removal forgot only its tally), so every workload a restart policy ever
skipped an occurrence of stayed in memory for the life of the process.
"""

from __future__ import annotations

import random
from collections.abc import Iterator, Mapping
from typing import Any

from lifecycle_controller.controller.events.recorder import KubeEventRecorder
from lifecycle_controller.controller.policy.store import PolicyStore
from lifecycle_controller.controller.reconcile.assembly import build_reconciler
from lifecycle_controller.controller.watch.cache import CachedObject, MetadataCache, RestartFact
from lifecycle_controller.controller.watch.informers import InformerSet
from lifecycle_controller.controller.work.result import Result
from lifecycle_controller.core import DecisionSettings, Ledger
from lifecycle_controller.core.objects.resources import ObjectKey
from lifecycle_controller.core.text.timestamps import parse_rfc3339
from lifecycle_controller.kube import KubeClient
from lifecycle_controller.kube.resources import CLUSTER_POLICIES, POLICIES
from tests.doubles.fakeapi import DEPLOYMENTS, FakeApiServer
from tests.doubles.fakeclock import FakeClock
from tests.unit.support import eventually

HOUR = 3600
COUNT = 5

NIGHTLY = {
    "apiVersion": "lifecycle.cezary.dev/v1alpha1",
    "kind": "ClusterLifecyclePolicy",
    "metadata": {"name": "hourly"},
    "spec": {
        "resources": ["deployments.apps"],
        "lifecycle": {"restart-every": "1h", "catch-up": "1m"},
    },
}


def deployment(name: str) -> dict[str, Any]:
    template: dict[str, Any] = {"metadata": {"annotations": {}}, "spec": {}}
    return {"metadata": {"name": name}, "spec": {"replicas": 0, "template": template}}


def uid_keys(root: object, uids: set[str]) -> set[str]:
    """The ``uids`` found as dict keys anywhere in the controller objects reachable from
    ``root`` (what the process remembers of those objects by UID)."""
    found: set[str] = set()
    seen: set[int] = set()

    def fields(obj: object) -> Iterator[object]:
        if isinstance(obj, Mapping):  # dicts, and the bounded ones (cachetools)
            for key, value in obj.items():
                if key in uids:
                    found.add(key)
                yield value
        elif isinstance(obj, list | tuple | set | frozenset):
            yield from obj
        elif type(obj).__module__.startswith("lifecycle_controller.controller"):
            yield from vars(obj).values() if hasattr(obj, "__dict__") else ()
            for name in getattr(type(obj), "__slots__", ()):
                yield getattr(obj, name, None)

    stack: list[object] = [root]
    while stack:
        obj = stack.pop()
        if id(obj) in seen:
            continue
        seen.add(id(obj))
        stack.extend(fields(obj))
    return found


async def test_nothing_is_remembered_of_a_deleted_workload_by_its_uid(
    api: FakeApiServer, kube: KubeClient, clock: FakeClock
) -> None:
    api.serve(CLUSTER_POLICIES)
    api.serve(POLICIES)
    api.store.create(CLUSTER_POLICIES, None, NIGHTLY)
    store = PolicyStore(kube, clock=clock)
    assert await store.load()
    cache = MetadataCache(policy_views=store)
    reconcile = build_reconciler(
        api=kube,
        cache=cache,
        recorder=KubeEventRecorder(kube, clock=clock, reporting_instance="test"),
        clock=clock,
        ledger=Ledger(),
        settings=DecisionSettings(),
        policies=store,
    )
    keys = [ObjectKey(DEPLOYMENTS, "team", f"web-{n}") for n in range(COUNT)]
    uids = {
        api.store.create(DEPLOYMENTS, "team", deployment(key.name))["metadata"]["uid"]
        for key in keys
    }
    async with InformerSet(
        source=kube,
        cache=cache,
        on_object_change=lambda *change: None,
        clock=clock,
        rng=random.Random(1),
    ) as informers:
        await informers.ensure([DEPLOYMENTS])
        await eventually(lambda: len(cache.keys(DEPLOYMENTS)) == COUNT)
        await clock.advance(3 * HOUR + 30 * 60)  # the 3 h occurrence is 30 min past: skipped
        for key in keys:
            assert await reconcile(key) == Result(requeue_after=30 * 60)  # the next one, 4 h
        assert uid_keys(reconcile, uids) == uids  # what a restart counts from, by UID

        for key in keys:
            api.store.delete(DEPLOYMENTS, "team", key.name)
        await eventually(lambda: not cache.keys(DEPLOYMENTS))
        for key in keys:
            assert await reconcile(key) is None  # the object is gone: its state goes too
        assert uid_keys(reconcile, uids) == set()


def test_the_anchor_is_the_later_of_the_marker_and_the_acknowledgement() -> None:
    cache = MetadataCache()
    key = ObjectKey(DEPLOYMENTS, "team", "web")
    obj = CachedObject("u1", "7", "web", "team", "2026-01-01T00:00:00Z")
    cache.put(key, obj)
    assert cache.restart_anchor("u1") is None
    cache.write_back(
        key, obj, decided_on=obj, acknowledged_ns=parse_rfc3339("2026-01-01T03:00:00Z")
    )
    assert cache.restart_fact("u1") is None  # the marker is still to be read
    assert cache.restart_anchor("u1") == "2026-01-01T03:00:00Z"
    cache.write_back(key, obj, decided_on=obj, restart=RestartFact("2026-01-01T02:00:00Z"))
    assert cache.restart_anchor("u1") == "2026-01-01T03:00:00Z"  # the later one
    cache.write_back(key, obj, decided_on=obj, restart=RestartFact("2026-01-01T04:00:00Z"))
    assert cache.restart_anchor("u1") == "2026-01-01T04:00:00Z"
    cache.delete(key)  # no longer kept (its annotations went): its facts stay
    assert cache.restart_anchor("u1") == "2026-01-01T04:00:00Z"
    cache.write_back(key, obj, decided_on=obj, acknowledged_ns=1)
    assert cache.get(key) is None  # a fact alone never brings the object back
    cache.put(key, obj)
    cache.write_back(key, None)  # deleted: what is known by its UID goes
    assert cache.restart_anchor("u1") is None
