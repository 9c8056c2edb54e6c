"""Informers against the real API server: list, watch, relist, scoping, RBAC, pagination.

Everything here talks to the real kube-apiserver, except ``test_silent_stream_*``: a server
that accepts a watch and then says nothing is a fault the real one cannot be made to produce,
so that one test uses a tiny loopback aiohttp server.

410 Gone *is* produced by the real server: core/v1 Events are not served from the API server's
watch cache, so after an etcd compaction a watch (or a list continue token) from an older
resourceVersion gets ``410 Expired`` from etcd itself.
"""

from __future__ import annotations

import asyncio
import json
import uuid
from collections.abc import AsyncIterator, Awaitable, Callable, Mapping
from contextlib import asynccontextmanager
from dataclasses import dataclass, field, replace
from typing import Any

import aiohttp
import pytest
from aiohttp import web

from lifecycle_controller.controller.watch.cache import CachedObject, MetadataCache
from lifecycle_controller.controller.watch.cache_writer import CacheWriter
from lifecycle_controller.controller.watch.informers import (
    ChangeKind,
    InformerSet,
    InformerSettings,
    MetadataSource,
)
from lifecycle_controller.controller.watch.projection import MetadataProjection
from lifecycle_controller.controller.watch.reflector import Informer
from lifecycle_controller.core.objects.resources import ObjectKey
from lifecycle_controller.devcluster import ControlPlane
from lifecycle_controller.kube import (
    KubeClient,
    ResourceType,
    Timeouts,
    TransportError,
    load_configuration,
)
from lifecycle_controller.machinery.clock import RealClock
from tests.integration.keys import DELETE_AFTER, DRY_RUN
from tests.integration.support import CONFIGMAPS, configmap, eventually
from tests.loopback import served

EVENTS = ResourceType("", "v1", "events", "Event", namespaced=True)  # not watch-cached

# Fast recovery so the tests stay short; the protocol is the same as with the defaults.
FAST = InformerSettings(backoff_initial=0.05, backoff_max=0.2, min_watch_seconds=0.0)
#: For the tests of the paginated protocol (the fallback when streaming lists are refused).
PAGED = replace(FAST, streaming_list=False)


@dataclass
class Recorder:
    """The on_object_change handler: remembers every delivery."""

    events: list[tuple[ChangeKind, ObjectKey, CachedObject | None, CachedObject | None]] = field(
        default_factory=list
    )

    def __call__(
        self, kind: ChangeKind, key: ObjectKey, old: CachedObject | None, new: CachedObject | None
    ) -> None:
        self.events.append((kind, key, old, new))

    def of(
        self, name: str
    ) -> list[tuple[ChangeKind, dict[str, str] | None, dict[str, str] | None]]:
        """(kind, old annotations, new annotations) delivered for objects called ``name``."""
        return [
            (
                kind,
                None if old is None else dict(old.annotations),
                None if new is None else dict(new.annotations),
            )
            for kind, key, old, new in self.events
            if key.name == name
        ]


async def wait_until(condition: Callable[[], bool], what: str) -> None:
    """Poll a local condition fed by the informer (which runs against the real server)."""

    async def check() -> bool:
        return condition()

    await eventually(check, within=15, interval=0.05, what=what)


@dataclass
class Metrics:
    restarts: list[str] = field(default_factory=list)
    relists: int = 0

    def watch_restarted(self, resource: ResourceType, reason: str) -> None:
        self.restarts.append(reason)

    def relisted(self, resource: ResourceType) -> None:
        self.relists += 1

    def event_received(self, resource: ResourceType, event_type: str) -> None:
        pass

    def cache_objects(self, resource: ResourceType, count: int) -> None:
        pass


@asynccontextmanager
async def running(informer: Informer) -> AsyncIterator[Informer]:
    task = asyncio.create_task(informer.run())
    try:
        yield informer
    finally:
        task.cancel()
        await asyncio.gather(task, return_exceptions=True)


