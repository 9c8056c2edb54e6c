"""Acceptance scenarios AS-57 … AS-66 (scope and discovery) against the real controller.

Each test starts the whole controller in-process (``start_controller``) against the real API
server, scoped to what the scenario needs, and watches its effects through the API: objects
deleted or left alone (resourceVersion unchanged), Events, and the controller's own watch set.
Also: the controller run by an identity with only namespaced Roles (docs/behaviour.md#read-scoping),
and a CRD created after startup (docs/behaviour.md#rediscovery, which changes AS-65).
"""

from __future__ import annotations

import asyncio
import contextlib
import functools
import uuid
from collections.abc import AsyncIterator, Callable, Iterator
from typing import Any

import pytest

from lifecycle_controller.app import Controller
from lifecycle_controller.app import controller as app_controller
from lifecycle_controller.config import ConfigError, RawFlags, build_settings
from lifecycle_controller.controller.watch.discovery import Discovery, DiscoveryFatal
from lifecycle_controller.devcluster import ControlPlane
from lifecycle_controller.kube import CRDS, NAMESPACES, KubeClient, NotFound, ResourceType
from lifecycle_controller.serving.server import CACHES_PENDING, DISCOVERY_PENDING
from tests.integration.controller import RunningController, StartController
from tests.integration.events import events_of
from tests.integration.keys import DELETE_AFTER, DELETE_AT
from tests.integration.scenario_support import queue_adds
from tests.integration.support import (
    CONFIGMAP_RULE,
    CONFIGMAPS,
    DEPLOYMENTS,
    EVENT_RULE,
    broken_api_group,
    configmap,
    crd_manifest,
    deployment,
    eventually,
)
from tests.integration.timestamps import PAST

DELETED_NOTE = f"Resource deleted based on delete-at annotation: {PAST}"
EXPLICIT_FAILED = "explicit resource discovery failed: "
CLUSTER_SCOPED_TAIL = (
    "requires an empty namespace watch list; only an exact namespaces resource selection "
    "can be combined with namespace filters"
)


# --------------------------------------------------------------------------- helpers


@pytest.fixture
def make_namespace(control_plane: ControlPlane) -> Iterator[Callable[..., str]]:
    """Create extra namespaces (``prefix`` + random suffix, with annotations); all deleted after."""
    created: list[str] = []

    def make(prefix: str = "t-", **annotations: str) -> str:
        name = f"{prefix}{uuid.uuid4().hex[:10]}"
        response = control_plane.request(
            "POST",
            "/api/v1/namespaces",
            {
                "apiVersion": "v1",
                "kind": "Namespace",
                "metadata": {"name": name, "annotations": annotations},
            },
        )
        assert response.status == 201, response.body
        created.append(name)
        return name

    yield make
    for name in created:
        control_plane.request("DELETE", f"/api/v1/namespaces/{name}")


async def gone(kube: KubeClient, resource: ResourceType, namespace: str | None, name: str) -> bool:
    """Deleted, or being deleted (a Namespace lingers while its contents are removed)."""
    try:
        obj = await kube.get_metadata(resource, namespace, name)
    except NotFound:
        return True
    return bool(obj["metadata"].get("deletionTimestamp"))


async def wait_gone(
    kube: KubeClient, resource: ResourceType, namespace: str | None, name: str
) -> None:
    await eventually(
        functools.partial(gone, kube, resource, namespace, name),
        within=15,
        what=f"{resource.key} {namespace}/{name} to be deleted",
    )


async def resource_version(
    kube: KubeClient, resource: ResourceType, namespace: str | None, name: str
) -> str:
    obj = await kube.get_metadata(resource, namespace, name)
    assert not obj["metadata"].get("deletionTimestamp"), f"{name} is being deleted"
    return str(obj["metadata"]["resourceVersion"])


