"""Maintenance windows end to end (docs/annotations.md#maintenance-windows).

A restart and a deletion fall due outside their window: each gets one Normal
``ActionDeferred`` naming the opening, nothing is written before it, and both run at the
opening. The window is whole minutes, so the test puts its opening at the next minute
boundary at least ``LEAD`` seconds away and may wait up to about 75 s for it.

The opening is chosen only once the controller is running (its start is the slow and
variable part of the setup on a busy machine), so the objects' own ``maintenance-window``
annotations carry it; the controller's ``--maintenance-window`` flag, which must be given
before it starts, is checked on one more ConfigMap without an annotation: it is deferred to
the flag's window, hours away, and left alone.

The restart carries its own ``maintenance-window`` annotation and ``catch-up: "5s"`` with a
``restart-at`` two seconds away, so it is at least six seconds late at the opening: it still
runs, because lateness is measured from the opening, not from the scheduled time.
Four more ConfigMaps, created latest-due first, are deferred to the same opening: with one
worker their deletions follow their due times, not the order they were seen in.
"""

from __future__ import annotations

import asyncio
import time
from datetime import UTC, datetime, timedelta

import pytest

from lifecycle_controller.core.text.timestamps import parse_rfc3339
from lifecycle_controller.kube import KubeClient
from tests.integration.controller import StartController
from tests.integration.events import events_of, wait_event
from tests.integration.keys import CATCH_UP, DELETE_AT, RESTART_AT, RESTARTED_AT, P
from tests.integration.scenario_support import (
    annotations_of,
    get,
    gone,
    start_for,
    template_annotations,
    wait_gone,
    wait_restarted,
    workload,
)
from tests.integration.support import CONFIGMAPS, DEPLOYMENTS, configmap
from tests.integration.timestamps import PAST, rfc3339

MAINTENANCE_WINDOW = P + "maintenance-window"
#: The opening is at least this many seconds away when the controller is ready and the
#: objects are about to be created (creating them and seeing their Events takes far less).
LEAD = 15
#: How late after the opening the actions may run (requeue + one pass + the API).
SLACK = 3.0


def next_opening(lead: float = LEAD) -> datetime:
    """The first whole minute at least ``lead`` seconds from now (UTC); ``lead`` < 60 s."""
    assert lead < 60, "the next minute or the one after: give a shorter lead"
    now = datetime.now(UTC)
    minute = now.replace(second=0, microsecond=0) + timedelta(minutes=1)
    return minute if (minute - now).total_seconds() >= lead else minute + timedelta(minutes=1)


def window_from(opening: datetime, minutes: int = 10) -> str:
    """A window on every weekday from ``opening`` for ``minutes`` (may run past midnight)."""
    end = opening + timedelta(minutes=minutes)
    return f"Mon-Sun {opening:%H:%M}-{end:%H:%M} UTC"


async def sleep_until(moment: datetime) -> None:
    await asyncio.sleep(max(0.0, (moment - datetime.now(UTC)).total_seconds()))