def make_informer(
    source: MetadataSource,
    resource: ResourceType,
    namespace: str | None,
    *,
    cache: MetadataCache | None = None,
    recorder: Recorder | None = None,
    metrics: Metrics | None = None,
    settings: InformerSettings = FAST,
) -> Informer:
    return Informer(
        resource=resource,
        namespace=namespace,
        projection=MetadataProjection(source),
        keeper=CacheWriter(
            resource,
            namespace,
            MetadataCache() if cache is None else cache,
            Recorder() if recorder is None else recorder,
        ),
        clock=RealClock(),
        metrics=metrics,
        settings=settings,
    )


def patch_annotations(annotations: dict[str, str | None]) -> dict[str, Any]:
    return {"metadata": {"annotations": annotations}}


# ---------------------------------------------------------------------------- list + watch


async def test_initial_list_delivers_adds_for_annotated_objects_and_syncs(
    kube: KubeClient, namespace: str
) -> None:
    await kube.create(
        CONFIGMAPS, namespace, configmap("annotated", **{DELETE_AFTER: "1h", "x": "y"})
    )
    await kube.create(CONFIGMAPS, namespace, configmap("plain", x="y"))
    cache, recorder = MetadataCache(), Recorder()
    # Cluster-wide: other namespaces' objects arrive too; only ours are asserted.
    async with running(
        make_informer(kube, CONFIGMAPS, None, cache=cache, recorder=recorder)
    ) as inf:
        await wait_until(lambda: inf.synced, "the first list")
        assert cache.all_synced([CONFIGMAPS])
        assert recorder.of("annotated") == [("add", None, {DELETE_AFTER: "1h"})]
        assert recorder.of("plain") == []
        key = ObjectKey(CONFIGMAPS, namespace, "annotated")
        stored = cache.get(key)
        assert stored is not None
        assert stored.namespace == namespace
        assert stored.uid
        assert cache.get(ObjectKey(CONFIGMAPS, namespace, "plain")) is None


async def test_watch_delivers_changes_with_old_and_new(kube: KubeClient, namespace: str) -> None:
    cache, recorder = MetadataCache(), Recorder()
    async with running(
        make_informer(kube, CONFIGMAPS, namespace, cache=cache, recorder=recorder)
    ) as inf:
        await wait_until(lambda: inf.synced, "the first list")
        await kube.create(CONFIGMAPS, namespace, configmap("a", **{DELETE_AFTER: "1h"}))
        await kube.create(CONFIGMAPS, namespace, configmap("plain"))
        await wait_until(lambda: len(recorder.of("a")) == 1, "the create")
        await kube.merge_patch(CONFIGMAPS, namespace, "a", patch_annotations({DELETE_AFTER: "2h"}))
        await kube.merge_patch(CONFIGMAPS, namespace, "plain", patch_annotations({"other": "1"}))
        await kube.merge_patch(CONFIGMAPS, namespace, "plain", patch_annotations({DRY_RUN: "true"}))
        await kube.merge_patch(CONFIGMAPS, namespace, "a", patch_annotations({DELETE_AFTER: None}))
        await kube.delete(CONFIGMAPS, namespace, "plain")
        await wait_until(lambda: len(recorder.of("plain")) == 2, "the delete")

        assert recorder.of("a") == [
            ("add", None, {DELETE_AFTER: "1h"}),
            ("update", {DELETE_AFTER: "1h"}, {DELETE_AFTER: "2h"}),
            ("update", {DELETE_AFTER: "2h"}, {}),  # lost its annotations: still delivered
        ]
        assert recorder.of("plain") == [
            ("update", None, {DRY_RUN: "true"}),  # None: it was not annotated before
            ("delete", {DRY_RUN: "true"}, {DRY_RUN: "true"}),
        ]
        assert cache.keys(CONFIGMAPS) == []  # "a" lost its annotations, "plain" is gone


# ---------------------------------------------------------------------------- scoping and RBAC


CONFIGMAP_READER = [{"apiGroups": [""], "resources": ["configmaps"], "verbs": ["list", "watch"]}]


