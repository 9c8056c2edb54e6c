"""Scenarios AS-10 … AS-21 (docs/acceptance-scenarios.md) on the real controller and API server.

Relative timers are converted into absolute deadlines, and due deadlines delete the object:
ConfigMaps, Deployments, a Namespace with contents, and a custom resource. Also the deliberate
differences in this area (docs/behaviour.md#deliberate-differences): quiet conflicts,
terminating objects, ``--max-delete-ttl`` and the deletion budget.

Conflicts and a vanished object are produced on the real server at a chosen moment: a small
wrapper around the controller's own ``KubeClient.delete`` first edits (or deletes) the object
through the API and then lets the guarded DELETE go out, so the 409 or 404 the controller sees
is a real answer of the API server, not a mock.
"""

from __future__ import annotations

import asyncio
import calendar
import contextlib
import re
import time
import uuid
from collections.abc import AsyncIterator
from typing import Any

import pytest

from lifecycle_controller.devcluster import ControlPlane
from lifecycle_controller.kube import CRDS, NAMESPACES, KubeClient, NotFound, ResourceType
from tests.integration.controller import StartController
from tests.integration.events import events_of, list_events, sole_event, wait_event
from tests.integration.faults import configmap_edit, interfere, label_bump
from tests.integration.keys import (
    CONTROLLER,
    DELETE_AFTER,
    DELETE_AT,
    MANAGED_BY,
    REFERENCE_POINT,
    RESTART_AFTER,
    RESTART_AT,
    RESTARTED_AT,
    P,
)
from tests.integration.scenario_support import (
    annotations_of,
    create,
    idle,
    next_action,
    patch,
    read,
    reconcile_count,
    sample,
    start_for,
    wait_for,
    wait_gone,
)
from tests.integration.support import (
    CONFIGMAPS,
    DEPLOYMENTS,
    configmap,
    crd_manifest,
    deployment,
    eventually,
)
from tests.integration.timestamps import FAR, HOUR, PAST, SECONDS, deadline_in, epoch, stamp

# --------------------------------------------------------------------------- conversion


async def test_as_10_delete_after_converts(
    start_controller: StartController, namespace: str
) -> None:
    running = await start_for(start_controller, namespace)
    kube = running.kube
    before = int(time.time())
    await create(kube, CONFIGMAPS, namespace, configmap("cm", **{DELETE_AFTER: "1h"}))
    obj = await wait_for(
        kube,
        CONFIGMAPS,
        namespace,
        "cm",
        lambda o: DELETE_AT in annotations_of(o),
        what="delete-at",
    )
    after = int(time.time())
    annotations = annotations_of(obj)
    assert before + HOUR <= epoch(annotations[DELETE_AT]) <= after + HOUR
    assert DELETE_AFTER not in annotations
    assert annotations[MANAGED_BY] == CONTROLLER

    # The immediate requeue reconciles the new deadline: the controller now waits for it.
    async def waits_for_deadline() -> bool:
        due = next_action(running, "delete", "ConfigMap", namespace)
        return due == epoch(annotations[DELETE_AT])

    await eventually(waits_for_deadline, within=5, what="the requeue on the new delete-at")
    assert await events_of(kube, namespace, "cm") == []


async def test_as_11_reapplied_delete_after_overwrites_the_deadline(
    start_controller: StartController, namespace: str
) -> None:
    running = await start_for(start_controller, namespace)
    kube = running.kube
    await create(kube, CONFIGMAPS, namespace, configmap("cm", **{DELETE_AFTER: "1h"}))
    first = annotations_of(
        await wait_for(
            kube,
            CONFIGMAPS,
            namespace,
            "cm",
            lambda o: DELETE_AT in annotations_of(o),
            what="the first delete-at",
        )
    )[DELETE_AT]
    # Re-apply at T2 in a later second than the first conversion, so the deadline moves.
    await asyncio.sleep(max(0.0, epoch(first) - HOUR + 1 - time.time()) + 0.05)
    t2 = int(time.time())
    await patch(
        kube, CONFIGMAPS, namespace, "cm", {"metadata": {"annotations": {DELETE_AFTER: "1h"}}}
    )
    obj = await wait_for(
        kube,
        CONFIGMAPS,
        namespace,
        "cm",
        lambda o: DELETE_AFTER not in annotations_of(o) and annotations_of(o)[DELETE_AT] != first,
        what="the recomputed delete-at",
    )
    second = annotations_of(obj)[DELETE_AT]
    assert t2 + HOUR <= epoch(second) <= int(time.time()) + HOUR
    assert epoch(second) > epoch(first)


