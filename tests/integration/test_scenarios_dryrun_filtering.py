"""Scenarios AS-46 … AS-56 (docs/acceptance-scenarios.md) on the real controller and API server.

Per-action catch-up defaults, dry-run (global flag and annotation), conflicting families, and
the watch-event filter. Dry-run scenarios wait for the Event the contract names and then check
that nothing was written (the controller's field manager owns no field) and nothing requeued
(``workqueue_retries_total`` stays 0).

The filter scenarios count enqueues (``workqueue_adds_total``) around one API change at a
time. A barrier makes the count exact: after the change, the test edits a label of a sentinel
object of the same type and waits until the controller's metadata cache holds the sentinel's
new resourceVersion. Watch events of one type arrive in order and the informer calls the
enqueue handler synchronously with its cache update, so by then the change under test has been
either enqueued or dropped.
"""

from __future__ import annotations

import time
from collections.abc import Awaitable, Callable, Mapping
from typing import Any

from lifecycle_controller.core.objects.resources import ObjectKey
from lifecycle_controller.kube import ResourceType
from tests.integration.controller import RunningController, StartController
from tests.integration.events import events_of, wait_event
from tests.integration.keys import (
    CATCH_UP,
    CRON_TIMEZONE,
    DELETE_AFTER,
    DELETE_AT,
    DRY_RUN,
    LAST_RESTART,
    MANAGED_BY,
    REFERENCE_POINT,
    RESTART_AFTER,
    RESTART_AT,
    RESTART_CRON,
    RESTART_EVERY,
    RESTARTED_AT,
)
from tests.integration.scenario_support import (
    annotations_of,
    create,
    idle,
    lifecycle_annotations,
    patch,
    queue_adds,
    read,
    reconcile_count,
    requeues,
    start_for,
    wait_gone,
    written_by_controller,
)
from tests.integration.support import CONFIGMAPS, DEPLOYMENTS, configmap, deployment, eventually
from tests.integration.timestamps import FAR, HOUR, PAST, epoch

DRY_DELETE_NOW = ("Normal", "DryRunDelete", "Dry-run: Resource would be deleted now.")
DRY_RESTART_NOW = ("Normal", "DryRunRestart", "Dry-run: Resource would be restarted now.")


def workload(name: str, annotations: Mapping[str, str]) -> dict[str, Any]:
    """A Deployment with no replicas: a real Pod template, without Pod churn."""
    body = deployment(name, dict(annotations))
    body["spec"]["replicas"] = 0
    return body


def marker(obj: dict[str, Any] | None) -> str | None:
    assert obj is not None, "the object is gone"
    template = obj["spec"]["template"]["metadata"].get("annotations") or {}
    value = template.get(RESTARTED_AT)
    return value if isinstance(value, str) else None


async def assert_no_writes(
    running: RunningController,
    namespace: str,
    expected: Mapping[str, tuple[ResourceType, Mapping[str, str]]],
) -> None:
    """Every object keeps exactly its lifecycle annotations and was never written by us."""
    for name, (resource, wanted) in expected.items():
        obj = await read(running.kube, resource, namespace, name)
        assert lifecycle_annotations(obj) == dict(wanted), name
        assert not written_by_controller(obj), name
        if resource is DEPLOYMENTS:
            assert marker(obj) is None, name


# --------------------------------------------------------------------------- AS-46


