"""Restart scenarios AS-22 … AS-28, the restart marker and rollout blockers, end to end.

Scenarios: docs/acceptance-scenarios.md; the marker and the blockers:
docs/behaviour.md#restart-marker and docs/behaviour.md#rollout-blockers.

Each test starts the real controller in-process, scoped to its own namespace and to the
resource types it needs, and drives it only through the real API server. What the controller
wrote is read back from the API; what it *tried* to write is seen through a spy on its own
client (every PATCH/PUT/POST/DELETE it sends, with the server's answer), which is how "exactly
one merge patch with the resourceVersion lock" and "no writes" are asserted on objects whose
resourceVersion kube-controller-manager keeps moving (status updates).

Rollouts are real: kube-controller-manager runs in the control plane, so a restart of a
Deployment produces a new ReplicaSet and one of a StatefulSet or DaemonSet a new
ControllerRevision (Pods stay Pending: there is no kubelet).

Shared helpers: tests/integration/scenario_support.py (objects, waits, the controller's cache),
faults.py (the write spy, conflicts, a lagging cache) and events.py.
"""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from typing import Any

import pytest

from lifecycle_controller.core.text.timestamps import parse_rfc3339
from lifecycle_controller.kube import CRDS, KubeClient, ResourceType
from tests.integration.controller import StartController
from tests.integration.events import event_records, reasons, wait_for_event
from tests.integration.faults import (
    MODIFIED,
    committed,
    conflicting_writer,
    lag_cache,
    spy_writes,
)
from tests.integration.keys import (
    CONTROLLER,
    LAST_RESTART,
    MANAGED_BY,
    RESTART_AFTER,
    RESTART_AT,
    RESTART_CRON,
    RESTART_EVERY,
    RESTARTED_AT,
)
from tests.integration.scenario_support import (
    annotations_of,
    get,
    lifecycle_annotations,
    owned_by,
    settle,
    start_for,
    template_annotations,
    wait_cached,
    wait_in_sync,
    wait_restarted,
    workload,
)
from tests.integration.support import (
    CONFIGMAPS,
    DAEMONSETS,
    DEPLOYMENTS,
    REPLICASETS,
    REVISIONS,
    STATEFULSETS,
    configmap,
    crd_manifest,
    eventually,
)
from tests.integration.timestamps import (
    NANO_FORMAT,
    from_now,
    now_ns,
    parse_utc,
    rfc3339,
    rfc3339_nano,
)

WORKLOADS = {"Deployment": DEPLOYMENTS, "StatefulSet": STATEFULSETS, "DaemonSet": DAEMONSETS}
WATCH_KEYS = {"Deployment": "deployments.apps", "StatefulSet": "statefulsets.apps"}
WATCH_KEYS["DaemonSet"] = "daemonsets.apps"


# ------------------------------------------------------------------------------- scenarios

RESTART_TRIGGERED = ("Normal", "RestartTriggered", "Updated Pod template for a restart request")


@pytest.mark.parametrize("kind", ["Deployment", "StatefulSet", "DaemonSet"])
async def test_as_22_restart_at_due_is_one_guarded_patch(
    start_controller: StartController,
    namespace: str,
    kube: KubeClient,
    monkeypatch: pytest.MonkeyPatch,
    kind: str,
) -> None:
    # docs/behaviour.md#restart-marker (changes AS-22): the marker is RFC3339Nano UTC
    # and never equal to the previous one.
    resource = WORKLOADS[kind]
    running = await start_for(start_controller, namespace, WATCH_KEYS[kind])
    writes = spy_writes(monkeypatch, running)
    before = now_ns()
    created = await kube.create(
        resource, namespace, workload(kind, "app", {RESTART_AT: "2020-01-01T00:00:00Z"})
    )

    obj = await wait_restarted(kube, resource, namespace, "app")
    after = now_ns()
    event = await wait_for_event(kube, namespace, "app", "RestartTriggered")
    assert (event.type, event.reason, event.note) == RESTART_TRIGGERED

    marker = template_annotations(obj)[RESTARTED_AT]
    assert NANO_FORMAT.fullmatch(marker)
    assert before <= parse_rfc3339(marker) <= after
    assert template_annotations(obj)[MANAGED_BY] == CONTROLLER
    assert RESTART_AT not in annotations_of(obj)
    assert annotations_of(obj)[MANAGED_BY] == CONTROLLER

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
    assert [e for e in await event_records(kube, namespace, "app") if e.type == "Warning"] == []
    assert template_annotations(await get(kube, resource, namespace, "app")) == (
        template_annotations(obj)
    )


