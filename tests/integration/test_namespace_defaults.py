"""Namespace defaults end to end (docs/annotations.md#namespace-defaults).

On the real control plane: a Namespace's ``dry-run: "true"`` makes its objects dry-run (the
Event says so and the object survives) unless the object says ``dry-run: "false"``; its
``max-delete-ttl`` refuses a longer ``delete-after``; changing its annotation re-evaluates the
objects already there; an invalid ``maintenance-window`` on it blocks deletions there and gets
a Warning on the Namespace; and with an exact ``--watch-namespace``, an identity with only
namespaced rights plus get/list/watch on that one Namespace object is enough. ``status``
and ``explain`` name the values that came from the Namespace.
"""

from __future__ import annotations

import asyncio
import re
import time
from typing import Any

import aiohttp

from lifecycle_controller.core import DecisionSettings
from lifecycle_controller.core.objects.scope import ScopeConfig
from lifecycle_controller.devcluster import ControlPlane
from lifecycle_controller.kube import KubeClient
from lifecycle_controller.kube.resources import NAMESPACES
from lifecycle_controller.machinery.clock import RealClock
from lifecycle_controller.tools.explain import explain_object
from lifecycle_controller.tools.status import collect_status
from tests.integration.controller import StartController
from tests.integration.events import events_of, list_events, wait_event
from tests.integration.keys import DELETE_AFTER, DELETE_AT, DRY_RUN, P
from tests.integration.scenario_support import (
    create,
    gone,
    patch,
    reconcile_count,
    settle,
    start_for,
    wait_gone,
)
from tests.integration.support import CONFIGMAPS, configmap, eventually
from tests.integration.timestamps import PAST, deadline_in, stamp

MAINTENANCE_WINDOW = P + "maintenance-window"
MAX_DELETE_TTL = P + "max-delete-ttl"


async def annotate_namespace(kube: KubeClient, namespace: str, **annotations: str | None) -> None:
    await patch(kube, NAMESPACES, None, namespace, {"metadata": {"annotations": annotations}})


async def test_a_namespace_dry_run_makes_its_objects_dry_run_unless_they_say_otherwise(
    start_controller: StartController, namespace: str, kube: KubeClient
) -> None:
    await annotate_namespace(kube, namespace, **{DRY_RUN: "true"})
    await start_for(start_controller, namespace)
    await create(kube, CONFIGMAPS, namespace, configmap("kept", **{DELETE_AT: PAST}))
    await create(
        kube, CONFIGMAPS, namespace, configmap("real", **{DELETE_AT: PAST, DRY_RUN: "false"})
    )
    assert await wait_event(kube, namespace, "kept", "DryRunDelete") == [
        ("Normal", "DryRunDelete", "Dry-run: Resource would be deleted now.")
    ]
    await wait_gone(kube, CONFIGMAPS, namespace, "real", within=15)
    await wait_event(kube, namespace, "real", "Deleted")
    assert not await gone(kube, CONFIGMAPS, namespace, "kept")


async def test_a_namespace_cap_refuses_a_longer_delete_after(
    start_controller: StartController, namespace: str, kube: KubeClient
) -> None:
    await annotate_namespace(kube, namespace, **{MAX_DELETE_TTL: "1h"})
    await start_for(start_controller, namespace, max_delete_ttl="30d")
    await create(kube, CONFIGMAPS, namespace, configmap("long", **{DELETE_AFTER: "2h"}))
    events = await wait_event(kube, namespace, "long", "DeleteTTLExceeded")
    assert events[0][:2] == ("Warning", "DeleteTTLExceeded")
    assert 'delete-after="2h"' in events[0][2]
    assert "1h0m0s" in events[0][2]


