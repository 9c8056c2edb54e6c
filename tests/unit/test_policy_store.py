"""The policy store on a scripted source: off without the CRDs (said once), parsed once per
generation, a change published, a status-only change not (docs/policies.md)."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from typing import Any

from structlog.testing import capture_logs

from lifecycle_controller.controller.policy.store import PolicyStore
from lifecycle_controller.core.objects.resources import ResourceType
from lifecycle_controller.core.policy.in_force import PolicySet
from lifecycle_controller.kube import NotFound
from lifecycle_controller.kube.resources import POLICIES
from lifecycle_controller.machinery.tasks import cancel_and_wait
from tests.doubles.fakeclock import FakeClock


def policy(name: str, generation: int, *, status: dict[str, Any] | None = None) -> dict[str, Any]:
    return {
        "apiVersion": "lifecycle.cezary.dev/v1alpha1",
        "kind": "LifecyclePolicy",
        "metadata": {
            "name": name,
            "namespace": "team",
            "uid": f"uid-{name}",
            "generation": generation,
            "resourceVersion": str(generation),
        },
        "spec": {"resources": ["configmaps"], "lifecycle": {"delete-after": "1h"}},
        "status": status or {},
    }


class Source:
    def __init__(self, items: dict[ResourceType, list[dict[str, Any]]] | None) -> None:
        self.items = items
        self.lists = 0
        self.events: asyncio.Queue[dict[str, Any]] = asyncio.Queue()

    async def list_objects(
        self,
        resource: ResourceType,
        *,
        namespace: str | None = None,
        limit: int = 500,
        continue_token: str | None = None,
    ) -> dict[str, Any]:
        self.lists += 1
        if self.items is None:
            raise NotFound(404, {"reason": "NotFound"})
        return {"items": self.items.get(resource, []), "metadata": {"resourceVersion": "1"}}

    def watch_objects(
        self, resource: ResourceType, *, resource_version: str, timeout_seconds: int
    ) -> AsyncIterator[dict[str, Any]]:
        return self._events(resource)

    async def _events(self, resource: ResourceType) -> AsyncIterator[dict[str, Any]]:
        if resource is not POLICIES:
            await asyncio.Event().wait()
        while True:
            yield await self.events.get()


async def test_without_the_crds_policies_are_off_and_it_is_said_once(clock: FakeClock) -> None:
    source = Source(None)
    store = PolicyStore(source, clock=clock, recheck=60)
    with capture_logs() as logs:
        assert not await store.load()
        task = asyncio.create_task(store.run())
        for _ in range(3):
            await clock.advance(60)
        await cancel_and_wait(task)
    off = [line for line in logs if "policies are off" in line["event"]]
    assert len(off) == 1
    assert not store.current
    assert source.lists >= 3  # it keeps looking, once a minute


async def test_a_new_generation_is_published_and_a_status_change_is_not(clock: FakeClock) -> None:
    source = Source({POLICIES: [policy("stale", 1)]})
    store = PolicyStore(source, clock=clock)
    changes: list[tuple[PolicySet, PolicySet]] = []

    async def changed(old: PolicySet, new: PolicySet) -> None:
        changes.append((old, new))

    assert await store.load()
    first = store.current.valid[0]
    store.on_change = changed
    task = asyncio.create_task(store.run())
    await clock.settle()
    source.events.put_nowait(
        {"type": "MODIFIED", "object": policy("stale", 1, status={"matched": 3})}
    )
    await clock.settle()
    assert changes == []
    assert store.current.valid[0] is first  # parsed once for its generation
    source.events.put_nowait({"type": "MODIFIED", "object": policy("stale", 2)})
    await clock.settle()
    assert len(changes) == 1
    assert changes[0][1].valid[0].generation == 2
    source.events.put_nowait({"type": "DELETED", "object": policy("stale", 2)})
    await clock.settle()
    assert len(changes) == 2
    assert not store.current
    await cancel_and_wait(task)


async def test_schedule_since_survives_a_restart_through_the_status(clock: FakeClock) -> None:
    kept = {"observedGeneration": 4, "scheduleSince": "2026-01-01T00:00:00Z"}
    store = PolicyStore(Source({POLICIES: [policy("p", 4, status=kept)]}), clock=clock)
    assert await store.load()
    since = store.schedule_since()
    assert list(since.values()) == [1767225600 * 10**9]
    other = {"observedGeneration": 3, "scheduleSince": "2026-01-01T00:00:00Z"}
    fresh = PolicyStore(Source({POLICIES: [policy("p", 4, status=other)]}), clock=clock)
    assert await fresh.load()
    assert list(fresh.schedule_since().values()) == [clock.now_ns()]


async def test_policies_in_namespaces_out_of_scope_are_not_kept(clock: FakeClock) -> None:
    """With ``--watch-namespace team``, a LifecyclePolicy elsewhere can match nothing: the
    store keeps it out of the set (no status, no Warning in a namespace not acted in)."""
    elsewhere = policy("other", 1)
    elsewhere["metadata"] = {**elsewhere["metadata"], "namespace": "not-watched", "uid": "u2"}
    source = Source({POLICIES: [policy("here", 1), elsewhere]})
    store = PolicyStore(source, clock=clock, namespaces=lambda namespace: namespace == "team")
    assert await store.load()
    assert [str(doc.ref) for doc in store.docs()] == ["LifecyclePolicy/team/here"]
    assert not store.apply(POLICIES, "ADDED", elsewhere)


async def test_while_discovery_finds_no_policy_kinds_nothing_is_asked(clock: FakeClock) -> None:
    """Without the CRDs the controller sends no request for policies (discovery, refreshed
    anyway, says they are not served); once it finds them, the next check lists them."""
    source = Source({POLICIES: [policy("later", 1)]})
    served: list[bool | None] = [False]
    store = PolicyStore(source, clock=clock, recheck=60, served=lambda: served[0])
    with capture_logs() as logs:
        assert not await store.load()
        task = asyncio.create_task(store.run())
        for _ in range(3):
            await clock.advance(60)
        assert source.lists == 0
        served[0] = True
        await clock.advance(60)
        await clock.settle()
        assert source.lists == 2  # both kinds, once
        assert [str(doc.ref) for doc in store.docs()] == ["LifecyclePolicy/team/later"]
        await cancel_and_wait(task)
    assert [line["event"] for line in logs if "policies are" in line["event"]] == [
        "lifecycle policies are off: the lifecycle.cezary.dev CRDs are not installed",
        "lifecycle policies are on",
    ]


class OverlapSource(Source):
    """A source that notes how many lists are in flight at once."""

    def __init__(self, items: dict[ResourceType, list[dict[str, Any]]] | None) -> None:
        super().__init__(items)
        self.in_flight = self.most = 0

    async def list_objects(
        self,
        resource: ResourceType,
        *,
        namespace: str | None = None,
        limit: int = 500,
        continue_token: str | None = None,
    ) -> dict[str, Any]:
        self.in_flight += 1
        self.most = max(self.most, self.in_flight)
        for _ in range(3):  # an answer takes a few turns of the loop
            await asyncio.sleep(0)
        self.in_flight -= 1
        return await super().list_objects(resource, namespace=namespace, limit=limit)


async def test_both_kinds_are_listed_at_once_when_loading(clock: FakeClock) -> None:
    """The start waits for the slower of the two lists, not for both in turn; a failure is
    still that of the kinds in their order (the cluster kind's first)."""
    source = OverlapSource({POLICIES: [policy("p", 1)]})
    store = PolicyStore(source, clock=clock)
    assert await store.load()
    assert source.most == 2
    assert [str(doc.ref) for doc in store.docs()] == ["LifecyclePolicy/team/p"]
    missing = OverlapSource(None)
    with capture_logs() as logs:
        assert not await PolicyStore(missing, clock=clock).load()
    assert [line["event"] for line in logs if "policies are off" in line["event"]] == [
        "lifecycle policies are off: the lifecycle.cezary.dev CRDs are not installed"
    ]