async def test_as_46_per_action_catch_up_defaults(
    start_controller: StartController, namespace: str
) -> None:
    running = await start_for(
        start_controller,
        namespace,
        "configmaps",
        "deployments.apps",
        delete_catch_up="never",
        restart_catch_up="always",
    )
    kube = running.kube
    await create(kube, CONFIGMAPS, namespace, configmap("delete-default", **{DELETE_AT: PAST}))
    await create(
        kube,
        CONFIGMAPS,
        namespace,
        configmap("delete-override", **{DELETE_AT: PAST, CATCH_UP: "always"}),
    )
    await create(kube, DEPLOYMENTS, namespace, workload("restart-default", {RESTART_AT: PAST}))
    await create(
        kube,
        DEPLOYMENTS,
        namespace,
        workload("restart-override", {RESTART_AT: PAST, CATCH_UP: "never"}),
    )

    def skipped(action: str) -> tuple[str, str, str]:
        message = f"Skipped {action} scheduled at {PAST} under the catch-up policy."
        return ("Normal", "ActionSkipped", message)

    # --delete-catch-up=never: a deadline first seen overdue is skipped; the object stays.
    assert await wait_event(kube, namespace, "delete-default", "ActionSkipped") == [
        skipped("delete")
    ]
    obj = await read(kube, CONFIGMAPS, namespace, "delete-default")
    assert lifecycle_annotations(obj) == {MANAGED_BY: "lifecycle-controller"}
    # ... and the annotation overrides it for that object.
    await wait_gone(kube, CONFIGMAPS, namespace, "delete-override")
    # --restart-catch-up=always: the overdue restart runs.
    assert await wait_event(kube, namespace, "restart-default", "RestartTriggered") == [
        ("Normal", "RestartTriggered", "Updated Pod template for a restart request")
    ]
    obj = await read(kube, DEPLOYMENTS, namespace, "restart-default")
    assert marker(obj) is not None
    assert RESTART_AT not in annotations_of(obj)
    # ... and the annotation overrides it: skipped, no marker, catch-up kept.
    assert await wait_event(kube, namespace, "restart-override", "ActionSkipped") == [
        skipped("restart")
    ]
    obj = await read(kube, DEPLOYMENTS, namespace, "restart-override")
    assert marker(obj) is None
    assert lifecycle_annotations(obj) == {CATCH_UP: "never", MANAGED_BY: "lifecycle-controller"}


# --------------------------------------------------------------------------- AS-47 … AS-51


async def test_as_47_dry_run_due_delete(start_controller: StartController, namespace: str) -> None:
    running = await start_for(start_controller, namespace, dry_run=True)
    kube = running.kube
    await create(kube, CONFIGMAPS, namespace, configmap("cm", **{DELETE_AT: PAST}))
    assert await wait_event(kube, namespace, "cm", "DryRunDelete") == [DRY_DELETE_NOW]
    await assert_no_writes(running, namespace, {"cm": (CONFIGMAPS, {DELETE_AT: PAST})})
    assert requeues(running) == 0


async def test_as_48_dry_run_relative_timers(
    start_controller: StartController, namespace: str
) -> None:
    running = await start_for(
        start_controller, namespace, "configmaps", "deployments.apps", dry_run=True
    )
    kube = running.kube
    before = int(time.time())
    await create(kube, CONFIGMAPS, namespace, configmap("cm", **{DELETE_AFTER: "1h"}))
    await create(kube, DEPLOYMENTS, namespace, workload("web", {RESTART_AFTER: "1h"}))
    (delete_event,) = await wait_event(kube, namespace, "cm", "DryRunDelete")
    (restart_event,) = await wait_event(kube, namespace, "web", "DryRunRestart")
    after = int(time.time())
    for event, text in (
        (delete_event, "Dry-run: Resource would be scheduled for deletion at "),
        (restart_event, "Dry-run: Resource would be scheduled for restart at "),
    ):
        assert event[0] == "Normal"
        assert event[2].startswith(text), event
        assert event[2].endswith(".")
        deadline = epoch(event[2][len(text) : -1])
        assert before + HOUR <= deadline <= after + HOUR
    await assert_no_writes(
        running,
        namespace,
        {"cm": (CONFIGMAPS, {DELETE_AFTER: "1h"}), "web": (DEPLOYMENTS, {RESTART_AFTER: "1h"})},
    )
    assert requeues(running) == 0


