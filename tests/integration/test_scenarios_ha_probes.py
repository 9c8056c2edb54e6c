"""Acceptance scenarios AS-67 … AS-69 (probes, metrics, HA) against the real controller.

Probes and ``/metrics`` are read over HTTP from a controller started in-process; leader
election runs two real ``lifecycle-controller run`` processes on one Lease with short timings
(4 s lease, 3 s renew deadline, 0.5 s retry), killed with SIGKILL or stopped with SIGTERM.
Which replica acted is read from the ``reportingInstance`` of its Events (``POD_NAME``).
"""

from __future__ import annotations

import functools
import signal
import time
from dataclasses import dataclass
from typing import Any

import aiohttp
from prometheus_client.parser import text_string_to_metric_families

from lifecycle_controller.devcluster import ControlPlane
from lifecycle_controller.kube import LEASES, KubeClient, NotFound
from lifecycle_controller.serving.server import CACHES_PENDING
from tests.integration.controller import RunningController, StartController
from tests.integration.events import list_events
from tests.integration.keys import DELETE_AFTER, DELETE_AT
from tests.integration.processes import ControllerProcess, ProcessLauncher
from tests.integration.scenario_support import wait_gone
from tests.integration.support import (
    CONFIGMAP_RULE,
    CONFIGMAPS,
    EVENT_RULE,
    configmap,
    eventually,
)
from tests.integration.timestamps import PAST, epoch

LEASE_SECONDS = 4.0
ELECTION_FLAGS: dict[str, Any] = {
    "leader_election_lease_duration": "4s",
    "leader_election_renew_deadline": "3s",
    "leader_election_retry_period": "0.5s",
}
LEASE_RULE = {
    "apiGroups": ["coordination.k8s.io"],
    "resources": ["leases"],
    "verbs": ["get", "create", "update"],
}
NOT_SYNCED = f"resource coverage not ready: {CACHES_PENDING}"

Samples = dict[tuple[str, frozenset[tuple[str, str]]], float]


# --------------------------------------------------------------------------- helpers


async def get(http: aiohttp.ClientSession, port: int | None, path: str) -> tuple[int, str]:
    assert port is not None
    async with http.get(f"http://127.0.0.1:{port}{path}") as response:
        return response.status, await response.text()


def parse_metrics(text: str) -> Samples:
    return {
        (sample.name, frozenset(sample.labels.items())): float(sample.value)
        for family in text_string_to_metric_families(text)
        for sample in family.samples
    }


async def serving(running: RunningController) -> None:
    """Wait until the controller's probe and metrics servers are bound (run() starts them)."""

    async def bound() -> bool:
        controller = running.controller
        return controller.probes is not None and controller.metrics_server is not None

    await eventually(bound, within=5, interval=0.05, what="the servers to start")


async def scrape(http: aiohttp.ClientSession, running: RunningController) -> Samples:
    """The controller's /metrics (plain HTTP), parsed."""
    await serving(running)
    server = running.controller.metrics_server
    assert server is not None
    status, body = await get(http, server.port, "/metrics")
    assert status == 200, body
    return parse_metrics(body)


def sample(samples: Samples, metric: str, /, **labels: str) -> float | None:
    return samples.get((metric, frozenset(labels.items())))


async def probe_port(running: RunningController) -> int | None:
    await serving(running)
    assert running.controller.probes is not None
    return running.controller.probes.port


@dataclass
class Identity:
    """A user with Event rights (and Lease rights) in one namespace, but none on ConfigMaps
    until :meth:`grant_configmaps`: its ConfigMap informer cannot sync before that."""

    control_plane: ControlPlane
    namespace: str
    user: str
    kubeconfig: str

    def grant_configmaps(self) -> None:
        self.control_plane.grant(
            {"kind": "User", "apiGroup": "rbac.authorization.k8s.io", "name": self.user},
            name=f"configmaps-{self.user}",
            namespaced_rules={self.namespace: [CONFIGMAP_RULE]},
        )


def identity_without_configmaps(control_plane: ControlPlane, namespace: str) -> Identity:
    user = f"no-configmaps-{namespace}"
    kubeconfig = control_plane.user_kubeconfig(
        user, namespaced_rules={namespace: [EVENT_RULE, LEASE_RULE]}
    )
    return Identity(control_plane, namespace, user, str(kubeconfig))


