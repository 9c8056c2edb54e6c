"""The notifier wired in: the recorder decorator, the URL file, shutdown, a whole Controller.

The decorator wraps the real :class:`KubeEventRecorder` on the fake API server, so what is
notified follows what the recorder really did (created, folded, refused). The notifier
posts to a real aiohttp receiver on loopback.
"""

from __future__ import annotations

import asyncio
import contextlib
import os
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import pytest
from aiohttp import web

from lifecycle_controller.app import Controller
from lifecycle_controller.config import RawFlags, build_settings
from lifecycle_controller.controller.events.notify import (
    NotifyingRecorder,
    WebhookNotifier,
    WebhookUrls,
)
from lifecycle_controller.controller.events.recorder import KubeEventRecorder, Recorded
from lifecycle_controller.core.decision import events as catalogue
from lifecycle_controller.core.decision.events import Event, EventType
from lifecycle_controller.core.objects import keys
from lifecycle_controller.core.objects.resources import ObjectKey, ObjectRef
from lifecycle_controller.core.text.timestamps import format_rfc3339_nano
from lifecycle_controller.kube import KubeClient
from tests.doubles.fakeapi import CONFIGMAPS, FakeApiServer
from tests.doubles.fakeclock import FakeClock
from tests.unit.support import annotated, eventually, fake_time_flowing

REF = ObjectRef(ObjectKey(CONFIGMAPS, "team", "cm"), uid="uid-1", resource_version="42")
NS = 1_000_000_000


class Queue:
    """Stands in for the notifier: keeps what was offered."""

    def __init__(self) -> None:
        self.offered: list[dict[str, Any]] = []

    def offer(self, document: dict[str, Any]) -> None:
        self.offered.append(document)


def decorated(kube: KubeClient, clock: FakeClock, queue: Queue) -> NotifyingRecorder:
    inner = KubeEventRecorder(kube, clock=clock, reporting_instance="pod-a")
    notifier: Any = queue
    return NotifyingRecorder(inner, notifier, clock=clock, cluster="prod")


async def test_an_outcome_event_becomes_a_document_with_its_context(
    kube: KubeClient, clock: FakeClock
) -> None:
    queue = Queue()
    event = catalogue.about(
        catalogue.deleted("2026-10-05T03:00:00Z"), action="delete", due_ns=5 * NS, dry_run=False
    )
    assert await decorated(kube, clock, queue).record(REF, event) is Recorded.CREATED
    [document] = queue.offered
    assert document["kind"] == "ConfigMap"
    assert (document["namespace"], document["name"], document["uid"]) == ("team", "cm", "uid-1")
    assert (document["action"], document["reason"]) == ("delete", "Deleted")
    assert document["due"] == "1970-01-01T00:00:05Z"
    assert document["occurred"] == format_rfc3339_nano(clock.now_ns())
    assert document["cluster"] == "prod"
    assert document["text"].startswith("[prod] Deleted: ConfigMap team/cm: Resource deleted")


async def test_events_sent_before_are_not_notified_again(
    kube: KubeClient, clock: FakeClock
) -> None:
    queue = Queue()
    recorder = decorated(kube, clock, queue)
    halted = catalogue.actions_halted(3, 600 * NS, "2026-10-05T03:00:00Z")
    upcoming = catalogue.upcoming(
        delete=True, due_ns=10 * NS, policy="always", dry_run=True, lead_ns=NS, name="upc-1"
    )
    assert await recorder.record(REF, halted) is Recorded.CREATED
    assert await recorder.record(REF, halted) is Recorded.SUPPRESSED  # once per trip
    assert await recorder.record(REF, upcoming) is Recorded.CREATED
    assert await recorder.record(REF, upcoming) is Recorded.SUPPRESSED  # once per occurrence
    # ActionsHalted is recorded once per trip, and not notified per object unless asked.
    assert [d["reason"] for d in queue.offered] == ["UpcomingDeletion"]
    assert queue.offered[0]["dry_run"] is True
    assert queue.offered[0]["action"] == "delete"
    assert queue.offered[0]["text"].startswith("[prod] UpcomingDeletion (dry-run): ")


async def test_a_warning_posted_by_an_earlier_process_is_not_notified(
    kube: KubeClient, clock: FakeClock
) -> None:
    upcoming = catalogue.upcoming(
        delete=False, due_ns=10 * NS, policy="never", dry_run=False, lead_ns=NS, name="upc-2"
    )
    earlier = Queue()
    await decorated(kube, clock, earlier).record(REF, upcoming)
    later = Queue()
    assert await decorated(kube, clock, later).record(REF, upcoming) is Recorded.SUPPRESSED
    assert len(earlier.offered) == 1
    assert later.offered == []