async def create_configmap(kube: KubeClient, namespace: str, name: str, **annotations: str) -> str:
    """Create a ConfigMap; return its resourceVersion."""
    created = await kube.create(CONFIGMAPS, namespace, configmap(name, **annotations))
    return str(created["metadata"]["resourceVersion"])


async def recorded_events(
    kube: KubeClient, namespace: str, name: str
) -> list[tuple[str, str, str]]:
    """:func:`events_of` once there are any (an Event is sent after the write)."""

    async def recorded() -> bool:
        return bool(await events_of(kube, namespace, name))

    await eventually(recorded, within=10, what=f"an Event about {name}")
    return await events_of(kube, namespace, name)


def watched_keys(running: RunningController) -> set[str]:
    pipeline = running.controller.pipeline
    assert pipeline is not None
    return {resource.key for resource in pipeline.informers.running()}


async def queue_idle(running: RunningController) -> bool:
    """Nothing queued and no reconcile running."""
    registry = running.controller.metrics.registry
    depth = registry.get_sample_value("workqueue_depth", {"name": "lifecycle"})
    active = registry.get_sample_value(
        "controller_runtime_active_workers", {"controller": "lifecycle"}
    )
    return depth == 0 and active == 0


async def fatal_startup(control_plane: ControlPlane, **flags: Any) -> str:
    """Run the controller with ``flags`` (strings or tuples) until startup fails; the message.

    Runs without the ``start_controller`` fixture, whose teardown re-raises a failed run.
    """
    settings = build_settings(RawFlags(health_probe_bind_address="0", **flags))
    async with await KubeClient.connect(str(control_plane.admin_kubeconfig)) as client:
        with pytest.raises(DiscoveryFatal) as error:
            await asyncio.wait_for(Controller(settings, client).run(), timeout=30)
    return str(error.value)


# --------------------------------------------------------------------------- AS-57, AS-58


async def test_as_57_watch_resource_selects_only_deployments(
    start_controller: StartController, kube: KubeClient, namespace: str
) -> None:
    ignored_version = await create_configmap(kube, namespace, "config", **{DELETE_AT: PAST})
    await kube.create(DEPLOYMENTS, namespace, deployment("web", {DELETE_AT: PAST}))
    running = await start_controller(
        watch_resource=["deployments.apps"], watch_namespace=[namespace]
    )
    assert watched_keys(running) == {"deployments.apps"}

    await wait_gone(kube, DEPLOYMENTS, namespace, "web")
    assert await recorded_events(kube, namespace, "web") == [("Normal", "Deleted", DELETED_NOTE)]
    # Both objects came in the initial lists; the ConfigMap kind is not even watched.
    assert await resource_version(kube, CONFIGMAPS, namespace, "config") == ignored_version
    assert await events_of(kube, namespace, "config") == []


async def test_as_58_watch_and_ignore_of_one_resource_watches_nothing_and_is_ready(
    start_controller: StartController, kube: KubeClient, namespace: str
) -> None:
    version = await create_configmap(kube, namespace, "config", **{DELETE_AT: PAST})
    running = await start_controller(
        watch_resource=["configmaps"], ignore_resource=["configmaps"], watch_namespace=[namespace]
    )
    assert running.controller.not_ready_reason() is None
    assert watched_keys(running) == set()
    pipeline = running.controller.pipeline
    assert pipeline is not None
    assert pipeline.discovery.watched == frozenset()
    await asyncio.sleep(1)  # nothing is watched, so there is no positive signal to wait for
    assert await resource_version(kube, CONFIGMAPS, namespace, "config") == version
    assert await events_of(kube, namespace, "config") == []


# --------------------------------------------------------------------------- AS-59, AS-60


async def test_as_59_missing_pattern_fails_startup(control_plane: ControlPlane) -> None:
    message = await fatal_startup(control_plane, watch_resource=("configmaps", "nosuchthing"))
    assert message == (
        f"{EXPLICIT_FAILED}explicit resource coverage incomplete: "
        "missing patterns=[nosuchthing], unwatchable resources=[]"
    )