@pytest.fixture
def other_namespace(control_plane: ControlPlane) -> Any:
    name = f"t-{uuid.uuid4().hex[:10]}"
    response = control_plane.request("POST", "/api/v1/namespaces", {"metadata": {"name": name}})
    assert response.status == 201, response.body
    yield name
    control_plane.request("DELETE", f"/api/v1/namespaces/{name}")


async def test_per_namespace_informers_need_only_namespaced_roles(
    control_plane: ControlPlane, kube: KubeClient, namespace: str, other_namespace: str
) -> None:
    user = control_plane.user_kubeconfig(
        f"ns-reader-{namespace}",
        namespaced_rules={namespace: CONFIGMAP_READER, other_namespace: CONFIGMAP_READER},
    )
    for ns in (namespace, other_namespace):
        await kube.create(CONFIGMAPS, ns, configmap("x", **{DELETE_AFTER: "1h"}))
    cache, recorder = MetadataCache(), Recorder()
    async with await KubeClient.connect(str(user)) as reader:
        informers = InformerSet(
            source=reader,
            cache=cache,
            on_object_change=recorder,
            clock=RealClock(),
            namespaces=[namespace, other_namespace],
            settings=FAST,
        )
        async with informers:
            await informers.ensure([CONFIGMAPS])
            await wait_until(informers.synced, "both namespaces listed")
            await kube.create(CONFIGMAPS, other_namespace, configmap("y", **{DELETE_AFTER: "1h"}))
            await wait_until(lambda: len(recorder.events) == 3, "the watched create")
    assert sorted((k.namespace, k.name, kind) for kind, k, _, _ in recorder.events) == sorted(
        [(namespace, "x", "add"), (other_namespace, "x", "add"), (other_namespace, "y", "add")]
    )


async def test_forbidden_scope_backs_off_without_stopping_the_others(
    control_plane: ControlPlane, kube: KubeClient, namespace: str, other_namespace: str
) -> None:
    user = control_plane.user_kubeconfig(
        f"half-reader-{namespace}", namespaced_rules={namespace: CONFIGMAP_READER}
    )
    await kube.create(CONFIGMAPS, namespace, configmap("x", **{DELETE_AFTER: "1h"}))
    cache, recorder, metrics = MetadataCache(), Recorder(), Metrics()
    async with await KubeClient.connect(str(user)) as reader:
        informers = InformerSet(
            source=reader,
            cache=cache,
            on_object_change=recorder,
            clock=RealClock(),
            namespaces=[namespace, other_namespace],
            metrics=metrics,
            settings=FAST,
        )
        async with informers:
            await informers.ensure([CONFIGMAPS])
            await wait_until(lambda: metrics.restarts.count("forbidden") >= 3, "retries")
            assert cache.is_synced(CONFIGMAPS, namespace)
            assert not informers.synced()
            await kube.create(CONFIGMAPS, namespace, configmap("y", **{DELETE_AFTER: "1h"}))
            await wait_until(lambda: len(recorder.events) == 2, "the allowed namespace")


async def test_missing_resource_type_stops_the_informer(kube: KubeClient) -> None:
    missing = ResourceType("example.invalid", "v1", "nothings", "Nothing", namespaced=True)
    gone: list[ResourceType] = []
    informer = Informer(
        resource=missing,
        namespace=None,
        projection=MetadataProjection(kube),
        keeper=CacheWriter(missing, None, MetadataCache(), Recorder()),
        clock=RealClock(),
        settings=FAST,
        on_resource_gone=gone.append,
    )
    async with asyncio.timeout(10):
        await informer.run()
    assert gone == [missing]


# ---------------------------------------------------------------------------- pagination


