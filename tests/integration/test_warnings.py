"""Warnings before acting end to end (docs/annotations.md#warnings-before-acting).

A ConfigMap due a few seconds from now with ``warn-before: "5s"`` gets one Normal
``UpcomingDeletion`` about five seconds before it is deleted, then ``Deleted``; the lead time
is honoured within a second (both Events' ``eventTime`` against the deadline). A controller
restart inside the lead time does not post the warning again (its name is per occurrence).
"""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

from lifecycle_controller.kube import KubeClient
from tests.integration.controller import StartController
from tests.integration.events import list_events, wait_event
from tests.integration.keys import DELETE_AT, DRY_RUN, P
from tests.integration.scenario_support import settle, start_for, wait_gone
from tests.integration.support import CONFIGMAPS, configmap
from tests.integration.timestamps import epoch, on_time, parse_utc, rfc3339

WARN_BEFORE = P + "warn-before"
LEAD = 5


def event_time(event: dict[str, object]) -> float:
    return parse_utc(str(event["eventTime"])).timestamp()


async def test_upcoming_deletion_comes_lead_time_before_deleted(
    start_controller: StartController, namespace: str, kube: KubeClient
) -> None:
    await start_for(start_controller, namespace)
    due = rfc3339(datetime.now(UTC) + timedelta(seconds=LEAD + 6))
    await kube.create(
        CONFIGMAPS, namespace, configmap("tmp", **{DELETE_AT: due, WARN_BEFORE: f"{LEAD}s"})
    )
    created_by = datetime.now(UTC).timestamp()
    await wait_gone(kube, CONFIGMAPS, namespace, "tmp", within=LEAD + 12)
    await wait_event(kube, namespace, "tmp", "Deleted")
    listed = await list_events(kube, namespace, "tmp")
    assert [event["reason"] for event in listed] == ["UpcomingDeletion", "Deleted"]
    warning, deleted = listed
    assert warning["type"] == "Normal"
    assert warning["note"] == (
        f"The deletion of this object is due at {due} (warn-before {LEAD}s, catch-up policy "
        "always)."
    )
    assert str(warning["metadata"]["name"]).startswith("tmp.upcoming-")
    deadline = epoch(due)
    assert on_time(event_time(warning), deadline - LEAD, created_by)
    assert on_time(event_time(deleted), deadline, created_by)


async def test_the_warning_is_posted_once_across_a_controller_restart_and_in_dry_run(
    start_controller: StartController, namespace: str, kube: KubeClient
) -> None:
    first = await start_for(start_controller, namespace, warn_before="1h")
    due = rfc3339(datetime.now(UTC) + timedelta(minutes=30))
    await kube.create(
        CONFIGMAPS, namespace, configmap("rehearsal", **{DELETE_AT: due, DRY_RUN: "true"})
    )
    await wait_event(kube, namespace, "rehearsal", "UpcomingDeletion")
    await first.stop()
    await start_for(start_controller, namespace, warn_before="1h")
    await settle(2.0)
    listed = await list_events(kube, namespace, "rehearsal")
    assert [event["reason"] for event in listed] == ["UpcomingDeletion"]
    assert str(listed[0]["note"]).endswith(
        "Dry-run: the deletion will only be reported, not carried out."
    )
    assert f"due at {due} (warn-before 1h0m0s" in str(listed[0]["note"])