async def test_as_12_creation_timestamp_reference_point(
    start_controller: StartController, namespace: str
) -> None:
    running = await start_for(start_controller, namespace)
    kube = running.kube
    created = await create(
        kube,
        CONFIGMAPS,
        namespace,
        configmap("cm", **{DELETE_AFTER: "1h", REFERENCE_POINT: "creationTimestamp"}),
    )
    expected = stamp(epoch(created["metadata"]["creationTimestamp"]) + HOUR)
    obj = await wait_for(
        kube,
        CONFIGMAPS,
        namespace,
        "cm",
        lambda o: DELETE_AT in annotations_of(o),
        what="delete-at",
    )
    assert annotations_of(obj)[DELETE_AT] == expected
    assert DELETE_AFTER not in annotations_of(obj)

    # With a delete-at in place, a re-added delete-after (any value) is dropped, deadline kept.
    await patch(
        kube, CONFIGMAPS, namespace, "cm", {"metadata": {"annotations": {DELETE_AFTER: "5m"}}}
    )
    obj = await wait_for(
        kube,
        CONFIGMAPS,
        namespace,
        "cm",
        lambda o: DELETE_AFTER not in annotations_of(o),
        what="the redundant delete-after to be removed",
    )
    annotations = annotations_of(obj)
    assert annotations[DELETE_AT] == expected
    assert annotations[MANAGED_BY] == CONTROLLER
    assert await events_of(kube, namespace, "cm") == []


async def test_as_13_bogus_reference_point_falls_back_once(
    start_controller: StartController, namespace: str
) -> None:
    # docs/behaviour.md#repeated-warnings changes AS-13: the fallback warning is sent once
    # per object and value, not on every conversion.
    running = await start_for(start_controller, namespace)
    kube = running.kube
    before = int(time.time())
    await create(
        kube,
        CONFIGMAPS,
        namespace,
        configmap("cm", **{DELETE_AFTER: "1h", REFERENCE_POINT: "bogus"}),
    )
    obj = await wait_for(
        kube,
        CONFIGMAPS,
        namespace,
        "cm",
        lambda o: DELETE_AT in annotations_of(o),
        what="delete-at",
    )
    first = annotations_of(obj)[DELETE_AT]
    assert before + HOUR <= epoch(first) <= int(time.time()) + HOUR
    warning = (
        "Warning",
        "InvalidAnnotationValue",
        "Invalid value for lifecycle.cezary.dev/reference-point: 'bogus', "
        "falling back to 'applyTimestamp'",
    )
    assert await events_of(kube, namespace, "cm") == [warning]

    # A second conversion with the same bogus value converts again without a second warning.
    await patch(
        kube, CONFIGMAPS, namespace, "cm", {"metadata": {"annotations": {DELETE_AFTER: "2h"}}}
    )
    obj = await wait_for(
        kube,
        CONFIGMAPS,
        namespace,
        "cm",
        lambda o: DELETE_AFTER not in annotations_of(o),
        what="the second conversion",
    )
    assert epoch(annotations_of(obj)[DELETE_AT]) >= before + 2 * HOUR
    # Another value is another warning.
    await patch(
        kube,
        CONFIGMAPS,
        namespace,
        "cm",
        {"metadata": {"annotations": {DELETE_AFTER: "3h", REFERENCE_POINT: "Bogus"}}},
    )
    events = await wait_event(kube, namespace, "cm", "InvalidAnnotationValue")

    async def two_warnings() -> bool:
        events[:] = await events_of(kube, namespace, "cm")
        return len(events) == 2

    await eventually(two_warnings, within=10, what="the warning about the new value")
    assert events[0] == warning
    assert events[1] == (warning[0], warning[1], warning[2].replace("'bogus'", "'Bogus'"))
    series = [e.get("series") for e in await list_events(kube, namespace, "cm")]
    assert series == [None, None]


