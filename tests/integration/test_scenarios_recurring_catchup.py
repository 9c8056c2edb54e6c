"""Recurring and catch-up scenarios AS-29 … AS-45 (docs/acceptance-scenarios.md), end to end.

Each test starts the real controller in-process, scoped to its own namespace, and acts only
through the real API server. Recurring schedules cannot be waited for (``restart-every`` is at
least 1m), so due occurrences are produced by writing a past ``last-restart-timestamp``
anchor ourselves (for example now - 1h - 5s with ``restart-every: 1h``); one-time actions use
timestamps a few seconds ahead or in the past. The ``never`` policy's in-memory ledger is
observed through the controller's ``ledger`` to know an occurrence was armed before it is due.

Shared helpers: tests/integration/scenario_support.py, faults.py and events.py.
"""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable
from datetime import UTC, date, datetime, time, timedelta
from typing import Any
from zoneinfo import ZoneInfo

import pytest

from lifecycle_controller.core import ObjectKey
from lifecycle_controller.devcluster import ControlPlane
from lifecycle_controller.kube import KubeClient, ResourceType
from tests.integration.controller import RunningController, StartController
from tests.integration.events import event_records, reasons, wait_for_event
from tests.integration.faults import (
    MODIFIED,
    committed,
    conflicting_writer,
    lag_cache,
    spy_writes,
)
from tests.integration.keys import (
    CATCH_UP,
    CONTROLLER,
    CRON_TIMEZONE,
    DELETE_AFTER,
    DELETE_AT,
    DRY_RUN,
    LAST_RESTART,
    MANAGED_BY,
    REFERENCE_POINT,
    RESTART_AT,
    RESTART_CRON,
    RESTART_EVERY,
    RESTARTED_AT,
)
from tests.integration.scenario_support import (
    cached,
    get,
    gone,
    lifecycle_annotations,
    next_action,
    settle,
    start_for,
    template_annotations,
    wait_gone,
    wait_restarted,
    workload,
)
from tests.integration.support import CONFIGMAPS, DEPLOYMENTS, configmap, eventually
from tests.integration.timestamps import (
    NANO_FORMAT,
    from_now,
    now_ns,
    parse_utc,
    rfc3339,
    rfc3339_nano,
)

NS = 1_000_000_000
HOUR_NS = 3600 * NS
DEPLOY = ["deployments.apps"]
BOTH = ["configmaps", "deployments.apps"]


def skipped(action: str, scheduled: str) -> tuple[str, str, str]:
    return (
        "Normal",
        "ActionSkipped",
        f"Skipped {action} scheduled at {scheduled} under the catch-up policy.",
    )


def next_restart_at(running: RunningController, namespace: str) -> float | None:
    """``lifecycle_next_action_timestamp_seconds{action="restart",kind="Deployment",namespace}``."""
    return next_action(running, "restart", "Deployment", namespace)


def armed(running: RunningController, kind: str, namespace: str, name: str) -> bool:
    """Whether the controller's ``never`` ledger holds an arm for the object."""
    group = "apps" if kind == "Deployment" else ""
    return (
        running.controller.ledger.peek(
            ObjectKey.for_kind(group=group, version="v1", kind=kind, namespace=namespace, name=name)
        )
        is not None
    )


async def wait_armed(
    running: RunningController, kind: str, namespace: str, name: str, *, within: float = 10
) -> None:
    async def check() -> bool:
        return armed(running, kind, namespace, name)

    await eventually(check, within=within, interval=0.05, what=f"an armed {kind} {name}")


async def wait_until(moment: datetime) -> None:
    """Sleep until the wall clock has passed ``moment`` (a scenario's due time)."""
    delay = (moment - datetime.now(UTC)).total_seconds()
    if delay > 0:
        await asyncio.sleep(delay + 0.2)


async def wait_annotations(
    kube: KubeClient,
    resource: ResourceType,
    namespace: str,
    name: str,
    condition: Callable[[dict[str, str]], bool],
    *,
    what: str,
) -> dict[str, str]:
    """The object's lifecycle annotations once ``condition`` holds for them."""
    seen: list[dict[str, str]] = []

    async def check() -> bool:
        seen[:] = [lifecycle_annotations(await get(kube, resource, namespace, name))]
        return condition(seen[0])

    await eventually(check, within=15, what=what)
    return seen[0]


async def assert_not_restarted(kube: KubeClient, namespace: str, name: str) -> None:
    obj = await get(kube, DEPLOYMENTS, namespace, name)
    assert RESTARTED_AT not in template_annotations(obj)


# ------------------------------------------------------------------------------- recurring


