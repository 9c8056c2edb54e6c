"""Helpers of the acceptance scenarios: objects, waits, and what the running controller shows.

- Writes as the test's own field manager (:func:`create`, :func:`patch`), so the controller's
  writes stay recognisable in ``managedFields`` (:func:`written_by_controller`).
- Reading objects and their annotations, and polling until something holds
  (:func:`wait_for`, :func:`wait_gone`, :func:`wait_restarted`).
- The in-process controller's own state: metrics samples (:func:`sample`, :func:`requeues`,
  :func:`idle` …) and its metadata cache (:func:`cached`, :func:`wait_in_sync`).

Fault injection (write spies, conflicts, a lagging cache) is in tests/integration/faults.py.
"""

from __future__ import annotations

import asyncio
import sys
from collections.abc import Callable
from typing import Any

from lifecycle_controller.controller.watch.cache import CachedObject
from lifecycle_controller.core.objects.resources import ObjectKey
from lifecycle_controller.devcluster import ControlPlane
from lifecycle_controller.kube import KubeClient, NotFound, ResourceType
from tests.integration.controller import RunningController, StartController
from tests.integration.keys import CONTROLLER, RESTARTED_AT, P
from tests.integration.support import eventually

TEST_MANAGER = "scenario-test"


# --------------------------------------------------------------------------- writes and reads


async def create(
    kube: KubeClient, resource: ResourceType, namespace: str | None, body: dict[str, Any]
) -> dict[str, Any]:
    """Create as the test's own field manager (so the controller's writes stay recognisable)."""
    return await kube.request(
        "POST",
        resource.collection_path(namespace),
        query=[("fieldManager", TEST_MANAGER)],
        body=body,
    )


async def patch(
    kube: KubeClient,
    resource: ResourceType,
    namespace: str | None,
    name: str,
    body: dict[str, Any],
) -> dict[str, Any]:
    """A merge patch as the test's own field manager (a user's or another tool's edit)."""
    return await kube.merge_patch(resource, namespace, name, body, field_manager=TEST_MANAGER)


async def read(
    kube: KubeClient, resource: ResourceType, namespace: str | None, name: str
) -> dict[str, Any] | None:
    """The object, or None when it does not exist."""
    try:
        return await kube.get(resource, namespace, name)
    except NotFound:
        return None


async def get(
    kube: KubeClient, resource: ResourceType, namespace: str, name: str
) -> dict[str, Any]:
    """The object (NotFound when it does not exist)."""
    return await kube.get(resource, namespace, name)


async def gone(kube: KubeClient, resource: ResourceType, namespace: str | None, name: str) -> bool:
    return await read(kube, resource, namespace, name) is None


def annotations_of(obj: dict[str, Any] | None) -> dict[str, str]:
    assert obj is not None, "the object is gone"
    return dict(obj["metadata"].get("annotations") or {})


def lifecycle_annotations(obj: dict[str, Any] | None) -> dict[str, str]:
    """The object's ``lifecycle.cezary.dev/*`` annotations."""
    return {k: v for k, v in annotations_of(obj).items() if k.startswith(P)}


def template_annotations(obj: dict[str, Any]) -> dict[str, str]:
    """The annotations of a workload's Pod template."""
    return dict(obj["spec"]["template"]["metadata"].get("annotations") or {})


def written_by_controller(obj: dict[str, Any] | None) -> bool:
    """Whether the controller ever changed the object (its field manager owns fields)."""
    assert obj is not None, "the object is gone"
    managers = obj["metadata"].get("managedFields") or []
    return any(entry.get("manager") == CONTROLLER for entry in managers)


async def owned_by(
    kube: KubeClient, resource: ResourceType, namespace: str, owner_uid: str
) -> list[dict[str, Any]]:
    """Objects of ``resource`` in ``namespace`` whose owner is ``owner_uid``."""
    listing = await kube.request("GET", resource.collection_path(namespace))
    return [
        item
        for item in listing["items"]
        if any(ref.get("uid") == owner_uid for ref in item["metadata"].get("ownerReferences", []))
    ]