# --------------------------------------------------------------------------- AS-67


async def test_as_67_healthz_ok_and_readyz_only_after_discovery_and_cache_sync(
    start_controller: StartController,
    control_plane: ControlPlane,
    http: aiohttp.ClientSession,
    namespace: str,
) -> None:
    identity = identity_without_configmaps(control_plane, namespace)
    running = await start_controller(
        kubeconfig=identity.kubeconfig,
        ready=False,
        watch_resource=["configmaps"],
        watch_namespace=[namespace],
    )
    port = await probe_port(running)
    assert await get(http, port, "/healthz") == (200, "ok")

    async def waiting_for_caches() -> bool:
        status, body = await get(http, port, "/readyz")
        return status == 500 and NOT_SYNCED in body

    await eventually(waiting_for_caches, within=15, what="/readyz to wait for the caches")
    assert await get(http, port, "/readyz/resource-coverage") == (
        500,
        f"internal server error: {NOT_SYNCED}",
    )
    assert await get(http, port, "/healthz") == (200, "ok")

    identity.grant_configmaps()

    async def ready() -> bool:
        return await get(http, port, "/readyz") == (200, "ok")

    await eventually(ready, within=20, what="/readyz 200 after the informer synced")
    assert await get(http, port, "/healthz") == (200, "ok")


async def test_as_67_a_replica_that_is_not_elected_is_ready(
    start_controller: StartController,
    control_plane: ControlPlane,
    kube: KubeClient,
    http: aiohttp.ClientSession,
    namespace: str,
) -> None:
    election: dict[str, Any] = {
        "leader_elect": True,
        "leader_election_id": f"as67-{namespace}",
        "leader_election_namespace": namespace,
        **ELECTION_FLAGS,
    }
    scope: dict[str, Any] = {"watch_resource": ["configmaps"], "watch_namespace": [namespace]}
    # The leader's caches can never sync: it lacks rights on ConfigMaps.
    identity = identity_without_configmaps(control_plane, namespace)
    leader = await start_controller(
        kubeconfig=identity.kubeconfig, ready=False, **election, **scope
    )

    async def leading() -> bool:
        return leader.controller.is_leader()

    await eventually(leading, within=10, what="the first replica to lead")
    follower = await start_controller(ready=False, **election, **scope)

    async def follower_ready() -> bool:
        return await get(http, await probe_port(follower), "/readyz") == (200, "ok")

    await eventually(follower_ready, within=10, what="the follower's /readyz")
    assert not follower.controller.is_leader()
    assert follower.controller.pipeline is None  # it does nothing but wait
    status, body = await get(http, await probe_port(leader), "/readyz")
    assert status == 500
    assert NOT_SYNCED in body
    lease = await kube.get(LEASES, namespace, f"as67-{namespace}")
    assert lease["spec"]["holderIdentity"] == leader.controller.identity


# --------------------------------------------------------------------------- AS-68


async def test_as_68_discovery_metrics_reflect_the_plan_and_readiness(
    start_controller: StartController,
    control_plane: ControlPlane,
    http: aiohttp.ClientSession,
    namespace: str,
) -> None:
    identity = identity_without_configmaps(control_plane, namespace)
    running = await start_controller(
        kubeconfig=identity.kubeconfig,
        ready=False,
        watch_resource=["configmaps"],
        watch_namespace=[namespace],
        metrics_bind_address="127.0.0.1:0",
        metrics_secure=False,
    )

    async def planned() -> bool:
        samples = await scrape(http, running)
        return sample(samples, "lifecycle_controller_discovery_resources", **WATCHABLE) == 1

    await eventually(planned, within=15, what="the discovery metrics")
    samples = await scrape(http, running)
    assert sample(samples, "lifecycle_controller_discovery_ready") == 0
    configured = sample(
        samples, "lifecycle_controller_discovery_resources", result="skipped", reason="configured"
    )
    assert configured is not None
    assert configured > 10  # every other resource type
    failed = [
        labels
        for name, labels in samples
        if name == "lifecycle_controller_discovery_resources" and ("result", "failed") in labels
    ]
    assert failed == []

    identity.grant_configmaps()

    # Only /metrics is read here: the gauge must not depend on someone probing /readyz.
    async def ready_gauge() -> bool:
        samples = await scrape(http, running)
        return sample(samples, "lifecycle_controller_discovery_ready") == 1

    await eventually(ready_gauge, within=20, what="lifecycle_controller_discovery_ready 1")
    assert running.controller.not_ready_reason() is None


