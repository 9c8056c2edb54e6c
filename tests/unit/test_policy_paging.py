"""Every policy is read, however many there are: the store and ``policies try`` follow the
list's continue tokens on the in-memory API server, and the store's watch starts from the
resourceVersion of the last page.

Caught: both listed each kind with ``limit=500`` and kept the first page only, so the
501st LifecyclePolicy of a cluster was silently ignored (not in force, not reported).
"""

from __future__ import annotations

import asyncio
from typing import Any

import pytest

from lifecycle_controller.controller.policy.store import PolicyStore
from lifecycle_controller.kube import KubeClient
from lifecycle_controller.kube.paging import list_whole, pages
from lifecycle_controller.kube.resources import CLUSTER_POLICIES, CONFIGMAPS, POLICIES
from lifecycle_controller.machinery.tasks import cancel_and_wait
from lifecycle_controller.tools.policy_live import read_policies
from tests.doubles.fakeapi import FakeApiServer
from tests.doubles.fakeclock import FakeClock

PAGE = 500  # the store asks for this many policies per page
COUNT = 2 * PAGE + 1  # three pages, the last one a single policy


def namespaced_policy(number: int) -> dict[str, Any]:
    return {
        "apiVersion": "lifecycle.cezary.dev/v1alpha1",
        "kind": "LifecyclePolicy",
        "metadata": {"name": f"p{number:04d}"},
        "spec": {"resources": ["configmaps"], "lifecycle": {"delete-after": "1h"}},
    }


@pytest.fixture
def many_policies(api: FakeApiServer) -> None:
    api.serve(CLUSTER_POLICIES)
    api.serve(POLICIES)
    for number in range(COUNT):
        api.store.create(POLICIES, "team", namespaced_policy(number))


@pytest.mark.usefixtures("many_policies")
async def test_the_store_holds_every_page_and_watches_from_the_last(
    api: FakeApiServer, kube: KubeClient, clock: FakeClock
) -> None:
    store = PolicyStore(kube, clock=clock)
    assert await store.load()
    names = sorted(doc.ref.name for doc in store.docs())
    assert len(names) == COUNT
    assert names[-1] == f"p{COUNT - 1:04d}"  # the one on the last page is in force
    assert len(store.current.valid) == COUNT
    lists = [r for r in api.requests_to("GET", "/lifecyclepolicies") if not r.is_watch]
    assert [bool(r.param("continue")) for r in lists] == [False, True, True]
    assert [r.param("limit") for r in lists] == [str(PAGE)] * 3
    listed_at = str(api.store.revision)
    task = asyncio.create_task(store.run())
    await clock.settle()
    watches = [r for r in api.requests_to("GET", "/lifecyclepolicies") if r.is_watch]
    assert [r.param("resourceVersion") for r in watches] == [listed_at]
    api.store.create(POLICIES, "team", namespaced_policy(COUNT))
    await clock.settle()
    assert len(store.current.valid) == COUNT + 1
    await cancel_and_wait(task)


@pytest.mark.usefixtures("many_policies")
async def test_policies_try_reads_every_page(kube: KubeClient, clock: FakeClock) -> None:
    read = await read_policies(kube, now_ns=clock.now_ns())
    assert read.problem is None
    assert len(read.manifests) == COUNT
    assert len(read.docs.policies.valid) == COUNT


async def test_list_whole_gives_the_last_pages_version(
    api: FakeApiServer, kube: KubeClient
) -> None:
    for number in range(5):
        api.store.create(CONFIGMAPS, "team", {"metadata": {"name": f"c{number}"}})

    async def fetch(token: str | None) -> dict[str, Any]:
        return await kube.list_objects(CONFIGMAPS, namespace="team", limit=2, continue_token=token)

    seen = [len(page.get("items") or ()) async for page in pages(fetch)]
    assert seen == [2, 2, 1]
    items, version = await list_whole(fetch)
    assert [item["metadata"]["name"] for item in items] == [f"c{n}" for n in range(5)]
    assert version == str(api.store.revision)


async def test_one_kind_is_never_in_force_without_the_other(
    api: FakeApiServer, kube: KubeClient, clock: FakeClock
) -> None:
    """A namespaced policy outranks a cluster policy that is not enforced: while one kind
    cannot be listed, what the other holds is not published either."""
    api.serve(CLUSTER_POLICIES)
    api.serve(POLICIES)
    api.store.create(POLICIES, "team", namespaced_policy(1))
    outage = api.fail(503, method="GET", path="/clusterlifecyclepolicies$", times=3)
    store = PolicyStore(kube, clock=clock)
    assert not await store.load()  # the cluster kind is listed first, and fails
    task = asyncio.create_task(store.run())
    await clock.settle()
    assert [doc.ref.name for doc in store.docs()] == ["p0001"]  # read, not in force
    assert not store.current
    for _ in range(60):
        await clock.advance(1)
        if store.current:
            break
    assert outage.exhausted
    assert [p.ref.name for p in store.current.valid] == ["p0001"]
    await cancel_and_wait(task)