@dataclass
class CountingSource:
    """Passes every call to the real client and remembers the list requests."""

    kube: KubeClient
    list_calls: list[dict[str, Any]] = field(default_factory=list)
    watch_calls: list[dict[str, Any]] = field(default_factory=list)
    stream_calls: list[dict[str, Any]] = field(default_factory=list)
    after_page: Callable[[dict[str, Any]], Awaitable[None]] | None = None

    async def list_metadata(self, resource: ResourceType, **kwargs: Any) -> dict[str, Any]:
        self.list_calls.append(kwargs)
        page = await self.kube.list_metadata(resource, **kwargs)
        if self.after_page is not None:
            await self.after_page(page)
        return page

    def watch_metadata(
        self, resource: ResourceType, **kwargs: Any
    ) -> AsyncIterator[dict[str, Any]]:
        self.watch_calls.append(kwargs)
        return self.kube.watch_metadata(resource, **kwargs)

    def watch_list_metadata(
        self, resource: ResourceType, **kwargs: Any
    ) -> AsyncIterator[dict[str, Any]]:
        self.stream_calls.append(kwargs)
        return self.kube.watch_list_metadata(resource, **kwargs)


async def test_lists_follow_continue_tokens(kube: KubeClient, namespace: str) -> None:
    for i in range(5):
        await kube.create(CONFIGMAPS, namespace, configmap(f"c{i}", **{DELETE_AFTER: f"{i}h"}))
    await kube.create(CONFIGMAPS, namespace, configmap("plain"))
    source, recorder = CountingSource(kube), Recorder()
    informer = make_informer(
        source, CONFIGMAPS, namespace, recorder=recorder, settings=replace(PAGED, page_size=2)
    )
    await informer.list_once()  # resourceVersion=0 (this server may answer in one page)
    await informer.list_once()  # a consistent relist: pages of 2
    consistent = [c for c in source.list_calls if c["resource_version"] is None]
    assert [c["limit"] for c in source.list_calls] == [2] * len(source.list_calls)
    assert len(consistent) == 3  # 6 objects, 2 per page
    assert consistent[0]["continue_token"] is None
    assert all(c["continue_token"] for c in consistent[1:])
    assert sorted(key.name for _, key, _, _ in recorder.events) == [f"c{i}" for i in range(5)]
    assert {kind for kind, _, _, _ in recorder.events} == {"add"}  # unchanged: not re-delivered


async def test_a_streaming_list_is_one_request_that_lists_then_watches(
    kube: KubeClient, namespace: str
) -> None:
    for i in range(3):
        await kube.create(CONFIGMAPS, namespace, configmap(f"s{i}", **{DELETE_AFTER: f"{i}h"}))
    for i in range(20):
        await kube.create(CONFIGMAPS, namespace, configmap(f"plain{i}"))
    source, recorder, cache = CountingSource(kube), Recorder(), MetadataCache()
    informer = make_informer(source, CONFIGMAPS, namespace, cache=cache, recorder=recorder)
    async with running(informer):
        await wait_until(lambda: informer.synced, "the streaming list")
        assert sorted(key.name for _, key, _, _ in recorder.events) == ["s0", "s1", "s2"]
        assert {kind for kind, _, _, _ in recorder.events} == {"add"}
        assert informer.resource_version
        await kube.merge_patch(
            CONFIGMAPS, namespace, "plain3", patch_annotations({DRY_RUN: "true"})
        )
        await kube.merge_patch(CONFIGMAPS, namespace, "s1", patch_annotations({DELETE_AFTER: None}))
        await wait_until(lambda: len(recorder.events) == 5, "the changes after the list")
    # Listed and then watched over the one stream: no list, no second watch.
    assert source.list_calls == []
    assert source.watch_calls == []
    assert len(source.stream_calls) == 1
    assert recorder.of("plain3") == [("update", None, {DRY_RUN: "true"})]
    assert recorder.of("s1")[-1] == ("update", {DELETE_AFTER: "1h"}, {})
    assert sorted(k.name for k in cache.keys(CONFIGMAPS)) == ["plain3", "s0", "s2"]


# ---------------------------------------------------------------------------- 410 Gone