async def test_as_14_restart_after_converts_like_delete_after(
    start_controller: StartController, namespace: str
) -> None:
    running = await start_for(start_controller, namespace, "configmaps", "deployments.apps")
    kube = running.kube
    before = int(time.time())
    await create(kube, DEPLOYMENTS, namespace, deployment("apply", {RESTART_AFTER: "1h"}))
    created = await create(
        kube,
        DEPLOYMENTS,
        namespace,
        deployment("created", {RESTART_AFTER: "1h", REFERENCE_POINT: "creationTimestamp"}),
    )
    await create(
        kube,
        DEPLOYMENTS,
        namespace,
        deployment("bogus", {RESTART_AFTER: "1h", REFERENCE_POINT: "x"}),
    )
    await create(kube, CONFIGMAPS, namespace, configmap("cm", **{RESTART_AFTER: "1h"}))

    def converted(obj: dict[str, Any]) -> bool:
        return RESTART_AT in annotations_of(obj)

    results = {
        name: await wait_for(
            kube, DEPLOYMENTS, namespace, name, converted, what=f"{name} restart-at"
        )
        for name in ("apply", "created", "bogus")
    }
    after = int(time.time())
    for name, obj in results.items():
        annotations = annotations_of(obj)
        assert RESTART_AFTER not in annotations, name
        assert annotations[MANAGED_BY] == CONTROLLER, name
        template = obj["spec"]["template"]["metadata"].get("annotations") or {}
        assert RESTARTED_AT not in template, name
        assert MANAGED_BY not in template, name
        if name != "created":
            assert before + HOUR <= epoch(annotations[RESTART_AT]) <= after + HOUR, name
    creation = epoch(created["metadata"]["creationTimestamp"])
    assert annotations_of(results["created"])[RESTART_AT] == stamp(creation + HOUR)
    assert await events_of(kube, namespace, "bogus") == [
        (
            "Warning",
            "InvalidAnnotationValue",
            "Invalid value for lifecycle.cezary.dev/reference-point: 'x', "
            "falling back to 'applyTimestamp'",
        )
    ]

    # creationTimestamp with an existing restart-at: a re-added restart-after is dropped.
    kept = annotations_of(results["created"])[RESTART_AT]
    await patch(
        kube,
        DEPLOYMENTS,
        namespace,
        "created",
        {"metadata": {"annotations": {RESTART_AFTER: "5m"}}},
    )
    obj = await wait_for(
        kube,
        DEPLOYMENTS,
        namespace,
        "created",
        lambda o: RESTART_AFTER not in annotations_of(o),
        what="the redundant restart-after to be removed",
    )
    assert annotations_of(obj)[RESTART_AT] == kept

    # Only supported kinds: a ConfigMap's restart-after stays unconverted.
    events = await wait_event(kube, namespace, "cm", "UnsupportedRestartKind")
    assert events == [
        (
            "Warning",
            "UnsupportedRestartKind",
            "Restart requires an apps Deployment, StatefulSet, or DaemonSet; no action taken",
        )
    ]
    assert annotations_of(await read(kube, CONFIGMAPS, namespace, "cm")) == {RESTART_AFTER: "1h"}