WATCHABLE = {"result": "discovered", "reason": "watchable"}


# --------------------------------------------------------------------------- /metrics


async def test_metrics_expose_reference_controller_and_lifecycle_series(
    start_controller: StartController,
    kube: KubeClient,
    http: aiohttp.ClientSession,
    namespace: str,
) -> None:
    lease_name = f"metrics-{namespace}"
    running = await start_controller(
        watch_resource=["configmaps"],
        watch_namespace=[namespace],
        metrics_bind_address="127.0.0.1:0",
        metrics_secure=False,
        leader_elect=True,
        leader_election_id=lease_name,
        leader_election_namespace=namespace,
        **ELECTION_FLAGS,
    )
    assert await get(http, await probe_port(running), "/healthz") == (200, "ok")
    assert await get(http, await probe_port(running), "/readyz") == (200, "ok")
    await kube.create(CONFIGMAPS, namespace, configmap("soon", **{DELETE_AFTER: "3s"}))

    async def converted() -> bool:
        obj = await kube.get_metadata(CONFIGMAPS, namespace, "soon")
        return DELETE_AT in (obj["metadata"].get("annotations") or {})

    await eventually(converted, within=10, what="delete-after to be converted")
    obj = await kube.get_metadata(CONFIGMAPS, namespace, "soon")
    due = str(obj["metadata"]["annotations"][DELETE_AT])
    pending = {"action": "delete", "kind": "ConfigMap", "namespace": namespace}

    async def next_action_published() -> bool:
        samples = await scrape(http, running)
        return sample(samples, "lifecycle_next_action_timestamp_seconds", **pending) == epoch(due)

    await eventually(
        next_action_published, within=5, what="lifecycle_next_action_timestamp_seconds"
    )

    await wait_gone(kube, CONFIGMAPS, namespace, "soon", within=15)

    async def next_action_removed() -> bool:
        samples = await scrape(http, running)
        return sample(samples, "lifecycle_next_action_timestamp_seconds", **pending) is None

    await eventually(next_action_removed, within=5, what="the next-action series to go")
    samples = await scrape(http, running)
    expect = functools.partial(sample, samples)
    assert expect("lifecycle_controller_discovery_ready") == 1
    assert expect("lifecycle_controller_discovery_resources", **WATCHABLE) == 1
    success = {"action": "delete", "kind": "ConfigMap"}
    assert expect("lifecycle_actions_total", **success, result="success") == 1
    assert expect("lifecycle_actions_total", **success, result="error") == 0
    assert expect("lifecycle_action_lateness_seconds_count") == 1
    assert (expect("workqueue_adds_total", name="lifecycle") or 0) >= 2  # convert, then delete
    reconciles = {"controller": "lifecycle"}
    assert (expect("controller_runtime_reconcile_total", **reconciles, result="success") or 0) >= 1
    assert expect("controller_runtime_reconcile_errors_total", **reconciles) == 0
    assert expect("leader_election_master_status", name=lease_name) == 1


# --------------------------------------------------------------------------- AS-69


@dataclass
class Replicas:
    """Two controller processes on one Lease, the first of them leading."""

    leader: ControllerProcess
    follower: ControllerProcess
    lease_name: str
    holder: str


async def lease_holder(kube: KubeClient, namespace: str, name: str) -> str:
    try:
        lease = await kube.get(LEASES, namespace, name)
    except NotFound:
        return ""
    return str(lease["spec"].get("holderIdentity") or "")


async def leader_status(process: ControllerProcess, lease_name: str) -> float | None:
    return await process.metric("leader_election_master_status", {"name": lease_name})


async def start_replicas(launcher: ProcessLauncher, kube: KubeClient, namespace: str) -> Replicas:
    lease_name = f"ha-{namespace}"
    args = [
        "--leader-elect",
        f"--leader-election-id={lease_name}",
        f"--leader-election-namespace={namespace}",
        "--leader-election-lease-duration=4s",
        "--leader-election-renew-deadline=3s",
        "--leader-election-retry-period=0.5s",
        "--watch-resource=configmaps",
        f"--watch-namespace={namespace}",
    ]
    first = await launcher.start("replica-a", *args, metrics=True)

    async def first_leads() -> bool:
        if first.process.returncode is not None:
            raise AssertionError(first.log_text())
        return (await first.get("/readyz"))[0] == 200 and (
            await leader_status(first, lease_name)
        ) == 1

    await eventually(first_leads, within=30, what="replica-a to lead")
    holder = await lease_holder(kube, namespace, lease_name)
    assert holder

    second = await launcher.start("replica-b", *args, metrics=True)
    await second.wait_ready()  # ready although not elected (AS-67)
    assert await leader_status(second, lease_name) == 0
    assert await lease_holder(kube, namespace, lease_name) == holder
    return Replicas(first, second, lease_name, holder)


