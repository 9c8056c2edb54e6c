"""The policy fence on the in-memory API server: a policy deletion goes only while the policy
on the server is the one it was decided on (docs/reliability.md#policy-fence).

The store is loaded once and not watching, so it is exactly the stale view the fence exists
for: the server's policy is changed (narrowed, deleted, recreated) behind its back.

Caught: a deletion decided on the controller's copy of a policy was carried out after the
policy had been narrowed or deleted, whenever the policy watch was behind.
"""

from __future__ import annotations

import asyncio
from collections import Counter
from typing import Any

import pytest

from lifecycle_controller.controller.assembly import build_reconciler
from lifecycle_controller.controller.cache import MetadataCache
from lifecycle_controller.controller.policy_fence import PolicyFence
from lifecycle_controller.controller.policy_store import PolicyStore
from lifecycle_controller.controller.recorder import KubeEventRecorder
from lifecycle_controller.controller.result import Result
from lifecycle_controller.core import DecisionSettings, Ledger
from lifecycle_controller.core.decision.events import DELETION_FAILURE
from lifecycle_controller.core.decision.guardrails import HoldReason
from lifecycle_controller.core.decision.outcomes import Action, Delete
from lifecycle_controller.core.objects.resources import ObjectKey
from lifecycle_controller.kube import KubeClient
from lifecycle_controller.kube.resources import CLUSTER_POLICIES, CONFIGMAPS, POLICIES
from lifecycle_controller.machinery.tasks import cancel_and_wait
from tests.doubles.fakeapi import FakeApiServer
from tests.doubles.fakeclock import FakeClock

SWEEP = "/namespaces/team/lifecyclepolicies/sweep"


class Checks:
    def __init__(self) -> None:
        self.results: Counter[str] = Counter()

    def count_policy_fence(self, result: str) -> None:
        self.results[result] += 1


def sweep(names: list[str]) -> dict[str, Any]:
    return {
        "apiVersion": "lifecycle.cezary.dev/v1alpha1",
        "kind": "LifecyclePolicy",
        "metadata": {"name": "sweep"},
        "spec": {"resources": ["configmaps"], "names": names, "lifecycle": {"delete-after": "1s"}},
    }


@pytest.fixture
async def store(api: FakeApiServer, kube: KubeClient, clock: FakeClock) -> PolicyStore:
    """``sweep`` (ConfigMaps named tmp-*), as the store read it once."""
    api.serve(CLUSTER_POLICIES)
    api.serve(POLICIES)
    api.store.create(POLICIES, "team", sweep(["tmp-*"]))
    loaded = PolicyStore(kube, clock=clock)
    assert await loaded.load()
    return loaded


def decision() -> Delete:
    return Delete(
        uid="u",
        resource_version="1",
        failure=DELETION_FAILURE,
        action=Action.DELETE,
        policy="LifecyclePolicy/team/sweep",
    )


def policy_gets(api: FakeApiServer) -> int:
    return len(api.requests_to("GET", SWEEP))


async def test_an_unchanged_policy_is_read_once_per_two_seconds(
    api: FakeApiServer, kube: KubeClient, clock: FakeClock, store: PolicyStore
) -> None:
    checks = Checks()
    fence = PolicyFence(store, kube, clock, metrics=checks)
    basis = fence.basis(store.docs()[0].ref)
    holds = await asyncio.gather(*(fence.check(basis, decision()) for _ in range(50)))
    assert holds == [None] * 50
    assert policy_gets(api) == 1  # fifty deletions at once, one quorum read
    await clock.advance(1.5)
    assert await fence.check(basis, decision()) is None
    assert policy_gets(api) == 1
    await clock.advance(1.0)
    assert await fence.check(basis, decision()) is None
    assert policy_gets(api) == 2
    assert checks.results == {"confirmed": 51, "recent": 1}


@pytest.mark.parametrize("change", ["narrowed", "deleted", "recreated", "unreadable"])
async def test_a_changed_or_unreadable_policy_holds_the_deletion(
    api: FakeApiServer, kube: KubeClient, clock: FakeClock, store: PolicyStore, change: str
) -> None:
    checks = Checks()
    fence = PolicyFence(store, kube, clock, metrics=checks, retry_after=1.0)
    basis = fence.basis(store.docs()[0].ref)
    if change == "narrowed":
        api.store.patch(POLICIES, "team", "sweep", {"spec": {"names": ["tmp-go-*"]}})
    elif change in ("deleted", "recreated"):
        api.store.delete(POLICIES, "team", "sweep")
        if change == "recreated":
            api.store.create(POLICIES, "team", sweep(["tmp-*"]))  # generation 1, another uid
    else:
        api.fail(500, method="GET", path=SWEEP)
    hold = await fence.check(basis, decision())
    assert hold is not None
    assert hold.reason is HoldReason.POLICY_UNCONFIRMED
    assert hold.requeue_after_ns == 10**9
    assert hold.held == decision()
    assert checks.results == {"error" if change == "unreadable" else "changed": 1}


async def test_the_reconciler_deletes_only_while_the_policy_is_unchanged(
    api: FakeApiServer, kube: KubeClient, clock: FakeClock, store: PolicyStore
) -> None:
    cache = MetadataCache(policy_views=store)
    checks = Checks()
    reconcile = build_reconciler(
        api=kube,
        cache=cache,
        recorder=KubeEventRecorder(kube, clock=clock, reporting_instance="test"),
        clock=clock,
        ledger=Ledger(),
        settings=DecisionSettings(),
        policies=store,
        fence_metrics=checks,
    )
    keys = {}
    for name in ("tmp-go", "tmp-stay"):
        created = api.store.create(CONFIGMAPS, "team", {"metadata": {"name": name}})
        keys[name] = ObjectKey(CONFIGMAPS, "team", name)
        cache.put(keys[name], cache.project(CONFIGMAPS, created["metadata"]))
    await clock.advance(2)  # both due by the policy the store holds
    api.store.patch(POLICIES, "team", "sweep", {"spec": {"names": ["tmp-go*"]}})

    assert await reconcile(keys["tmp-stay"]) == Result(requeue_after=1.0)
    assert await reconcile(keys["tmp-go"]) == Result(requeue_after=1.0)  # decided on the old
    assert api.requests_to("DELETE") == []
    assert checks.results == {"changed": 2}

    # The store's watch catches up: the next decisions are made on the narrowed policy.
    watching = asyncio.create_task(store.run())
    await clock.settle()
    assert store.current.valid[0].generation == 2
    assert await reconcile(keys["tmp-stay"]) is None
    assert await reconcile(keys["tmp-go"]) is None
    await cancel_and_wait(watching)
    deleted = [request.path.rsplit("/", 1)[-1] for request in api.requests_to("DELETE")]
    assert deleted == ["tmp-go"]
    assert api.store.get(CONFIGMAPS, "team", "tmp-stay") is not None