def workload(
    kind: str,
    name: str,
    annotations: dict[str, str] | None = None,
    *,
    replicas: int = 1,
    paused: bool = False,
    on_delete: bool = False,
    partition: int | None = None,
) -> dict[str, Any]:
    """An apps/v1 Deployment, StatefulSet or DaemonSet with a minimal Pod template."""
    labels = {"app": name}
    spec: dict[str, Any] = {
        "selector": {"matchLabels": labels},
        "template": {
            "metadata": {"labels": labels},
            "spec": {"containers": [{"name": "app", "image": "registry.invalid/app:1"}]},
        },
    }
    if kind != "DaemonSet":
        spec["replicas"] = replicas
    if kind == "Deployment" and paused:
        spec["paused"] = True
    if kind == "StatefulSet":
        spec["serviceName"] = name
    if on_delete:
        spec["updateStrategy"] = {"type": "OnDelete"}
    elif partition is not None:
        spec["updateStrategy"] = {
            "type": "RollingUpdate",
            "rollingUpdate": {"partition": partition},
        }
    return {
        "apiVersion": "apps/v1",
        "kind": kind,
        "metadata": {"name": name, "annotations": annotations or {}},
        "spec": spec,
    }


# --------------------------------------------------------------------------- waits


async def wait_for(
    kube: KubeClient,
    resource: ResourceType,
    namespace: str | None,
    name: str,
    condition: Callable[[dict[str, Any]], bool],
    *,
    within: float = 10,
    what: str,
) -> dict[str, Any]:
    """Poll the object until ``condition`` holds on it; return it."""
    seen: dict[str, dict[str, Any]] = {}

    async def holds() -> bool:
        obj = await read(kube, resource, namespace, name)
        if obj is not None and condition(obj):
            seen["obj"] = obj
            return True
        return False

    await eventually(holds, within=within, what=what)
    return seen["obj"]


async def wait_gone(
    kube: KubeClient,
    resource: ResourceType,
    namespace: str | None,
    name: str,
    *,
    within: float = 10,
) -> None:
    """Poll until the object no longer exists."""

    async def check() -> bool:
        return await gone(kube, resource, namespace, name)

    await eventually(check, within=within, what=f"{name} to be deleted")


async def wait_restarted(
    kube: KubeClient,
    resource: ResourceType,
    namespace: str,
    name: str,
    *,
    other_than: str | None = None,
    within: float = 15,
) -> dict[str, Any]:
    """The object once its template carries a restart marker (different from ``other_than``)."""
    seen: list[dict[str, Any]] = []

    async def restarted() -> bool:
        obj = await get(kube, resource, namespace, name)
        marker = template_annotations(obj).get(RESTARTED_AT)
        seen[:] = [obj]
        return marker is not None and marker != other_than

    await eventually(restarted, within=within, what=f"a restart marker on {name}")
    return seen[0]


async def settle(seconds: float = 1.0) -> None:
    """Give the controller time to act where the scenario expects it NOT to."""
    await asyncio.sleep(seconds)


# --------------------------------------------------------------------------- the controller


async def start_for(
    start_controller: StartController, namespace: str, *resources: str, **flags: Any
) -> RunningController:
    """The controller watching ``resources`` (ConfigMaps by default) in ``namespace`` only."""
    return await start_controller(
        watch_resource=list(resources or ("configmaps",)), watch_namespace=[namespace], **flags
    )


def sample(running: RunningController, metric: str, **labels: str) -> float | None:
    """One sample of the controller's metrics registry (None: no such series)."""
    return running.controller.metrics.registry.get_sample_value(metric, labels)


async def wait_sample(
    running: RunningController, metric: str, value: float, *, within: float, **labels: str
) -> None:
    """Wait until one sample of the controller's metrics reads ``value``.

    For a count the controller bumps after another process has answered it (a webhook
    receiver records a document before its response reaches the controller).
    """

    async def reads() -> bool:
        return sample(running, metric, **labels) == value

    await eventually(reads, within=within, interval=0.05, what=f"{metric}{labels} == {value}")