async def test_as_59_selected_resource_without_required_verbs_fails_startup(
    control_plane: ControlPlane,
) -> None:
    # `bindings` supports only create: it lacks get/list/watch/patch/delete.
    message = await fatal_startup(control_plane, watch_resource=("configmaps", "bindings"))
    assert message == (
        f"{EXPLICIT_FAILED}explicit resource coverage incomplete: "
        "missing patterns=[], unwatchable resources=[bindings]"
    )


@pytest.mark.parametrize(
    ("pattern", "resource"), [("nodes", "nodes"), ("namespace*", "namespaces"), ("*", None)]
)
async def test_as_60_cluster_scoped_selection_with_a_namespace_list_fails_startup(
    control_plane: ControlPlane, namespace: str, pattern: str, resource: str | None
) -> None:
    message = await fatal_startup(
        control_plane, watch_resource=(pattern,), watch_namespace=(namespace,)
    )
    prefix = f"{EXPLICIT_FAILED}cluster-scoped resource "
    if resource is not None:
        prefix += f"{resource} "
    assert message.startswith(prefix), message
    assert message.endswith(CLUSTER_SCOPED_TAIL), message


async def test_as_60_exact_namespaces_selection_acts_on_namespaces_named_in_the_filter(
    start_controller: StartController,
    kube: KubeClient,
    namespace: str,
    make_namespace: Callable[..., str],
) -> None:
    listed = make_namespace(**{DELETE_AT: PAST})
    unlisted = make_namespace(**{DELETE_AT: PAST})
    unlisted_version = await resource_version(kube, NAMESPACES, None, unlisted)
    running = await start_controller(
        watch_resource=["namespaces", "configmaps"], watch_namespace=[namespace, listed]
    )
    assert watched_keys(running) == {"namespaces", "configmaps"}

    await wait_gone(kube, NAMESPACES, None, listed)
    # Events about cluster-scoped objects live in `default`.
    assert await recorded_events(kube, "default", listed) == [("Normal", "Deleted", DELETED_NOTE)]
    assert await resource_version(kube, NAMESPACES, None, unlisted) == unlisted_version
    assert await events_of(kube, "default", unlisted) == []


# --------------------------------------------------------------------------- AS-61, AS-62


async def test_as_61_objects_outside_the_watched_namespaces_are_never_mutated(
    start_controller: StartController,
    kube: KubeClient,
    namespace: str,
    make_namespace: Callable[..., str],
) -> None:
    other = make_namespace()
    other_version = await create_configmap(kube, other, "config", **{DELETE_AT: PAST})
    await create_configmap(kube, namespace, "config", **{DELETE_AT: PAST})
    # A glob reads cluster-wide, so the other namespace's ConfigMap is seen and filtered out.
    running = await start_controller(
        watch_resource=["configmaps"], watch_namespace=[f"{namespace}*"]
    )
    await wait_gone(kube, CONFIGMAPS, namespace, "config")
    assert await resource_version(kube, CONFIGMAPS, other, "config") == other_version
    assert await events_of(kube, other, "config") == []
    # Only the allowed object was ever queued.
    assert queue_adds(running) == 1


async def test_as_61_a_namespace_list_leaves_cluster_scoped_kinds_unwatched(
    start_controller: StartController, kube: KubeClient, namespace: str
) -> None:
    # Broad mode: every eligible resource, but cluster-scoped ones are skipped quietly.
    running = await start_controller(watch_namespace=[namespace])
    pipeline = running.controller.pipeline
    assert pipeline is not None
    watched = pipeline.informers.running()
    assert {"configmaps", "deployments.apps", "secrets"} <= {r.key for r in watched}
    assert all(resource.namespaced for resource in watched), [
        r.key for r in watched if not r.namespaced
    ]
    # Reads are scoped to the exact namespace.
    assert pipeline.informers.scopes(next(iter(watched))) == [namespace]
    await create_configmap(kube, namespace, "config", **{DELETE_AT: PAST})
    await wait_gone(kube, CONFIGMAPS, namespace, "config")


