"""Discovery and scope against the real API server (docs/behaviour.md#discovery-and-scope):
reference tests 26-31, AS-57..AS-66, rediscovery and tolerated unrelated failing groups."""

from __future__ import annotations

import asyncio
import contextlib
import uuid
from collections.abc import AsyncIterator, Mapping
from typing import Any

import pytest

from lifecycle_controller.controller.watch.discovery import CrdWatchState, Discovery, DiscoveryFatal
from lifecycle_controller.core.objects.scope import ScopeConfig
from lifecycle_controller.devcluster import ControlPlane
from lifecycle_controller.kube import (
    CRDS,
    KubeClient,
    NotFound,
    ResourceType,
    Timeouts,
    TransportError,
    load_configuration,
)
from lifecycle_controller.kube.discovery import DiscoverySnapshot, fetch_discovery
from lifecycle_controller.machinery.clock import RealClock
from tests.doubles.fakeclock import FakeClock
from tests.integration.support import broken_api_group, crd_manifest, eventually, group_fails

APISERVICES = ResourceType("apiregistration.k8s.io", "v1", "apiservices", "APIService", False)
COVERAGE_TAIL = (
    "requires an empty namespace watch list; only an exact namespaces resource selection "
    "can be combined with namespace filters"
)


class RecordingMetrics:
    def __init__(self) -> None:
        self.attempts: list[dict[tuple[str, str], int]] = []

    def record_discovery_attempt(self, counts: Mapping[tuple[str, str], int]) -> None:
        self.attempts.append(dict(counts))


class Changes:
    def __init__(self) -> None:
        self.added: set[str] = set()
        self.removed: set[str] = set()
        self.calls = 0

    def __call__(self, added: frozenset[ResourceType], removed: frozenset[ResourceType]) -> None:
        self.calls += 1
        self.added |= {str(r) for r in added}
        self.removed |= {str(r) for r in removed}


@pytest.fixture
async def broken_group(control_plane: ControlPlane, kube: KubeClient) -> AsyncIterator[str]:
    """An aggregated API whose backend does not exist: discovery reports it Stale / 503."""
    async with broken_api_group(control_plane, kube) as group:
        yield group

    async def gone() -> bool:
        return not await group_fails(kube, group)

    await eventually(gone, within=20, what=f"{group} to leave discovery")


def _keys(resources: Any) -> set[str]:
    return {r.key for r in resources}


# --------------------------------------------------------------------------- fetching


async def test_aggregated_and_legacy_discovery_agree(kube: KubeClient) -> None:
    aggregated = await fetch_discovery(kube)
    legacy = await fetch_discovery(kube, aggregated=False)
    assert aggregated.aggregated
    assert not legacy.aggregated
    assert set(aggregated.resources) == set(legacy.resources)
    assert not aggregated.failed

    # Subresources are listed by the server but never reach planning.
    raw = [r for g in legacy.groups for v in g.versions for r in v.resources]
    assert any(r.resource == "pods/status" for r in raw)
    assert not any(r.is_subresource for r in aggregated.resources)
    # One version per group-resource: the preferred one.
    hpa = [r for r in aggregated.resources if r.key == "horizontalpodautoscalers.autoscaling"]
    assert [r.version for r in hpa] == ["v2"]


# --------------------------------------------------------------------------- startup


async def test_ref_028_default_mode_watches_every_eligible_resource(kube: KubeClient) -> None:
    metrics = RecordingMetrics()
    discovery = Discovery(kube, ScopeConfig(), clock=FakeClock(), metrics=metrics)
    assert discovery.not_ready_reason == "resource discovery has not completed"

    watched = await discovery.initial()

    by_key = {r.key: r for r in watched}
    assert by_key["deployments.apps"] == ResourceType(
        "apps", "v1", "deployments", "Deployment", namespaced=True
    )
    assert by_key["configmaps"].version == "v1"
    assert by_key["namespaces"].namespaced is False
    assert by_key["horizontalpodautoscalers.autoscaling"].version == "v2"
    assert {"pods", "events", "leases.coordination.k8s.io", "nodes"} <= set(by_key)
    # Sorted by key; no subresources; no resource without the required verbs.
    assert [r.key for r in watched] == sorted(by_key)
    assert not any("/" in r.resource for r in watched)
    assert "bindings" not in by_key
    assert "tokenreviews.authentication.k8s.io" not in by_key
    assert discovery.complete
    assert discovery.not_ready_reason is None
    counts = metrics.attempts[-1]
    assert counts[("discovered", "watchable")] == len(watched)
    assert counts[("skipped", "unsupported_verbs")] >= 2


