"""One namespace listed again beside a running cluster-wide watch
(controller/watch/namespace_relist.py, ``NamespaceMerge`` in controller/watch/cache_writer.py),
on a scripted source and a fake clock.

A LifecyclePolicy changed what is kept in its namespace: that namespace is listed exactly at
the watch's resourceVersion and merged into the cache there only, while the watch runs on.
What changed an object since the list's point (a watch event, the controller's own write) is
newer and stays; requests coalesce; a full list meanwhile, or a failed list, lists again.
"""

from __future__ import annotations

import asyncio
from collections import deque
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

import pytest

from lifecycle_controller.controller.watch.cache import CachedObject, MetadataCache
from lifecycle_controller.controller.watch.cache_writer import CacheWriter
from lifecycle_controller.controller.watch.informers import InformerSet
from lifecycle_controller.controller.watch.namespace_relist import NamespaceRelists
from lifecycle_controller.controller.watch.projection import MetadataProjection
from lifecycle_controller.controller.watch.reflector import Informer
from lifecycle_controller.core.objects.resources import ObjectKey, ResourceType
from lifecycle_controller.core.policy.in_force import NameTest, object_view
from lifecycle_controller.core.policy.match import ObjectView
from lifecycle_controller.kube import Gone, TransportError
from tests.doubles.fakeclock import FakeClock
from tests.machinery.test_informers import (
    ANNOTATION,
    CONFIGMAPS,
    SETTINGS,
    CountingMetrics,
    FakeSource,
    Recorder,
    Script,
    page,
)


def meta(
    name: str, rv: str, ns: str = "a", *, keep: bool = False, annotated: bool = False
) -> dict[str, Any]:
    return {
        "name": name,
        "namespace": ns,
        "uid": f"uid-{name}",
        "resourceVersion": rv,
        "creationTimestamp": "2026-01-01T00:00:00Z",
        "annotations": {ANNOTATION: "1h"} if annotated else {},
        "labels": {"keep": "yes"} if keep else {},
    }


@dataclass
class Views:
    """A LifecyclePolicy in each of ``namespaces`` keeps the objects labelled ``keep=yes``."""

    namespaces: set[str] = field(default_factory=set)

    def watches(self, resource: ResourceType) -> bool:
        return bool(self.namespaces)

    def view(
        self,
        resource: ResourceType,
        metadata: Mapping[str, Any],
        fields: Mapping[str, Any] | None = None,
        read: frozenset[tuple[str, ...]] | None = None,
    ) -> ObjectView | None:
        labels = metadata.get("labels") or {}
        if metadata.get("namespace") in self.namespaces and labels.get("keep") == "yes":
            return object_view(resource, metadata)
        return None

    def reads(self, resource: ResourceType) -> frozenset[tuple[str, ...]]:
        return frozenset()

    def name_test(self, resource: ResourceType) -> NameTest | None:
        return None


@dataclass
class Source(FakeSource):
    """:class:`FakeSource` that also answers namespace lists, each from its own script; a
    namespace's list waits while ``gate`` is clear."""

    namespaces: dict[str, deque[Script]] = field(default_factory=dict)
    gate: asyncio.Event = field(default_factory=asyncio.Event)

    def __post_init__(self) -> None:
        self.gate.set()

    async def list_metadata(
        self,
        resource: ResourceType,
        *,
        namespace: str | None = None,
        limit: int = 500,
        continue_token: str | None = None,
        resource_version: str | None = None,
        field_selector: str | None = None,
        resource_version_match: str | None = None,
    ) -> dict[str, Any]:
        if resource_version_match is None:  # an informer's own list
            return await super().list_metadata(
                resource,
                namespace=namespace,
                limit=limit,
                continue_token=continue_token,
                resource_version=resource_version,
            )
        self.list_calls.append(
            {
                "ns": namespace,
                "continue": continue_token,
                "rv": resource_version,
                "match": resource_version_match,
            }
        )
        assert namespace is not None
        await self.gate.wait()
        script = self.namespaces.get(namespace) or deque()
        answer = script.popleft() if script else page(resource_version or "1")
        if isinstance(answer, Exception):
            raise answer
        assert isinstance(answer, dict)
        return answer