def next_action(running: RunningController, action: str, kind: str, namespace: str) -> float | None:
    """``lifecycle_next_action_timestamp_seconds`` of the controller under test (None: none)."""
    name = "lifecycle_next_action_timestamp_seconds"
    return sample(running, name, action=action, kind=kind, namespace=namespace)


def requeues(running: RunningController) -> float:
    """``workqueue_retries_total``: every requeue-after and rate-limited retry so far."""
    return sample(running, "workqueue_retries_total", name="lifecycle") or 0.0


def queue_adds(running: RunningController) -> float:
    """``workqueue_adds_total{name="lifecycle"}``: how many keys were queued."""
    return sample(running, "workqueue_adds_total", name="lifecycle") or 0.0


def reconcile_count(running: RunningController) -> float:
    """Reconciles finished so far, whatever their outcome."""
    return sum(
        sample(running, "controller_runtime_reconcile_total", controller="lifecycle", result=result)
        or 0.0
        for result in ("success", "error", "requeue_after", "terminal")
    )


async def idle(running: RunningController) -> None:
    """Wait until the work queue holds nothing and no reconcile runs."""

    async def quiet() -> bool:
        depth = sample(running, "workqueue_depth", name="lifecycle") or 0.0
        busy = sample(running, "controller_runtime_active_workers", controller="lifecycle")
        return depth == 0 and not busy

    await eventually(quiet, within=10, interval=0.02, what="an idle work queue")


def cached(
    running: RunningController, resource: ResourceType, namespace: str, name: str
) -> CachedObject | None:
    """The controller's cached view of ``name`` (None when it holds none)."""
    pipeline = running.controller.pipeline
    assert pipeline is not None
    return pipeline.reconciler.cache.get(ObjectKey(resource, namespace, name))


async def wait_cached(
    running: RunningController,
    resource: ResourceType,
    namespace: str,
    name: str,
    *,
    resource_version: str | None = None,
) -> CachedObject:
    """The controller's cached view of ``name`` (at ``resource_version``, if given)."""

    async def present() -> bool:
        obj = cached(running, resource, namespace, name)
        return obj is not None and resource_version in (None, obj.resource_version)

    await eventually(present, within=10, interval=0.05, what=f"{name} in the controller's cache")
    obj = cached(running, resource, namespace, name)
    assert obj is not None
    return obj


async def wait_in_sync(
    running: RunningController, kube: KubeClient, resource: ResourceType, namespace: str, name: str
) -> tuple[dict[str, Any], CachedObject]:
    """Wait until the object is quiet (status caught up) and the cache holds its current state."""
    found: list[tuple[dict[str, Any], CachedObject]] = []

    async def in_sync() -> bool:
        obj = await get(kube, resource, namespace, name)
        status = obj.get("status") or {}
        view = cached(running, resource, namespace, name)
        quiet = status.get("observedGeneration") == obj["metadata"]["generation"]
        if (
            quiet
            and view is not None
            and view.resource_version == obj["metadata"]["resourceVersion"]
        ):
            found[:] = [(obj, view)]
            return True
        return False

    await eventually(in_sync, within=10, interval=0.05, what=f"{name} quiet and cached")
    return found[0]


async def run_cli(control_plane: ControlPlane, namespace: str, *args: str) -> tuple[str, str]:
    """(stdout, stderr) of ``lifecycle-controller ARGS`` as a real process (must exit 0),
    against the test control plane, with the breaker and Lease in ``namespace``."""
    process = await asyncio.create_subprocess_exec(
        sys.executable,
        "-m",
        "lifecycle_controller",
        *args,
        "--kubeconfig",
        str(control_plane.admin_kubeconfig),
        "--leader-election-namespace",
        namespace,
        stdout=asyncio.subprocess.PIPE,
        stderr=asyncio.subprocess.PIPE,
    )
    out, err = await asyncio.wait_for(process.communicate(), timeout=60)
    assert process.returncode == 0, err.decode()
    return out.decode(), err.decode()