async def test_changing_the_namespace_re_evaluates_its_objects(
    start_controller: StartController, namespace: str, kube: KubeClient
) -> None:
    await annotate_namespace(kube, namespace, **{DRY_RUN: "true"})
    await start_for(start_controller, namespace)
    await create(kube, CONFIGMAPS, namespace, configmap("later", **{DELETE_AT: PAST}))
    await wait_event(kube, namespace, "later", "DryRunDelete")
    await annotate_namespace(kube, namespace, **{DRY_RUN: None})
    await wait_gone(kube, CONFIGMAPS, namespace, "later", within=15)
    reasons = [reason for _, reason, _ in await wait_event(kube, namespace, "later", "Deleted")]
    assert reasons == ["DryRunDelete", "Deleted"]


async def test_an_invalid_namespace_window_blocks_deletion_and_warns_on_the_namespace(
    start_controller: StartController, namespace: str, kube: KubeClient
) -> None:
    await annotate_namespace(kube, namespace, **{MAINTENANCE_WINDOW: "whenever"})
    await start_for(start_controller, namespace)
    await create(kube, CONFIGMAPS, namespace, configmap("held", **{DELETE_AT: PAST}))
    warnings: list[dict[str, Any]] = []

    async def warned() -> bool:
        warnings[:] = await list_events(kube, "default", namespace)
        return bool(warnings)

    await eventually(warned, within=15, what="a Warning on the Namespace")
    (warning,) = warnings
    assert (warning["type"], warning["reason"]) == ("Warning", "InvalidAnnotation")
    assert warning["regarding"]["kind"] == "Namespace"
    assert warning["note"].startswith(
        f'Invalid namespace default {MAINTENANCE_WINDOW}="whenever": '
    )
    await settle(2.0)
    assert not await gone(kube, CONFIGMAPS, namespace, "held")
    assert await events_of(kube, namespace, "held") == []
    # Fixing the Namespace lets the deletion through.
    await annotate_namespace(kube, namespace, **{MAINTENANCE_WINDOW: "Mon-Sun 00:00-24:00 UTC"})
    await wait_gone(kube, CONFIGMAPS, namespace, "held", within=15)


async def test_namespaced_rights_plus_reading_that_namespace_suffice(
    start_controller: StartController, namespace: str, kube: KubeClient, control_plane: ControlPlane
) -> None:
    await annotate_namespace(kube, namespace, **{DRY_RUN: "true"})
    user = f"nsdefaults-{namespace}"
    rules: list[dict[str, Any]] = [
        {
            "apiGroups": [""],
            "resources": ["configmaps"],
            "verbs": ["get", "list", "watch", "patch", "delete"],
        },
        {"apiGroups": ["events.k8s.io"], "resources": ["events"], "verbs": ["create", "patch"]},
    ]
    reading: list[dict[str, Any]] = [
        {
            "apiGroups": [""],
            "resources": ["namespaces"],
            "resourceNames": [namespace],
            "verbs": ["get", "list", "watch"],
        }
    ]
    kubeconfig = await asyncio.to_thread(
        control_plane.user_kubeconfig,
        user,
        cluster_rules=reading,
        namespaced_rules={namespace: rules},
    )
    running = await start_for(start_controller, namespace, kubeconfig=str(kubeconfig))
    store = running.controller.pipeline.namespaces if running.controller.pipeline else None
    assert store is not None
    defaults = store.get(namespace)
    assert defaults is not None  # read with just those rights, not "unavailable"
    assert defaults.dry_run is True
    await create(kube, CONFIGMAPS, namespace, configmap("kept", **{DELETE_AT: PAST}))
    await wait_event(kube, namespace, "kept", "DryRunDelete")
    assert not await gone(kube, CONFIGMAPS, namespace, "kept")