async def test_as_15_unrelated_updates_leave_delete_at_alone(
    start_controller: StartController, namespace: str
) -> None:
    running = await start_for(start_controller, namespace)
    kube = running.kube
    await create(kube, CONFIGMAPS, namespace, configmap("cm", **{DELETE_AFTER: "3s"}))
    obj = await wait_for(
        kube,
        CONFIGMAPS,
        namespace,
        "cm",
        lambda o: DELETE_AT in annotations_of(o),
        what="delete-at",
    )
    deadline = annotations_of(obj)[DELETE_AT]
    for edit in (
        {"metadata": {"labels": {"team": "a"}}},
        {"data": {"k": "changed"}},
        {"metadata": {"annotations": {"example.com/other": "x"}}},
        {"metadata": {"annotations": {MANAGED_BY: "someone-else"}}},
    ):
        obj = await patch(kube, CONFIGMAPS, namespace, "cm", edit)
        assert annotations_of(obj)[DELETE_AT] == deadline
    await wait_gone(kube, CONFIGMAPS, namespace, "cm")
    assert time.time() >= epoch(deadline)
    assert await wait_event(kube, namespace, "cm", "Deleted") == [
        ("Normal", "Deleted", f"Resource deleted based on delete-at annotation: {deadline}")
    ]


# --------------------------------------------------------------------------- deletion


async def test_as_16_due_delete_at_deletes(
    start_controller: StartController, namespace: str
) -> None:
    running = await start_for(start_controller, namespace)
    kube = running.kube
    now = stamp(time.time())  # "≤ now" is inclusive: this second is already due
    await create(kube, CONFIGMAPS, namespace, configmap("past", **{DELETE_AT: PAST}))
    await create(kube, CONFIGMAPS, namespace, configmap("now", **{DELETE_AT: now}))
    for name, value in (("past", PAST), ("now", now)):
        await wait_gone(kube, CONFIGMAPS, namespace, name)
        events = await wait_event(kube, namespace, name, "Deleted")
        assert events == [
            ("Normal", "Deleted", f"Resource deleted based on delete-at annotation: {value}")
        ]
    assert next_action(running, "delete", "ConfigMap", namespace) is None


async def test_as_17_future_delete_at_waits_for_the_deadline(
    start_controller: StartController, namespace: str
) -> None:
    running = await start_for(start_controller, namespace)
    kube = running.kube
    deadline = deadline_in(3)
    await create(kube, CONFIGMAPS, namespace, configmap("cm", **{DELETE_AT: stamp(deadline)}))

    async def waiting() -> bool:
        return next_action(running, "delete", "ConfigMap", namespace) == deadline

    # Waiting for the deadline can be seen until the deadline itself, however slow the setup.
    await eventually(waiting, within=deadline - time.time(), what="the requeue at the deadline")
    while time.time() < deadline - 0.3:
        assert await read(kube, CONFIGMAPS, namespace, "cm") is not None, "deleted too early"
        await asyncio.sleep(0.1)
    await wait_gone(kube, CONFIGMAPS, namespace, "cm", within=5)
    event = await sole_event(kube, namespace, "cm")
    assert event["reason"] == "Deleted"
    acted = calendar.timegm(time.strptime(event["eventTime"][:19], "%Y-%m-%dT%H:%M:%S"))
    assert deadline <= acted <= deadline + 2, event["eventTime"]