async def test_as_057_explicit_watch_resource(kube: KubeClient) -> None:
    discovery = Discovery(
        kube, ScopeConfig(watch_resources=("deployments.apps",)), clock=RealClock()
    )
    assert await discovery.initial() == (
        ResourceType("apps", "v1", "deployments", "Deployment", namespaced=True),
    )


async def test_as_066_star_star_skips_core_resources(kube: KubeClient) -> None:
    # Reference behaviour kept on purpose: a glob also "requests" the resources that lack the
    # required verbs (tokenreviews, ...), which makes them unwatchable and startup fails.
    discovery = Discovery(kube, ScopeConfig(watch_resources=("*.*",)), clock=RealClock())
    with pytest.raises(DiscoveryFatal, match=r"unwatchable resources=\[.*tokenreviews"):
        await discovery.initial()
    plan = discovery.plan
    assert plan is not None
    assert "deployments.apps" in plan.keys
    assert not any(r.group == "" for r in plan.watched)
    assert not any("." not in key for key in plan.unwatchable)

    everything = Discovery(kube, ScopeConfig(watch_resources=("*",)), clock=RealClock())
    with pytest.raises(DiscoveryFatal, match=r"unwatchable resources=\[bindings "):
        await everything.initial()
    assert everything.plan is not None
    assert {"pods", "deployments.apps", "namespaces"} <= set(everything.plan.keys)


async def test_ref_027_missing_pattern_is_fatal(kube: KubeClient) -> None:
    scope = ScopeConfig(watch_resources=("deployments.apps", "widgets.example.test"))
    discovery = Discovery(kube, scope, clock=RealClock())
    with pytest.raises(DiscoveryFatal) as error:
        await discovery.initial()
    assert str(error.value) == (
        "explicit resource discovery failed: explicit resource coverage incomplete: "
        "missing patterns=[widgets.example.test], unwatchable resources=[]"
    )
    assert discovery.not_ready_reason is not None
    assert discovery.watched == frozenset()


async def test_ref_027_unwatchable_resource_is_fatal(kube: KubeClient) -> None:
    discovery = Discovery(kube, ScopeConfig(watch_resources=("bindings",)), clock=RealClock())
    with pytest.raises(DiscoveryFatal, match=r"unwatchable resources=\[bindings\]$"):
        await discovery.initial()


@pytest.mark.parametrize("pattern", ["*", "nodes", "namespace*"])
async def test_as_060_cluster_scoped_selection_with_namespace_filter(
    kube: KubeClient, pattern: str
) -> None:
    scope = ScopeConfig(watch_resources=(pattern,), watch_namespaces=("team-a",))
    with pytest.raises(DiscoveryFatal) as error:
        await Discovery(kube, scope, clock=RealClock()).initial()
    message = str(error.value)
    assert message.startswith("explicit resource discovery failed: cluster-scoped resource ")
    assert message.endswith(COVERAGE_TAIL)


async def test_as_060_exact_namespaces_with_namespace_filter(kube: KubeClient) -> None:
    scope = ScopeConfig(
        watch_resources=("namespaces", "deployments.apps"), watch_namespaces=("team-a",)
    )
    watched = await Discovery(kube, scope, clock=RealClock()).initial()
    assert [r.key for r in watched] == ["deployments.apps", "namespaces"]


async def test_as_058_watch_and_ignore_same_resource_is_an_empty_valid_plan(
    kube: KubeClient,
) -> None:
    scope = ScopeConfig(watch_resources=("configmaps",), ignore_resources=("configmaps",))
    discovery = Discovery(kube, scope, clock=RealClock())
    assert await discovery.initial() == ()
    assert discovery.complete


