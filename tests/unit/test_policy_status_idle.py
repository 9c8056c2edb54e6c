"""While nothing changes, the status writer's flush does not go through the policies: an idle
cluster with 1,000 policies costs what one without them does (docs/performance.md#many-policies).
A changed policy object, or a dirty policy, is gone through on the next flush."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from lifecycle_controller.controller.act.writes import ObjectWriter
from lifecycle_controller.controller.events.recorder import KubeEventRecorder
from lifecycle_controller.controller.policy.decisions import PolicyDecisions
from lifecycle_controller.controller.policy.status import PolicyStatusWriter
from lifecycle_controller.controller.policy.store import PolicyDoc, PolicyStore
from lifecycle_controller.controller.watch.cache import MetadataCache
from lifecycle_controller.kube import KubeClient, ResourceType
from lifecycle_controller.kube.resources import CLUSTER_POLICIES, POLICIES
from tests.doubles.fakeapi import FakeApiServer
from tests.doubles.fakeclock import FakeClock


def namespaced_policy(number: int) -> dict[str, Any]:
    return {
        "apiVersion": "lifecycle.cezary.dev/v1alpha1",
        "kind": "LifecyclePolicy",
        "metadata": {"name": f"p{number}"},
        "spec": {"resources": ["configmaps"], "lifecycle": {"delete-after": "1h"}},
    }


class StatusPatches:
    """The writer's API: every status patch answered and recorded (by policy name)."""

    def __init__(self) -> None:
        self.patched: list[str] = []

    async def merge_patch(
        self,
        resource: ResourceType,
        namespace: str | None,
        name: str,
        patch: Mapping[str, Any],
        *,
        field_manager: str = "",
        subresource: str = "",
    ) -> dict[str, Any]:
        assert subresource == "status"
        self.patched.append(name)
        return {}

    async def get(self, resource: ResourceType, namespace: str | None, name: str) -> dict[str, Any]:
        raise AssertionError("no audit entries: nothing is read")


class CountingStore(PolicyStore):
    """The store, counting how often the writer goes through its policy objects."""

    gone_through = 0

    def docs(self) -> list[PolicyDoc]:
        self.gone_through += 1
        return super().docs()


async def test_an_idle_flush_goes_through_no_policy(
    api: FakeApiServer, kube: KubeClient, clock: FakeClock
) -> None:
    api.serve(CLUSTER_POLICIES)
    api.serve(POLICIES)
    for number in range(3):
        api.store.create(POLICIES, "team", namespaced_policy(number))
    store = CountingStore(kube, clock=clock)
    assert await store.load()
    cache = MetadataCache(policy_views=store)
    decisions = PolicyDecisions(store, cache, ObjectWriter(kube, cache, clock))
    recorder = KubeEventRecorder(kube, clock=clock, reporting_instance="test")
    patches = StatusPatches()
    writer = PolicyStatusWriter(
        patches, store, decisions, recorder, clock, watched_keys=lambda: ["configmaps"]
    )

    await writer.flush()
    assert store.gone_through == 1
    assert sorted(patches.patched) == ["p0", "p1", "p2"]  # every status written once

    for _ in range(3):
        await writer.flush()
    assert store.gone_through == 1  # nothing changed: not gone through again
    assert len(patches.patched) == 3

    relabelled = api.store.get(POLICIES, "team", "p1")
    relabelled["metadata"]["labels"] = {"team": "a"}
    store.apply(POLICIES, "MODIFIED", relabelled)  # a new object, the same generation
    await writer.flush()
    assert store.gone_through == 2
    assert len(patches.patched) == 3  # its report did not change: nothing written

    decisions.aggregates.dirty.add(store.docs()[0].ref)
    await writer.flush()
    assert store.gone_through == 4  # the test's own look, then the writer's
    await writer.flush()
    assert store.gone_through == 4
