"""Every watch of the process is the one reflector: its faults, tested for every purpose.

The annotated types (the shared cache), the Namespace defaults, the lifecycle policies and
the followed rollouts each run :class:`~lifecycle_controller.controller.watch.reflector.Informer`
through their owner's own wiring, on the in-memory API server and the fake clock. Each fault
is checked the same way for all of them: a bookmark moves the resourceVersion on, a 410 (the
history compacted) lists again, a 500 ERROR event backs off and lists again, a disconnect is
reported while it lasts and recovered from, and a compaction while the watch was away ends
in a list that finds what changed meanwhile (the rollout watch, which keeps nothing from
before its watch, goes on from there instead). After each, a change is kept, and the
``lifecycle_watch_*{resource,purpose}`` family counted it under its purpose.
"""

from __future__ import annotations

import asyncio
import random
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from typing import Any

import pytest

from lifecycle_controller.app.informer_metrics import InformerMetricsAdapter
from lifecycle_controller.controller.namespace.defaults import NamespaceDefaultsStore
from lifecycle_controller.controller.policy.store import PolicyStore
from lifecycle_controller.controller.rollout.watch import RolloutWatch
from lifecycle_controller.controller.watch.cache import MetadataCache
from lifecycle_controller.controller.watch.informers import InformerSet
from lifecycle_controller.controller.watch.reflector import Informer
from lifecycle_controller.core.objects import keys
from lifecycle_controller.core.objects.resources import ObjectKey, ResourceType
from lifecycle_controller.kube import NAMESPACES, KubeClient
from lifecycle_controller.kube.resources import CLUSTER_POLICIES, POLICIES
from lifecycle_controller.machinery.tasks import cancel_and_wait
from lifecycle_controller.serving.metrics import Metrics
from tests.doubles.fakeapi import CONFIGMAPS, DEPLOYMENTS, FakeApiServer
from tests.doubles.fakeclock import FakeClock

NAMESPACE = "team"
MARK = "lifecycle-test/mark"


@dataclass
class Watched:
    """One purpose's owner, running: its informer of ``resource`` and what it keeps."""

    informer: Callable[[], Informer | None]
    kept: Callable[[], dict[str, str]]
    stop: Callable[[], Awaitable[None]]


@dataclass
class Purpose:
    """How one purpose's objects are made and changed, its owner started, its state read."""

    name: str
    resource: ResourceType
    #: Lists read every object (False: the rollout watch lists only for a resourceVersion).
    full_lists: bool
    start: Callable[[FakeApiServer, KubeClient, FakeClock, Metrics], Awaitable[Watched]]
    #: What the owner should keep, read from the server.
    expected: Callable[[FakeApiServer], dict[str, str]]
    body: Callable[[str, int], dict[str, Any]]
    patch: Callable[[int], dict[str, Any]]
    namespace: str | None = NAMESPACE


def _rv(obj: dict[str, Any]) -> str:
    return str(obj["metadata"]["resourceVersion"])


# ---------------------------------------------------------------------------- the purposes


async def start_objects(
    api: FakeApiServer, kube: KubeClient, clock: FakeClock, metrics: Metrics
) -> Watched:
    cache = MetadataCache()
    informers = InformerSet(
        source=kube,
        cache=cache,
        on_object_change=lambda *change: None,
        clock=clock,
        metrics=InformerMetricsAdapter(metrics, purpose="objects"),
        rng=random.Random(1),
    )
    await informers.ensure([CONFIGMAPS])
    return Watched(
        informer=lambda: next(iter(informers.informers()), None),
        kept=lambda: {k.name: o.resource_version for k, o in cache.items(CONFIGMAPS)},
        stop=informers.aclose,
    )


def objects_expected(api: FakeApiServer) -> dict[str, str]:
    annotated = [o for o in api.store.objects(CONFIGMAPS) if o["metadata"].get("annotations")]
    return {o["metadata"]["name"]: _rv(o) for o in annotated}