async def test_as_62_ignore_namespace_glob_protects_objects_and_namespace_objects(
    start_controller: StartController,
    kube: KubeClient,
    namespace: str,
    make_namespace: Callable[..., str],
) -> None:
    protected = make_namespace("kube-", **{DELETE_AT: PAST})
    protected_ns_version = await resource_version(kube, NAMESPACES, None, protected)
    protected_cm_version = await create_configmap(kube, protected, "config", **{DELETE_AT: PAST})
    await create_configmap(kube, namespace, "config", **{DELETE_AT: PAST})
    # The real kube-system Namespace too (its deletion is refused by admission anyway).
    await kube.merge_patch(
        NAMESPACES, None, "kube-system", {"metadata": {"annotations": {DELETE_AT: PAST}}}
    )
    try:
        running = await start_controller(
            watch_resource=["configmaps", "namespaces"], ignore_namespace=["kube-*"]
        )
        await wait_gone(kube, CONFIGMAPS, namespace, "config")
        # Reads are cluster-wide here: leftovers of earlier tests may be queued too, so
        # wait until the queue has drained before checking that nothing else was touched.
        await eventually(
            functools.partial(queue_idle, running), within=15, what="the queue to drain"
        )
        assert await resource_version(kube, NAMESPACES, None, protected) == protected_ns_version
        assert await resource_version(kube, CONFIGMAPS, protected, "config") == (
            protected_cm_version
        )
        assert await events_of(kube, protected, "config") == []
        assert await events_of(kube, "default", protected) == []
        assert await events_of(kube, "default", "kube-system") == []
    finally:
        await kube.merge_patch(
            NAMESPACES, None, "kube-system", {"metadata": {"annotations": {DELETE_AT: None}}}
        )


# --------------------------------------------------------------------------- AS-63


async def test_as_63_exact_namespaces_run_with_namespaced_roles_only(
    start_controller: StartController,
    control_plane: ControlPlane,
    kube: KubeClient,
    namespace: str,
    make_namespace: Callable[..., str],
) -> None:
    second = make_namespace()
    kubeconfig = control_plane.user_kubeconfig(
        f"scoped-{namespace}",
        namespaced_rules={ns: [CONFIGMAP_RULE, EVENT_RULE] for ns in (namespace, second)},
    )
    for ns in (namespace, second):
        await create_configmap(kube, ns, "short-lived", **{DELETE_AFTER: "1s"})
    running = await start_controller(
        kubeconfig=str(kubeconfig),
        watch_resource=["configmaps"],
        watch_namespace=[second, namespace],
    )
    pipeline = running.controller.pipeline
    assert pipeline is not None
    assert pipeline.informers.scopes(CONFIGMAPS) == sorted([namespace, second])
    for ns in (namespace, second):
        await wait_gone(kube, CONFIGMAPS, ns, "short-lived")
        reasons = [reason for _, reason, _ in await recorded_events(kube, ns, "short-lived")]
        assert reasons == ["Deleted"]


async def test_as_63_a_glob_namespace_list_needs_cluster_wide_reads(
    start_controller: StartController,
    control_plane: ControlPlane,
    kube: KubeClient,
    namespace: str,
) -> None:
    kubeconfig = control_plane.user_kubeconfig(
        f"scoped-{namespace}", namespaced_rules={namespace: [CONFIGMAP_RULE, EVENT_RULE]}
    )
    version = await create_configmap(kube, namespace, "config", **{DELETE_AT: PAST})
    running = await start_controller(
        kubeconfig=str(kubeconfig),
        ready=False,
        watch_resource=["configmaps"],
        watch_namespace=[namespace, f"{namespace}-*"],
    )
    registry = running.controller.metrics.registry

    async def forbidden_twice() -> bool:
        labels = {"resource": "configmaps", "reason": "forbidden"}
        return (registry.get_sample_value("lifecycle_watch_restarts_total", labels) or 0) >= 2

    await eventually(forbidden_twice, within=15, what="the cluster-wide list to be Forbidden")
    assert running.controller.not_ready_reason() == CACHES_PENDING
    assert not running.task.done()
    assert await resource_version(kube, CONFIGMAPS, namespace, "config") == version