async def test_as_49_dry_run_recurring(start_controller: StartController, namespace: str) -> None:
    running = await start_for(start_controller, namespace, "deployments.apps", dry_run=True)
    kube = running.kube
    objects = {
        "every-new": {RESTART_EVERY: "1m"},
        "cron-new": {RESTART_CRON: "0 3 * * *"},
        "every-due": {RESTART_EVERY: "1m", LAST_RESTART: "2020-01-01T00:00:00Z"},
    }
    for name, values in objects.items():
        await create(kube, DEPLOYMENTS, namespace, workload(name, values))
    assert await wait_event(kube, namespace, "every-due", "DryRunRestart") == [DRY_RESTART_NOW]

    async def all_reconciled() -> bool:
        return reconcile_count(running) >= len(objects)

    await eventually(all_reconciled, within=10, what="a reconcile of every Deployment")
    # Initialization in dry-run: no anchor written and no Event at all.
    assert await events_of(kube, namespace, "every-new") == []
    assert await events_of(kube, namespace, "cron-new") == []
    await assert_no_writes(
        running, namespace, {name: (DEPLOYMENTS, values) for name, values in objects.items()}
    )
    assert requeues(running) == 0
    assert reconcile_count(running) == len(objects)


async def test_as_50_dry_run_skip(start_controller: StartController, namespace: str) -> None:
    running = await start_for(
        start_controller, namespace, "configmaps", "deployments.apps", dry_run=True
    )
    kube = running.kube
    objects: dict[str, tuple[ResourceType, dict[str, str]]] = {
        "late-window": (CONFIGMAPS, {DELETE_AT: PAST, CATCH_UP: "15m"}),
        "late-never": (CONFIGMAPS, {DELETE_AT: PAST, CATCH_UP: "never"}),
        "restart-window": (DEPLOYMENTS, {RESTART_AT: PAST, CATCH_UP: "15m"}),
        "recurring-never": (
            DEPLOYMENTS,
            {RESTART_EVERY: "1m", LAST_RESTART: PAST, CATCH_UP: "never"},
        ),
    }
    for name, (resource, values) in objects.items():
        body = configmap(name, **values) if resource is CONFIGMAPS else workload(name, values)
        await create(kube, resource, namespace, body)

    def would_skip(action: str, when: str) -> tuple[str, str, str]:
        message = f"Dry-run: Would skip {action} scheduled at {when} under the catch-up policy."
        return ("Normal", "DryRunActionSkipped", message)

    expected = {
        "late-window": would_skip("delete", PAST),
        "late-never": would_skip("delete", PAST),
        "restart-window": would_skip("restart", PAST),
        # The first missed occurrence after the anchor.
        "recurring-never": would_skip("restart", "2020-01-01T00:01:00Z"),
    }
    for name, event in expected.items():
        assert await wait_event(kube, namespace, name, "DryRunActionSkipped") == [event], name
    await assert_no_writes(running, namespace, objects)
    assert requeues(running) == 0
    assert len(running.controller.ledger) == 0


async def test_as_51_global_dry_run_beats_annotation_false(
    start_controller: StartController, namespace: str
) -> None:
    running = await start_for(start_controller, namespace, dry_run=True)
    kube = running.kube
    annotations = {DELETE_AT: PAST, DRY_RUN: "false"}
    await create(kube, CONFIGMAPS, namespace, configmap("cm", **annotations))
    assert await wait_event(kube, namespace, "cm", "DryRunDelete") == [DRY_DELETE_NOW]
    await assert_no_writes(running, namespace, {"cm": (CONFIGMAPS, annotations)})


# --------------------------------------------------------------------------- AS-52, AS-53


async def test_as_52_both_families_conflict(
    start_controller: StartController, namespace: str
) -> None:
    running = await start_for(start_controller, namespace, "configmaps", "deployments.apps")
    kube = running.kube
    deletes = {DELETE_AT: PAST, DELETE_AFTER: "1s"}
    restarts = {
        RESTART_AT: PAST,
        RESTART_AFTER: "1s",
        RESTART_CRON: "* * * * *",
        RESTART_EVERY: "1m",
    }
    objects: dict[str, tuple[ResourceType, dict[str, str]]] = {}
    for d, (delete_key, delete_value) in enumerate(deletes.items()):
        for r, (restart_key, restart_value) in enumerate(restarts.items()):
            annotations = {delete_key: delete_value, restart_key: restart_value}
            await create(kube, DEPLOYMENTS, namespace, workload(f"mix-{d}-{r}", annotations))
            objects[f"mix-{d}-{r}"] = (DEPLOYMENTS, annotations)
    annotations = {DELETE_AFTER: "1s", RESTART_AT: PAST}
    await create(kube, CONFIGMAPS, namespace, configmap("cm", **annotations))
    objects["cm"] = (CONFIGMAPS, annotations)
    warning = (
        "Warning",
        "ConflictingAnnotations",
        "Resource has both delete and restart annotations.",
    )
    for name in objects:
        assert await wait_event(kube, namespace, name, "ConflictingAnnotations") == [warning], name
    await assert_no_writes(running, namespace, objects)
    assert requeues(running) == 0


