"""Discovery on the fake API server: both formats, explicit vs broad mode, rediscovery.

Waits happen on the fake clock: the broad-mode retry (30 s), the rediscovery period and the
settle delay after a CRD change are all advanced by hand.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable, Mapping

import pytest

from lifecycle_controller.controller.watch.discovery import (
    NOT_COMPLETED,
    CrdWatchState,
    Discovery,
    DiscoveryFatal,
)
from lifecycle_controller.controller.watch.informers import InformerSettings
from lifecycle_controller.core.objects.scope import ScopeConfig
from lifecycle_controller.kube import CRDS, KubeClient, ResourceType
from lifecycle_controller.kube.discovery import fetch_discovery
from tests.doubles.fakeapi import CONFIGMAPS, DEPLOYMENTS, FakeApiServer
from tests.doubles.fakeclock import FakeClock
from tests.unit.support import eventually, sleeping, widget_type


class RecordingMetrics:
    def __init__(self) -> None:
        self.attempts: list[dict[tuple[str, str], int]] = []

    def record_discovery_attempt(self, counts: Mapping[tuple[str, str], int]) -> None:
        self.attempts.append(dict(counts))


Change = tuple[frozenset[ResourceType], frozenset[ResourceType]]


def recording(
    changes: list[Change],
) -> Callable[[frozenset[ResourceType], frozenset[ResourceType]], None]:
    def on_change(added: frozenset[ResourceType], removed: frozenset[ResourceType]) -> None:
        changes.append((added, removed))

    return on_change


def keys(types: frozenset[ResourceType] | tuple[ResourceType, ...]) -> set[str]:
    return {t.key for t in types}


async def test_aggregated_and_legacy_discovery_find_the_same_resources(
    kube: KubeClient, api: FakeApiServer
) -> None:
    aggregated = await fetch_discovery(kube)
    legacy = await fetch_discovery(kube, aggregated=False)
    assert aggregated.aggregated
    assert not legacy.aggregated
    assert {r.key for r in aggregated.resources} == {r.key for r in legacy.resources}
    assert "deployments/status.apps" not in {r.key for r in aggregated.resources}
    assert "as=APIGroupDiscoveryList" in api.requests[0].headers["Accept"]
    # Legacy discovery: one document per group version after /api and /apis.
    assert {r.path for r in api.requests[2:]} >= {"/api/v1", "/apis/apps/v1"}


async def test_an_old_server_answers_legacy_documents_to_an_aggregated_request(
    clock: FakeClock,
) -> None:
    async with FakeApiServer(now_ns=clock.now_ns, aggregated_discovery=False) as api:
        api.catalogue.unavailable.add("apps/v1")
        async with api.client() as kube:
            snapshot = await fetch_discovery(kube)
    assert not snapshot.aggregated
    assert set(snapshot.failed) == {"apps/v1"}
    assert snapshot.failed_groups == {"apps"}
    assert "configmaps" in {r.key for r in snapshot.resources}


async def test_broad_mode_watches_every_listable_type(kube: KubeClient, clock: FakeClock) -> None:
    metrics = RecordingMetrics()
    discovery = Discovery(kube, ScopeConfig(), clock=clock, metrics=metrics)
    assert discovery.not_ready_reason == NOT_COMPLETED
    watched = await discovery.initial()
    assert {"configmaps", "deployments.apps", "leases.coordination.k8s.io"} <= keys(watched)
    assert "tokenreviews.authentication.k8s.io" not in keys(watched)  # create only
    assert list(watched) == sorted(watched, key=lambda t: t.key)
    assert discovery.complete
    assert discovery.not_ready_reason is None
    assert discovery.watched == frozenset(watched)
    assert discovery.plan is not None
    assert metrics.attempts[-1][("discovered", "watchable")] == len(watched)


async def test_explicit_mode_fails_at_once_on_a_missing_pattern(
    kube: KubeClient, clock: FakeClock
) -> None:
    scope = ScopeConfig(watch_resources=("configmaps", "widgets.example.com"))
    discovery = Discovery(kube, scope, clock=clock)
    with pytest.raises(DiscoveryFatal) as caught:
        await discovery.initial()
    assert str(caught.value) == (
        "explicit resource discovery failed: explicit resource coverage incomplete: "
        "missing patterns=[widgets.example.com], unwatchable resources=[]"
    )
    assert discovery.attempts == 1


async def test_explicit_mode_fails_on_a_failing_group_its_patterns_can_match(
    api: FakeApiServer, kube: KubeClient, clock: FakeClock
) -> None:
    api.catalogue.unavailable.add("apps/v1")
    fatal = Discovery(kube, ScopeConfig(watch_resources=("deployments.apps",)), clock=clock)
    with pytest.raises(DiscoveryFatal) as caught:
        await fatal.initial()
    assert "apps/v1: stale GroupVersion discovery: apps/v1" in str(caught.value)
    assert "incomplete" in (fatal.not_ready_reason or "")
    # A failing group that no watch pattern can match is tolerated.
    tolerated = Discovery(kube, ScopeConfig(watch_resources=("configmaps",)), clock=clock)
    assert keys(await tolerated.initial()) == {"configmaps"}


async def test_broad_mode_waits_for_complete_discovery_on_the_clock(
    api: FakeApiServer, kube: KubeClient, clock: FakeClock
) -> None:
    api.catalogue.unavailable.add("apps/v1")
    discovery = Discovery(kube, ScopeConfig(), clock=clock, retry_interval=30)
    task = asyncio.create_task(discovery.initial())
    await sleeping(clock)
    assert discovery.attempts == 1
    assert "apps/v1" in (discovery.not_ready_reason or "")
    await clock.advance(29)
    assert discovery.attempts == 1  # nothing before the retry interval
    await clock.advance(1)
    await sleeping(clock)
    assert discovery.attempts == 2  # still incomplete: partial results are never used
    assert discovery.watched == frozenset()
    api.catalogue.unavailable.clear()
    await clock.advance(30)
    watched = await asyncio.wait_for(task, 5)
    assert "deployments.apps" in keys(watched)
    assert discovery.attempts == 3


async def test_a_total_failure_or_an_empty_answer_is_incomplete(
    api: FakeApiServer, kube: KubeClient, clock: FakeClock
) -> None:
    metrics = RecordingMetrics()
    discovery = Discovery(kube, ScopeConfig(), clock=clock, metrics=metrics)
    api.fail(500, path="^/apis$")
    failed = await discovery.attempt()
    assert failed.plan is None
    assert (failed.error or "").startswith("server preferred resources are incomplete: ")
    assert metrics.attempts[-1] == {("failed", "group_discovery"): 1}
    api.catalogue.served.clear()
    empty = await discovery.attempt()
    assert empty.error == "server returned no preferred resources"


async def test_a_cluster_scoped_request_conflicts_with_namespace_filters(
    kube: KubeClient, clock: FakeClock
) -> None:
    crds = "customresourcedefinitions.apiextensions.k8s.io"
    scope = ScopeConfig(watch_resources=("configmaps", crds), watch_namespaces=("a",))
    with pytest.raises(DiscoveryFatal, match="requires an empty namespace watch list"):
        await Discovery(kube, scope, clock=clock, watch_crds=False).initial()


async def test_rediscovery_publishes_added_and_removed_types(
    api: FakeApiServer, kube: KubeClient, clock: FakeClock
) -> None:
    discovery = Discovery(kube, ScopeConfig(), clock=clock, interval=60, watch_crds=False)
    await discovery.initial()
    changes: list[Change] = []
    task = asyncio.create_task(
        discovery.run(lambda added, removed: changes.append((added, removed)))
    )
    widgets = widget_type()
    api.serve(widgets)
    await clock.advance(60)
    await eventually(lambda: changes)
    assert changes == [(frozenset({widgets}), frozenset())]
    assert widgets in discovery.watched
    # A group that fails to answer keeps its types; a type that is gone is removed.
    api.catalogue.unavailable.add("apps/v1")
    api.unserve(widgets)
    await sleeping(clock)
    await clock.advance(60)
    await eventually(lambda: len(changes) == 2)
    assert changes[1] == (frozenset(), frozenset({widgets}))
    assert DEPLOYMENTS in discovery.watched
    assert discovery.not_ready_reason is None
    task.cancel()
    await asyncio.gather(task, return_exceptions=True)


async def test_a_failed_change_is_retried_at_the_next_rediscovery(
    api: FakeApiServer, kube: KubeClient, clock: FakeClock
) -> None:
    discovery = Discovery(kube, ScopeConfig(), clock=clock, interval=60, watch_crds=False)
    await discovery.initial()
    calls: list[Change] = []

    async def on_change(added: frozenset[ResourceType], removed: frozenset[ResourceType]) -> None:
        calls.append((added, removed))
        if len(calls) == 1:
            raise RuntimeError("informer start failed")

    api.serve(widget_type())
    await discovery.rediscover(on_change)
    assert widget_type() not in discovery.watched
    await discovery.rediscover(on_change)
    assert widget_type() in discovery.watched
    assert calls[0] == calls[1]
    # A rediscovery that fails entirely keeps the watch set.
    api.fail(503, path="^/api$")
    before = discovery.watched
    await discovery.rediscover(on_change)
    assert discovery.watched == before
    assert len(calls) == 2


async def test_a_crd_change_triggers_an_early_rediscovery(
    api: FakeApiServer, kube: KubeClient, clock: FakeClock
) -> None:
    discovery = Discovery(kube, ScopeConfig(), clock=clock, interval=600, crd_settle=2)
    await discovery.initial()
    changes: list[Change] = []
    task = asyncio.create_task(
        discovery.run(lambda added, removed: changes.append((added, removed)))
    )
    # The CRD watch lists once and triggers a catch-up rediscovery.
    await eventually(lambda: api.store.watchers(CRDS))
    await clock.advance(2)
    await eventually(lambda: discovery.attempts == 2)
    assert discovery.crd_watch_state is CrdWatchState.WATCHING
    api.store.create(CRDS, None, {"metadata": {"name": "widgets.example.com"}})
    api.serve(widget_type())
    # The event cuts the 600 s wait short: rediscovery now waits only the settle delay.
    await eventually(lambda: clock.next_deadline() == clock.monotonic() + 2)
    await clock.advance(2)
    await eventually(lambda: changes)
    assert changes == [(frozenset({widget_type()}), frozenset())]
    assert discovery.attempts == 3  # well before the 600 s period
    # A watch that expires is re-listed; a refused one falls back to the period alone.
    api.fail(403, path="customresourcedefinitions")
    api.watch_error(410, CRDS)
    await eventually(lambda: discovery.crd_watch_state is CrdWatchState.FORBIDDEN)
    assert not task.done()
    task.cancel()
    await asyncio.gather(task, return_exceptions=True)


async def test_a_failing_crd_watch_backs_off_on_the_clock(
    api: FakeApiServer, kube: KubeClient, clock: FakeClock
) -> None:
    # The CRD informer backs off like every informer; without jitter the steps are exact.
    no_jitter = InformerSettings(backoff_initial=1.0, backoff_jitter=0.0)
    discovery = Discovery(kube, ScopeConfig(), clock=clock, interval=600, crd_informer=no_jitter)
    await discovery.initial()
    api.fail(500, path="customresourcedefinitions", times=2)
    task = asyncio.create_task(discovery.run(lambda added, removed: None))
    await eventually(lambda: len(api.requests_to("GET", "customresourcedefinitions")) == 1)
    await sleeping(clock, 2)
    await clock.advance(1)
    await eventually(lambda: len(api.requests_to("GET", "customresourcedefinitions")) == 2)
    await sleeping(clock, 2)
    await clock.advance(1.5)
    assert len(api.requests_to("GET", "customresourcedefinitions")) == 2  # now waits 2 s
    await clock.advance(0.5)
    await eventually(lambda: api.store.watchers(CRDS))
    task.cancel()
    await asyncio.gather(task, return_exceptions=True)
    assert CONFIGMAPS in discovery.watched
