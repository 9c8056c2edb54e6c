"""REFERENCE §11.3 restart scenarios (AS-22 … AS-28) and SPEC §2.7/§2.8, end to end.

Each test starts the real controller in-process, scoped to its own namespace and to the
resource types it needs, and drives it only through the real API server. What the controller
wrote is read back from the API; what it *tried* to write is seen through a spy on its own
client (every PATCH/PUT/POST/DELETE it sends, with the server's answer), which is how "exactly
one merge patch with the resourceVersion lock" and "no writes" are asserted on objects whose
resourceVersion kube-controller-manager keeps moving (status updates).

Rollouts are real: kube-controller-manager runs in the control plane, so a restart of a
Deployment produces a new ReplicaSet and one of a StatefulSet or DaemonSet a new
ControllerRevision (Pods stay Pending: there is no kubelet).

The helpers at the top are shared with ``test_scenarios_recurring_catchup.py``.
"""

from __future__ import annotations

import asyncio
import re
import time
from collections.abc import AsyncIterator, Awaitable, Callable
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from typing import Any

import pytest

from lifecycle_controller.cache import CachedObject, ObjectKey
from lifecycle_controller.devcluster import ControlPlane
from lifecycle_controller.kube import CRDS, EVENTS, KubeClient, KubeError, ResourceType
from tests.integration.controller import RunningController, StartController
from tests.integration.support import configmap, eventually

# ---------------------------------------------------------------------------------- shared

P = "lifecycle.cezary.dev/"
RESTART_AT = P + "restart-at"
RESTART_AFTER = P + "restart-after"
RESTART_EVERY = P + "restart-every"
RESTART_CRON = P + "restart-cron"
CRON_TIMEZONE = P + "cron-timezone"
LAST_RESTART = P + "last-restart-timestamp"
DELETE_AT = P + "delete-at"
DELETE_AFTER = P + "delete-after"
CATCH_UP = P + "catch-up"
DRY_RUN = P + "dry-run"
REFERENCE_POINT = P + "reference-point"
MANAGED_BY = P + "managed-by"
RESTARTED_AT = P + "restartedAt"
CONTROLLER = "lifecycle-controller"

CONFIGMAPS = ResourceType("", "v1", "configmaps", "ConfigMap", namespaced=True)
DEPLOYMENTS = ResourceType("apps", "v1", "deployments", "Deployment", namespaced=True)
STATEFULSETS = ResourceType("apps", "v1", "statefulsets", "StatefulSet", namespaced=True)
DAEMONSETS = ResourceType("apps", "v1", "daemonsets", "DaemonSet", namespaced=True)
REPLICASETS = ResourceType("apps", "v1", "replicasets", "ReplicaSet", namespaced=True)
REVISIONS = ResourceType("apps", "v1", "controllerrevisions", "ControllerRevision", namespaced=True)
WORKLOADS = {"Deployment": DEPLOYMENTS, "StatefulSet": STATEFULSETS, "DaemonSet": DAEMONSETS}
WATCH_KEYS = {"Deployment": "deployments.apps", "StatefulSet": "statefulsets.apps"}
WATCH_KEYS["DaemonSet"] = "daemonsets.apps"

SECONDS_FORMAT = re.compile(r"^\d{4}-\d\d-\d\dT\d\d:\d\d:\d\dZ$")
NANO_FORMAT = re.compile(r"^\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d(\.\d{0,8}[1-9])?Z$")


def rfc3339(moment: datetime) -> str:
    """Whole-second UTC ``Z`` form, as the controller writes ``*-at`` and the marker."""
    return moment.astimezone(UTC).strftime("%Y-%m-%dT%H:%M:%SZ")


def rfc3339_nano(ns: int) -> str:
    """Go RFC3339Nano in UTC: trailing zeros of the fraction trimmed, no fraction if whole."""
    seconds, fraction = divmod(ns, 1_000_000_000)
    text = datetime.fromtimestamp(seconds, UTC).strftime("%Y-%m-%dT%H:%M:%S")
    digits = f"{fraction:09d}".rstrip("0")
    return f"{text}.{digits}Z" if digits else f"{text}Z"


def parse_utc(value: str) -> datetime:
    """Parse a ``…Z`` timestamp written by the controller (fraction cut to microseconds)."""
    match = re.fullmatch(r"(.{19})(?:\.(\d+))?Z", value)
    assert match is not None, value
    whole = datetime.strptime(match.group(1), "%Y-%m-%dT%H:%M:%S").replace(tzinfo=UTC)
    micros = int((match.group(2) or "0")[:6].ljust(6, "0"))
    return whole + timedelta(microseconds=micros)