async def test_status_and_explain_name_the_namespace_defaults(
    namespace: str, kube: KubeClient
) -> None:
    await annotate_namespace(kube, namespace, **{DRY_RUN: "true"})
    await create(kube, CONFIGMAPS, namespace, configmap("shown", **{DELETE_AT: PAST}))
    report = await collect_status(
        kube,
        scope=ScopeConfig(watch_resources=("configmaps",)),
        clock=RealClock(),
        settings=DecisionSettings(),
        namespace=namespace,
    )
    (row,) = report.rows
    assert row.dry_run is True
    assert row.inherited == [f"dry-run: true (from namespace {namespace})"]
    explained = await explain_object(
        kube,
        "configmap/shown",
        namespace=namespace,
        scope=ScopeConfig(),
        settings=DecisionSettings(),
        now_ns=RealClock().now_ns(),
    )
    assert explained.dry_run == f"yes (namespace {namespace})"
    assert explained.inherited == [f"dry-run: true (from namespace {namespace})"]


async def test_a_refused_delete_at_stays_refused_after_its_deadline_and_a_restart(
    start_controller: StartController, namespace: str, kube: KubeClient
) -> None:
    # docs/behaviour.md#max-delete-ttl: a refusal never expires by itself. Before the fix the
    # TTL was measured from the pass, so a controller started after the deadline deleted it.
    await annotate_namespace(kube, namespace, **{MAX_DELETE_TTL: "5s"})
    first = await start_for(start_controller, namespace)
    due = deadline_in(10)
    value = stamp(due)
    await create(kube, CONFIGMAPS, namespace, configmap("capped", **{DELETE_AT: value}))
    (warning,) = await wait_event(kube, namespace, "capped", "DeleteTTLExceeded")
    assert warning[0] == "Warning"
    assert warning[2].endswith(
        f"exceeds maximum 5s set by the max-delete-ttl annotation of Namespace {namespace}."
    ), warning
    # The TTL is what was left from the refusing pass, in whole seconds (rounded up): over
    # the maximum (it was refused) and at most the lead and the second that rounding adds,
    # however late that pass came on a loaded machine.
    ttl = re.search(r"because TTL (\d+)s ", warning[2])
    assert ttl is not None, warning
    assert 5 < int(ttl[1]) <= 11, warning
    await first.stop()
    await asyncio.sleep(max(0.0, due - time.time()) + 1.0)  # the deadline is past

    second = await start_for(start_controller, namespace)

    reconciles = 0.0

    async def reconciled() -> bool:
        return reconcile_count(second) > reconciles

    await eventually(reconciled, within=15, what="a reconcile after the restart")
    await settle(1.0)
    assert not await gone(kube, CONFIGMAPS, namespace, "capped"), "deleted after the restart"
    # A Namespace change re-evaluates it: still refused.
    reconciles = reconcile_count(second)
    await annotate_namespace(kube, namespace, **{MAX_DELETE_TTL: "6s"})
    await eventually(reconciled, within=15, what="a re-evaluation after the Namespace change")
    await settle(2.0)
    assert not await gone(kube, CONFIGMAPS, namespace, "capped")
    assert {r for _, r, _ in await events_of(kube, namespace, "capped")} == {"DeleteTTLExceeded"}
    explained = await explain_object(
        kube,
        "configmap/capped",
        namespace=namespace,
        scope=ScopeConfig(),
        settings=DecisionSettings(),
        now_ns=RealClock().now_ns(),
    )
    assert [p.split(":", 1)[0] for p in explained.problems] == ["DeleteTTLExceeded"]


async def test_a_watched_namespace_that_does_not_exist_shows_on_readyz(
    start_controller: StartController, namespace: str, kube: KubeClient
) -> None:
    missing = f"{namespace}-nothing-here"
    running = await start_controller(
        watch_resource=["configmaps"], watch_namespace=[namespace, missing]
    )
    probes = running.controller.probes
    assert probes is not None
    assert probes.port is not None
    async with (
        aiohttp.ClientSession() as http,
        http.get(f"http://127.0.0.1:{probes.port}/readyz") as response,
    ):
        assert response.status == 200
        assert (
            f"[!]watched namespace {missing} does not exist (--watch-namespace)"
            in (await response.text()).splitlines()
        )