async def compact_etcd(plane: ControlPlane, kube: KubeClient, namespace: str) -> None:
    """Compact etcd history up to now, so older resourceVersions of Events are gone."""
    revision = (await kube.list_metadata(EVENTS, namespace=namespace, limit=1))["metadata"][
        "resourceVersion"
    ]
    async with aiohttp.ClientSession() as session:
        response = await session.post(
            f"{plane.etcd_url}/v3/kv/compaction",
            json={"revision": revision, "physical": True},
        )
        assert response.status == 200, await response.text()


def core_event(name: str, namespace: str, **annotations: str) -> dict[str, Any]:
    return {
        "apiVersion": "v1",
        "kind": "Event",
        "metadata": {"name": name, "annotations": annotations},
        "involvedObject": {"kind": "ConfigMap", "namespace": namespace, "name": "x"},
        "reason": "Test",
        "message": "informer test",
        "type": "Normal",
    }


@dataclass
class Interruptible:
    """The real client, plus a switch that breaks the open watch and holds new ones back."""

    kube: KubeClient
    open: asyncio.Event = field(default_factory=asyncio.Event)
    cut: asyncio.Event = field(default_factory=asyncio.Event)
    list_calls: list[dict[str, Any]] = field(default_factory=list)
    watch_versions: list[str] = field(default_factory=list)

    def __post_init__(self) -> None:
        self.open.set()

    async def list_metadata(self, resource: ResourceType, **kwargs: Any) -> dict[str, Any]:
        self.list_calls.append(kwargs)
        return await self.kube.list_metadata(resource, **kwargs)

    def watch_metadata(
        self, resource: ResourceType, **kwargs: Any
    ) -> AsyncIterator[dict[str, Any]]:
        self.watch_versions.append(kwargs["resource_version"])
        return self._watch(resource, kwargs)

    def watch_list_metadata(
        self, resource: ResourceType, **kwargs: Any
    ) -> AsyncIterator[dict[str, Any]]:
        return self.kube.watch_list_metadata(resource, **kwargs)  # not used: PAGED

    async def _watch(
        self, resource: ResourceType, kwargs: dict[str, Any]
    ) -> AsyncIterator[dict[str, Any]]:
        await self.open.wait()
        stream = self.kube.watch_metadata(resource, **kwargs)
        cut = asyncio.ensure_future(self.cut.wait())
        following: asyncio.Future[dict[str, Any]] | None = None
        try:
            while True:
                following = asyncio.ensure_future(anext(stream))
                await asyncio.wait({following, cut}, return_when=asyncio.FIRST_COMPLETED)
                if cut.done():
                    raise TransportError("connection cut by the test")
                try:
                    yield following.result()
                except StopAsyncIteration:
                    return
        finally:
            for future in (cut, following):
                if future is not None and not future.done():
                    future.cancel()
                    await asyncio.gather(future, return_exceptions=True)
            await stream.aclose()  # type: ignore[attr-defined]


async def test_relist_after_410_synthesises_deletes_for_objects_gone_meanwhile(
    control_plane: ControlPlane, kube: KubeClient, namespace: str
) -> None:
    await kube.create(EVENTS, namespace, core_event("stays", namespace, **{DELETE_AFTER: "1h"}))
    await kube.create(EVENTS, namespace, core_event("goes", namespace, **{DELETE_AFTER: "1h"}))
    source, cache, recorder, metrics = Interruptible(kube), MetadataCache(), Recorder(), Metrics()
    informer = make_informer(
        source, EVENTS, namespace, cache=cache, recorder=recorder, metrics=metrics, settings=PAGED
    )
    async with running(informer):
        await wait_until(lambda: informer.synced, "the first list")
        assert len(recorder.events) == 2
        # The watch breaks; the re-watch waits while the world moves on and history is compacted.
        source.open.clear()
        source.cut.set()
        await wait_until(lambda: len(source.watch_versions) == 2, "a re-watch attempt")
        assert source.watch_versions[1] == informer.resource_version  # the last one seen
        await kube.delete(EVENTS, namespace, "goes")
        await kube.create(EVENTS, namespace, core_event("new", namespace, **{DELETE_AFTER: "1h"}))
        await compact_etcd(control_plane, kube, namespace)
        source.cut.clear()
        source.open.set()
        await wait_until(lambda: len(recorder.events) == 4, "the relist")
    assert recorder.of("goes")[-1] == ("delete", {DELETE_AFTER: "1h"}, None)  # synthesised
    assert recorder.of("new") == [("add", None, {DELETE_AFTER: "1h"})]
    assert recorder.of("stays") == [("add", None, {DELETE_AFTER: "1h"})]  # not re-delivered
    assert metrics.restarts[:2] == ["transport", "expired"]
    assert [c["resource_version"] for c in source.list_calls] == ["0", None]
    assert metrics.relists == 1
    assert sorted(k.name for k in cache.keys(EVENTS)) == ["new", "stays"]