def key(name: str, ns: str = "a") -> ObjectKey:
    return ObjectKey(CONFIGMAPS, ns, name)


def names(cache: MetadataCache) -> set[str]:
    return {f"{k.namespace}/{k.name}" for k in cache.keys(CONFIGMAPS)}


# ---------------------------------------------------------------------------- the merge


def test_the_merge_keeps_what_changed_since_and_touches_no_other_namespace() -> None:
    views = Views()
    cache = MetadataCache(views)
    recorder = Recorder()
    writer = CacheWriter(CONFIGMAPS, None, cache, recorder)
    writer.upsert(meta("annotated", "3", annotated=True), created=True, listed=True)
    writer.upsert(meta("gone", "4", annotated=True), created=True, listed=True)
    writer.upsert(meta("patched", "5", annotated=True), created=True, listed=True)
    writer.upsert(meta("elsewhere", "2", "b", annotated=True), created=True, listed=True)
    views.namespaces.add("a")  # a LifecyclePolicy in "a" keeps keep=yes there now
    merge = writer.merge("a")
    # After the list's point (rv 10), the watch and the controller's writes move on:
    writer.upsert(meta("modified", "12"), created=False, listed=False)  # label taken off
    writer.remove(meta("deleted", "13"))  # an unkept object deleted
    patched = CachedObject.from_metadata(meta("patched", "14", annotated=True))
    cache.write_back(key("patched"), patched)
    recorder.events.clear()
    # The list, as at rv 10:
    for listed in (
        meta("annotated", "3", annotated=True),
        meta("matches", "8", keep=True),
        meta("modified", "9", keep=True),
        meta("deleted", "7", keep=True),
        meta("patched", "5", annotated=True),
        meta("plain", "6"),
        meta("stranger", "6", "b", keep=True),  # not of this namespace
    ):
        merge.put(listed)
    merge.finish()
    merge.close()
    assert names(cache) == {"a/annotated", "a/matches", "a/patched", "b/elsewhere"}
    assert recorder.summary() == [("add", "matches", None, "8"), ("delete", "gone", "4", None)]
    stored = cache.get(key("patched"))
    assert stored is not None
    assert stored.resource_version == "14"  # the newer state stays
    writer.upsert(meta("after", "15", keep=True), created=True, listed=False)  # merge closed
    assert "a/after" in names(cache)


def test_a_merge_drops_what_is_no_longer_kept_in_its_namespace() -> None:
    views = Views({"a", "b"})
    cache = MetadataCache(views)
    recorder = Recorder()
    writer = CacheWriter(CONFIGMAPS, None, cache, recorder)
    for ns in "ab":
        writer.upsert(meta("x", "3", ns, keep=True), created=True, listed=True)
    views.namespaces.discard("a")  # the LifecyclePolicy in "a" was deleted
    recorder.events.clear()
    merge = writer.merge("a")
    merge.put(meta("x", "3", keep=True))
    merge.finish()
    merge.close()
    assert names(cache) == {"b/x"}
    assert [(kind, name) for kind, name, _, _ in recorder.events] == [("update", "x")]


def test_a_merge_is_one_per_namespace_within_the_writers_scope() -> None:
    cache = MetadataCache(Views())
    writer = CacheWriter(CONFIGMAPS, "a", cache, Recorder())
    with pytest.raises(ValueError, match="outside"):
        writer.merge("b")
    merge = writer.merge("a")
    with pytest.raises(RuntimeError, match="being merged"):
        writer.merge("a")
    merge.close()
    writer.merge("a").close()


# ---------------------------------------------------------------------------- the informer set