def from_now(seconds: float) -> datetime:
    return datetime.now(UTC) + timedelta(seconds=seconds)


def now_ns() -> int:
    return time.time_ns()


@pytest.fixture
async def api(control_plane: ControlPlane) -> AsyncIterator[KubeClient]:
    """The test's own admin client (so its writes never show up in the controller's spy)."""
    client = await KubeClient.connect(str(control_plane.admin_kubeconfig))
    yield client
    await client.close()


@dataclass(frozen=True)
class Write:
    """One write the controller sent, and how the server answered (None = success)."""

    method: str
    path: str
    body: Any
    error: str | None

    @property
    def conflict(self) -> bool:
        return self.error is not None and "Conflict" in self.error


class WriteLog:
    """Every non-Event write request of one controller, in order."""

    def __init__(self) -> None:
        self.writes: list[Write] = []

    def to(self, name: str) -> list[Write]:
        """Writes whose path ends with the object ``name``."""
        return [w for w in self.writes if w.path.rstrip("/").endswith(f"/{name}")]


def committed(writes: list[Write]) -> list[Write]:
    """The writes the server accepted; every other one must have been a 409 (nothing applied).

    A status update by kube-controller-manager between the controller's read and its write is
    an ordinary conflict, retried quietly on fresh state (SPEC §2.3).
    """
    rejected = [w for w in writes if w.error is not None]
    assert all(w.conflict for w in rejected), rejected
    return [w for w in writes if w.error is None]


BeforeWrite = Callable[[str, str, Any], Awaitable[None]]


def spy_writes(
    monkeypatch: pytest.MonkeyPatch,
    running: RunningController,
    *,
    before: BeforeWrite | None = None,
) -> WriteLog:
    """Record what the controller's client writes (it still goes to the real API server).

    ``before(method, path, body)`` runs just before each write is sent: a test uses it to make
    a concurrent change land exactly between the controller's read and its write.
    """
    log = WriteLog()
    real: Callable[..., Awaitable[Any]] = running.kube.request

    async def request(method: str, path: str, *args: Any, **kwargs: Any) -> Any:
        if method == "GET" or "/events" in path:
            return await real(method, path, *args, **kwargs)
        body = kwargs.get("body")
        if before is not None:
            await before(method, path, body)
        try:
            result = await real(method, path, *args, **kwargs)
        except KubeError as error:
            log.writes.append(Write(method, path, body, f"{type(error).__name__}: {error}"))
            raise
        log.writes.append(Write(method, path, body, None))
        return result

    monkeypatch.setattr(running.kube, "request", request)
    return log


@dataclass(frozen=True)
class EventRecord:
    type: str
    reason: str
    note: str
    count: int


async def event_records(kube: KubeClient, namespace: str, name: str) -> list[EventRecord]:
    """Every Event regarding ``name`` (oldest first), with its series count (1 if none)."""
    listing = await kube.request(
        "GET",
        EVENTS.collection_path(namespace),
        query=[("fieldSelector", f"regarding.name={name}")],
    )
    items = sorted(listing["items"], key=lambda e: e.get("eventTime") or "")
    return [
        EventRecord(
            e["type"], e["reason"], e.get("note", ""), int((e.get("series") or {}).get("count", 1))
        )
        for e in items
    ]


async def wait_for_event(
    kube: KubeClient, namespace: str, name: str, reason: str, *, within: float = 15
) -> EventRecord:
    """The first Event with ``reason`` about ``name``, once it exists."""
    found: list[EventRecord] = []

    async def present() -> bool:
        found[:] = [e for e in await event_records(kube, namespace, name) if e.reason == reason]
        return bool(found)

    await eventually(present, within=within, what=f"Event {reason} on {name}")
    return found[0]


async def reasons(kube: KubeClient, namespace: str, name: str) -> list[str]:
    return [e.reason for e in await event_records(kube, namespace, name)]


def top_annotations(obj: dict[str, Any]) -> dict[str, str]:
    return dict(obj["metadata"].get("annotations") or {})


def lifecycle_annotations(obj: dict[str, Any]) -> dict[str, str]:
    return {k: v for k, v in top_annotations(obj).items() if k.startswith(P)}


