"""The policy fence on the in-memory API server: a policy deletion goes only while the API
server's view (the policies that may concern the object, its Namespace's labels) decides it
too (docs/reliability.md#policy-fence).

The store is loaded once and not watching, and the Namespace labels it is given are a dict
the test changes by hand: exactly the stale view the fence exists for. The server's side is
changed behind its back: the policy narrowed, deleted or created again, the Namespace
relabelled out of the policy's ``namespaceSelector``, a policy that outranks it or an invalid
one that holds the objects created.

Caught: a deletion decided on the controller's copy was carried out after the view it was
decided on had changed, whenever a watch was behind; and, before the fence covered the view,
whenever the change was not to the deciding policy itself.
"""

from __future__ import annotations

import asyncio
from collections import Counter
from typing import Any

import pytest

from lifecycle_controller.controller.events.recorder import KubeEventRecorder
from lifecycle_controller.controller.policy.fence import PolicyFence, _SharedReads
from lifecycle_controller.controller.policy.store import PolicyStore
from lifecycle_controller.controller.reconcile.assembly import build_reconciler
from lifecycle_controller.controller.watch.cache import MetadataCache
from lifecycle_controller.controller.work.result import Result
from lifecycle_controller.core import DecisionSettings, Ledger
from lifecycle_controller.core.objects.resources import ObjectKey
from lifecycle_controller.kube import KubeClient, KubeError
from lifecycle_controller.kube.resources import CLUSTER_POLICIES, CONFIGMAPS, NAMESPACES, POLICIES
from lifecycle_controller.machinery.tasks import cancel_and_wait
from tests.doubles.fakeapi import FakeApiServer
from tests.doubles.fakeclock import FakeClock

CLUSTER_LIST = "/apis/lifecycle.cezary.dev/v1alpha1/clusterlifecyclepolicies"
TEAM_LIST = "/namespaces/team/lifecyclepolicies"
TEAM = "/api/v1/namespaces/team"
PREVIEW = {"env": "preview"}


class Checks:
    def __init__(self) -> None:
        self.results: Counter[str] = Counter()

    def count_policy_fence(self, result: str) -> None:
        self.results[result] += 1


def policy(kind: str, name: str, **spec: Any) -> dict[str, Any]:
    metadata = {"name": name} if kind.startswith("Cluster") else {"name": name, "namespace": "team"}
    return {
        "apiVersion": "lifecycle.cezary.dev/v1alpha1",
        "kind": kind,
        "metadata": metadata,
        "spec": {"resources": ["configmaps"], **spec},
    }


def sweep(names: list[str]) -> dict[str, Any]:
    """ConfigMaps named ``names`` in Namespaces labelled env=preview, after 1s."""
    return policy(
        "ClusterLifecyclePolicy",
        "sweep",
        names=names,
        namespaceSelector={"matchLabels": PREVIEW},
        lifecycle={"delete-after": "1s"},
    )


def namespace(**labels: str) -> dict[str, Any]:
    return {"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": "team", "labels": labels}}


@pytest.fixture
async def store(api: FakeApiServer, kube: KubeClient, clock: FakeClock) -> PolicyStore:
    """``sweep`` (ConfigMaps named tmp-* in env=preview Namespaces), as the store read it
    once; Namespace ``team`` labelled env=preview, as the store was told."""
    api.serve(CLUSTER_POLICIES)
    api.serve(POLICIES)
    api.store.create(CLUSTER_POLICIES, None, sweep(["tmp-*"]))
    api.store.create(NAMESPACES, None, namespace(**PREVIEW))
    loaded = PolicyStore(kube, clock=clock)
    assert await loaded.load()
    labels = {"team": PREVIEW}
    loaded.namespace_labels = labels.get
    return loaded


def reads(api: FakeApiServer, path: str) -> int:
    """GETs of ``path`` (the store's own list of the cluster policies left out)."""
    found = sum(1 for r in api.requests_to("GET", path) if r.path.endswith(path))
    return found - 1 if path == CLUSTER_LIST else found