async def test_repeats_on_a_series_are_notified_and_other_events_are_not(
    kube: KubeClient, clock: FakeClock
) -> None:
    queue = Queue()
    recorder = decorated(kube, clock, queue)
    restarted = catalogue.restart_triggered()
    assert await recorder.record(REF, restarted) is Recorded.CREATED
    await clock.advance(60)
    assert await recorder.record(REF, restarted) is Recorded.SERIES
    for quiet in (
        catalogue.action_deferred("delete", 0, NS),
        catalogue.dry_run_delete_now(),
        catalogue.conflicting_annotations(),
        catalogue.rollout_completed(NS),
    ):
        await recorder.record(REF, quiet)
    assert [d["reason"] for d in queue.offered] == ["RestartTriggered", "RestartTriggered"]


async def test_an_event_the_api_refused_is_still_notified(
    api: FakeApiServer, kube: KubeClient, clock: FakeClock
) -> None:
    api.fail(403, method="POST", path="/events$")
    queue = Queue()
    failed = Event(EventType.WARNING, "DeletionFailed", "Failed to delete resource: boom")
    assert await decorated(kube, clock, queue).record(REF, failed) is Recorded.FAILED
    assert [d["reason"] for d in queue.offered] == ["DeletionFailed"]


# --------------------------------------------------------------------------- the URL file


def test_the_url_file_is_re_read_when_it_changes(tmp_path: Path) -> None:
    path = tmp_path / "urls"
    path.write_text("https://hooks.example/a\n")
    urls = WebhookUrls(["http://fixed.example/x"], file=str(path))
    assert urls.current() == ("http://fixed.example/x", "https://hooks.example/a")
    path.write_text("# rotated\nhttps://hooks.example/b\nhttps://hooks.example/c\n")
    stat = path.stat()
    os.utime(path, ns=(stat.st_atime_ns, stat.st_mtime_ns + 1_000_000_000))
    assert urls.current()[1:] == ("https://hooks.example/b", "https://hooks.example/c")


def test_a_broken_url_file_keeps_the_last_good_urls(tmp_path: Path) -> None:
    path = tmp_path / "urls"
    path.write_text("https://hooks.example/a\n")
    urls = WebhookUrls(file=str(path))
    path.write_text("ftp://nope.example/\n")
    assert urls.current() == ("https://hooks.example/a",)
    path.unlink()
    assert urls.current() == ("https://hooks.example/a",)
    assert urls.configured


def test_a_secret_volume_swap_is_seen(tmp_path: Path) -> None:
    """Kubernetes swaps a ``..data`` symlink; the mounted name is a symlink into it."""
    (tmp_path / "v1").mkdir()
    (tmp_path / "v1" / "urls").write_text("https://hooks.example/old\n")
    (tmp_path / "..data").symlink_to("v1")
    (tmp_path / "urls").symlink_to("..data/urls")
    urls = WebhookUrls(file=str(tmp_path / "urls"))
    assert urls.current() == ("https://hooks.example/old",)
    (tmp_path / "v2").mkdir()
    (tmp_path / "v2" / "urls").write_text("https://hooks.example/new\n")
    (tmp_path / "..data_tmp").symlink_to("v2")
    os.replace(tmp_path / "..data_tmp", tmp_path / "..data")
    assert urls.current() == ("https://hooks.example/new",)


# --------------------------------------------------------------------------- a receiver


@pytest.fixture
async def hook() -> AsyncIterator[tuple[str, list[dict[str, Any]]]]:
    received: list[dict[str, Any]] = []

    async def handle(request: web.Request) -> web.Response:
        received.append(await request.json())
        return web.Response(status=204)

    app = web.Application()
    app.router.add_post("/hook", handle)
    runner = web.AppRunner(app)
    await runner.setup()
    site = web.TCPSite(runner, "127.0.0.1", 0)
    await site.start()
    yield f"http://127.0.0.1:{runner.addresses[0][1]}/hook", received
    await runner.cleanup()


async def test_documents_still_queued_at_shutdown_are_counted_dropped() -> None:
    results: list[str] = []
    in_flight = asyncio.Event()
    never = asyncio.Event()

    async def deliver(*args: object) -> None:
        in_flight.set()
        await never.wait()

    target = WebhookNotifier(
        ["http://127.0.0.1:9/unused"], clock=FakeClock(), on_result=results.append
    )
    target._deliver = deliver  # type: ignore[assignment,method-assign]
    task = asyncio.create_task(target.run())
    for index in range(3):
        target.offer({"reason": "Deleted", "n": index})
    await asyncio.wait_for(in_flight.wait(), 5)  # the first one is "in flight"
    task.cancel()
    with contextlib.suppress(asyncio.CancelledError):
        await task
    assert results == ["dropped", "dropped"]


