"""Workloads whose Pods really run, on the control plane with fake nodes (``kwok_plane``).

kwok makes every Pod bound to a fake Node Running and Ready a second after the scheduler
bound it (lifecycle_controller/devcluster/nodes.py), unless its labels carry
:data:`~lifecycle_controller.devcluster.nodes.UNREADY_LABEL`. The helpers build Deployments,
StatefulSets and DaemonSets for that, read their Pods as the test sees them
(:class:`PodView`), and wait until a workload has settled with every Pod Ready.
"""

from __future__ import annotations

import asyncio
import re
from collections.abc import AsyncIterator, Callable
from contextlib import asynccontextmanager
from dataclasses import dataclass, field
from typing import Any

from lifecycle_controller.core.objects.rollout_progress import rollout_progress
from lifecycle_controller.devcluster.nodes import UNREADY_LABEL
from lifecycle_controller.kube import KubeClient, ResourceType
from lifecycle_controller.kube.resources import PODS
from tests.integration.keys import RESTARTED_AT
from tests.integration.scenario_support import get, workload
from tests.integration.support import eventually


def real_workload(
    kind: str,
    name: str,
    annotations: dict[str, str] | None = None,
    *,
    replicas: int = 3,
    unready: bool = False,
    partition: int | None = None,
) -> dict[str, Any]:
    """A workload for real Pods: RollingUpdate (a Deployment with maxUnavailable 1 and
    maxSurge 1), no grace period; with ``unready`` its Pods run but never become Ready."""
    body = workload(kind, name, annotations, replicas=replicas, partition=partition)
    template = body["spec"]["template"]
    template["spec"]["terminationGracePeriodSeconds"] = 0
    if unready:
        template["metadata"]["labels"][UNREADY_LABEL] = "true"
    if kind == "Deployment":
        body["spec"]["strategy"] = {
            "type": "RollingUpdate",
            "rollingUpdate": {"maxUnavailable": 1, "maxSurge": 1},
        }
    return body


@dataclass(frozen=True)
class PodView:
    """What a rollout test asks of one Pod."""

    name: str
    #: The ``app`` label: the workload it belongs to (:func:`real_workload`).
    app: str
    node: str
    phase: str
    ready: bool
    deleting: bool
    restarted_at: str | None
    #: ``metadata.creationTimestamp`` (RFC 3339, whole seconds: compares as text).
    created: str

    @classmethod
    def of(cls, pod: dict[str, Any]) -> PodView:
        status = pod.get("status") or {}
        ready = any(
            condition.get("type") == "Ready" and condition.get("status") == "True"
            for condition in status.get("conditions") or []
        )
        metadata = pod["metadata"]
        return cls(
            name=metadata["name"],
            app=(metadata.get("labels") or {}).get("app") or "",
            node=(pod.get("spec") or {}).get("nodeName") or "",
            phase=status.get("phase") or "",
            ready=ready,
            deleting=bool(metadata.get("deletionTimestamp")),
            restarted_at=(metadata.get("annotations") or {}).get(RESTARTED_AT),
            created=metadata.get("creationTimestamp") or "",
        )

    @property
    def serving(self) -> bool:
        """Running, Ready and not being deleted."""
        return self.phase == "Running" and self.ready and not self.deleting


async def pods_of(kube: KubeClient, namespace: str, app: str) -> list[PodView]:
    """The Pods labelled ``app=<app>`` (what :func:`real_workload` selects), by name."""
    listing = await kube.request(
        "GET", PODS.collection_path(namespace), query=[("labelSelector", f"app={app}")]
    )
    return sorted((PodView.of(item) for item in listing["items"]), key=lambda pod: pod.name)