@dataclass
class Harness:
    clock: FakeClock
    views: Views = field(default_factory=Views)
    source: Source = field(default_factory=Source)
    recorder: Recorder = field(default_factory=Recorder)
    metrics: CountingMetrics = field(default_factory=CountingMetrics)

    def __post_init__(self) -> None:
        self.cache = MetadataCache(self.views)

    def informers(self, **extra: Any) -> InformerSet:
        return InformerSet(
            source=self.source,
            cache=self.cache,
            on_object_change=self.recorder,
            clock=self.clock,
            settings=SETTINGS,
            metrics=self.metrics,
            **extra,
        )

    def namespace_calls(self) -> list[tuple[str | None, str | None, str | None, str | None]]:
        """The namespace lists sent beside the watch (ns, rv, match, continue)."""
        return [
            (c["ns"], c["rv"], c["match"], c["continue"])
            for c in self.source.list_calls
            if "match" in c
        ]

    def cluster_lists(self) -> int:
        """Full cluster-wide lists begun."""
        return sum(
            1
            for c in self.source.list_calls
            if "match" not in c and c["ns"] is None and not c["continue"]
        )


@pytest.fixture
def h(clock: FakeClock) -> Harness:
    return Harness(clock)


async def started(h: Harness, **extra: Any) -> InformerSet:
    h.source.lists.append(page("10", meta("x", "5", keep=True), meta("y", "6", "b", keep=True)))
    informers = h.informers(**extra)
    await informers.ensure([CONFIGMAPS])
    await h.clock.settle()
    assert informers.synced()
    return informers


async def test_a_namespace_is_listed_again_exactly_at_the_watch_while_it_runs(h: Harness) -> None:
    informers = await started(h)
    assert names(h.cache) == set()
    h.views.namespaces.add("a")
    h.source.namespaces["a"] = deque(
        [page("10", meta("x", "5", keep=True), cont="c1"), page("10", meta("z", "6", keep=True))]
    )
    await informers.relist_namespaces(CONFIGMAPS, {"a"})
    await h.clock.settle()
    assert names(h.cache) == {"a/x", "a/z"}  # "b/y" is kept by nothing: never read again
    assert h.namespace_calls() == [("a", "10", "Exact", None), ("a", "10", "Exact", "c1")]
    assert h.cluster_lists() == 1  # the first list only: no cluster-wide relist
    assert len(h.source.watch_calls) == 1  # the watch ran on
    assert h.metrics.relists == 0
    relists = informers.namespace_relists(CONFIGMAPS)
    assert relists is not None
    assert relists.done == 1
    assert relists.idle
    await informers.aclose()


async def test_requests_coalesce_per_namespace(h: Harness) -> None:
    informers = await started(h)
    h.views.namespaces.update("ab")
    h.source.namespaces["b"] = deque([page("10", meta("y", "6", "b", keep=True))])
    h.source.gate.clear()
    await informers.relist_namespaces(CONFIGMAPS, {"a"})
    await informers.relist_namespaces(CONFIGMAPS, {"a", "b"})
    await h.clock.settle()  # "a" is being listed; "b" waits
    relists = informers.namespace_relists(CONFIGMAPS)
    assert relists is not None
    assert relists.pending == {"b"}
    await informers.relist_namespaces(CONFIGMAPS, {"a", "b"})  # "a" again: once more after
    h.source.gate.set()
    await h.clock.settle()
    assert [ns for ns, *_ in h.namespace_calls()] == ["a", "a", "b"]
    assert names(h.cache) == {"b/y"}  # "a" has nothing kept: its pages were empty
    await informers.aclose()


async def test_a_failed_namespace_list_is_tried_again_after_a_backoff(h: Harness) -> None:
    informers = await started(h)
    h.views.namespaces.add("b")
    h.source.namespaces["b"] = deque(
        [Gone(410, {"message": "too old"}), page("10", meta("y", "6", "b", keep=True))]
    )
    await informers.relist_namespaces(CONFIGMAPS, {"b"})
    await h.clock.settle()
    assert names(h.cache) == set()
    await h.clock.advance(2 * SETTINGS.backoff_initial)
    assert names(h.cache) == {"b/y"}
    assert len(h.namespace_calls()) == 2
    await informers.aclose()