async def test_an_unexpected_error_counts_failed_and_the_notifier_goes_on(
    hook: tuple[str, list[dict[str, Any]]],
) -> None:
    url, received = hook
    results: list[str] = []
    clock = FakeClock()
    target = WebhookNotifier([url], clock=clock, on_result=results.append)
    task = asyncio.create_task(target.run())
    try:
        target.offer({"reason": "Deleted", "bad": {1, 2}})  # a set is not JSON
        target.offer({"reason": "Deleted", "good": True})
        async with fake_time_flowing(clock):
            await eventually(lambda: len(results) == 2, guard=5)
    finally:
        task.cancel()
        with contextlib.suppress(asyncio.CancelledError):
            await task
    assert results == ["failed", "delivered"]
    assert received == [{"reason": "Deleted", "good": True}]


async def test_a_controller_with_a_webhook_notifies_the_leaders_events_and_stops_cleanly(
    api: FakeApiServer,
    kube: KubeClient,
    clock: FakeClock,
    hook: tuple[str, list[dict[str, Any]]],
) -> None:
    url, received = hook
    api.store.create(CONFIGMAPS, "team", annotated("old", {keys.DELETE_AT: "2020-01-01T00:00:00Z"}))
    flags = RawFlags(
        watch_resource=("configmaps",),
        health_probe_bind_address="127.0.0.1:0",
        metrics_bind_address="0",
        notify_webhook=(url,),
        cluster_name="unit",
    )
    controller = Controller(build_settings(flags), kube, clock=clock, identity="replica-a")
    task = asyncio.create_task(controller.run())
    registry = controller.metrics.registry
    delivered = {"result": "delivered"}
    try:
        await eventually(
            lambda: registry.get_sample_value("lifecycle_notifications_total", delivered), guard=10
        )
    finally:
        task.cancel()
        await asyncio.gather(task, return_exceptions=True)
    [document] = received
    assert (document["reason"], document["name"], document["cluster"]) == ("Deleted", "old", "unit")
    assert document["due"] == "2020-01-01T00:00:00Z"
    assert registry.get_sample_value("lifecycle_notifications_total", delivered) == 1


async def test_without_a_webhook_no_notifier_runs(
    api: FakeApiServer, kube: KubeClient, clock: FakeClock
) -> None:
    flags = RawFlags(watch_resource=("configmaps",), health_probe_bind_address="127.0.0.1:0")
    controller = Controller(build_settings(flags), kube, clock=clock, identity="replica-a")
    assert controller._notifier() is None
    registry = controller.metrics.registry
    for result in ("delivered", "failed", "dropped"):  # declared all the same
        assert registry.get_sample_value("lifecycle_notifications_total", {"result": result}) == 0


async def test_a_failed_deletion_is_notified_with_the_decisions_action_and_due(
    api: FakeApiServer,
    kube: KubeClient,
    clock: FakeClock,
    hook: tuple[str, list[dict[str, Any]]],
) -> None:
    url, received = hook
    api.fail(403, method="DELETE", path="/configmaps/old$", times=100)
    api.store.create(CONFIGMAPS, "team", annotated("old", {keys.DELETE_AT: "2020-01-01T00:00:00Z"}))
    flags = RawFlags(
        watch_resource=("configmaps",),
        health_probe_bind_address="127.0.0.1:0",
        notify_webhook=(url,),
    )
    controller = Controller(build_settings(flags), kube, clock=clock, identity="replica-a")
    task = asyncio.create_task(controller.run())
    try:
        await eventually(lambda: bool(received), guard=10)
    finally:
        task.cancel()
        await asyncio.gather(task, return_exceptions=True)
    document = received[0]
    assert (document["reason"], document["action"]) == ("DeletionFailed", "delete")
    assert document["due"] == "2020-01-01T00:00:00Z"
    assert document["text"].startswith("DeletionFailed: ConfigMap team/old: Failed to delete")


async def test_a_redirect_is_final_and_not_followed() -> None:
    followed: list[str] = []

    async def moved(request: web.Request) -> web.Response:
        raise web.HTTPFound("/elsewhere")

    async def elsewhere(request: web.Request) -> web.Response:
        followed.append(request.method)
        return web.Response(status=200)

    app = web.Application()
    app.router.add_post("/hook", moved)
    app.router.add_route("*", "/elsewhere", elsewhere)
    runner = web.AppRunner(app)
    await runner.setup()
    site = web.TCPSite(runner, "127.0.0.1", 0)
    await site.start()
    results: list[str] = []
    url = f"http://127.0.0.1:{runner.addresses[0][1]}/hook"
    clock = FakeClock()
    target = WebhookNotifier([url], clock=clock, on_result=results.append)
    task = asyncio.create_task(target.run())
    try:
        target.offer({"reason": "Deleted"})
        async with fake_time_flowing(clock):
            await eventually(lambda: bool(results), guard=5)
    finally:
        task.cancel()
        with contextlib.suppress(asyncio.CancelledError):
            await task
        await runner.cleanup()
    assert results == ["failed"]
    assert followed == []