@pytest.mark.long  # a window's opening
@pytest.mark.timeout(180)
async def test_due_actions_outside_the_window_are_deferred_and_run_at_the_opening(
    start_controller: StartController, namespace: str, kube: KubeClient
) -> None:
    flag_opening = next_opening() + timedelta(hours=6)  # nothing in this test reaches it
    running = await start_for(
        start_controller,
        namespace,
        "configmaps",
        "deployments.apps",
        maintenance_window=window_from(flag_opening),
        workers=1,
    )
    del running
    # Every deadline below is derived from now, after the controller is ready.
    opening = next_opening()
    window = window_from(opening)
    opening_text = rfc3339(opening)
    restart_at = rfc3339(datetime.now(UTC) + timedelta(seconds=2))
    await kube.create(CONFIGMAPS, namespace, configmap("flagged", **{DELETE_AT: PAST}))
    await kube.create(
        DEPLOYMENTS,
        namespace,
        workload(
            "Deployment",
            "web",
            {RESTART_AT: restart_at, CATCH_UP: "5s", MAINTENANCE_WINDOW: window},
            replicas=0,
        ),
    )
    windowed = {MAINTENANCE_WINDOW: window}
    await kube.create(CONFIGMAPS, namespace, configmap("tmp", **{DELETE_AT: PAST}, **windowed))
    ordered = [f"order-{i}" for i in range(4)]
    for i in reversed(range(4)):
        due = f"2021-06-0{i + 1}T00:00:00Z"
        await kube.create(
            CONFIGMAPS, namespace, configmap(ordered[i], **{DELETE_AT: due}, **windowed)
        )
    # The API server's own order of the deletions (Events are written beside the workers,
    # so their eventTimes need not follow the deletions).
    listing = await kube.list_metadata(CONFIGMAPS, namespace=namespace, limit=1)
    watcher = asyncio.create_task(
        _deletions(kube, namespace, listing["metadata"]["resourceVersion"], set(ordered))
    )

    # Nothing happens before the opening. Only the creates above stood between choosing the
    # opening and this check: the deferrals, which take seconds on a loaded machine, are
    # checked after it (they happened before the opening, or nothing would be deferred).
    await sleep_until(opening - timedelta(seconds=1.5))
    assert datetime.now(UTC) < opening, "creating the objects took longer than the lead"
    web = await get(kube, DEPLOYMENTS, namespace, "web")
    assert RESTARTED_AT not in template_annotations(web)
    assert annotations_of(web)[RESTART_AT] == restart_at
    assert not await gone(kube, CONFIGMAPS, namespace, "tmp")

    # At the opening both run, once.
    restarted = await wait_restarted(kube, DEPLOYMENTS, namespace, "web", within=SLACK + 5)
    marker = parse_rfc3339(template_annotations(restarted)[RESTARTED_AT])
    opening_ns = int(opening.timestamp()) * 1_000_000_000
    assert opening_ns <= marker <= opening_ns + int(SLACK * 1e9)
    assert RESTART_AT not in annotations_of(restarted)
    await wait_gone(kube, CONFIGMAPS, namespace, "tmp", within=SLACK + 5)
    assert time.time() <= opening.timestamp() + SLACK + 5

    await wait_event(kube, namespace, "web", "RestartTriggered")
    await wait_event(kube, namespace, "tmp", "Deleted")
    for name, done in (("web", "RestartTriggered"), ("tmp", "Deleted")):
        reasons = [event[1] for event in await events_of(kube, namespace, name)]
        assert reasons == ["ActionDeferred", done], reasons  # once per occurrence, no skip

    # Deferred to one opening, they ran in due-time order (one worker: one at a time).
    for name in ordered:
        await wait_gone(kube, CONFIGMAPS, namespace, name, within=SLACK + 5)
        await wait_event(kube, namespace, name, "Deleted")
    deletions = await asyncio.wait_for(watcher, 10)
    assert [name for name in deletions if name in ordered] == ordered, deletions

    # Each was deferred, once, before the opening, to the opening its window gives.
    for name, action, due, when in (
        ("web", "restart", restart_at, opening_text),
        ("tmp", "delete", PAST, opening_text),
        ("flagged", "delete", PAST, rfc3339(flag_opening)),  # the flag's window
    ):
        seen = await wait_event(kube, namespace, name, "ActionDeferred")
        [deferred] = [event for event in seen if event[1] == "ActionDeferred"]
        assert deferred[0] == "Normal"
        assert deferred[2] == (
            f"The {action} scheduled at {due} is outside every maintenance window; "
            f"it will run at the next opening, {when}."
        )
    assert not await gone(kube, CONFIGMAPS, namespace, "flagged")  # its window is hours away


async def _deletions(
    kube: KubeClient, namespace: str, resource_version: str, awaited: set[str]
) -> list[str]:
    """The names of the namespace's deleted ConfigMaps, in order, until ``awaited`` are gone."""
    deletions: list[str] = []
    stream = kube.watch_metadata(
        CONFIGMAPS, namespace=namespace, resource_version=resource_version, timeout_seconds=300
    )
    async for event in stream:
        if event["type"] == "DELETED":
            deletions.append(event["object"]["metadata"]["name"])
            if awaited <= set(deletions):
                break
    return deletions