def template_annotations(obj: dict[str, Any]) -> dict[str, str]:
    return dict(obj["spec"]["template"]["metadata"].get("annotations") or {})


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


async def get(api: KubeClient, resource: ResourceType, namespace: str, name: str) -> dict[str, Any]:
    return await api.get(resource, namespace, name)


async def wait_restarted(
    api: KubeClient,
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
        obj = await get(api, resource, namespace, name)
        marker = template_annotations(obj).get(RESTARTED_AT)
        seen[:] = [obj]
        return marker is not None and marker != other_than

    await eventually(restarted, within=within, what=f"a restart marker on {name}")
    return seen[0]


async def owned_by(
    api: KubeClient, resource: ResourceType, namespace: str, owner_uid: str
) -> list[dict[str, Any]]:
    """Objects of ``resource`` in ``namespace`` whose owner is ``owner_uid``."""
    listing = await api.request("GET", resource.collection_path(namespace))
    return [
        item
        for item in listing["items"]
        if any(ref.get("uid") == owner_uid for ref in item["metadata"].get("ownerReferences", []))
    ]


def cached(
    running: RunningController, resource: ResourceType, namespace: str, name: str
) -> CachedObject | None:
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
    running: RunningController, api: KubeClient, resource: ResourceType, namespace: str, name: str
) -> tuple[dict[str, Any], CachedObject]:
    """Wait until the object is quiet (status caught up) and the cache holds its current state."""
    found: list[tuple[dict[str, Any], CachedObject]] = []

    async def in_sync() -> bool:
        obj = await get(api, resource, namespace, name)
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


def lag_cache(
    running: RunningController,
    resource: ResourceType,
    namespace: str,
    name: str,
    stale: CachedObject,
    *,
    enqueue: bool = False,
) -> None:
    """Fault injection: the controller's watch lags, its cache still holds ``stale``.

    The real API server cannot be told to delay one watch event, so the cache entry is set
    back; every write the controller then makes is still judged by the real server.
    """
    pipeline = running.controller.pipeline
    assert pipeline is not None
    key = ObjectKey(resource, namespace, name)
    pipeline.reconciler.cache.put(key, stale)
    if enqueue:
        pipeline.queue.add(key)


async def settle(seconds: float = 1.0) -> None:
    """Give the controller time to act where the scenario expects it NOT to."""
    await asyncio.sleep(seconds)


# ------------------------------------------------------------------------------- scenarios

RESTART_TRIGGERED = ("Normal", "RestartTriggered", "Updated Pod template for a restart request")


@pytest.mark.parametrize("kind", ["Deployment", "StatefulSet", "DaemonSet"])
async def test_as_22_restart_at_due_is_one_guarded_patch(
    start_controller: StartController,
    namespace: str,
    api: KubeClient,
    monkeypatch: pytest.MonkeyPatch,
    kind: str,
) -> None:
    # SPEC §2 (AS-22): the marker is RFC3339 UTC seconds and never equal to the previous one.
    resource = WORKLOADS[kind]
    running = await start_controller(watch_resource=[WATCH_KEYS[kind]], watch_namespace=[namespace])
    writes = spy_writes(monkeypatch, running)
    before = rfc3339(datetime.now(UTC))
    created = await api.create(
        resource, namespace, workload(kind, "app", {RESTART_AT: "2020-01-01T00:00:00Z"})
    )

    obj = await wait_restarted(api, resource, namespace, "app")
    after = rfc3339(datetime.now(UTC))
    event = await wait_for_event(api, namespace, "app", "RestartTriggered")
    assert (event.type, event.reason, event.note) == RESTART_TRIGGERED

    marker = template_annotations(obj)[RESTARTED_AT]
    assert SECONDS_FORMAT.match(marker)
    assert before <= marker <= after
    assert template_annotations(obj)[MANAGED_BY] == CONTROLLER
    assert RESTART_AT not in top_annotations(obj)
    assert top_annotations(obj)[MANAGED_BY] == CONTROLLER

    await settle()
    [patch] = committed(writes.to("app"))  # exactly one (earlier 409s applied nothing)
    assert patch.method == "PATCH"
    locked_at = patch.body["metadata"]["resourceVersion"]
    assert int(locked_at) >= int(created["metadata"]["resourceVersion"])
    assert patch.body == {
        "metadata": {
            "annotations": {RESTART_AT: None, MANAGED_BY: CONTROLLER},
            "resourceVersion": locked_at,
        },
        "spec": {
            "template": {
                "metadata": {"annotations": {RESTARTED_AT: marker, MANAGED_BY: CONTROLLER}}
            }
        },
    }
    assert [e for e in await event_records(api, namespace, "app") if e.type == "Warning"] == []
    assert template_annotations(await get(api, resource, namespace, "app")) == (
        template_annotations(obj)
    )