async def deleted_by(kube: KubeClient, namespace: str, name: str) -> list[str]:
    """The reporting instances of the controller's Events about ``name`` (once there are any:
    Events are sent after the write)."""

    async def recorded() -> bool:
        return bool(await list_events(kube, namespace, name))

    await eventually(recorded, within=10, what=f"an Event about {name}")
    return [str(e.get("reportingInstance")) for e in await list_events(kube, namespace, name)]


async def test_as_69_only_the_lease_holder_acts_and_sigterm_hands_over_at_once(
    launcher: ProcessLauncher, kube: KubeClient, namespace: str
) -> None:
    replicas = await start_replicas(launcher, kube, namespace)
    leader, follower = replicas.leader, replicas.follower
    await kube.create(CONFIGMAPS, namespace, configmap("first", **{DELETE_AT: PAST}))
    await wait_gone(kube, CONFIGMAPS, namespace, "first", within=15)
    assert await deleted_by(kube, namespace, "first") == ["replica-a"]
    done = {"action": "delete", "kind": "ConfigMap", "result": "success"}
    assert await leader.metric("lifecycle_actions_total", done) == 1
    assert await follower.metric("lifecycle_actions_total", done) is None  # never acted
    # Only a real process counts its API requests (the in-process harness does not wire it).
    assert (
        await leader.metric("rest_client_requests_total", {"code": "200", "method": "PUT"}) or 0
    ) >= 1
    assert await leader_status(follower, replicas.lease_name) == 0

    # SIGTERM: the leader stops its work, releases the Lease and exits 0.
    started = time.monotonic()
    leader.send(signal.SIGTERM)

    async def follower_leads() -> bool:
        return await leader_status(follower, replicas.lease_name) == 1

    await eventually(follower_leads, within=LEASE_SECONDS, interval=0.1, what="the hand-over")
    handed_over = time.monotonic() - started
    assert handed_over < LEASE_SECONDS - 1, handed_over  # no wait for the lease to expire
    assert await leader.wait_exit() == 0
    new_holder = await lease_holder(kube, namespace, replicas.lease_name)
    assert new_holder not in ("", replicas.holder)

    await kube.create(CONFIGMAPS, namespace, configmap("second", **{DELETE_AT: PAST}))
    await wait_gone(kube, CONFIGMAPS, namespace, "second", within=15)
    assert await deleted_by(kube, namespace, "second") == ["replica-b"]

    follower.send(signal.SIGTERM)
    assert await follower.wait_exit() == 0


async def test_as_69_after_kill_9_the_follower_takes_over_when_the_lease_expires(
    launcher: ProcessLauncher, kube: KubeClient, namespace: str
) -> None:
    replicas = await start_replicas(launcher, kube, namespace)
    leader, follower = replicas.leader, replicas.follower

    killed = time.monotonic()
    leader.send(signal.SIGKILL)
    assert await leader.wait_exit() == -signal.SIGKILL
    # Due while nobody leads: the next leader must process it.
    await kube.create(CONFIGMAPS, namespace, configmap("orphan", **{DELETE_AT: PAST}))

    async def taken_over() -> bool:
        holder = await lease_holder(kube, namespace, replicas.lease_name)
        return holder not in ("", replicas.holder)

    await eventually(taken_over, within=3 * LEASE_SECONDS, interval=0.1, what="the takeover")
    waited = time.monotonic() - killed
    # The lease was renewed at most one retry period (0.5 s) before the kill.
    assert waited > LEASE_SECONDS - 1, waited
    await wait_gone(kube, CONFIGMAPS, namespace, "orphan", within=15)
    assert await deleted_by(kube, namespace, "orphan") == ["replica-b"]
    assert await leader_status(follower, replicas.lease_name) == 1