async def test_a_burst_of_checks_costs_one_read_of_each_kind_per_two_seconds(
    api: FakeApiServer, kube: KubeClient, clock: FakeClock, store: PolicyStore
) -> None:
    fence = PolicyFence(store, kube, clock)
    views = await asyncio.gather(*(fence.view("team") for _ in range(50)))
    # Fifty deletions at once: one quorum list of each kind, one GET of the Namespace (the
    # policy selects namespaces by label), shared.
    assert (reads(api, CLUSTER_LIST), reads(api, TEAM_LIST), reads(api, TEAM)) == (1, 1, 1)
    assert not any(view.recent for view in views)
    assert views[0].namespace_labels == PREVIEW
    # A generation the store holds is not parsed again; the set is built once per read.
    assert views[0].policies.valid[0] is store.current.valid[0]
    assert all(view.policies is views[0].policies for view in views)

    await clock.advance(1.5)
    kept = await fence.view("team")
    assert kept.recent
    assert kept.policies is views[0].policies
    assert (reads(api, CLUSTER_LIST), reads(api, TEAM_LIST), reads(api, TEAM)) == (1, 1, 1)
    other = await fence.view("other")  # another namespace: the cluster policies are shared
    assert not other.recent
    assert other.namespace_labels is None  # no such Namespace: unknown
    assert reads(api, CLUSTER_LIST) == 1
    assert reads(api, "/namespaces/other/lifecyclepolicies") == 1

    await clock.advance(1.0)
    assert not (await fence.view("team")).recent
    assert (reads(api, CLUSTER_LIST), reads(api, TEAM_LIST), reads(api, TEAM)) == (2, 2, 2)
    lists = len(api.requests_to("GET", "lifecyclepolicies"))
    assert (await fence.view(None)).recent  # cluster-scoped: the cluster policies only
    assert len(api.requests_to("GET", "lifecyclepolicies")) == lists


async def test_no_namespace_is_read_while_no_policy_selects_namespaces_by_label(
    api: FakeApiServer, kube: KubeClient, clock: FakeClock, store: PolicyStore
) -> None:
    api.store.delete(CLUSTER_POLICIES, None, "sweep")
    api.store.create(
        POLICIES, "team", policy("LifecyclePolicy", "keep", lifecycle={"delete-after": "1h"})
    )
    view = await PolicyFence(store, kube, clock).view("team")
    assert [str(p.ref) for p in view.policies.valid] == ["LifecyclePolicy/team/keep"]
    assert view.namespace_labels is None
    assert reads(api, TEAM) == 0


async def test_a_failed_read_is_raised_and_not_kept(
    api: FakeApiServer, kube: KubeClient, clock: FakeClock, store: PolicyStore
) -> None:
    fence = PolicyFence(store, kube, clock)
    api.fail(500, method="GET", path=TEAM_LIST + "$")
    with pytest.raises(KubeError):
        await fence.view("team")
    assert (await fence.view("team")).policies.valid  # read again at once


@pytest.mark.parametrize("seen_by", ["watch", "relist"])
@pytest.mark.parametrize("kind", ["ClusterLifecyclePolicy", "LifecyclePolicy"])
async def test_a_policy_the_store_saw_deleted_is_forgotten_by_the_fence_at_once(
    api: FakeApiServer,
    kube: KubeClient,
    clock: FakeClock,
    store: PolicyStore,
    kind: str,
    seen_by: str,
) -> None:
    """The fence keeps a read 2 s and until a later check, and with it every policy read;
    once the store sees a policy go (a DELETED event, or a list that no longer has it), the
    read that holds it is dropped: the next check reads again and the policy is gone, within
    the 2 s too. Before, the deleted policy stayed in the fence until a later check came."""
    resource = CLUSTER_POLICIES if kind.startswith("Cluster") else POLICIES
    namespace = None if resource is CLUSTER_POLICIES else "team"
    if namespace is not None:
        api.store.create(POLICIES, "team", policy(kind, "keep", lifecycle={"delete-after": "1h"}))
        assert await store.load()
    name = "sweep" if namespace is None else "keep"
    fence = PolicyFence(store, kube, clock)
    before = await fence.view("team")
    assert f"{kind}/{namespace + '/' if namespace else ''}{name}" in {
        str(p.ref) for p in before.policies.valid
    }

    gone = api.store.get(resource, namespace, name)
    api.store.delete(resource, namespace, name)
    if seen_by == "watch":
        assert store.apply(resource, "DELETED", gone)
    else:
        assert await store.load()  # the list no longer has it
    await clock.advance(0.5)

    after = await fence.view("team")
    assert not after.recent
    assert name not in {p.ref.name for p in after.policies.valid}