async def test_as_23_conflicting_restart_is_retried_quietly_and_keeps_the_concurrent_change(
    start_controller: StartController,
    namespace: str,
    api: KubeClient,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    # SPEC §2.3 changes AS-23: the 409 is retried at once on fresh state; no RestartFailed.
    # The concurrent change lands while the controller's watch lags (the cache is set back to
    # the state before it), so the restart patch carries an outdated resourceVersion.
    running = await start_controller(
        watch_resource=["deployments.apps"], watch_namespace=[namespace]
    )
    writes = spy_writes(monkeypatch, running)
    await api.create(
        DEPLOYMENTS,
        namespace,
        workload("Deployment", "web", {RESTART_AT: rfc3339(from_now(3))}, replicas=0),
    )
    _, stale = await wait_in_sync(running, api, DEPLOYMENTS, namespace, "web")
    changed = await api.merge_patch(
        DEPLOYMENTS, namespace, "web", {"metadata": {"labels": {"team": "a"}}}
    )
    await wait_in_sync(running, api, DEPLOYMENTS, namespace, "web")
    lag_cache(running, DEPLOYMENTS, namespace, "web", stale)

    obj = await wait_restarted(api, DEPLOYMENTS, namespace, "web")
    await wait_for_event(api, namespace, "web", "RestartTriggered")
    first, second = writes.to("web")
    assert first.conflict
    assert first.body["metadata"]["resourceVersion"] == stale.resource_version
    assert second.error is None
    assert second.body["metadata"]["resourceVersion"] == changed["metadata"]["resourceVersion"]
    assert obj["metadata"]["labels"] == {"team": "a"}  # the concurrent change is kept
    assert RESTART_AT not in top_annotations(obj)
    assert await reasons(api, namespace, "web") == ["RestartTriggered"]  # no RestartFailed


def conflicting_writer(
    api: KubeClient, resource: ResourceType, namespace: str, name: str, *, times: int
) -> BeforeWrite:
    """A concurrent writer that changes the object just before each of the controller's first
    ``times`` writes to it, so each of them is rejected with 409 Conflict."""
    remaining = [times]

    async def edit(method: str, path: str, body: Any) -> None:
        if method == "PATCH" and path.endswith(f"/{name}") and remaining[0] > 0:
            remaining[0] -= 1
            label = {"concurrent": str(remaining[0])}
            await api.merge_patch(resource, namespace, name, {"metadata": {"labels": label}})

    return edit


MODIFIED = "the object has been modified"


async def test_as_23_persistent_conflicts_warn_after_the_bounded_quiet_retries(
    start_controller: StartController,
    namespace: str,
    api: KubeClient,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    # SPEC §2.3: one pass tries once and retries 3 times on fresh state; only then the
    # reference's Warning RestartFailed and the rate-limited retry, which succeeds.
    running = await start_controller(
        watch_resource=["deployments.apps"], watch_namespace=[namespace]
    )
    writer = conflicting_writer(api, DEPLOYMENTS, namespace, "web", times=4)
    writes = spy_writes(monkeypatch, running, before=writer)
    await api.create(
        DEPLOYMENTS,
        namespace,
        workload("Deployment", "web", {RESTART_AT: "2020-01-01T00:00:00Z"}, replicas=0),
    )
    obj = await wait_restarted(api, DEPLOYMENTS, namespace, "web")
    await wait_for_event(api, namespace, "web", "RestartTriggered")
    *rejected, accepted = writes.to("web")
    assert accepted.error is None
    assert all(w.conflict for w in rejected)  # 4 by our writer (+ any by status updates)
    assert len(rejected) >= 4
    records = await event_records(api, namespace, "web")
    assert [(e.type, e.reason) for e in records] == [
        ("Warning", "RestartFailed"),
        ("Normal", "RestartTriggered"),
    ]
    assert records[0].note.startswith("Could not patch object to trigger restart: ")
    assert MODIFIED in records[0].note
    assert obj["metadata"]["labels"]["concurrent"] == "0"  # the last concurrent change is kept


async def test_as_24_committed_restart_is_not_replayed_after_a_lost_response(
    start_controller: StartController,
    namespace: str,
    api: KubeClient,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    # The "lost response" is a retry on the state from before the committed patch: the cache
    # is set back to it and the object enqueued again. The guarded patch conflicts, the fresh
    # read shows restart-at gone, and nothing more happens.
    running = await start_controller(
        watch_resource=["deployments.apps"], watch_namespace=[namespace]
    )
    writes = spy_writes(monkeypatch, running)
    await api.create(
        DEPLOYMENTS,
        namespace,
        workload("Deployment", "web", {RESTART_AT: rfc3339(from_now(2))}, replicas=0),
    )
    before_restart = await wait_cached(running, DEPLOYMENTS, namespace, "web")
    restarted = await wait_restarted(api, DEPLOYMENTS, namespace, "web")
    await wait_for_event(api, namespace, "web", "RestartTriggered")
    marker = template_annotations(restarted)[RESTARTED_AT]

    lag_cache(running, DEPLOYMENTS, namespace, "web", before_restart, enqueue=True)

    async def replay_rejected() -> bool:
        return len(writes.to("web")) >= 2

    await eventually(replay_rejected, within=10, what="the replayed restart patch")
    await settle()
    committed, replay = writes.to("web")
    assert committed.error is None
    assert replay.conflict
    obj = await get(api, DEPLOYMENTS, namespace, "web")
    assert template_annotations(obj)[RESTARTED_AT] == marker
    assert obj["metadata"]["generation"] == restarted["metadata"]["generation"]
    assert [(e.reason, e.count) for e in await event_records(api, namespace, "web")] == [
        ("RestartTriggered", 1)
    ]


CRD_GROUP_SUFFIX = "scenarios.example.com"


def deployment_crd(group: str) -> dict[str, Any]:
    """A custom kind named Deployment (with a spec.template) in a group of our own."""
    return {
        "apiVersion": "apiextensions.k8s.io/v1",
        "kind": "CustomResourceDefinition",
        "metadata": {"name": f"deployments.{group}"},
        "spec": {
            "group": group,
            "scope": "Namespaced",
            "names": {"plural": "deployments", "singular": "deployment", "kind": "Deployment"},
            "versions": [
                {
                    "name": "v1",
                    "served": True,
                    "storage": True,
                    "schema": {
                        "openAPIV3Schema": {
                            "type": "object",
                            "x-kubernetes-preserve-unknown-fields": True,
                        }
                    },
                }
            ],
        },
    }


async def create_established_crd(api: KubeClient, group: str) -> ResourceType:
    await api.create(CRDS, None, deployment_crd(group))

    async def established() -> bool:
        crd = await api.get(CRDS, None, f"deployments.{group}")
        conditions = (crd.get("status") or {}).get("conditions") or []
        return any(c["type"] == "Established" and c["status"] == "True" for c in conditions)

    await eventually(established, within=15, what="the CRD to be established")
    return ResourceType(group, "v1", "deployments", "Deployment", namespaced=True)


async def test_as_25_restart_on_other_kinds_is_unsupported_and_writes_nothing(
    start_controller: StartController,
    namespace: str,
    api: KubeClient,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    group = f"{namespace}.{CRD_GROUP_SUFFIX}"
    custom = await create_established_crd(api, group)
    try:
        running = await start_controller(
            watch_resource=["configmaps", "replicasets.apps", f"deployments.{group}"],
            watch_namespace=[namespace],
        )
        writes = spy_writes(monkeypatch, running)
        past = "2020-01-01T00:00:00Z"
        await api.create(CONFIGMAPS, namespace, configmap("cm", **{RESTART_AFTER: "1h"}))
        replicaset = workload("Deployment", "rs", {RESTART_AT: past}, replicas=0)
        replicaset["kind"] = "ReplicaSet"
        await api.create(REPLICASETS, namespace, replicaset)
        fake = workload("Deployment", "fake", {RESTART_AT: past})
        fake["apiVersion"] = f"{group}/v1"
        await api.create(custom, namespace, fake)

        unsupported = (
            "Warning",
            "UnsupportedRestartKind",
            "Restart requires an apps Deployment, StatefulSet, or DaemonSet; no action taken",
        )
        for name in ("cm", "rs", "fake"):
            event = await wait_for_event(api, namespace, name, "UnsupportedRestartKind")
            assert (event.type, event.reason, event.note) == unsupported
        await settle()
        assert writes.writes == []
        cm = await get(api, CONFIGMAPS, namespace, "cm")
        assert lifecycle_annotations(cm) == {RESTART_AFTER: "1h"}  # not even converted
        for resource, name in ((REPLICASETS, "rs"), (custom, "fake")):
            obj = await get(api, resource, namespace, name)
            assert lifecycle_annotations(obj) == {RESTART_AT: past}
            assert RESTARTED_AT not in template_annotations(obj)
        for name in ("cm", "rs", "fake"):
            assert await reasons(api, namespace, name) == ["UnsupportedRestartKind"]
    finally:
        await api.request("DELETE", CRDS.object_path(None, f"deployments.{group}"))


async def test_as_27_restart_at_wins_then_the_recurring_schedule_initializes(
    start_controller: StartController,
    namespace: str,
    api: KubeClient,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    running = await start_controller(
        watch_resource=["deployments.apps"], watch_namespace=[namespace]
    )
    writes = spy_writes(monkeypatch, running)
    await api.create(
        DEPLOYMENTS,
        namespace,
        workload(
            "Deployment",
            "web",
            {RESTART_AT: "2020-01-01T00:00:00Z", RESTART_EVERY: "1h", RESTART_CRON: "0 3 * * *"},
            replicas=0,
        ),
    )

    async def initialized() -> bool:
        return LAST_RESTART in top_annotations(await get(api, DEPLOYMENTS, namespace, "web"))

    await eventually(initialized, within=15, what="the recurring anchor")
    await settle()
    obj = await get(api, DEPLOYMENTS, namespace, "web")
    restart, initialization = committed(writes.to("web"))
    assert RESTART_AT in restart.body["metadata"]["annotations"]
    assert "spec" in restart.body
    assert initialization.body["metadata"]["annotations"] == {
        LAST_RESTART: top_annotations(obj)[LAST_RESTART],
        MANAGED_BY: CONTROLLER,
    }
    assert "spec" not in initialization.body  # initialization never restarts
    marker = template_annotations(obj)[RESTARTED_AT]
    anchor = top_annotations(obj)[LAST_RESTART]
    assert NANO_FORMAT.match(anchor)
    assert parse_utc(anchor) >= parse_utc(marker)
    assert lifecycle_annotations(obj) == {
        RESTART_EVERY: "1h",
        RESTART_CRON: "0 3 * * *",
        LAST_RESTART: anchor,
        MANAGED_BY: CONTROLLER,
    }
    assert await reasons(api, namespace, "web") == ["RestartTriggered"]


async def test_as_28_cron_beats_every_silently(
    start_controller: StartController,
    namespace: str,
    api: KubeClient,
) -> None:
    # With the anchor 2 minutes back, the every-minute cron is due but `restart-every: 1h` is
    # not: a restart proves cron was used, and the new anchor is "now" (cron), not anchor + 1h.
    await start_controller(watch_resource=["deployments.apps"], watch_namespace=[namespace])
    anchor_ns = now_ns() - 120 * 1_000_000_000
    await api.create(
        DEPLOYMENTS,
        namespace,
        workload(
            "Deployment",
            "web",
            {RESTART_CRON: "* * * * *", RESTART_EVERY: "1h", LAST_RESTART: rfc3339_nano(anchor_ns)},
            replicas=0,
        ),
    )
    started = datetime.now(UTC)
    obj = await wait_restarted(api, DEPLOYMENTS, namespace, "web")
    finished = datetime.now(UTC)
    new_anchor = parse_utc(top_annotations(obj)[LAST_RESTART])
    assert started - timedelta(seconds=1) <= new_anchor <= finished
    assert top_annotations(obj)[RESTART_EVERY] == "1h"
    await settle(0.5)
    assert await reasons(api, namespace, "web") == ["RestartTriggered"]  # no warning


@pytest.mark.parametrize(
    ("kind", "owned"),
    [("Deployment", REPLICASETS), ("StatefulSet", REVISIONS), ("DaemonSet", REVISIONS)],
)
async def test_restart_rolls_out_a_new_replicaset_or_controller_revision(
    start_controller: StartController,
    namespace: str,
    api: KubeClient,
    kind: str,
    owned: ResourceType,
) -> None:
    resource = WORKLOADS[kind]
    await start_controller(watch_resource=[WATCH_KEYS[kind]], watch_namespace=[namespace])
    created = await api.create(resource, namespace, workload(kind, "app"))
    uid = created["metadata"]["uid"]

    async def generations(n: int) -> bool:
        return len(await owned_by(api, owned, namespace, uid)) == n

    await eventually(lambda: generations(1), within=15, what=f"the first {owned.kind}")
    await api.merge_patch(
        resource,
        namespace,
        "app",
        {"metadata": {"annotations": {RESTART_AT: rfc3339(from_now(-1))}}},
    )
    obj = await wait_restarted(api, resource, namespace, "app")
    await eventually(lambda: generations(2), within=15, what=f"a second {owned.kind}")
    newest = max(
        await owned_by(api, owned, namespace, uid),
        key=lambda item: int(item["metadata"]["resourceVersion"]),
    )
    template = (
        newest["spec"]["template"] if owned is REPLICASETS else newest["data"]["spec"]["template"]
    )
    assert (
        template["metadata"]["annotations"][RESTARTED_AT]
        == (template_annotations(obj)[RESTARTED_AT])
    )


async def test_spec_2_7_two_restarts_within_one_second_change_the_marker(
    start_controller: StartController,
    namespace: str,
    api: KubeClient,
) -> None:
    await start_controller(watch_resource=["deployments.apps"], watch_namespace=[namespace])
    await api.create(
        DEPLOYMENTS,
        namespace,
        workload("Deployment", "web", {RESTART_AT: "2020-01-01T00:00:00Z"}, replicas=0),
    )
    first = await wait_restarted(api, DEPLOYMENTS, namespace, "web", within=15)
    first_marker = template_annotations(first)[RESTARTED_AT]
    await api.merge_patch(
        DEPLOYMENTS,
        namespace,
        "web",
        {"metadata": {"annotations": {RESTART_AT: "2020-01-01T00:00:01Z"}}},
    )
    second = await wait_restarted(api, DEPLOYMENTS, namespace, "web", other_than=first_marker)
    second_marker = template_annotations(second)[RESTARTED_AT]
    assert SECONDS_FORMAT.match(second_marker)
    assert second_marker > first_marker  # differs, never goes backwards
    uid = second["metadata"]["uid"]

    async def three_replicasets() -> bool:  # the original and one per restart: both rolled
        return len(await owned_by(api, REPLICASETS, namespace, uid)) == 3

    await eventually(three_replicasets, within=15, what="a ReplicaSet per restart")

    async def two_restart_events() -> bool:
        return (
            sum(
                e.count
                for e in await event_records(api, namespace, "web")
                if e.reason == "RestartTriggered"
            )
            == 2
        )

    await eventually(two_restart_events, within=10, what="two RestartTriggered")


BLOCKED = "Pod template updated for a restart, but Pods may not be replaced: "


@pytest.mark.parametrize(
    ("kind", "options", "reason_text"),
    [
        ("Deployment", {"paused": True}, "the Deployment is paused"),
        ("DaemonSet", {"on_delete": True}, "the DaemonSet uses the OnDelete update strategy"),
        ("StatefulSet", {"on_delete": True}, "the StatefulSet uses the OnDelete update strategy"),
        ("StatefulSet", {"partition": 2}, "the StatefulSet has a rolling-update partition of 2"),
    ],
    ids=["paused-deployment", "ondelete-daemonset", "ondelete-statefulset", "partition"],
)
async def test_spec_2_8_rollout_blockers_are_reported_after_the_restart(
    start_controller: StartController,
    namespace: str,
    api: KubeClient,
    kind: str,
    options: dict[str, Any],
    reason_text: str,
) -> None:
    resource = WORKLOADS[kind]
    await start_controller(watch_resource=[WATCH_KEYS[kind]], watch_namespace=[namespace])
    await api.create(
        resource,
        namespace,
        workload(kind, "app", {RESTART_AT: "2020-01-01T00:00:00Z"}, replicas=0, **options),
    )
    await wait_restarted(api, resource, namespace, "app")
    await wait_for_event(api, namespace, "app", "RolloutBlocked")
    records = await event_records(api, namespace, "app")
    assert [(e.type, e.reason, e.note) for e in records] == [
        RESTART_TRIGGERED,
        ("Warning", "RolloutBlocked", f"{BLOCKED}{reason_text}."),
    ]