async def start_namespaces(
    api: FakeApiServer, kube: KubeClient, clock: FakeClock, metrics: Metrics
) -> Watched:
    store = NamespaceDefaultsStore(
        source=kube,
        clock=clock,
        metrics=InformerMetricsAdapter(metrics, purpose="namespace-defaults"),
        rng=random.Random(1),
    )
    task = asyncio.create_task(store.run())
    await clock.settle()
    names = ["c", *(o["metadata"]["name"] for o in api.store.objects(NAMESPACES))]

    def kept() -> dict[str, str]:
        found = {name: store.get(name) for name in names}
        return {n: d.values[keys.MAX_DELETE_TTL] for n, d in found.items() if d is not None}

    return Watched(
        informer=lambda: next(iter(store.informers()), None),
        kept=kept,
        stop=lambda: cancel_and_wait(task),
    )


def namespaces_expected(api: FakeApiServer) -> dict[str, str]:
    out = {}
    for obj in api.store.objects(NAMESPACES):
        value = (obj["metadata"].get("annotations") or {}).get(keys.MAX_DELETE_TTL)
        if value is not None:
            out[obj["metadata"]["name"]] = value
    return out


async def start_policies(
    api: FakeApiServer, kube: KubeClient, clock: FakeClock, metrics: Metrics
) -> Watched:
    store = PolicyStore(
        kube,
        clock=clock,
        metrics=InformerMetricsAdapter(metrics, purpose="policies"),
        rng=random.Random(1),
    )
    assert await store.load()
    task = asyncio.create_task(store.run())
    await clock.settle()

    def informer() -> Informer | None:
        return next((i for i in store.informers() if i.resource == POLICIES), None)

    return Watched(
        informer=informer,
        kept=lambda: {doc.ref.name: doc.resource_version for doc in store.docs()},
        stop=lambda: cancel_and_wait(task),
    )


def policies_expected(api: FakeApiServer) -> dict[str, str]:
    return {o["metadata"]["name"]: _rv(o) for o in api.store.objects(POLICIES)}


async def start_rollouts(
    api: FakeApiServer, kube: KubeClient, clock: FakeClock, metrics: Metrics
) -> Watched:
    watch = RolloutWatch(
        kube,
        clock,
        metrics=InformerMetricsAdapter(metrics, purpose="rollouts"),
        rng=random.Random(1),
    )
    version = str(api.store.revision)
    followed = {}
    for obj in api.store.objects(DEPLOYMENTS):
        key = ObjectKey(DEPLOYMENTS, NAMESPACE, obj["metadata"]["name"])
        watch.follow(key, obj["metadata"]["uid"], version)
        followed[key.name] = key
    await clock.settle()

    def kept() -> dict[str, str]:
        versions = {name: watch.version(key) for name, key in followed.items()}
        return {name: v for name, v in versions.items() if v is not None}

    return Watched(
        informer=lambda: next(iter(watch.informers()), None), kept=kept, stop=watch.aclose
    )


def rollouts_expected(api: FakeApiServer) -> dict[str, str]:
    return {o["metadata"]["name"]: _rv(o) for o in api.store.objects(DEPLOYMENTS)}


def annotated_configmap(name: str, mark: int) -> dict[str, Any]:
    return {"metadata": {"name": name, "annotations": {keys.DELETE_AFTER: f"{mark}h"}}}


def namespace(name: str, mark: int) -> dict[str, Any]:
    return {"metadata": {"name": name, "annotations": {keys.MAX_DELETE_TTL: f"{mark}h"}}}


def policy(name: str, mark: int) -> dict[str, Any]:
    return {
        "apiVersion": "lifecycle.cezary.dev/v1alpha1",
        "kind": "LifecyclePolicy",
        "metadata": {"name": name},
        "spec": {"resources": ["configmaps"], "lifecycle": {"delete-after": f"{mark}h"}},
    }