async def test_as_53_modifiers_are_not_action_keys(
    start_controller: StartController, namespace: str
) -> None:
    running = await start_for(start_controller, namespace)
    kube = running.kube
    modifiers = {
        "anchor": {LAST_RESTART: PAST},
        "zone": {CRON_TIMEZONE: "Europe/Warsaw"},
        "policy": {CATCH_UP: "always"},
        "all": {LAST_RESTART: PAST, CRON_TIMEZONE: "UTC", CATCH_UP: "1h", REFERENCE_POINT: ""},
    }
    for name, extra in modifiers.items():
        await create(kube, CONFIGMAPS, namespace, configmap(name, **{DELETE_AFTER: "1s", **extra}))
    for name, extra in modifiers.items():
        await wait_gone(kube, CONFIGMAPS, namespace, name)
        reasons = [reason for _, reason, _ in await wait_event(kube, namespace, name, "Deleted")]
        stray_zone = CRON_TIMEZONE in extra
        assert reasons == (["IgnoredAnnotation", "Deleted"] if stray_zone else ["Deleted"]), name


# --------------------------------------------------------------------------- AS-54 … AS-56


class Barrier:
    """Waits until the controller has handled every earlier watch event of one type.

    The sentinel carries an action annotation (so the controller caches it) whose decision is
    a far-future wait; label edits on it are never enqueued themselves.
    """

    def __init__(self, running: RunningController, namespace: str, resource: ResourceType) -> None:
        self._running = running
        self._namespace = namespace
        self._resource = resource
        self._name = f"sentinel-{resource.resource}"
        self._count = 0

    async def create(self) -> None:
        annotations = {DELETE_AT: FAR} if self._resource is CONFIGMAPS else {RESTART_AT: FAR}
        body = (
            configmap(self._name, **annotations)
            if self._resource is CONFIGMAPS
            else workload(self._name, annotations)
        )
        await create(self._running.kube, self._resource, self._namespace, body)
        await self.wait()

    async def wait(self) -> None:
        self._count += 1
        edited = await patch(
            self._running.kube,
            self._resource,
            self._namespace,
            self._name,
            {"metadata": {"labels": {"barrier": str(self._count)}}},
        )
        version = edited["metadata"]["resourceVersion"]
        pipeline = self._running.controller.pipeline
        assert pipeline is not None
        key = ObjectKey(self._resource, self._namespace, self._name)

        async def seen() -> bool:
            cached = pipeline.reconciler.cache.get(key)
            # Other writers (kube-controller-manager) may have moved it on since; on this
            # etcd-backed server resourceVersions are increasing integers.
            return cached is not None and int(cached.resource_version) >= int(version)

        await eventually(seen, within=10, interval=0.02, what="the barrier edit in the cache")


Change = Callable[[], Awaitable[Any]]


async def enqueues(running: RunningController, barrier: Barrier, change: Change) -> float:
    """How many enqueues one API change caused (0 or 1)."""
    await idle(running)
    before = queue_adds(running)
    await change()
    await barrier.wait()
    return queue_adds(running) - before