async def test_expired_continue_token_restarts_the_list(
    control_plane: ControlPlane, kube: KubeClient, namespace: str
) -> None:
    for i in range(3):
        await kube.create(EVENTS, namespace, core_event(f"e{i}", namespace, **{DELETE_AFTER: "1h"}))
    compacted: list[bool] = []

    async def compact_once(page: dict[str, Any]) -> None:
        if page["metadata"].get("continue") and not compacted:
            compacted.append(True)
            # A write after the page, then compaction: the continue token is now too old.
            await kube.create(EVENTS, namespace, core_event("late", namespace))
            await compact_etcd(control_plane, kube, namespace)

    source, recorder = CountingSource(kube), Recorder()
    informer = make_informer(
        source, EVENTS, namespace, recorder=recorder, settings=replace(PAGED, page_size=2)
    )
    await informer.list_once()  # the first list (resourceVersion=0)
    source.list_calls.clear()
    source.after_page = compact_once
    await informer.list_once()  # a consistent relist in pages of 2; its token expires
    assert [bool(c["continue_token"]) for c in source.list_calls] == [False, True, False, True]
    assert source.list_calls[2]["resource_version"] is None
    assert sorted(key.name for _, key, _, _ in recorder.events) == ["e0", "e1", "e2"]
    assert informer.synced


@dataclass
class Paced:
    """The real client's metadata lists, logged with what the informer stores, in order; a
    page whose continue token is in ``hold`` is answered, then held until ``release``."""

    kube: KubeClient
    log: list[tuple[str, str]] = field(default_factory=list)
    hold: set[int] = field(default_factory=set)
    release: asyncio.Event = field(default_factory=asyncio.Event)
    ended: list[str] = field(default_factory=list)

    async def list_metadata(self, resource: ResourceType, **kwargs: Any) -> dict[str, Any]:
        page = sum(1 for kind, _ in self.log if kind == "asked")
        self.log.append(("asked", "next" if kwargs["continue_token"] else "first"))
        answer = await self.kube.list_metadata(resource, **kwargs)
        try:
            if page in self.hold:
                await self.release.wait()
        except asyncio.CancelledError:
            self.ended.append("cancelled")
            raise
        self.ended.append("answered")
        return answer

    def watch_metadata(
        self, resource: ResourceType, **kwargs: Any
    ) -> AsyncIterator[dict[str, Any]]:
        return self.kube.watch_metadata(resource, **kwargs)  # not used: lists only

    def watch_list_metadata(
        self, resource: ResourceType, **kwargs: Any
    ) -> AsyncIterator[dict[str, Any]]:
        return self.kube.watch_list_metadata(resource, **kwargs)  # not used: PAGED


class LoggedProjection(MetadataProjection):
    """Logs each object the informer stores (its ``kept`` part is asked for then)."""

    def __init__(self, source: Paced) -> None:
        super().__init__(source)
        self.paced = source

    def kept(self, obj: Mapping[str, Any]) -> Mapping[str, Any] | None:
        self.paced.log.append(("stored", str(obj["metadata"]["name"])))
        return super().kept(obj)


def paced_informer(source: Paced, namespace: str, recorder: Recorder) -> Informer:
    return Informer(
        resource=CONFIGMAPS,
        namespace=namespace,
        projection=LoggedProjection(source),
        keeper=CacheWriter(CONFIGMAPS, namespace, MetadataCache(), recorder),
        clock=RealClock(),
        settings=replace(PAGED, page_size=2),
    )