def deployment(name: str, mark: int) -> dict[str, Any]:
    template: dict[str, Any] = {"metadata": {"annotations": {}}, "spec": {}}
    return {
        "metadata": {"name": name, "annotations": {MARK: str(mark)}},
        "spec": {"replicas": 0, "template": template},
    }


PURPOSES = [
    Purpose(
        "objects",
        CONFIGMAPS,
        True,
        start_objects,
        objects_expected,
        annotated_configmap,
        lambda mark: {"metadata": {"annotations": {keys.DELETE_AFTER: f"{mark}h"}}},
    ),
    Purpose(
        "namespace-defaults",
        NAMESPACES,
        True,
        start_namespaces,
        namespaces_expected,
        namespace,
        lambda mark: {"metadata": {"annotations": {keys.MAX_DELETE_TTL: f"{mark}h"}}},
        namespace=None,
    ),
    Purpose(
        "policies",
        POLICIES,
        True,
        start_policies,
        policies_expected,
        policy,
        lambda mark: {"spec": {"lifecycle": {"delete-after": f"{mark}h"}}},
    ),
    Purpose(
        "rollouts",
        DEPLOYMENTS,
        False,
        start_rollouts,
        rollouts_expected,
        deployment,
        lambda mark: {"metadata": {"annotations": {MARK: str(mark)}}},
    ),
]


# ---------------------------------------------------------------------------- the harness


class Run:
    """One purpose's owner on the fake API server, with helpers that drive the fake clock."""

    def __init__(
        self, purpose: Purpose, api: FakeApiServer, kube: KubeClient, clock: FakeClock
    ) -> None:
        self.purpose = purpose
        self.api = api
        self.kube = kube
        self.clock = clock
        self.metrics = Metrics(process_collectors=False)
        self.mark = 1
        self.names = ["a", "b"]

    async def __aenter__(self) -> Run:
        for name in self.names:
            self.create(name)
        self.watched = await self.purpose.start(self.api, self.kube, self.clock, self.metrics)
        await self.changed()
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.watched.stop()

    @property
    def informer(self) -> Informer:
        informer = self.watched.informer()
        assert informer is not None
        return informer

    def create(self, name: str) -> None:
        self.api.store.create(
            self.purpose.resource, self.purpose.namespace, self.purpose.body(name, self.mark)
        )

    def change(self, name: str) -> None:
        self.api.store.patch(
            self.purpose.resource, self.purpose.namespace, name, self.purpose.patch(self.mark)
        )

    def delete(self, name: str) -> None:
        self.api.store.delete(self.purpose.resource, self.purpose.namespace, name)
        self.names.remove(name)

    async def until(self, condition: Callable[[], bool], what: str, *, step: float = 0.25) -> None:
        """Let fake time pass in small steps (backoffs run out) until ``condition()``."""
        for _ in range(400):
            await self.clock.settle()
            if condition():
                return
            await self.clock.advance(step)
        raise AssertionError(f"{self.purpose.name}: {what}")

    def in_step(self) -> bool:
        expected = self.purpose.expected(self.api)
        if self.purpose.name == "namespace-defaults":
            expected = {n: v for n, v in expected.items() if n in self.names}
        return self.watched.kept() == expected

    async def changed(self) -> None:
        """Change every object; the owner keeps every change."""
        self.mark += 1
        for name in self.names:
            self.change(name)
        await self.until(self.in_step, "the owner keeps what the server holds")

    def ends(self, reason: str) -> float:
        value = self.metrics.registry.get_sample_value(
            "lifecycle_watch_ends_total",
            {"resource": self.purpose.resource.key, "purpose": self.purpose.name, "reason": reason},
        )
        return value or 0.0

    def watching(self) -> bool:
        return bool(self.api.store.watchers(self.purpose.resource))

    def path(self) -> str:
        """The pattern of the requests of the purpose's informer (a fault's ``path``)."""
        return self.purpose.resource.collection_path(None) + "$"

    def requests(self, *, watch: bool) -> list[str]:
        """The informer's GET requests so far, watches or lists, by their query."""
        path = self.purpose.resource.collection_path(None)
        return [
            str(r.query)
            for r in self.api.requests_to("GET", path)
            if r.path == path and r.is_watch is watch
        ]