async def test_as_54_objects_without_actions_are_never_reconciled(
    start_controller: StartController, namespace: str
) -> None:
    running = await start_for(start_controller, namespace)
    kube = running.kube
    barrier = Barrier(running, namespace, CONFIGMAPS)
    await barrier.create()
    junk = {DRY_RUN: "bogus", CATCH_UP: "Always", CRON_TIMEZONE: "Invalid/Zone"}

    def edit(name: str, body: dict[str, Any]) -> Change:
        return lambda: patch(kube, CONFIGMAPS, namespace, name, body)

    def add(body: dict[str, Any]) -> Change:
        return lambda: create(kube, CONFIGMAPS, namespace, body)

    changes = {
        "create plain": add(configmap("plain")),
        "create with junk modifiers": add(configmap("junk", **junk)),
        "label": edit("junk", {"metadata": {"labels": {"a": "b"}}}),
        "modifier values": edit("junk", {"metadata": {"annotations": {DRY_RUN: "nope"}}}),
        "empty action": edit("junk", {"metadata": {"annotations": {DELETE_AT: ""}}}),
        "data": edit("plain", {"data": {"k": "changed"}}),
        "lifecycle modifiers added": edit("plain", {"metadata": {"annotations": junk}}),
    }
    for what, change in changes.items():
        assert await enqueues(running, barrier, change) == 0, what
    assert await events_of(kube, namespace, "junk") == []
    assert await events_of(kube, namespace, "plain") == []
    # An action makes the invalid dry-run matter: one enqueue and its Warning.
    action = edit("junk", {"metadata": {"annotations": {DELETE_AT: PAST}}})
    assert await enqueues(running, barrier, action) == 1
    await wait_event(kube, namespace, "junk", "InvalidAnnotationValue")


async def test_as_55_unrelated_changes_do_not_reconcile(
    start_controller: StartController, namespace: str
) -> None:
    running = await start_for(start_controller, namespace, "configmaps", "deployments.apps")
    kube = running.kube
    configmaps = Barrier(running, namespace, CONFIGMAPS)
    deployments = Barrier(running, namespace, DEPLOYMENTS)
    await configmaps.create()
    await deployments.create()
    await create(kube, CONFIGMAPS, namespace, configmap("cm", **{DELETE_AT: FAR}))
    await create(kube, DEPLOYMENTS, namespace, deployment("web", {RESTART_AT: FAR}))
    await configmaps.wait()
    await deployments.wait()

    def edit(resource: ResourceType, name: str, body: dict[str, Any]) -> Change:
        return lambda: patch(kube, resource, namespace, name, body)

    dropped = {
        "data": edit(CONFIGMAPS, "cm", {"data": {"k": "changed"}}),
        "labels": edit(CONFIGMAPS, "cm", {"metadata": {"labels": {"a": "b"}}}),
        "managed-by": edit(CONFIGMAPS, "cm", {"metadata": {"annotations": {MANAGED_BY: "x"}}}),
        "catch-up": edit(CONFIGMAPS, "cm", {"metadata": {"annotations": {CATCH_UP: "never"}}}),
        "other annotation": edit(CONFIGMAPS, "cm", {"metadata": {"annotations": {"a.io/b": "c"}}}),
    }
    for what, change in dropped.items():
        assert await enqueues(running, configmaps, change) == 0, what
    image = {"spec": {"template": {"spec": {"containers": [{"name": "app", "image": "x:2"}]}}}}
    spec_changes = {
        "template": edit(DEPLOYMENTS, "web", image),
        "replicas": edit(DEPLOYMENTS, "web", {"spec": {"replicas": 2}}),
        "labels": edit(DEPLOYMENTS, "web", {"metadata": {"labels": {"a": "b"}}}),
    }
    for what, change in spec_changes.items():
        assert await enqueues(running, deployments, change) == 0, what
    # kube-controller-manager's status and revision updates were dropped too; an action
    # value change still passes.
    later = {"metadata": {"annotations": {RESTART_AT: "2998-01-01T00:00:00Z"}}}
    assert await enqueues(running, deployments, edit(DEPLOYMENTS, "web", later)) == 1
    assert await events_of(kube, namespace, "cm") == []