@pytest.mark.parametrize(
    ("watch", "ignore", "message"),
    [
        (("Bad_Name",), (), 'invalid namespace name "Bad_Name"'),
        (
            ("kube-system",),
            ("kube-*",),
            "watch list requires at least one namespace after ignore rules",
        ),
    ],
)
def test_as_63_invalid_or_fully_ignored_namespace_lists_fail_startup(
    watch: tuple[str, ...], ignore: tuple[str, ...], message: str
) -> None:
    with pytest.raises(ConfigError) as error:
        build_settings(RawFlags(watch_namespace=watch, ignore_namespace=ignore))
    assert str(error.value) == f"invalid namespace watch configuration: {message}"


# --------------------------------------------------------------------------- AS-64


@pytest.fixture
async def broken_group(control_plane: ControlPlane, kube: KubeClient) -> AsyncIterator[str]:
    """An aggregated API group whose backend does not exist: discovery reports it failing."""
    async with broken_api_group(control_plane, kube) as group:
        yield group


async def test_as_64_discovery_failure_with_a_watch_list_stops_the_controller(
    control_plane: ControlPlane, namespace: str, broken_group: str
) -> None:
    message = await fatal_startup(
        control_plane,
        watch_resource=("configmaps", f"*.{broken_group}"),
        watch_namespace=(namespace,),
    )
    assert message == (
        f"{EXPLICIT_FAILED}server preferred resources are incomplete: "
        "unable to retrieve the complete list of server APIs: "
        f"{broken_group}/v1beta1: stale GroupVersion discovery: {broken_group}/v1beta1"
    )