async def test_a_paged_list_asks_for_the_next_page_before_storing_the_current_one(
    kube: KubeClient, namespace: str
) -> None:
    """The server reads page n+1 while the informer stores page n (one page ahead, no more)."""
    for i in range(5):
        await kube.create(CONFIGMAPS, namespace, configmap(f"c{i}", **{DELETE_AFTER: "1h"}))
    source, recorder = Paced(kube), Recorder()
    informer = paced_informer(source, namespace, recorder)
    await informer.list_once()  # resourceVersion=0 (this server may answer in one page)
    source.log.clear()
    await informer.list_once()  # consistent: pages of 2
    assert source.log == [
        ("asked", "first"),
        ("asked", "next"),
        ("stored", "c0"),
        ("stored", "c1"),
        ("asked", "next"),
        ("stored", "c2"),
        ("stored", "c3"),
        ("stored", "c4"),  # the last page: nothing more asked
    ]
    assert informer.synced


async def test_cancelling_a_paged_list_cancels_the_page_in_flight(
    kube: KubeClient, namespace: str
) -> None:
    """The informer stopped while its next page is in flight: that request ends with it,
    no task outlives the list, and a later list runs whole."""
    for i in range(5):
        await kube.create(CONFIGMAPS, namespace, configmap(f"c{i}", **{DELETE_AFTER: "1h"}))
    source, recorder = Paced(kube), Recorder()
    informer = paced_informer(source, namespace, recorder)
    await informer.list_once()
    source.log.clear()
    source.ended.clear()
    source.hold = {1}  # the second page asked for since the log was cleared
    before = asyncio.all_tasks()
    task = asyncio.create_task(informer.list_once())

    async def held() -> bool:
        return source.log.count(("asked", "next")) == 1 and len(source.ended) == 1

    await eventually(held, within=10, interval=0.01, what="the second page asked for, held")
    task.cancel()
    with pytest.raises(asyncio.CancelledError):
        await task
    assert source.ended == ["answered", "cancelled"]
    assert {t for t in asyncio.all_tasks() - before if not t.done()} == set()
    source.hold = set()
    await informer.list_once()
    assert sorted(key.name for _, key, _, _ in recorder.events) == [f"c{i}" for i in range(5)]


# ---------------------------------------------------------------------------- silent stream


async def test_silent_stream_is_cut_and_rewatched_from_the_last_version(
    control_plane: ControlPlane,
) -> None:
    # Fault injection the real server cannot produce: a watch that stays open and silent.
    watches: list[str] = []
    finished = asyncio.Event()

    async def handle(request: web.Request) -> web.StreamResponse:
        if request.query.get("watch") != "true":
            return web.json_response(
                {
                    "kind": "PartialObjectMetadataList",
                    "metadata": {"resourceVersion": "10"},
                    "items": [],
                }
            )
        watches.append(request.query["resourceVersion"])
        response = web.StreamResponse()
        await response.prepare(request)
        bookmark = {"type": "BOOKMARK", "object": {"metadata": {"resourceVersion": "12"}}}
        await response.write(json.dumps(bookmark).encode() + b"\n")
        await finished.wait()  # silence: the client gives up after its idle timeout
        return response

    app = web.Application()
    app.router.add_get("/api/v1/configmaps", handle)
    configuration, _ = await load_configuration(str(control_plane.admin_kubeconfig))
    metrics = Metrics()
    async with served(app) as base:
        configuration.host = base
        try:
            async with KubeClient(configuration, timeouts=Timeouts(watch_idle=0.3)) as fake:
                informer = make_informer(fake, CONFIGMAPS, None, metrics=metrics, settings=PAGED)
                async with running(informer):
                    await wait_until(lambda: len(watches) >= 2, "a re-watch")
        finally:
            finished.set()
    assert watches[:2] == ["10", "12"]
    assert metrics.restarts[0] == "transport"