async def test_as_063_namespaced_roles_suffice_for_discovery(
    control_plane: ControlPlane, namespace: str
) -> None:
    # Discovery endpoints are readable by every authenticated user; the CRD watch is not,
    # and then rediscovery falls back to the period alone.
    kubeconfig = control_plane.user_kubeconfig(
        f"scoped-{namespace}",
        namespaced_rules={
            namespace: [
                {
                    "apiGroups": [""],
                    "resources": ["configmaps"],
                    "verbs": ["get", "list", "watch", "patch", "delete"],
                }
            ]
        },
    )
    scope = ScopeConfig(watch_resources=("configmaps",), watch_namespaces=(namespace,))
    assert scope.informer_namespaces() == (namespace,)
    async with await KubeClient.connect(str(kubeconfig)) as client:
        discovery = Discovery(client, scope, clock=RealClock(), interval=3600)
        watched = await discovery.initial()
        assert [r.key for r in watched] == ["configmaps"]
        runner = asyncio.create_task(discovery.run(Changes()))
        try:

            async def crd_watch_forbidden() -> bool:
                return discovery.crd_watch_state is CrdWatchState.FORBIDDEN

            await eventually(crd_watch_forbidden, within=10, what="the CRD watch to be refused")
            await asyncio.sleep(0.2)
            assert not runner.done()
        finally:
            runner.cancel()
            with pytest.raises(asyncio.CancelledError):
                await runner


# --------------------------------------------------------------------------- failures


async def test_spec_2_5_unrelated_failing_group_does_not_block_explicit_mode(
    kube: KubeClient, broken_group: str
) -> None:
    metrics = RecordingMetrics()
    scope = ScopeConfig(watch_resources=("deployments.apps", "*.apps"))
    discovery = Discovery(kube, scope, clock=RealClock(), metrics=metrics)
    watched = await discovery.initial()
    assert "deployments.apps" in _keys(watched)
    assert discovery.complete
    assert metrics.attempts[-1][("failed", "group_discovery")] == 1

    # A pattern that could match a key of the failing group makes the failure fatal.
    scope = ScopeConfig(watch_resources=("deployments.apps", f"*.{broken_group}"))
    with pytest.raises(DiscoveryFatal) as error:
        await Discovery(kube, scope, clock=RealClock()).initial()
    gv = f"{broken_group}/v1beta1"
    assert str(error.value) == (
        "explicit resource discovery failed: server preferred resources are incomplete: "
        f"unable to retrieve the complete list of server APIs: {gv}: "
        f"stale GroupVersion discovery: {gv}"
    )


async def test_ref_028_broad_mode_waits_for_complete_discovery(
    kube: KubeClient, control_plane: ControlPlane, broken_group: str
) -> None:
    clock = FakeClock()
    metrics = RecordingMetrics()
    discovery = Discovery(kube, ScopeConfig(), clock=clock, metrics=metrics)
    initial = asyncio.create_task(discovery.initial())

    async def retry_scheduled() -> bool:
        return clock.next_deadline() == clock.monotonic() + 30

    await eventually(retry_scheduled, within=10, what="the 30 s retry")
    assert not initial.done()
    assert discovery.not_ready_reason is not None
    assert "stale GroupVersion discovery" in discovery.not_ready_reason
    assert metrics.attempts[-1] == {("failed", "group_discovery"): 1}
    assert discovery.watched == frozenset()  # partial results are never used

    # Still failing after one period: one more attempt, still waiting.
    await clock.advance(30)
    await eventually(retry_scheduled, within=10, what="the second retry")
    assert discovery.attempts == 2

    control_plane.request(
        "DELETE", f"/apis/apiregistration.k8s.io/v1/apiservices/v1beta1.{broken_group}"
    )

    async def healthy() -> bool:
        return not await group_fails(kube, broken_group)

    await eventually(healthy, within=20, what="the broken group to disappear")
    await clock.advance(30)
    watched = await asyncio.wait_for(initial, timeout=10)
    assert "deployments.apps" in _keys(watched)
    assert discovery.complete
    assert discovery.attempts == 3