async def wait_serving(
    kube: KubeClient,
    resource: ResourceType,
    namespace: str,
    name: str,
    *,
    count: int,
    within: float = 60,
) -> list[PodView]:
    """Wait until the workload's rollout is complete by its status and exactly ``count`` Pods
    exist, all serving; return them."""
    seen: list[PodView] = []

    async def settled() -> bool:
        obj = await get(kube, resource, namespace, name)
        seen[:] = await pods_of(kube, namespace, name)
        return (
            rollout_progress(obj).complete
            and len(seen) == count
            and all(pod.serving for pod in seen)
        )

    await eventually(settled, within=within, what=f"{count} Pods of {name} Running and Ready")
    return seen


@dataclass
class PodTimeline:
    """The namespace's Pods as they changed: one snapshot per watch event, and a copy of the
    latest every ``interval`` seconds (so a wait for "a snapshot after X" ends)."""

    snapshots: list[list[PodView]] = field(default_factory=list)

    def widest(self, measure: Callable[[list[PodView]], int]) -> int:
        """The largest ``measure`` of any snapshot."""
        return max((measure(pods) for pods in self.snapshots), default=0)

    def narrowest(self, measure: Callable[[list[PodView]], int]) -> int:
        """The smallest ``measure`` of any snapshot."""
        return min((measure(pods) for pods in self.snapshots), default=0)


async def all_pods(kube: KubeClient, namespace: str) -> list[PodView]:
    """Every Pod of ``namespace``, by name."""
    listing = await kube.request("GET", PODS.collection_path(namespace))
    return sorted((PodView.of(item) for item in listing["items"]), key=lambda pod: pod.name)


async def _follow_pods(
    kube: KubeClient, namespace: str, state: dict[str, PodView], changed: Callable[[], None]
) -> None:
    """Keep ``state`` equal to the namespace's Pods, event by event (listing again after a
    watch ends with an error), calling ``changed`` after every change."""
    while True:
        listing = await kube.request("GET", PODS.collection_path(namespace))
        state.clear()
        state.update({item["metadata"]["name"]: PodView.of(item) for item in listing["items"]})
        changed()
        version = str(listing["metadata"]["resourceVersion"])
        events = kube.watch_objects(
            PODS, namespace=namespace, resource_version=version, timeout_seconds=300
        )
        async for event in events:
            obj = event.get("object") or {}
            kind = event.get("type")
            if kind == "ERROR":
                break
            if kind == "BOOKMARK":
                continue
            name = obj["metadata"]["name"]
            if kind == "DELETED":
                state.pop(name, None)
            else:
                state[name] = PodView.of(obj)
            changed()


@asynccontextmanager
async def pod_timeline(
    kube: KubeClient, namespace: str, *, interval: float = 0.1
) -> AsyncIterator[PodTimeline]:
    """Record the namespace's Pods in the background for the ``async with`` block: every
    state a watch shows (a short state between two polls is never missed), plus a copy of
    the latest every ``interval`` seconds."""
    timeline = PodTimeline()
    state: dict[str, PodView] = {}
    listed = asyncio.Event()

    def changed() -> None:
        timeline.snapshots.append(sorted(state.values(), key=lambda pod: pod.name))
        listed.set()

    async def tick() -> None:
        await listed.wait()
        while True:
            await asyncio.sleep(interval)
            changed()

    tasks = [
        asyncio.create_task(_follow_pods(kube, namespace, state, changed)),
        asyncio.create_task(tick()),
    ]
    try:
        await listed.wait()
        yield timeline
    finally:
        for task in tasks:
            task.cancel()
        await asyncio.gather(*tasks, return_exceptions=True)


COMPLETED = "Rollout after the restart completed in "


def rollout_seconds(note: str) -> float:
    """The seconds a ``RolloutCompleted`` note reports (``"... completed in 1m2.5s."``)."""
    match = re.fullmatch(re.escape(COMPLETED) + r"(?:(\d+)h)?(?:(\d+)m)?(?:([\d.]+)s)?\.", note)
    assert match, note
    hours, minutes, seconds = (float(group or 0) for group in match.groups())
    return 3600 * hours + 60 * minutes + seconds