async def test_as_64_broad_mode_stays_unready_until_discovery_completes(
    start_controller: StartController,
    control_plane: ControlPlane,
    kube: KubeClient,
    namespace: str,
    broken_group: str,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    # The reference retries every 30 s (checked with a fake clock in test_discovery.py);
    # 1 s here keeps the scenario short. Nothing else is changed.
    monkeypatch.setattr(
        app_controller, "Discovery", functools.partial(Discovery, retry_interval=1.0)
    )
    await create_configmap(kube, namespace, "config", **{DELETE_AT: PAST})
    running = await start_controller(watch_namespace=[namespace], ready=False)

    async def retried() -> bool:
        pipeline = running.controller.pipeline
        return pipeline is not None and pipeline.discovery.attempts >= 2

    await eventually(retried, within=15, what="a second discovery attempt")
    assert running.controller.not_ready_reason() == DISCOVERY_PENDING
    assert not running.task.done()
    pipeline = running.controller.pipeline
    assert pipeline is not None
    assert pipeline.informers.running() == set()  # partial results are never used
    assert not await gone(kube, CONFIGMAPS, namespace, "config")

    control_plane.request(
        "DELETE", f"/apis/apiregistration.k8s.io/v1/apiservices/v1beta1.{broken_group}"
    )

    async def ready() -> bool:
        return running.controller.not_ready_reason() is None

    await eventually(ready, within=30, what="readiness after a complete discovery")
    assert "configmaps" in watched_keys(running)
    await wait_gone(kube, CONFIGMAPS, namespace, "config")


# --------------------------------------------------------------------------- AS-65


@pytest.fixture
async def crd_group(kube: KubeClient) -> AsyncIterator[str]:
    """A fresh API group name; its CRD (if any) is deleted afterwards."""
    group = f"t{uuid.uuid4().hex[:8]}.example.test"
    yield group
    with contextlib.suppress(NotFound):
        await kube.delete(CRDS, None, f"widgets.{group}")


async def test_as_65_crd_created_after_startup_is_picked_up_without_restart(
    start_controller: StartController, kube: KubeClient, namespace: str, crd_group: str
) -> None:
    # docs/behaviour.md#rediscovery changes AS-65: the CRD watch triggers rediscovery, no
    # restart is needed.
    # The 60 s rediscovery period is left as is, so only the CRD watch explains the pick-up.
    running = await start_controller(watch_namespace=[namespace])
    widgets = ResourceType(crd_group, "v1", "widgets", "Widget", namespaced=True)
    assert widgets.key not in watched_keys(running)

    await kube.create(CRDS, None, crd_manifest(crd_group, "widgets", "Widget"))
    widget = {
        "apiVersion": f"{crd_group}/v1",
        "kind": "Widget",
        "metadata": {"name": "gizmo", "annotations": {DELETE_AFTER: "1s"}},
    }

    async def created() -> bool:
        try:
            await kube.create(widgets, namespace, widget)
        except NotFound:  # the new API is not served yet
            return False
        return True

    await eventually(created, within=20, what="the Widget API to be served")
    await eventually(
        functools.partial(gone, kube, widgets, namespace, "gizmo"),
        within=30,
        what="the Widget to be deleted",
    )
    assert widgets.key in watched_keys(running)
    reasons = [reason for _, reason, _ in await recorded_events(kube, namespace, "gizmo")]
    assert reasons == ["Deleted"]


# --------------------------------------------------------------------------- AS-66


async def unwatchable_for(control_plane: ControlPlane, pattern: str) -> list[str]:
    """The keys a lone watch pattern selects that lack the required verbs."""
    message = await fatal_startup(control_plane, watch_resource=(pattern,))
    head, _, rest = message.partition("unwatchable resources=[")
    assert head == f"{EXPLICIT_FAILED}explicit resource coverage incomplete: missing patterns=[], "
    listed, _, advice = rest.partition("]")
    keys = listed.split()
    # The line says what to do: every unwatchable key as an --ignore-resource flag.
    assert all(f"--ignore-resource={key}" in advice for key in keys)
    return keys


async def test_as_66_star_star_skips_core_resources_and_star_selects_everything(
    start_controller: StartController,
    control_plane: ControlPlane,
    kube: KubeClient,
    namespace: str,
) -> None:
    # Reference behaviour kept: a glob also requests resources without the required verbs
    # (bindings, tokenreviews, ...), which fails startup; ignoring them makes it valid.
    grouped_unwatchable = await unwatchable_for(control_plane, "*.*")
    assert grouped_unwatchable
    assert all("." in key for key in grouped_unwatchable)
    all_unwatchable = await unwatchable_for(control_plane, "*")
    assert "bindings" in all_unwatchable
    assert set(grouped_unwatchable) < set(all_unwatchable)

    config_version = await create_configmap(kube, namespace, "config", **{DELETE_AT: PAST})
    await kube.create(DEPLOYMENTS, namespace, deployment("grouped", {DELETE_AT: PAST}))
    grouped = await start_controller(
        watch_resource=["*.*"], ignore_resource=grouped_unwatchable, watch_namespace=[]
    )
    grouped_keys = watched_keys(grouped)
    assert "deployments.apps" in grouped_keys
    assert not any("." not in key for key in grouped_keys)
    await wait_gone(kube, DEPLOYMENTS, namespace, "grouped")
    assert await resource_version(kube, CONFIGMAPS, namespace, "config") == config_version
    await grouped.stop()

    everything = await start_controller(watch_resource=["*"], ignore_resource=all_unwatchable)
    assert {"configmaps", "pods", "namespaces", "nodes", "deployments.apps"} <= watched_keys(
        everything
    )
    await wait_gone(kube, CONFIGMAPS, namespace, "config")