async def test_a_type_not_listed_yet_is_listed_again_whole(
    h: Harness,
) -> None:
    h.source.gate.clear()
    h.source.lists.append(TransportError("refused"))  # the first list fails: not synced
    informers = h.informers()
    await informers.ensure([CONFIGMAPS])
    await h.clock.settle()
    await informers.relist_namespaces(CONFIGMAPS, {"a"})
    await h.clock.settle()
    assert h.namespace_calls() == []
    assert h.cluster_lists() == 2
    await informers.relist_namespaces(CONFIGMAPS, set())  # nothing asked: nothing done
    await informers.aclose()


async def test_per_namespace_informers_start_over_in_those_namespaces_only(h: Harness) -> None:
    h.source.lists.extend([page("10"), page("10")])
    informers = h.informers(namespaces=["a", "b"])
    await informers.ensure([CONFIGMAPS])
    await h.clock.settle()
    assert informers.synced()
    h.views.namespaces.add("a")
    h.source.lists.append(page("11", meta("x", "5", keep=True)))
    await informers.relist_namespaces(CONFIGMAPS, {"a", "elsewhere"})
    await h.clock.settle()
    assert names(h.cache) == {"a/x"}
    assert [c["ns"] for c in h.source.list_calls] == ["a", "b", "a"]  # "a" started over
    assert h.namespace_calls() == []
    assert h.metrics.relists == 1
    assert informers.namespace_relists(CONFIGMAPS) is None
    await informers.aclose()


async def test_a_full_list_meanwhile_lists_the_namespace_again(clock: FakeClock) -> None:
    cache = MetadataCache(Views({"a"}))
    recorder = Recorder()
    source = Source()
    writer = CacheWriter(CONFIGMAPS, None, cache, recorder)
    informer = Informer(
        resource=CONFIGMAPS,
        namespace=None,
        projection=MetadataProjection(source),
        keeper=writer,
        clock=clock,
        settings=SETTINGS,
        resource_version="10",
    )
    relists = NamespaceRelists(informer, writer, clock, settings=SETTINGS)
    source.gate.clear()
    relists.request(["a"])
    await clock.settle()
    writer.listed(set())  # the informer's own relist completed meanwhile
    source.gate.set()
    await clock.settle()
    assert [c["ns"] for c in source.list_calls] == ["a", "a"]
    assert relists.done == 1
    await relists.aclose()
    with pytest.raises(ValueError, match="namespace-scoped"):
        NamespaceRelists(
            Informer(
                resource=CONFIGMAPS,
                namespace="a",
                projection=MetadataProjection(source),
                keeper=writer,
                clock=clock,
            ),
            writer,
            clock,
        )


@dataclass
class NamedViews(Views):
    """:class:`Views` whose policies name the objects ``keep-*`` only: any other object is
    never projected (its view is asked for nothing)."""

    projected: list[str] = field(default_factory=list)

    def view(
        self,
        resource: ResourceType,
        metadata: Mapping[str, Any],
        fields: Mapping[str, Any] | None = None,
        read: frozenset[tuple[str, ...]] | None = None,
    ) -> ObjectView | None:
        self.projected.append(str(metadata.get("name")))
        return super().view(resource, metadata, fields, read)

    def name_test(self, resource: ResourceType) -> NameTest | None:
        return lambda namespace, name: name.startswith("keep-")


def test_a_listed_object_no_policy_may_keep_by_name_is_not_projected() -> None:
    views = NamedViews({"a"})
    cache = MetadataCache(views)
    writer = CacheWriter(CONFIGMAPS, None, cache, Recorder())
    merge = writer.merge("a")
    for listed in (
        meta("keep-1", "3", keep=True),
        meta("other", "4", keep=True),  # no policy names it
        meta("annotated", "5", annotated=True),  # annotated: always judged
    ):
        merge.put(listed)
    merge.finish()
    merge.close()
    assert views.projected == ["keep-1", "annotated"]
    assert names(cache) == {"a/keep-1", "a/annotated"}
