"""Webhook notifications end to end (docs/notifications.md), with a real receiver on loopback.

The controller runs in-process against the real control plane; the receiver is an aiohttp
server on 127.0.0.1 that records every POST. A ConfigMap due a few seconds from now with
``warn-before`` gets ``UpcomingDeletion`` then ``Deleted`` documents with the object's
fields; a receiver that answers 503 first gets the document again; a receiver that never
answers does not delay the deletion (the ``Deleted`` Event's ``eventTime`` against the due
time, both from the API server); a dry-run object's warning says ``dry_run: true``.
"""

from __future__ import annotations

import asyncio
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

from lifecycle_controller.kube import KubeClient
from tests.integration.controller import StartController
from tests.integration.events import list_events, wait_event
from tests.integration.keys import DELETE_AT, DRY_RUN, P
from tests.integration.scenario_support import sample, start_for, wait_gone, wait_sample
from tests.integration.support import CONFIGMAPS, configmap
from tests.integration.timestamps import PAST, epoch, on_time, parse_utc, rfc3339
from tests.integration.webhook_receiver import Receiver, wait_documents

WARN_BEFORE = P + "warn-before"


def event_time(event: dict[str, Any]) -> float:
    return parse_utc(str(event["eventTime"])).timestamp()


async def test_upcoming_then_deleted_documents_from_a_url_file(
    start_controller: StartController,
    namespace: str,
    kube: KubeClient,
    receiver: Receiver,
    tmp_path: Path,
) -> None:
    urls = tmp_path / "urls"
    urls.write_text(f"# the team's hook\n\n{receiver.url}\n")
    running = await start_for(
        start_controller, namespace, notify_webhook_file=str(urls), cluster_name="it-cluster"
    )
    due = rfc3339(datetime.now(UTC) + timedelta(seconds=7))
    created = await kube.create(
        CONFIGMAPS, namespace, configmap("tmp", **{DELETE_AT: due, WARN_BEFORE: "3s"})
    )
    created_by = datetime.now(UTC).timestamp()
    await wait_gone(kube, CONFIGMAPS, namespace, "tmp", within=15)
    await wait_documents(receiver, 2, within=10)
    assert receiver.reasons() == ["UpcomingDeletion", "Deleted"]
    events = {event["reason"]: event for event in await list_events(kube, namespace, "tmp")}
    for document in receiver.received:
        assert document["kind"] == "ConfigMap"
        assert (document["namespace"], document["name"]) == (namespace, "tmp")
        assert document["uid"] == created["metadata"]["uid"]
        assert document["action"] == "delete"
        assert document["due"] == due
        assert document["dry_run"] is False
        assert document["cluster"] == "it-cluster"
        assert document["message"] == events[document["reason"]]["note"]
        assert document["text"] == (
            f"[it-cluster] {document['reason']}: ConfigMap {namespace}/tmp: {document['message']}"
        )
        occurred = parse_utc(str(document["occurred"])).timestamp()
        assert abs(occurred - event_time(events[document["reason"]])) <= 1.0
    upcoming, deleted = receiver.received
    for document, at in ((upcoming, epoch(due) - 3), (deleted, epoch(due))):
        occurred = parse_utc(document["occurred"]).timestamp()
        assert on_time(occurred, at, created_by), document["reason"]
    await wait_sample(running, "lifecycle_notifications_total", 2, within=5, result="delivered")
    assert sample(running, "lifecycle_notifications_total", result="failed") == 0
    assert sample(running, "lifecycle_notifications_total", result="dropped") == 0


async def test_a_receiver_that_answers_503_first_gets_the_document_again(
    start_controller: StartController, namespace: str, kube: KubeClient, receiver: Receiver
) -> None:
    receiver.statuses = [503]
    running = await start_for(start_controller, namespace, notify_webhook=[receiver.url])
    await kube.create(CONFIGMAPS, namespace, configmap("overdue", **{DELETE_AT: PAST}))
    await wait_documents(receiver, 1, within=15)
    assert receiver.reasons() == ["Deleted"]
    assert receiver.requests == 2  # the 503, then the retry that was delivered
    assert receiver.received[0]["due"] == PAST
    await wait_sample(running, "lifecycle_notifications_total", 1, within=5, result="delivered")
    assert sample(running, "lifecycle_notifications_total", result="failed") == 0


async def test_a_hanging_receiver_does_not_delay_the_deletion(
    start_controller: StartController, namespace: str, kube: KubeClient, receiver: Receiver
) -> None:
    receiver.hang = asyncio.Event()
    await start_for(start_controller, namespace, notify_webhook=[receiver.url])
    due = rfc3339(datetime.now(UTC) + timedelta(seconds=5))
    await kube.create(
        CONFIGMAPS, namespace, configmap("stuck", **{DELETE_AT: due, WARN_BEFORE: "3s"})
    )
    await wait_gone(kube, CONFIGMAPS, namespace, "stuck", within=15)
    await wait_event(kube, namespace, "stuck", "Deleted")
    events = {event["reason"]: event for event in await list_events(kube, namespace, "stuck")}
    # The warning's document is stuck in the receiver when the deletion falls due.
    assert receiver.requests >= 1
    assert receiver.received == []
    assert event_time(events["UpcomingDeletion"]) < epoch(due) - 2
    assert abs(event_time(events["Deleted"]) - epoch(due)) <= 1.0


async def test_a_dry_run_objects_warning_says_dry_run(
    start_controller: StartController, namespace: str, kube: KubeClient, receiver: Receiver
) -> None:
    await start_for(start_controller, namespace, notify_webhook=[receiver.url], warn_before="1h")
    due = rfc3339(datetime.now(UTC) + timedelta(minutes=30))
    await kube.create(
        CONFIGMAPS, namespace, configmap("rehearsal", **{DELETE_AT: due, DRY_RUN: "true"})
    )
    await wait_documents(receiver, 1, within=10)
    [document] = receiver.received
    assert (document["reason"], document["action"], document["due"]) == (
        "UpcomingDeletion",
        "delete",
        due,
    )
    assert document["dry_run"] is True
    assert document["cluster"] == ""
    assert document["text"].startswith(f"UpcomingDeletion (dry-run): ConfigMap {namespace}/")