# Test 40 of the reference (the predicate table), replayed through the API: the old state
# is created, then one merge patch moves it to the new state. Renames cannot happen in the
# API and are covered by tests/core/test_relevance.py.
ACTION = {DELETE_AT: PAST}
AFTER = {DELETE_AFTER: "1h"}
EVERY = {RESTART_EVERY: "1h"}
CRON = {RESTART_CRON: "0 3 * * *"}
ANCHOR = {LAST_RESTART: PAST}
TABLE: list[tuple[str, dict[str, str] | None, dict[str, Any], bool]] = [
    ("spec change", ACTION, {"data": {"k": "changed"}}, False),
    ("label change", ACTION, {"metadata": {"labels": {"a": "b"}}}, False),
    ("unrelated annotation", ACTION, {"metadata": {"annotations": {"a.io/b": "c"}}}, False),
    ("action added", {"a.io/b": "c"}, {"metadata": {"annotations": ACTION}}, True),
    ("annotations appear", None, {"metadata": {"annotations": ACTION}}, True),
    ("action value changed", ACTION, {"metadata": {"annotations": {DELETE_AT: FAR}}}, True),
    ("action removed", ACTION, {"metadata": {"annotations": {DELETE_AT: None}}}, True),
    ("dry-run changed", ACTION, {"metadata": {"annotations": {DRY_RUN: "false"}}}, True),
    ("dry-run removed", {**ACTION, DRY_RUN: "1"}, {"metadata": {"annotations": {DRY_RUN: None}}},
     True),
    ("reference-point next to delete-after", AFTER,
     {"metadata": {"annotations": {REFERENCE_POINT: "creationTimestamp"}}}, True),
    ("reference-point next to delete-at only", ACTION,
     {"metadata": {"annotations": {REFERENCE_POINT: "creationTimestamp"}}}, False),
    ("reference-point changed as delete-after is removed", AFTER,
     {"metadata": {"annotations": {REFERENCE_POINT: "creationTimestamp", DELETE_AFTER: None,
                                   **ACTION}}}, True),
    ("cron-timezone next to restart-cron", CRON,
     {"metadata": {"annotations": {CRON_TIMEZONE: "Europe/Warsaw"}}}, True),
    ("cron-timezone without cron", EVERY,
     {"metadata": {"annotations": {CRON_TIMEZONE: "Europe/Warsaw"}}}, False),
    ("last-restart-timestamp added next to every", EVERY, {"metadata": {"annotations": ANCHOR}},
     True),
    ("last-restart-timestamp removed next to cron", {**CRON, **ANCHOR},
     {"metadata": {"annotations": {LAST_RESTART: None}}}, True),
    ("last-restart-timestamp next to restart-at", {RESTART_AT: FAR},
     {"metadata": {"annotations": ANCHOR}}, False),
    ("last-restart-timestamp next to delete-after", AFTER, {"metadata": {"annotations": ANCHOR}},
     False),
    ("managed-by added", ACTION,
     {"metadata": {"annotations": {MANAGED_BY: "lifecycle-controller"}}}, False),
    ("catch-up changed", ACTION, {"metadata": {"annotations": {CATCH_UP: "never"}}}, False),
    ("no action on either side, even an invalid dry-run", {},
     {"metadata": {"annotations": {DRY_RUN: "bogus"}}}, False),
    ("empty action added", {}, {"metadata": {"annotations": {DELETE_AT: ""}}}, False),
]  # fmt: skip


async def test_as_56_reference_predicate_table_through_the_api(
    start_controller: StartController, namespace: str
) -> None:
    # Global dry-run: no decision writes, so each case's only watch event is the test's own.
    running = await start_for(start_controller, namespace, dry_run=True)
    kube = running.kube
    barrier = Barrier(running, namespace, CONFIGMAPS)
    await barrier.create()
    for index, (_, old, _, _) in enumerate(TABLE):
        body = configmap(f"case-{index}", **(old or {}))
        if old is None:
            del body["metadata"]["annotations"]
        await create(kube, CONFIGMAPS, namespace, body)
    await barrier.wait()
    outcome = {}
    for index, (what, _, change, _) in enumerate(TABLE):

        async def edit(name: str = f"case-{index}", body: dict[str, Any] = change) -> Any:
            return await patch(kube, CONFIGMAPS, namespace, name, body)

        outcome[what] = await enqueues(running, barrier, edit) == 1
    assert outcome == {what: expected for what, _, _, expected in TABLE}