async def test_as_18_conflicts_are_retried_quietly_on_fresh_state(
    start_controller: StartController, namespace: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    # docs/behaviour.md#quiet-conflict-retries changes AS-18: a 409 is retried at once on
    # fresh state (up to a small bound) before any DeletionFailed Warning. Each retry decides
    # again on what it read.
    running = await start_for(start_controller, namespace)
    kube = running.kube
    wrapper = interfere(monkeypatch, running, configmap_edit(kube, label_bump), times=2)
    await create(kube, CONFIGMAPS, namespace, configmap("busy", **{DELETE_AT: PAST}))
    await wait_gone(kube, CONFIGMAPS, namespace, "busy")
    assert (wrapper.calls, wrapper.conflicts) == (3, 2)
    events = await wait_event(kube, namespace, "busy", "Deleted")
    assert events == [
        ("Normal", "Deleted", f"Resource deleted based on delete-at annotation: {PAST}")
    ]


async def test_as_18_retry_after_conflict_decides_on_fresh_state(
    start_controller: StartController, namespace: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Between the read and the DELETE, one object gets dry-run, one a later deadline and one
    is replaced by a new object of the same name: the retry deletes none of them."""
    running = await start_for(start_controller, namespace)
    kube = running.kube
    edits = {
        "dry": configmap_edit(kube, lambda _: {"metadata": {"annotations": {P + "dry-run": "1"}}}),
        "later": configmap_edit(kube, lambda _: {"metadata": {"annotations": {DELETE_AT: FAR}}}),
    }
    replacement: dict[str, str] = {}

    async def replace(namespace: str | None, name: str) -> None:
        await kube.request("DELETE", CONFIGMAPS.object_path(namespace, name))
        created = await create(kube, CONFIGMAPS, namespace or "", configmap(name))
        replacement["uid"] = created["metadata"]["uid"]

    async def edit(namespace: str | None, name: str) -> None:
        await edits.get(name, replace)(namespace, name)

    wrapper = interfere(monkeypatch, running, edit, times=3)
    for name in ("dry", "later", "replaced"):
        await create(kube, CONFIGMAPS, namespace, configmap(name, **{DELETE_AT: PAST}))
    events = await wait_event(kube, namespace, "dry", "DryRunDelete")
    assert events == [("Normal", "DryRunDelete", "Dry-run: Resource would be deleted now.")]

    async def waits_for_new_deadline() -> bool:
        return next_action(running, "delete", "ConfigMap", namespace) == epoch(FAR)

    await eventually(waits_for_new_deadline, within=5, what="the postponed deadline")

    async def all_tried() -> bool:
        # A call is counted when the DELETE is sent, its conflict when the answer is back.
        return wrapper.calls == 3 and wrapper.conflicts >= 3

    await eventually(all_tried, within=5, what="the DELETE of the replaced object")
    assert wrapper.conflicts == 3  # the UID precondition protects the new object
    await idle(running)
    for name in ("dry", "later", "replaced"):
        assert await read(kube, CONFIGMAPS, namespace, name) is not None, name
    replaced = await read(kube, CONFIGMAPS, namespace, "replaced")
    assert replaced is not None
    assert replaced["metadata"]["uid"] == replacement["uid"]
    assert wrapper.calls == 3
    assert await events_of(kube, namespace, "later") == []
    assert await events_of(kube, namespace, "replaced") == []


async def test_spec_2_3_busy_configmap_is_deleted_without_warning(
    start_controller: StartController, namespace: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A task keeps updating a label while the deletion comes due (a busy object)."""
    running = await start_for(start_controller, namespace)
    kube = running.kube
    observer = interfere(monkeypatch, running, configmap_edit(kube, label_bump), times=0)
    await create(kube, CONFIGMAPS, namespace, configmap("busy"))
    edits: list[float] = []  # when each label update landed

    async def race() -> None:
        n = 0
        with contextlib.suppress(NotFound):
            while True:
                n += 1
                await patch(kube, CONFIGMAPS, namespace, "busy", label_bump(n))
                edits.append(time.time())
                await asyncio.sleep(0.02)

    async def busy() -> bool:
        return len(edits) >= 3

    racer = asyncio.create_task(race())
    try:
        await eventually(busy, within=10, interval=0.02, what="the object busy")
        # The deadline starts once the object is busy, however long that took.
        deadline = deadline_in(1)
        due = {"metadata": {"annotations": {DELETE_AT: stamp(deadline)}}}
        await patch(kube, CONFIGMAPS, namespace, "busy", due)
        await wait_gone(kube, CONFIGMAPS, namespace, "busy")
    finally:
        racer.cancel()
        with contextlib.suppress(asyncio.CancelledError):
            await racer
    # The race this test is about: the object was still being updated (every few tens of
    # milliseconds) when its deletion came due.
    assert max(edits) >= deadline - 0.5, "not updated any more when it fell due: no race"
    events = await wait_event(kube, namespace, "busy", "Deleted")
    assert [reason for _, reason, _ in events] == ["Deleted"], (observer.conflicts, events)


async def test_spec_2_3_persistent_conflict_warns_then_retries(
    start_controller: StartController, namespace: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Conflicts beyond the quiet retry bound give DeletionFailed; the backoff retry deletes."""
    running = await start_for(start_controller, namespace)
    kube = running.kube
    bound = 1 + running.controller.pipeline.reconciler.conflict_retries  # type: ignore[union-attr]
    wrapper = interfere(monkeypatch, running, configmap_edit(kube, label_bump), times=bound)
    await create(kube, CONFIGMAPS, namespace, configmap("busy", **{DELETE_AT: PAST}))
    await wait_gone(kube, CONFIGMAPS, namespace, "busy")
    assert (wrapper.calls, wrapper.conflicts) == (bound + 1, bound)
    events = await wait_event(kube, namespace, "busy", "Deleted")
    assert [reason for _, reason, _ in events] == ["DeletionFailed", "Deleted"]
    kind, _, note = events[0]
    assert kind == "Warning"
    assert re.fullmatch(
        r'Failed to delete resource: Operation cannot be fulfilled on ConfigMap "busy": '
        r"the ResourceVersion in the precondition \(\d+\) does not match the ResourceVersion "
        r"in record \(\d+\)\. The object might have been modified",
        note,
    ), note


async def test_as_19_not_found_counts_as_deleted(
    start_controller: StartController, namespace: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    running = await start_for(start_controller, namespace)
    kube = running.kube

    async def delete_first(namespace: str | None, name: str) -> None:
        await kube.request("DELETE", CONFIGMAPS.object_path(namespace, name))

    wrapper = interfere(monkeypatch, running, delete_first, times=1)
    await create(kube, CONFIGMAPS, namespace, configmap("cm", **{DELETE_AT: PAST}))
    events = await wait_event(kube, namespace, "cm", "Deleted")
    assert events == [
        ("Normal", "Deleted", f"Resource deleted based on delete-at annotation: {PAST}")
    ]
    assert wrapper.calls == 1
    assert sample(running, "controller_runtime_reconcile_errors_total", controller="lifecycle") in (
        None,
        0.0,
    )


async def test_as_19_forbidden_warns_and_retries(
    start_controller: StartController, namespace: str, control_plane: ControlPlane
) -> None:
    user = f"as19-{namespace}"
    rules: list[dict[str, Any]] = [
        {
            "apiGroups": [""],
            "resources": ["configmaps"],
            "verbs": ["get", "list", "watch", "patch"],
        },
        {"apiGroups": ["events.k8s.io"], "resources": ["events"], "verbs": ["create", "patch"]},
    ]
    kubeconfig = control_plane.user_kubeconfig(user, namespaced_rules={namespace: rules})
    await start_for(start_controller, namespace, kubeconfig=str(kubeconfig))
    admin = await KubeClient.connect(str(control_plane.admin_kubeconfig))
    async with admin:
        await create(admin, CONFIGMAPS, namespace, configmap("cm", **{DELETE_AT: PAST}))
        events = await wait_event(admin, namespace, "cm", "DeletionFailed")
        assert events[0] == (
            "Warning",
            "DeletionFailed",
            f'Failed to delete resource: configmaps "cm" is forbidden: User "{user}" cannot '
            f'delete resource "configmaps" in API group "" in the namespace "{namespace}"',
        )
        rules[0]["verbs"].append("delete")
        await asyncio.to_thread(
            control_plane.grant,
            {"kind": "User", "apiGroup": "rbac.authorization.k8s.io", "name": user},
            name=f"devcluster:{user}",
            namespaced_rules={namespace: rules},
        )
        await wait_gone(admin, CONFIGMAPS, namespace, "cm", within=20)
        events = await wait_event(admin, namespace, "cm", "Deleted")
        assert {reason for _, reason, _ in events} == {"DeletionFailed", "Deleted"}
        assert events[-1][1] == "Deleted"


async def test_as_20_namespace_deletion_cascades(
    start_controller: StartController, control_plane: ControlPlane
) -> None:
    doomed = f"t-{uuid.uuid4().hex[:10]}-doomed"
    running = await start_controller(watch_resource=["namespaces"], watch_namespace=[doomed])
    kube = running.kube
    try:
        await create(
            kube,
            NAMESPACES,
            None,
            {"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": doomed}},
        )
        await create(kube, CONFIGMAPS, doomed, configmap("content"))
        await patch(
            kube, NAMESPACES, None, doomed, {"metadata": {"annotations": {DELETE_AT: PAST}}}
        )
        events = await wait_event(kube, "default", doomed, "Deleted")
        assert events == [
            ("Normal", "Deleted", f"Resource deleted based on delete-at annotation: {PAST}")
        ]
        (event,) = await list_events(kube, "default", doomed)
        assert event["regarding"]["kind"] == "Namespace"
        assert "namespace" not in event["regarding"]
        await wait_gone(kube, CONFIGMAPS, doomed, "content", within=30)
        await wait_gone(kube, NAMESPACES, None, doomed, within=30)
    finally:
        with contextlib.suppress(NotFound):
            await kube.delete(NAMESPACES, None, doomed)


@pytest.fixture
async def widgets(control_plane: ControlPlane) -> AsyncIterator[ResourceType]:
    """A small namespaced CRD of a fresh group, served and discoverable; removed afterwards."""
    group = f"t{uuid.uuid4().hex[:8]}.lifecycle.test"
    resource = ResourceType(group, "v1", "widgets", "Widget", namespaced=True)
    admin = await KubeClient.connect(str(control_plane.admin_kubeconfig))
    async with admin:
        await create(admin, CRDS, None, crd_manifest(group, "widgets", "Widget"))
        try:

            async def discoverable() -> bool:
                try:
                    listing = await admin.request("GET", f"/apis/{group}/v1")
                except NotFound:
                    return False
                return any(r.get("name") == "widgets" for r in listing.get("resources", []))

            await eventually(discoverable, within=30, what="the CRD to be served")
            yield resource
        finally:
            with contextlib.suppress(NotFound):
                await admin.delete(CRDS, None, f"widgets.{group}")


async def test_as_21_custom_resources_are_deleted(
    start_controller: StartController, namespace: str, widgets: ResourceType
) -> None:
    running = await start_for(start_controller, namespace, widgets.key)
    kube = running.kube
    await create(
        kube,
        widgets,
        namespace,
        {
            "apiVersion": widgets.api_version,
            "kind": "Widget",
            "metadata": {"name": "w", "annotations": {DELETE_AFTER: "1s"}},
            "size": 3,
        },
    )
    await wait_gone(kube, widgets, namespace, "w")
    event = await sole_event(kube, namespace, "w")
    assert event["reason"] == "Deleted"
    assert event["regarding"]["apiVersion"] == widgets.api_version
    assert event["regarding"]["kind"] == "Widget"
    assert re.fullmatch(
        r"Resource deleted based on delete-at annotation: " + SECONDS.pattern, event["note"]
    )


# ---------------------------------------------------------- guards (deliberate differences)


async def test_spec_2_4_terminating_object_is_deleted_once(
    start_controller: StartController, namespace: str
) -> None:
    running = await start_for(start_controller, namespace)
    kube = running.kube
    body = configmap("held", **{DELETE_AT: PAST})
    body["metadata"]["finalizers"] = ["lifecycle.test/hold"]
    await create(kube, CONFIGMAPS, namespace, body)
    try:
        await wait_for(
            kube,
            CONFIGMAPS,
            namespace,
            "held",
            lambda o: "deletionTimestamp" in o["metadata"],
            what="the object to be terminating",
        )
        # An action annotation change enqueues the terminating object again: left alone.
        reconciles = reconcile_count(running)
        await patch(
            kube,
            CONFIGMAPS,
            namespace,
            "held",
            {"metadata": {"annotations": {DELETE_AT: "2020-01-02T00:00:00Z"}}},
        )

        async def reconciled_again() -> bool:
            return reconcile_count(running) > reconciles

        await eventually(reconciled_again, within=5, what="a reconcile of the terminating object")
        assert await events_of(kube, namespace, "held") == [
            ("Normal", "Deleted", f"Resource deleted based on delete-at annotation: {PAST}")
        ]
        assert (await list_events(kube, namespace, "held"))[0].get("series") is None
    finally:
        await patch(kube, CONFIGMAPS, namespace, "held", {"metadata": {"finalizers": None}})


async def test_spec_2_12_max_delete_ttl(start_controller: StartController, namespace: str) -> None:
    running = await start_for(start_controller, namespace, max_delete_ttl="1h")
    kube = running.kube
    far = stamp(time.time() + 2 * HOUR)
    await create(kube, CONFIGMAPS, namespace, configmap("over", **{DELETE_AFTER: "61m"}))
    await create(kube, CONFIGMAPS, namespace, configmap("equal", **{DELETE_AFTER: "1h"}))
    await create(kube, CONFIGMAPS, namespace, configmap("far", **{DELETE_AT: far}))
    await create(kube, CONFIGMAPS, namespace, configmap("past", **{DELETE_AT: PAST}))

    events = await wait_event(kube, namespace, "over", "DeleteTTLExceeded")
    assert events == [
        (
            "Warning",
            "DeleteTTLExceeded",
            'Ignoring lifecycle.cezary.dev/delete-after="61m" because TTL 1h1m0s exceeds '
            "maximum 1h0m0s.",
        )
    ]
    (_, _, note), *rest = await wait_event(kube, namespace, "far", "DeleteTTLExceeded")
    assert rest == []
    assert re.fullmatch(
        rf'Ignoring lifecycle\.cezary\.dev/delete-at="{far}" because TTL '
        r"(1h59m\d+s|2h0m0s) exceeds maximum 1h0m0s\.",  # from creation, whole seconds
        note,
    ), note
    await wait_for(
        kube,
        CONFIGMAPS,
        namespace,
        "equal",
        lambda o: DELETE_AT in annotations_of(o),
        what="the 1h delete-after (equal to the maximum) to convert",
    )
    await wait_gone(kube, CONFIGMAPS, namespace, "past")
    assert annotations_of(await read(kube, CONFIGMAPS, namespace, "over")) == {DELETE_AFTER: "61m"}
    assert annotations_of(await read(kube, CONFIGMAPS, namespace, "far")) == {DELETE_AT: far}


async def test_spec_2_12_delete_budget_throttles(
    start_controller: StartController, namespace: str
) -> None:
    # The bucket starts full at its capacity (1): the first due delete runs, the others wait
    # for a token (a minute away) with one ActionThrottled each and are never dropped.
    running = await start_for(start_controller, namespace, max_deletes_per_minute="1")
    kube = running.kube
    names = ("one", "two", "three")
    for name in names:
        await create(kube, CONFIGMAPS, namespace, configmap(name, **{DELETE_AT: PAST}))
    throttled_note = (
        "The delete is due but waits for the action budget (--max-deletes-per-minute); "
        "it will run as soon as the budget allows."
    )
    outcome: dict[str, list[tuple[str, str, str]]] = {}

    async def settled() -> bool:
        for name in names:
            outcome[name] = await events_of(kube, namespace, name)
        return all(outcome.values())

    await eventually(settled, within=10, what="an Event about each ConfigMap")
    deleted = [
        n
        for n in names
        if outcome[n]
        == [("Normal", "Deleted", f"Resource deleted based on delete-at annotation: {PAST}")]
    ]
    waiting = [n for n in names if outcome[n] == [("Normal", "ActionThrottled", throttled_note)]]
    assert len(deleted) == 1, outcome
    assert len(waiting) == 2, outcome
    assert await read(kube, CONFIGMAPS, namespace, deleted[0]) is None
    for name in waiting:
        assert annotations_of(await read(kube, CONFIGMAPS, namespace, name)) == {DELETE_AT: PAST}
        (event,) = await list_events(kube, namespace, name)
        assert event.get("series") is None
    throttled = sample(
        running, "lifecycle_actions_total", action="delete", kind="ConfigMap", result="throttled"
    )
    assert throttled == 2