async def test_a_read_in_flight_when_its_policy_goes_is_answered_and_not_kept() -> None:
    """Checks already waiting for a read get its answer; the answer is not kept, and the next
    check starts a read of its own, which a later check then shares."""
    clock = FakeClock()
    reads: _SharedReads[str, int] = _SharedReads(clock, fresh_for=2.0)
    answers: list[asyncio.Future[int]] = []

    async def read() -> int:
        answers.append(asyncio.get_running_loop().create_future())
        return await answers[-1]

    async def settled() -> None:
        for _ in range(3):
            await asyncio.sleep(0)

    waiting = asyncio.create_task(reads.get("team", read))
    await settled()
    reads.forget("team")
    again = asyncio.create_task(reads.get("team", read))
    await settled()
    assert len(answers) == 2  # the forgotten read is not shared any more
    answers[0].set_result(1)
    assert await waiting == (1, False)
    joined = asyncio.create_task(reads.get("team", read))  # shares the second read
    await settled()
    assert len(answers) == 2
    answers[1].set_result(2)
    assert (await again, await joined) == ((2, False), (2, False))
    assert await reads.get("team", read) == (2, True)  # the second read is kept


#: The change on the server, and what the view that caught up deletes.
CHANGES = {
    "narrowed": ["tmp-go"],
    "deleted": [],
    "recreated": ["tmp-go", "tmp-stay"],  # the same rule again: it deletes once confirmed
    "relabelled": [],
    "outranked": [],
    "held": [],
    "unreadable": ["tmp-go", "tmp-stay"],
}


def change_on_the_server(api: FakeApiServer, change: str) -> None:
    if change == "narrowed":
        api.store.patch(CLUSTER_POLICIES, None, "sweep", {"spec": {"names": ["tmp-go*"]}})
    elif change in ("deleted", "recreated"):
        api.store.delete(CLUSTER_POLICIES, None, "sweep")
        if change == "recreated":  # generation 1 again, another uid
            api.store.create(CLUSTER_POLICIES, None, sweep(["tmp-*"]))
    elif change == "relabelled":
        api.store.patch(NAMESPACES, None, "team", {"metadata": {"labels": {"env": "prod"}}})
    elif change == "outranked":  # a LifecyclePolicy outranks a (not enforced) cluster policy
        keep = policy(
            "LifecyclePolicy", "keep", names=["tmp-*"], lifecycle={"delete-after": "1000h"}
        )
        api.store.create(POLICIES, "team", keep)
    elif change == "held":  # an invalid policy holds what it would match
        broken = policy(
            "LifecyclePolicy", "broken", names=["tmp-*"], lifecycle={"delete-after": "soon"}
        )
        api.store.create(POLICIES, "team", broken)
    else:
        api.fail(500, method="GET", path=CLUSTER_LIST + "$", times=2)


@pytest.mark.parametrize("change", sorted(CHANGES))
async def test_the_reconciler_deletes_only_what_the_view_on_the_server_decides(
    api: FakeApiServer, kube: KubeClient, clock: FakeClock, store: PolicyStore, change: str
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
    await clock.advance(2)  # both due by the view the store holds
    change_on_the_server(api, change)

    assert await reconcile(keys["tmp-stay"]) == Result(requeue_after=1.0)
    assert await reconcile(keys["tmp-go"]) == Result(requeue_after=1.0)  # decided on the old
    assert api.requests_to("DELETE") == []
    assert checks.results == {"error" if change == "unreadable" else "changed": 2}

    # The watches catch up: the next decisions are made on the view as it now is.
    watching = asyncio.create_task(store.run())
    if change == "relabelled":
        store.namespace_labels = {"team": {"env": "prod"}}.get
    await clock.settle()
    await clock.advance(2.5)  # past the fence's kept reads
    for key in keys.values():
        await reconcile(key)
    await cancel_and_wait(watching)
    deleted = sorted(request.path.rsplit("/", 1)[-1] for request in api.requests_to("DELETE"))
    assert deleted == CHANGES[change]
    for name in set(keys) - set(deleted):
        assert api.store.get(CONFIGMAPS, "team", name) is not None
    assert checks.results["confirmed"] + checks.results["recent"] == len(deleted)