async def test_rediscovery_treats_unreadable_groups_as_unchanged(
    kube: KubeClient, control_plane: ControlPlane
) -> None:
    # Fault injection the real server cannot produce on demand: a healthy group ("apps")
    # failing on a later attempt, and then the whole API being unreachable.
    mode = {"value": "real"}
    dead = KubeClient(
        (await _configuration(control_plane, port=1)),
        timeouts=Timeouts(connect=0.5, request=1.0),
    )

    async def fetch() -> DiscoverySnapshot:
        if mode["value"] == "dead":
            return await fetch_discovery(dead)
        snapshot = await fetch_discovery(kube)
        if mode["value"] == "apps-failing":
            groups = tuple(g for g in snapshot.groups if g.name != "apps")
            return DiscoverySnapshot(groups, {"apps/v1": "injected failure"})
        return snapshot

    changes = Changes()
    discovery = Discovery(kube, ScopeConfig(), clock=FakeClock(), fetch=fetch, watch_crds=False)
    try:
        before = await discovery.initial()
        mode["value"] = "apps-failing"
        await discovery.rediscover(changes)
        mode["value"] = "dead"
        await discovery.rediscover(changes)
        with pytest.raises(TransportError):
            await fetch_discovery(dead)
    finally:
        await dead.close()
    assert changes.calls == 0
    assert discovery.watched == frozenset(before)
    assert discovery.complete


async def _configuration(control_plane: ControlPlane, *, port: int) -> Any:
    configuration, _ = await load_configuration(str(control_plane.admin_kubeconfig))
    configuration.host = f"https://127.0.0.1:{port}"
    return configuration


# --------------------------------------------------------------------------- rediscovery


def _new_group() -> str:
    return f"t{uuid.uuid4().hex[:8]}.example.test"


async def _create_crd(kube: KubeClient, group: str, plural: str = "widgets") -> str:
    kind = plural[:-1].title()
    await kube.create(CRDS, None, crd_manifest(group, plural, kind))
    return f"{plural}.{group}"


async def _delete_crd(kube: KubeClient, name: str) -> None:
    with contextlib.suppress(NotFound):
        await kube.delete(CRDS, None, name)


async def test_as_065_crd_watch_picks_up_added_and_removed_crds(kube: KubeClient) -> None:
    changes = Changes()
    # A period far away: only the CRD watch can explain a prompt rediscovery.
    discovery = Discovery(kube, ScopeConfig(), clock=RealClock(), interval=3600, crd_settle=0.5)
    await discovery.initial()
    runner = asyncio.create_task(discovery.run(changes))
    key = await _create_crd(kube, _new_group())
    try:

        async def added() -> bool:
            return f"{key}/v1" in changes.added

        await eventually(added, within=30, what=f"{key} to be added")
        assert any(r.key == key and r.kind == "Widget" for r in discovery.watched)

        await _delete_crd(kube, key)

        async def removed() -> bool:
            return f"{key}/v1" in changes.removed

        await eventually(removed, within=30, what=f"{key} to be removed")
        assert not any(r.key == key for r in discovery.watched)
    finally:
        runner.cancel()
        with pytest.raises(asyncio.CancelledError):
            await runner
        await _delete_crd(kube, key)


async def test_as_065_periodic_rediscovery_without_crd_watch(kube: KubeClient) -> None:
    clock = FakeClock()
    changes = Changes()
    group = _new_group()
    # Explicit mode: `*.<group>` must match something at startup.
    scope = ScopeConfig(watch_resources=("*.apps", f"*.{group}"))
    discovery = Discovery(kube, scope, clock=clock, interval=60, watch_crds=False)
    first = await _create_crd(kube, group)
    second = f"gadgets.{group}"
    try:
        await _served(kube, first)
        assert first in _keys(await discovery.initial())
        runner = asyncio.create_task(discovery.run(changes))
        try:
            await _create_crd(kube, group, "gadgets")
            await _served(kube, second)
            await clock.advance(59)
            assert changes.calls == 0

            async def added() -> bool:
                await clock.advance(1)
                return f"{second}/v1" in changes.added

            await eventually(added, within=10, what=f"{second} to be added by the period")
            assert changes.removed == set()
            assert discovery.complete
        finally:
            runner.cancel()
            with pytest.raises(asyncio.CancelledError):
                await runner
    finally:
        await _delete_crd(kube, first)
        await _delete_crd(kube, second)


async def _served(kube: KubeClient, key: str) -> None:
    async def served() -> bool:
        return key in _keys((await fetch_discovery(kube)).resources)

    await eventually(served, within=30, what=f"{key} to be served")