async def test_as_23_conflicting_restart_is_retried_quietly_and_keeps_the_concurrent_change(
    start_controller: StartController,
    namespace: str,
    kube: KubeClient,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    # docs/behaviour.md#quiet-conflict-retries changes AS-23: the 409 is retried at once on
    # fresh state; no RestartFailed.
    # The concurrent change lands while the controller's watch lags (the cache is set back to
    # the state before it), so the restart patch carries an outdated resourceVersion.
    running = await start_for(start_controller, namespace, "deployments.apps")
    writes = spy_writes(monkeypatch, running)
    await kube.create(
        DEPLOYMENTS,
        namespace,
        workload("Deployment", "web", {RESTART_AT: rfc3339(from_now(3))}, replicas=0),
    )
    _, stale = await wait_in_sync(running, kube, DEPLOYMENTS, namespace, "web")
    changed = await kube.merge_patch(
        DEPLOYMENTS, namespace, "web", {"metadata": {"labels": {"team": "a"}}}
    )
    await wait_in_sync(running, kube, DEPLOYMENTS, namespace, "web")
    lag_cache(running, DEPLOYMENTS, namespace, "web", stale)

    obj = await wait_restarted(kube, DEPLOYMENTS, namespace, "web")
    await wait_for_event(kube, namespace, "web", "RestartTriggered")
    first, second = writes.to("web")
    assert first.conflict
    assert first.body["metadata"]["resourceVersion"] == stale.resource_version
    assert second.error is None
    assert second.body["metadata"]["resourceVersion"] == changed["metadata"]["resourceVersion"]
    assert obj["metadata"]["labels"] == {"team": "a"}  # the concurrent change is kept
    assert RESTART_AT not in annotations_of(obj)
    assert await reasons(kube, namespace, "web") == ["RestartTriggered"]  # no RestartFailed


async def test_as_23_persistent_conflicts_warn_after_the_bounded_quiet_retries(
    start_controller: StartController,
    namespace: str,
    kube: KubeClient,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    # docs/behaviour.md#quiet-conflict-retries: one pass tries once and retries 3 times on
    # fresh state; only then the reference's Warning RestartFailed and the rate-limited
    # retry, which succeeds.
    running = await start_for(start_controller, namespace, "deployments.apps")
    writer = conflicting_writer(kube, DEPLOYMENTS, namespace, "web", times=4)
    writes = spy_writes(monkeypatch, running, before=writer)
    await kube.create(
        DEPLOYMENTS,
        namespace,
        workload("Deployment", "web", {RESTART_AT: "2020-01-01T00:00:00Z"}, replicas=0),
    )
    obj = await wait_restarted(kube, DEPLOYMENTS, namespace, "web")
    await wait_for_event(kube, namespace, "web", "RestartTriggered")
    *rejected, accepted = writes.to("web")
    assert accepted.error is None
    assert all(w.conflict for w in rejected)  # 4 by our writer (+ any by status updates)
    assert len(rejected) >= 4
    records = await event_records(kube, namespace, "web")
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
    kube: KubeClient,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    # The "lost response" is a retry on the state from before the committed patch: the cache
    # is set back to it and the object enqueued again. The guarded patch conflicts, the fresh
    # read shows restart-at gone, and nothing more happens.
    running = await start_for(start_controller, namespace, "deployments.apps")
    writes = spy_writes(monkeypatch, running)
    await kube.create(
        DEPLOYMENTS,
        namespace,
        workload("Deployment", "web", {RESTART_AT: rfc3339(from_now(2))}, replicas=0),
    )
    before_restart = await wait_cached(running, DEPLOYMENTS, namespace, "web")
    restarted = await wait_restarted(kube, DEPLOYMENTS, namespace, "web")
    await wait_for_event(kube, namespace, "web", "RestartTriggered")
    marker = template_annotations(restarted)[RESTARTED_AT]

    lag_cache(running, DEPLOYMENTS, namespace, "web", before_restart, enqueue=True)

    async def replay_rejected() -> bool:
        return len(writes.to("web")) >= 2

    await eventually(replay_rejected, within=10, what="the replayed restart patch")
    await settle()
    committed, replay = writes.to("web")
    assert committed.error is None
    assert replay.conflict
    obj = await get(kube, DEPLOYMENTS, namespace, "web")
    assert template_annotations(obj)[RESTARTED_AT] == marker
    assert obj["metadata"]["generation"] == restarted["metadata"]["generation"]
    assert [(e.reason, e.count) for e in await event_records(kube, namespace, "web")] == [
        ("RestartTriggered", 1)
    ]


CRD_GROUP_SUFFIX = "scenarios.example.com"


async def create_established_crd(kube: KubeClient, group: str) -> ResourceType:
    """A custom kind named Deployment (any fields, so a spec.template too) in ``group``."""
    await kube.create(CRDS, None, crd_manifest(group, "deployments", "Deployment"))

    async def established() -> bool:
        crd = await kube.get(CRDS, None, f"deployments.{group}")
        conditions = (crd.get("status") or {}).get("conditions") or []
        return any(c["type"] == "Established" and c["status"] == "True" for c in conditions)

    await eventually(established, within=15, what="the CRD to be established")
    return ResourceType(group, "v1", "deployments", "Deployment", namespaced=True)


async def test_as_25_restart_on_other_kinds_is_unsupported_and_writes_nothing(
    start_controller: StartController,
    namespace: str,
    kube: KubeClient,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    group = f"{namespace}.{CRD_GROUP_SUFFIX}"
    custom = await create_established_crd(kube, group)
    try:
        running = await start_for(
            start_controller, namespace, "configmaps", "replicasets.apps", f"deployments.{group}"
        )
        writes = spy_writes(monkeypatch, running)
        past = "2020-01-01T00:00:00Z"
        await kube.create(CONFIGMAPS, namespace, configmap("cm", **{RESTART_AFTER: "1h"}))
        replicaset = workload("Deployment", "rs", {RESTART_AT: past}, replicas=0)
        replicaset["kind"] = "ReplicaSet"
        await kube.create(REPLICASETS, namespace, replicaset)
        fake = workload("Deployment", "fake", {RESTART_AT: past})
        fake["apiVersion"] = f"{group}/v1"
        await kube.create(custom, namespace, fake)

        unsupported = (
            "Warning",
            "UnsupportedRestartKind",
            "Restart requires an apps Deployment, StatefulSet, or DaemonSet; no action taken",
        )
        for name in ("cm", "rs", "fake"):
            event = await wait_for_event(kube, namespace, name, "UnsupportedRestartKind")
            assert (event.type, event.reason, event.note) == unsupported
        await settle()
        assert writes.writes == []
        cm = await get(kube, CONFIGMAPS, namespace, "cm")
        assert lifecycle_annotations(cm) == {RESTART_AFTER: "1h"}  # not even converted
        for resource, name in ((REPLICASETS, "rs"), (custom, "fake")):
            obj = await get(kube, resource, namespace, name)
            assert lifecycle_annotations(obj) == {RESTART_AT: past}
            assert RESTARTED_AT not in template_annotations(obj)
        for name in ("cm", "rs", "fake"):
            assert await reasons(kube, namespace, name) == ["UnsupportedRestartKind"]
    finally:
        await kube.request("DELETE", CRDS.object_path(None, f"deployments.{group}"))


async def test_as_27_restart_at_wins_then_the_recurring_schedule_initializes(
    start_controller: StartController,
    namespace: str,
    kube: KubeClient,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    running = await start_for(start_controller, namespace, "deployments.apps")
    writes = spy_writes(monkeypatch, running)
    await kube.create(
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
        return LAST_RESTART in annotations_of(await get(kube, DEPLOYMENTS, namespace, "web"))

    await eventually(initialized, within=15, what="the recurring anchor")
    await settle()
    obj = await get(kube, DEPLOYMENTS, namespace, "web")
    restart, initialization = committed(writes.to("web"))
    assert RESTART_AT in restart.body["metadata"]["annotations"]
    assert "spec" in restart.body
    assert initialization.body["metadata"]["annotations"] == {
        LAST_RESTART: annotations_of(obj)[LAST_RESTART],
        MANAGED_BY: CONTROLLER,
    }
    assert "spec" not in initialization.body  # initialization never restarts
    marker = template_annotations(obj)[RESTARTED_AT]
    anchor = annotations_of(obj)[LAST_RESTART]
    assert NANO_FORMAT.match(anchor)
    assert parse_utc(anchor) >= parse_utc(marker)
    assert lifecycle_annotations(obj) == {
        RESTART_EVERY: "1h",
        RESTART_CRON: "0 3 * * *",
        LAST_RESTART: anchor,
        MANAGED_BY: CONTROLLER,
    }
    assert await reasons(kube, namespace, "web") == ["RestartTriggered"]


async def test_as_28_cron_beats_every_silently(
    start_controller: StartController,
    namespace: str,
    kube: KubeClient,
) -> None:
    # With the anchor 2 minutes back, the every-minute cron is due but `restart-every: 1h` is
    # not: a restart proves cron was used, and the new anchor is "now" (cron), not anchor + 1h.
    await start_for(start_controller, namespace, "deployments.apps")
    anchor_ns = now_ns() - 120 * 1_000_000_000
    await kube.create(
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
    obj = await wait_restarted(kube, DEPLOYMENTS, namespace, "web")
    finished = datetime.now(UTC)
    new_anchor = parse_utc(annotations_of(obj)[LAST_RESTART])
    assert started - timedelta(seconds=1) <= new_anchor <= finished
    assert annotations_of(obj)[RESTART_EVERY] == "1h"
    await settle(0.5)
    assert await reasons(kube, namespace, "web") == ["RestartTriggered"]  # no warning


@pytest.mark.parametrize(
    ("kind", "owned"),
    [("Deployment", REPLICASETS), ("StatefulSet", REVISIONS), ("DaemonSet", REVISIONS)],
)
async def test_restart_rolls_out_a_new_replicaset_or_controller_revision(
    start_controller: StartController,
    namespace: str,
    kube: KubeClient,
    kind: str,
    owned: ResourceType,
) -> None:
    resource = WORKLOADS[kind]
    await start_for(start_controller, namespace, WATCH_KEYS[kind])
    created = await kube.create(resource, namespace, workload(kind, "app"))
    uid = created["metadata"]["uid"]

    async def generations(n: int) -> bool:
        return len(await owned_by(kube, owned, namespace, uid)) == n

    await eventually(lambda: generations(1), within=15, what=f"the first {owned.kind}")
    await kube.merge_patch(
        resource,
        namespace,
        "app",
        {"metadata": {"annotations": {RESTART_AT: rfc3339(from_now(-1))}}},
    )
    obj = await wait_restarted(kube, resource, namespace, "app")
    await eventually(lambda: generations(2), within=15, what=f"a second {owned.kind}")
    newest = max(await owned_by(kube, owned, namespace, uid), key=_revision)
    template = (
        newest["spec"]["template"] if owned is REPLICASETS else newest["data"]["spec"]["template"]
    )
    assert (
        template["metadata"]["annotations"][RESTARTED_AT]
        == (template_annotations(obj)[RESTARTED_AT])
    )


def _revision(owned: dict[str, Any]) -> int:
    """The revision a ReplicaSet or ControllerRevision stands for (the newest is the highest;
    the resourceVersion is not: the old ReplicaSet is written again when it is scaled down)."""
    if "revision" in owned:
        return int(owned["revision"])
    return int(owned["metadata"]["annotations"]["deployment.kubernetes.io/revision"])


async def test_spec_2_7_two_restarts_within_one_second_change_the_marker(
    start_controller: StartController,
    namespace: str,
    kube: KubeClient,
) -> None:
    await start_for(start_controller, namespace, "deployments.apps")
    await kube.create(
        DEPLOYMENTS,
        namespace,
        workload("Deployment", "web", {RESTART_AT: "2020-01-01T00:00:00Z"}, replicas=0),
    )
    first = await wait_restarted(kube, DEPLOYMENTS, namespace, "web", within=15)
    first_marker = template_annotations(first)[RESTARTED_AT]
    await kube.merge_patch(
        DEPLOYMENTS,
        namespace,
        "web",
        {"metadata": {"annotations": {RESTART_AT: "2020-01-01T00:00:01Z"}}},
    )
    second = await wait_restarted(kube, DEPLOYMENTS, namespace, "web", other_than=first_marker)
    second_marker = template_annotations(second)[RESTARTED_AT]
    assert NANO_FORMAT.fullmatch(second_marker)
    assert parse_rfc3339(second_marker) > parse_rfc3339(first_marker)  # never backwards
    uid = second["metadata"]["uid"]

    async def three_replicasets() -> bool:  # the original and one per restart: both rolled
        return len(await owned_by(kube, REPLICASETS, namespace, uid)) == 3

    await eventually(three_replicasets, within=15, what="a ReplicaSet per restart")

    async def two_restart_events() -> bool:
        return (
            sum(
                e.count
                for e in await event_records(kube, namespace, "web")
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
    kube: KubeClient,
    kind: str,
    options: dict[str, Any],
    reason_text: str,
) -> None:
    resource = WORKLOADS[kind]
    await start_for(start_controller, namespace, WATCH_KEYS[kind])
    await kube.create(
        resource,
        namespace,
        workload(kind, "app", {RESTART_AT: "2020-01-01T00:00:00Z"}, replicas=0, **options),
    )
    await wait_restarted(kube, resource, namespace, "app")
    await wait_for_event(kube, namespace, "app", "RolloutBlocked")
    records = await event_records(kube, namespace, "app")
    assert [(e.type, e.reason, e.note) for e in records] == [
        RESTART_TRIGGERED,
        ("Warning", "RolloutBlocked", f"{BLOCKED}{reason_text}."),
    ]