async def test_as_29_restart_every_initializes_the_anchor_without_restarting(
    start_controller: StartController, namespace: str, kube: KubeClient
) -> None:
    running = await start_for(start_controller, namespace, *DEPLOY)
    before = datetime.now(UTC)
    await kube.create(
        DEPLOYMENTS, namespace, workload("Deployment", "web", {RESTART_EVERY: "1h"}, replicas=0)
    )
    found = await wait_annotations(
        kube, DEPLOYMENTS, namespace, "web", lambda a: LAST_RESTART in a, what="the anchor"
    )
    anchor = found[LAST_RESTART]
    assert NANO_FORMAT.match(anchor)
    assert before - timedelta(milliseconds=1) <= parse_utc(anchor) <= datetime.now(UTC)
    assert found == {RESTART_EVERY: "1h", LAST_RESTART: anchor, MANAGED_BY: CONTROLLER}
    obj = await get(kube, DEPLOYMENTS, namespace, "web")
    assert template_annotations(obj) == {}  # no restart, no template managed-by

    async def scheduled() -> bool:
        return next_restart_at(running, namespace) is not None

    await eventually(scheduled, within=5, what="the next restart time")
    expected = parse_utc(anchor).timestamp() + 3600
    assert next_restart_at(running, namespace) == pytest.approx(expected, abs=1e-3)
    assert await reasons(kube, namespace, "web") == []