@pytest.fixture(params=PURPOSES, ids=[p.name for p in PURPOSES])
def purpose(request: pytest.FixtureRequest, api: FakeApiServer) -> Purpose:
    chosen: Purpose = request.param
    if chosen.resource in (POLICIES,):
        api.serve(CLUSTER_POLICIES)
        api.serve(POLICIES)
    return chosen


# ---------------------------------------------------------------------------- the faults


async def test_a_bookmark_moves_the_resource_version_on(
    purpose: Purpose, api: FakeApiServer, kube: KubeClient, clock: FakeClock
) -> None:
    async with Run(purpose, api, kube, clock) as run:
        other = DEPLOYMENTS if purpose.resource is CONFIGMAPS else CONFIGMAPS
        api.store.create(other, NAMESPACE, {"metadata": {"name": "elsewhere"}})  # a revision on
        api.bookmark(purpose.resource)
        await run.until(
            lambda: run.informer.resource_version == str(api.store.revision), "the bookmark"
        )
        assert run.informer.delivering
        assert run.ends("expired") == 0
        await run.changed()


async def test_a_410_lists_again_and_watches_on(
    purpose: Purpose, api: FakeApiServer, kube: KubeClient, clock: FakeClock
) -> None:
    async with Run(purpose, api, kube, clock) as run:
        lists = len(run.requests(watch=False))
        streams = sum("sendInitialEvents" in q for q in run.requests(watch=True))
        api.watch_error(410, purpose.resource)
        await run.until(lambda: run.ends("expired") == 1 and run.watching(), "a new watch")
        relisted = len(run.requests(watch=False)) > lists
        restreamed = sum("sendInitialEvents" in q for q in run.requests(watch=True)) > streams
        assert relisted or restreamed
        await run.changed()


async def test_a_500_error_event_backs_off_and_lists_again(
    purpose: Purpose, api: FakeApiServer, kube: KubeClient, clock: FakeClock
) -> None:
    async with Run(purpose, api, kube, clock) as run:
        api.watch_error(500, purpose.resource)
        await clock.settle()
        assert run.ends("error") == 1
        assert not run.watching()  # backing off
        assert not run.informer.delivering
        await run.until(run.watching, "a new watch after the backoff")
        await run.changed()


async def test_a_disconnect_is_reported_while_it_lasts(
    purpose: Purpose, api: FakeApiServer, kube: KubeClient, clock: FakeClock
) -> None:
    async with Run(purpose, api, kube, clock) as run:
        outage = api.fail(503, method="GET", path=run.path(), times=3)
        api.close_watches(purpose.resource)
        await run.until(lambda: run.informer.disconnected, "disconnected")
        await run.until(lambda: outage.exhausted and not run.informer.disconnected, "answered")
        assert run.ends("server_error") == 3
        await run.until(run.watching, "watching again")
        await run.changed()


async def test_a_compaction_while_away_ends_in_a_list_of_what_changed(
    purpose: Purpose, api: FakeApiServer, kube: KubeClient, clock: FakeClock
) -> None:
    async with Run(purpose, api, kube, clock) as run:
        api.fail(503, method="GET", path=run.path(), times=1)  # the re-watch waits
        api.close_watches(purpose.resource)
        await run.until(lambda: run.ends("server_error") == 1, "the failed re-watch", step=0)
        run.mark += 1
        run.change("a")
        if purpose.full_lists:
            run.delete("b")
            run.create("c")
            run.names.append("c")
        api.store.compact()
        await run.until(lambda: run.ends("expired") == 1 and run.watching(), "a new watch")
        if purpose.full_lists:
            await run.until(run.in_step, "the list found what changed meanwhile")
        await run.changed()