async def test_as_30_due_interval_restarts_once_on_the_grid(
    start_controller: StartController,
    namespace: str,
    kube: KubeClient,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    running = await start_for(start_controller, namespace, *DEPLOY)
    writes = spy_writes(monkeypatch, running)
    anchor_ns = now_ns() - HOUR_NS - 5 * NS - 123_456_789  # sub-second part kept on the grid
    await kube.create(
        DEPLOYMENTS,
        namespace,
        workload(
            "Deployment",
            "web",
            {RESTART_EVERY: "1h", LAST_RESTART: rfc3339_nano(anchor_ns)},
            replicas=0,
        ),
    )
    obj = await wait_restarted(kube, DEPLOYMENTS, namespace, "web")
    assert lifecycle_annotations(obj)[LAST_RESTART] == rfc3339_nano(anchor_ns + HOUR_NS)

    async def scheduled() -> bool:
        return next_restart_at(running, namespace) is not None

    await eventually(scheduled, within=5, what="the next restart time")
    expected = (anchor_ns + 2 * HOUR_NS) / NS
    assert next_restart_at(running, namespace) == pytest.approx(expected, abs=1e-3)

    # A second pass at (practically) the same now does nothing: dry-run "false" is a change
    # the predicate passes, so it reconciles the object again.
    await kube.merge_patch(
        DEPLOYMENTS, namespace, "web", {"metadata": {"annotations": {DRY_RUN: "false"}}}
    )
    await settle()
    [restart] = committed(writes.to("web"))
    assert "spec" in restart.body
    again = await get(kube, DEPLOYMENTS, namespace, "web")
    assert template_annotations(again)[RESTARTED_AT] == template_annotations(obj)[RESTARTED_AT]
    assert await reasons(kube, namespace, "web") == ["RestartTriggered"]


async def test_as_31_due_cron_restarts_once_and_anchors_at_now(
    start_controller: StartController, namespace: str, kube: KubeClient
) -> None:
    running = await start_for(start_controller, namespace, *DEPLOY)
    before = datetime.now(UTC)
    await kube.create(
        DEPLOYMENTS,
        namespace,
        workload(
            "Deployment",
            "web",
            {RESTART_CRON: "* * * * *", LAST_RESTART: rfc3339_nano(now_ns() - 120 * NS)},
            replicas=0,
        ),
    )
    obj = await wait_restarted(kube, DEPLOYMENTS, namespace, "web")
    anchor = lifecycle_annotations(obj)[LAST_RESTART]
    assert NANO_FORMAT.match(anchor)
    assert before - timedelta(seconds=1) <= parse_utc(anchor) <= datetime.now(UTC)

    async def scheduled() -> bool:
        return next_restart_at(running, namespace) is not None

    await eventually(scheduled, within=5, what="the next restart time")
    next_minute = (int(parse_utc(anchor).timestamp()) // 60 + 1) * 60
    assert next_restart_at(running, namespace) == next_minute
    await settle(0.5)
    assert await reasons(kube, namespace, "web") == ["RestartTriggered"]


async def test_as_32_invalid_anchor_blocks_until_the_user_fixes_it(
    start_controller: StartController,
    namespace: str,
    kube: KubeClient,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    running = await start_for(start_controller, namespace, *DEPLOY)
    writes = spy_writes(monkeypatch, running)
    await kube.create(
        DEPLOYMENTS,
        namespace,
        workload("Deployment", "web", {RESTART_EVERY: "1h", LAST_RESTART: "garbage"}, replicas=0),
    )
    event = await wait_for_event(kube, namespace, "web", "InvalidState")
    assert (event.type, event.note) == (
        "Warning",
        'Could not parse last-restart-timestamp: parsing time "garbage" as '
        '"2006-01-02T15:04:05Z07:00": cannot parse "garbage" as "2006"',
    )
    await settle()
    assert writes.writes == []
    obj = await get(kube, DEPLOYMENTS, namespace, "web")
    assert lifecycle_annotations(obj) == {RESTART_EVERY: "1h", LAST_RESTART: "garbage"}

    anchor_ns = now_ns() - HOUR_NS - 5 * NS
    await kube.merge_patch(
        DEPLOYMENTS,
        namespace,
        "web",
        {"metadata": {"annotations": {LAST_RESTART: rfc3339_nano(anchor_ns)}}},
    )
    fixed = await wait_restarted(kube, DEPLOYMENTS, namespace, "web")
    assert lifecycle_annotations(fixed)[LAST_RESTART] == rfc3339_nano(anchor_ns + HOUR_NS)


def next_wall_time(after: datetime, zone: ZoneInfo, wall: time) -> datetime:
    """Our DST policy for a daily wall time: a gap runs at its end, an overlap runs once."""
    day: date = after.astimezone(zone).date()
    while True:
        local = datetime.combine(day, wall, tzinfo=zone)  # fold=0: the first of an overlap
        instant = local.astimezone(UTC)
        if instant.astimezone(zone).replace(tzinfo=None) != local.replace(tzinfo=None):
            # in a spring-forward gap (one hour from 02:00 in Europe): its end, 03:00 local
            instant = datetime.combine(day, time(wall.hour + 1), tzinfo=zone).astimezone(UTC)
        if instant > after:
            return instant
        day += timedelta(days=1)


async def test_as_33_warsaw_cron_initializes_and_schedules_the_next_local_run(
    start_controller: StartController, namespace: str, kube: KubeClient
) -> None:
    # AS-33 itself (our DST policy: Warsaw `30 2 * * *` runs at 03:00 local on the spring-forward
    # day and once, at the first 02:30, on the fall-back day) needs those calendar days; it is
    # covered with an injected clock in tests/core/test_cron.py
    # (test_as_33_warsaw_spring_forward_runs_at_three_and_fall_back_runs_once) and
    # tests/core/test_decide.py (test_as_33_warsaw_spring_forward_restart_runs_at_three_local).
    # Here: the zone is accepted by the live controller and the next run is 02:30 Warsaw time.
    running = await start_for(start_controller, namespace, *DEPLOY)
    await kube.create(
        DEPLOYMENTS,
        namespace,
        workload(
            "Deployment",
            "web",
            {RESTART_CRON: "30 2 * * *", CRON_TIMEZONE: "Europe/Warsaw"},
            replicas=0,
        ),
    )
    found = await wait_annotations(
        kube, DEPLOYMENTS, namespace, "web", lambda a: LAST_RESTART in a, what="the anchor"
    )

    async def scheduled() -> bool:
        return next_restart_at(running, namespace) is not None

    await eventually(scheduled, within=5, what="the next restart time")
    expected = next_wall_time(
        parse_utc(found[LAST_RESTART]), ZoneInfo("Europe/Warsaw"), time(2, 30)
    )
    assert next_restart_at(running, namespace) == expected.timestamp()
    await assert_not_restarted(kube, namespace, "web")
    assert await reasons(kube, namespace, "web") == []


async def test_as_34_a_day_of_missed_minutes_is_one_restart(
    start_controller: StartController,
    namespace: str,
    kube: KubeClient,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    running = await start_for(start_controller, namespace, *DEPLOY)
    writes = spy_writes(monkeypatch, running)
    anchor_ns = now_ns() - 24 * HOUR_NS - 5 * NS
    await kube.create(
        DEPLOYMENTS,
        namespace,
        workload(
            "Deployment",
            "web",
            {RESTART_EVERY: "1m", LAST_RESTART: rfc3339_nano(anchor_ns)},
            replicas=0,
        ),
    )
    obj = await wait_restarted(kube, DEPLOYMENTS, namespace, "web")
    assert lifecycle_annotations(obj)[LAST_RESTART] == rfc3339_nano(anchor_ns + 24 * HOUR_NS)
    await settle()
    restarts = [w for w in committed(writes.to("web")) if "spec" in w.body]
    assert len(restarts) == 1
    assert [(e.reason, e.count) for e in await event_records(kube, namespace, "web")] == [
        ("RestartTriggered", 1)
    ]


# -------------------------------------------------------------------------------- catch-up


async def test_as_35_always_executes_however_late(
    start_controller: StartController, namespace: str, kube: KubeClient
) -> None:
    await start_for(start_controller, namespace, *BOTH)
    long_ago = "2020-01-01T00:00:00Z"
    await kube.create(
        CONFIGMAPS, namespace, configmap("cm", **{DELETE_AT: long_ago, CATCH_UP: "always"})
    )
    await kube.create(
        DEPLOYMENTS,
        namespace,
        workload("Deployment", "web", {RESTART_AT: long_ago, CATCH_UP: "always"}, replicas=0),
    )
    await wait_gone(kube, CONFIGMAPS, namespace, "cm", within=15)
    await wait_restarted(kube, DEPLOYMENTS, namespace, "web")
    deleted = await wait_for_event(kube, namespace, "cm", "Deleted")
    assert deleted.note == f"Resource deleted based on delete-at annotation: {long_ago}"
    # Recurring occurrences coalesce into one restart: see AS-34.


async def test_as_36_duration_window_executes_late_actions_and_skips_too_late_ones(
    start_controller: StartController, namespace: str, kube: KubeClient
) -> None:
    await start_for(start_controller, namespace, *BOTH)
    late = rfc3339(from_now(-5))
    too_late = rfc3339(from_now(-7200))
    await kube.create(CONFIGMAPS, namespace, configmap("late", **{DELETE_AT: late, CATCH_UP: "1h"}))
    await kube.create(
        CONFIGMAPS, namespace, configmap("too-late", **{DELETE_AT: too_late, CATCH_UP: "1h"})
    )
    await kube.create(
        DEPLOYMENTS,
        namespace,
        workload("Deployment", "web", {RESTART_AT: too_late, CATCH_UP: "1h"}, replicas=0),
    )

    await wait_gone(kube, CONFIGMAPS, namespace, "late", within=15)
    for name, action in (("too-late", "delete"), ("web", "restart")):
        event = await wait_for_event(kube, namespace, name, "ActionSkipped")
        assert (event.type, event.reason, event.note) == skipped(action, too_late)
    cm = await get(kube, CONFIGMAPS, namespace, "too-late")  # kept
    assert lifecycle_annotations(cm) == {CATCH_UP: "1h", MANAGED_BY: CONTROLLER}
    web = await get(kube, DEPLOYMENTS, namespace, "web")
    assert lifecycle_annotations(web) == {CATCH_UP: "1h", MANAGED_BY: CONTROLLER}
    assert RESTARTED_AT not in template_annotations(web)


#: What a controller needs cluster-wide to read the lifecycle policies and write their status.
POLICY_READER_RULES: list[dict[str, Any]] = [
    {
        "apiGroups": ["lifecycle.cezary.dev"],
        "resources": ["clusterlifecyclepolicies", "lifecyclepolicies"],
        "verbs": ["get", "list", "watch"],
    },
    {
        "apiGroups": ["lifecycle.cezary.dev"],
        "resources": ["clusterlifecyclepolicies/status", "lifecyclepolicies/status"],
        "verbs": ["patch"],
    },
]


def controller_rules(*, delete: bool) -> list[dict[str, Any]]:
    """What a controller of ConfigMaps needs in its namespace, with or without delete."""
    verbs = ["get", "list", "watch", "patch"] + (["delete"] if delete else [])
    return [
        {"apiGroups": [""], "resources": ["configmaps"], "verbs": verbs},
        {"apiGroups": ["", "events.k8s.io"], "resources": ["events"], "verbs": ["create", "patch"]},
    ]


def controller_without_delete(control_plane: ControlPlane, namespace: str) -> str:
    """A least-privilege controller identity whose deletes are Forbidden (an API failure)."""
    user = control_plane.user_kubeconfig(
        f"ctl-{namespace}", namespaced_rules={namespace: controller_rules(delete=False)}
    )
    return str(user)


def allow_delete(control_plane: ControlPlane, namespace: str) -> None:
    """The API "recovers": the identity from :func:`controller_without_delete` may delete."""
    user = f"ctl-{namespace}"
    control_plane.grant(
        {"kind": "User", "apiGroup": "rbac.authorization.k8s.io", "name": user},
        name=f"devcluster:{user}",
        namespaced_rules={namespace: controller_rules(delete=True)},
    )


async def wait_deletion_failed(kube: KubeClient, namespace: str, name: str) -> None:
    event = await wait_for_event(kube, namespace, name, "DeletionFailed")
    assert event.type == "Warning"
    assert event.note.startswith("Failed to delete resource: ")
    assert "forbidden" in event.note.lower()


async def test_as_37_a_retry_after_an_api_failure_past_the_window_skips(
    start_controller: StartController, control_plane: ControlPlane, namespace: str, kube: KubeClient
) -> None:
    kubeconfig = controller_without_delete(control_plane, namespace)
    await start_for(start_controller, namespace, "configmaps", kubeconfig=kubeconfig)
    due = rfc3339(datetime.now(UTC))
    await kube.create(CONFIGMAPS, namespace, configmap("cm", **{DELETE_AT: due, CATCH_UP: "2s"}))
    await wait_deletion_failed(kube, namespace, "cm")  # within the window, but forbidden
    await wait_until(parse_utc(due) + timedelta(seconds=3))
    allow_delete(control_plane, namespace)

    event = await wait_for_event(kube, namespace, "cm", "ActionSkipped", within=30)
    assert (event.type, event.reason, event.note) == skipped("delete", due)
    cm = await get(kube, CONFIGMAPS, namespace, "cm")  # not deleted: the window did not reset
    assert DELETE_AT not in lifecycle_annotations(cm)


async def test_as_38_duration_window_recurring_restarts_recent_and_skips_stale(
    start_controller: StartController, namespace: str, kube: KubeClient
) -> None:
    now = datetime.now(UTC)
    if now.month == 1 and now.day == 1 and now.hour == 0:
        pytest.skip("the yearly cron's occurrence is recent right now")
    await start_for(start_controller, namespace, *DEPLOY)
    recent_ns = now_ns() - HOUR_NS - 5 * NS
    stale_ns = now_ns() - HOUR_NS - 600 * NS
    cases = {
        "every-recent": {RESTART_EVERY: "1h", LAST_RESTART: rfc3339_nano(recent_ns)},
        "every-stale": {RESTART_EVERY: "1h", LAST_RESTART: rfc3339_nano(stale_ns)},
        "cron-recent": {
            RESTART_CRON: "* * * * *",
            LAST_RESTART: rfc3339_nano(now_ns() - 600 * NS),
            CATCH_UP: "2m",
        },
        "cron-stale": {RESTART_CRON: "0 0 1 1 *", LAST_RESTART: "2020-06-01T00:00:00Z"},
    }
    before = datetime.now(UTC)
    for name, notes in cases.items():
        notes.setdefault(CATCH_UP, "1m")
        await kube.create(DEPLOYMENTS, namespace, workload("Deployment", name, notes, replicas=0))

    every_recent = await wait_restarted(kube, DEPLOYMENTS, namespace, "every-recent")
    assert lifecycle_annotations(every_recent)[LAST_RESTART] == rfc3339_nano(recent_ns + HOUR_NS)
    cron_recent = await wait_restarted(kube, DEPLOYMENTS, namespace, "cron-recent")
    assert parse_utc(lifecycle_annotations(cron_recent)[LAST_RESTART]) >= before

    grid_point = rfc3339_nano(stale_ns + HOUR_NS)
    event = await wait_for_event(kube, namespace, "every-stale", "ActionSkipped")
    assert (event.type, event.reason, event.note) == skipped("restart", grid_point)
    every_stale = await get(kube, DEPLOYMENTS, namespace, "every-stale")
    assert lifecycle_annotations(every_stale) == {
        RESTART_EVERY: "1h",
        LAST_RESTART: grid_point,  # the grid point, cadence kept
        CATCH_UP: "1m",
        MANAGED_BY: CONTROLLER,
    }
    event = await wait_for_event(kube, namespace, "cron-stale", "ActionSkipped")
    assert (event.type, event.reason, event.note) == skipped("restart", "2021-01-01T00:00:00Z")
    cron_stale = lifecycle_annotations(await get(kube, DEPLOYMENTS, namespace, "cron-stale"))
    assert cron_stale[RESTART_CRON] == "0 0 1 1 *"
    assert before <= parse_utc(cron_stale[LAST_RESTART]) <= datetime.now(UTC)  # now
    for name in ("every-stale", "cron-stale"):
        await assert_not_restarted(kube, namespace, name)


async def test_as_39_never_executes_occurrences_observed_before_due(
    start_controller: StartController, namespace: str, kube: KubeClient
) -> None:
    # Also the control case of the controller-restart test below: same objects, one process.
    running = await start_for(
        start_controller, namespace, *BOTH, delete_catch_up="never", restart_catch_up="never"
    )
    due = from_now(3)
    await kube.create(CONFIGMAPS, namespace, configmap("at", **{DELETE_AT: rfc3339(due)}))
    await kube.create(CONFIGMAPS, namespace, configmap("after", **{DELETE_AFTER: "3s"}))
    await kube.create(
        DEPLOYMENTS,
        namespace,
        workload("Deployment", "web", {RESTART_AT: rfc3339(due)}, replicas=0),
    )
    for kind, name in (("ConfigMap", "at"), ("ConfigMap", "after"), ("Deployment", "web")):
        await wait_armed(running, kind, namespace, name)  # observed (or converted) before due

    await wait_gone(kube, CONFIGMAPS, namespace, "at", within=15)
    await wait_gone(kube, CONFIGMAPS, namespace, "after", within=15)
    await wait_restarted(kube, DEPLOYMENTS, namespace, "web")
    assert await reasons(kube, namespace, "at") == ["Deleted"]
    assert await reasons(kube, namespace, "after") == ["Deleted"]
    assert await reasons(kube, namespace, "web") == ["RestartTriggered"]


async def test_as_39_never_arm_survives_api_errors(
    start_controller: StartController, control_plane: ControlPlane, namespace: str, kube: KubeClient
) -> None:
    kubeconfig = controller_without_delete(control_plane, namespace)
    await start_for(start_controller, namespace, "configmaps", kubeconfig=kubeconfig)
    due = from_now(2)
    await kube.create(
        CONFIGMAPS, namespace, configmap("cm", **{DELETE_AT: rfc3339(due), CATCH_UP: "never"})
    )
    await wait_deletion_failed(kube, namespace, "cm")
    allow_delete(control_plane, namespace)
    await eventually(lambda: gone(kube, CONFIGMAPS, namespace, "cm"), within=30, what="deletion")
    assert "ActionSkipped" not in await reasons(kube, namespace, "cm")


async def test_as_40_never_skips_overdue_occurrences_first_seen(
    start_controller: StartController, namespace: str, kube: KubeClient
) -> None:
    await start_for(start_controller, namespace, *BOTH, restart_catch_up="never")
    long_ago = "2020-01-01T00:00:00Z"
    anchor_ns = now_ns() - HOUR_NS - 5 * NS
    await kube.create(
        CONFIGMAPS, namespace, configmap("cm", **{DELETE_AT: long_ago, CATCH_UP: "never"})
    )
    await kube.create(
        DEPLOYMENTS, namespace, workload("Deployment", "once", {RESTART_AT: long_ago}, replicas=0)
    )
    await kube.create(
        DEPLOYMENTS,
        namespace,
        workload(
            "Deployment",
            "every",
            {RESTART_EVERY: "1h", LAST_RESTART: rfc3339_nano(anchor_ns)},
            replicas=0,
        ),
    )
    expectations = {
        "cm": skipped("delete", long_ago),
        "once": skipped("restart", long_ago),
        "every": skipped("restart", rfc3339_nano(anchor_ns + HOUR_NS)),
    }
    for name, expected in expectations.items():
        event = await wait_for_event(kube, namespace, name, "ActionSkipped")
        assert (event.type, event.reason, event.note) == expected
    assert lifecycle_annotations(await get(kube, CONFIGMAPS, namespace, "cm")) == {
        CATCH_UP: "never",
        MANAGED_BY: CONTROLLER,
    }
    assert lifecycle_annotations(await get(kube, DEPLOYMENTS, namespace, "once")) == {
        MANAGED_BY: CONTROLLER
    }
    every = lifecycle_annotations(await get(kube, DEPLOYMENTS, namespace, "every"))
    assert every[LAST_RESTART] == rfc3339_nano(anchor_ns + HOUR_NS)  # skipped, anchor advanced
    for name in ("once", "every"):
        await assert_not_restarted(kube, namespace, name)


async def test_as_40_never_skips_after_a_controller_restart(
    start_controller: StartController, namespace: str, kube: KubeClient
) -> None:
    flags: dict[str, Any] = {"watch_resource": BOTH, "watch_namespace": [namespace]}
    first = await start_controller(**flags)
    due = from_now(3)
    never = {CATCH_UP: "never"}
    await kube.create(CONFIGMAPS, namespace, configmap("cm", **{DELETE_AT: rfc3339(due)}, **never))
    await kube.create(
        DEPLOYMENTS,
        namespace,
        workload("Deployment", "web", {RESTART_AT: rfc3339(due), **never}, replicas=0),
    )
    await wait_armed(first, "ConfigMap", namespace, "cm")
    await wait_armed(first, "Deployment", namespace, "web")
    await first.stop()  # every arm is lost with the process
    await wait_until(due)

    second = await start_controller(**flags)
    for name, action in (("cm", "delete"), ("web", "restart")):
        event = await wait_for_event(kube, namespace, name, "ActionSkipped")
        assert (event.type, event.reason, event.note) == skipped(action, rfc3339(due))
    assert lifecycle_annotations(await get(kube, CONFIGMAPS, namespace, "cm")) == {
        **never,
        MANAGED_BY: CONTROLLER,
    }
    web = await get(kube, DEPLOYMENTS, namespace, "web")
    assert lifecycle_annotations(web) == {**never, MANAGED_BY: CONTROLLER}
    assert RESTARTED_AT not in template_annotations(web)
    assert len(second.controller.ledger) == 0


async def test_as_41_never_changed_identity_does_not_reuse_the_arm(
    start_controller: StartController, namespace: str, kube: KubeClient
) -> None:
    running = await start_for(
        start_controller, namespace, *BOTH, delete_catch_up="never", restart_catch_up="never"
    )
    due = from_now(3)
    await kube.create(CONFIGMAPS, namespace, configmap("value", **{DELETE_AT: rfc3339(due)}))
    await kube.create(CONFIGMAPS, namespace, configmap("policy", **{DELETE_AT: rfc3339(due)}))
    anchor_ns = now_ns() - HOUR_NS + 30 * NS  # due in 30 s
    await kube.create(
        DEPLOYMENTS,
        namespace,
        workload(
            "Deployment",
            "anchor",
            {RESTART_EVERY: "1h", LAST_RESTART: rfc3339_nano(anchor_ns)},
            replicas=0,
        ),
    )
    await wait_armed(running, "ConfigMap", namespace, "value")
    await wait_armed(running, "ConfigMap", namespace, "policy")
    await wait_armed(running, "Deployment", namespace, "anchor")

    # 1. the deadline value changes to one already past
    past = rfc3339(from_now(-1))
    await patch_annotations(kube, CONFIGMAPS, namespace, "value", {DELETE_AT: past})
    # 2. the anchor changes so that an occurrence is overdue
    new_anchor_ns = now_ns() - HOUR_NS - 5 * NS
    await patch_annotations(
        kube, DEPLOYMENTS, namespace, "anchor", {LAST_RESTART: rfc3339_nano(new_anchor_ns)}
    )
    # 3. the policy is toggled to always (reconciled: dry-run "false" passes the predicate,
    #    catch-up alone does not) and back to never before the deadline
    await patch_annotations(
        kube, CONFIGMAPS, namespace, "policy", {CATCH_UP: "always", DRY_RUN: "false"}
    )

    async def policy_arm_dropped() -> bool:
        return not armed(running, "ConfigMap", namespace, "policy")

    await eventually(policy_arm_dropped, within=5, what="the arm dropped under always")
    await patch_annotations(kube, CONFIGMAPS, namespace, "policy", {CATCH_UP: "never"})

    expectations = {
        "value": skipped("delete", past),
        "anchor": skipped("restart", rfc3339_nano(new_anchor_ns + HOUR_NS)),
        "policy": skipped("delete", rfc3339(due)),
    }
    for name, expected in expectations.items():
        event = await wait_for_event(kube, namespace, name, "ActionSkipped")
        assert (event.type, event.reason, event.note) == expected
    for name in ("value", "policy"):
        assert DELETE_AT not in lifecycle_annotations(await get(kube, CONFIGMAPS, namespace, name))
    await assert_not_restarted(kube, namespace, "anchor")


async def patch_annotations(
    kube: KubeClient,
    resource: ResourceType,
    namespace: str,
    name: str,
    changes: dict[str, str | None],
) -> dict[str, Any]:
    return await kube.merge_patch(resource, namespace, name, {"metadata": {"annotations": changes}})


async def test_as_42_never_unrelated_modifiers_keep_the_arm(
    start_controller: StartController, namespace: str, kube: KubeClient
) -> None:
    running = await start_for(
        start_controller, namespace, *BOTH, delete_catch_up="never", restart_catch_up="never"
    )
    due = from_now(4)
    await kube.create(CONFIGMAPS, namespace, configmap("cm", **{DELETE_AT: rfc3339(due)}))
    await kube.create(
        DEPLOYMENTS,
        namespace,
        workload("Deployment", "web", {RESTART_AT: rfc3339(due)}, replicas=0),
    )
    await wait_armed(running, "ConfigMap", namespace, "cm")
    await wait_armed(running, "Deployment", namespace, "web")
    await patch_annotations(
        kube, CONFIGMAPS, namespace, "cm", {REFERENCE_POINT: "creationTimestamp"}
    )
    await patch_annotations(
        kube,
        DEPLOYMENTS,
        namespace,
        "web",
        {
            REFERENCE_POINT: "creationTimestamp",
            CRON_TIMEZONE: "Europe/Warsaw",
            RESTART_CRON: "0 3 * * *",
            RESTART_EVERY: "1h",
        },
    )
    assert datetime.now(UTC) < due, "the modifiers must land before the deadline"

    await wait_gone(kube, CONFIGMAPS, namespace, "cm", within=15)
    await wait_restarted(kube, DEPLOYMENTS, namespace, "web")
    assert await reasons(kube, namespace, "cm") == ["Deleted"]
    assert await reasons(kube, namespace, "web") == ["RestartTriggered"]


async def test_as_43_never_blocking_states_clear_the_arm(
    start_controller: StartController, namespace: str, kube: KubeClient
) -> None:
    running = await start_for(start_controller, namespace, "configmaps", delete_catch_up="never")
    due = from_now(3)
    for name in ("dry-run", "conflict"):
        await kube.create(CONFIGMAPS, namespace, configmap(name, **{DELETE_AT: rfc3339(due)}))
        await wait_armed(running, "ConfigMap", namespace, name)

    await patch_annotations(kube, CONFIGMAPS, namespace, "dry-run", {DRY_RUN: "maybe"})
    await patch_annotations(
        kube, CONFIGMAPS, namespace, "conflict", {RESTART_AT: "2099-01-01T00:00:00Z"}
    )
    invalid = await wait_for_event(kube, namespace, "dry-run", "InvalidAnnotationValue")
    assert invalid.note == (
        'invalid value "maybe" for lifecycle.cezary.dev/dry-run: '
        "expected a boolean; taking no action"
    )
    conflict = await wait_for_event(kube, namespace, "conflict", "ConflictingAnnotations")
    assert conflict.note == "Resource has both delete and restart annotations."
    for name in ("dry-run", "conflict"):
        assert not armed(running, "ConfigMap", namespace, name)

    await wait_until(due)
    await patch_annotations(kube, CONFIGMAPS, namespace, "dry-run", {DRY_RUN: None})
    await patch_annotations(kube, CONFIGMAPS, namespace, "conflict", {RESTART_AT: None})
    for name in ("dry-run", "conflict"):
        event = await wait_for_event(kube, namespace, name, "ActionSkipped")
        assert (event.type, event.reason, event.note) == skipped("delete", rfc3339(due))
        assert not await gone(kube, CONFIGMAPS, namespace, name)


async def test_as_44_skip_is_guarded_retried_on_fresh_state_and_never_replayed(
    start_controller: StartController,
    namespace: str,
    kube: KubeClient,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    # docs/behaviour.md#quiet-conflict-retries changes AS-44: the 409 is retried at once on
    # fresh state (no ActionSkipFailed).
    # A concurrent edit that postpones the deadline lands between the controller's read and
    # its skip patch: the retry sees the new, future deadline and arms it; the edit is kept.
    running = await start_for(start_controller, namespace, "configmaps", delete_catch_up="never")
    postponed = rfc3339(from_now(3600))
    before_skip: dict[str, Any] = {}

    async def concurrent_edit(method: str, path: str, body: Any) -> None:
        name = path.rsplit("/", 1)[-1]
        if method != "PATCH" or name in before_skip:
            return
        before_skip[name] = cached(running, CONFIGMAPS, namespace, name)
        if name == "edited":
            await patch_annotations(kube, CONFIGMAPS, namespace, name, {DELETE_AT: postponed})

    writes = spy_writes(monkeypatch, running, before=concurrent_edit)
    long_ago = "2020-01-01T00:00:00Z"
    await kube.create(CONFIGMAPS, namespace, configmap("edited", **{DELETE_AT: long_ago}))
    await kube.create(CONFIGMAPS, namespace, configmap("lost", **{DELETE_AT: long_ago}))

    await wait_armed(running, "ConfigMap", namespace, "edited")
    rejected, *rest = writes.to("edited")
    assert rejected.conflict
    assert rejected.body == {
        "metadata": {
            "annotations": {DELETE_AT: None, MANAGED_BY: CONTROLLER},
            "resourceVersion": before_skip["edited"].resource_version,
        }
    }
    assert rest == []
    edited = await get(kube, CONFIGMAPS, namespace, "edited")
    assert lifecycle_annotations(edited) == {DELETE_AT: postponed}  # preserved, not acknowledged
    assert await reasons(kube, namespace, "edited") == []

    # Lost response: the skip of "lost" committed; a retry on the state before it conflicts
    # and the fresh read shows nothing left to skip.
    await wait_for_event(kube, namespace, "lost", "ActionSkipped")
    lag_cache(running, CONFIGMAPS, namespace, "lost", before_skip["lost"], enqueue=True)

    async def replayed() -> bool:
        return len(writes.to("lost")) >= 2

    await eventually(replayed, within=10, what="the replayed skip patch")
    await settle()
    done, replay = writes.to("lost")
    assert done.error is None
    assert replay.conflict
    assert [(e.reason, e.count) for e in await event_records(kube, namespace, "lost")] == [
        ("ActionSkipped", 1)
    ]


async def test_as_44_persistent_conflicts_warn_action_skip_failed_and_keep_the_edit(
    start_controller: StartController,
    namespace: str,
    kube: KubeClient,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    # docs/behaviour.md#quiet-conflict-retries: the reference's Warning ActionSkipFailed
    # comes only after the bounded quiet retries of one pass all conflict; the rate-limited
    # retry then skips on fresh state.
    running = await start_for(start_controller, namespace, "configmaps", delete_catch_up="never")
    writer = conflicting_writer(kube, CONFIGMAPS, namespace, "cm", times=4)
    writes = spy_writes(monkeypatch, running, before=writer)
    long_ago = "2020-01-01T00:00:00Z"
    await kube.create(CONFIGMAPS, namespace, configmap("cm", **{DELETE_AT: long_ago}))

    await wait_for_event(kube, namespace, "cm", "ActionSkipped")
    assert [w.conflict for w in writes.to("cm")] == [True, True, True, True, False]
    records = await event_records(kube, namespace, "cm")
    assert [(e.type, e.reason, e.count) for e in records] == [
        ("Warning", "ActionSkipFailed", 1),
        ("Normal", "ActionSkipped", 1),
    ]
    assert records[0].note.startswith("Could not acknowledge skipped delete: ")
    assert MODIFIED in records[0].note
    cm = await get(kube, CONFIGMAPS, namespace, "cm")
    assert cm["metadata"]["labels"] == {"concurrent": "0"}  # the concurrent edit is kept
    assert DELETE_AT not in lifecycle_annotations(cm)


async def test_as_45_many_objects_in_parallel_all_execute(
    start_controller: StartController, namespace: str, kube: KubeClient
) -> None:
    running = await start_for(
        start_controller, namespace, "configmaps", delete_catch_up="never", workers="8"
    )
    due = from_now(4)
    names = [f"cm-{i:02d}" for i in range(30)]
    creations: list[Awaitable[dict[str, Any]]] = [
        kube.create(CONFIGMAPS, namespace, configmap(name, **{DELETE_AT: rfc3339(due)}))
        for name in names
    ]
    await asyncio.gather(*creations)

    async def all_armed() -> bool:
        return all(armed(running, "ConfigMap", namespace, name) for name in names)

    await eventually(all_armed, within=10, interval=0.05, what="every object armed")
    assert datetime.now(UTC) < due

    async def all_gone() -> bool:
        listing = await kube.request("GET", CONFIGMAPS.collection_path(namespace))
        return not any(item["metadata"]["name"] in names for item in listing["items"])

    await eventually(all_gone, within=20, what="every object deleted")
    assert len(running.controller.ledger) == 0
    for name in names:
        assert await reasons(kube, namespace, name) == ["Deleted"]
