"""Webhook notifications against a real aiohttp server on loopback."""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import AsyncIterator
from dataclasses import dataclass, field
from typing import Any

import pytest
from aiohttp import web

from lifecycle_controller.controller.events.notify import (
    WebhookNotifier,
    chat_escape,
    is_notifiable,
    notification_document,
)
from lifecycle_controller.machinery.backoff import Backoff
from tests.doubles.fakeclock import FakeClock
from tests.loopback import served
from tests.unit.support import eventually, fake_time_flowing


@dataclass
class Receiver:
    url: str
    received: list[dict[str, Any]] = field(default_factory=list)
    statuses: list[int] = field(default_factory=list)  # answered first, then 200
    hang: asyncio.Event | None = None
    got: asyncio.Event = field(default_factory=asyncio.Event)


@pytest.fixture
async def receiver() -> AsyncIterator[Receiver]:
    state = Receiver(url="")

    async def hook(request: web.Request) -> web.Response:
        if state.hang is not None:
            await state.hang.wait()
        status = state.statuses.pop(0) if state.statuses else 200
        if status == 200:
            state.received.append(await request.json())
            state.got.set()
        return web.Response(status=status)

    app = web.Application()
    app.router.add_post("/hook", hook)
    async with served(app) as base:
        state.url = f"{base}/hook"
        yield state
        if state.hang is not None:
            state.hang.set()


def document(name: str = "cm", reason: str = "Deleted") -> dict[str, Any]:
    return notification_document(
        kind="ConfigMap",
        namespace="team",
        name=name,
        uid="uid-1",
        action="delete",
        reason=reason,
        message="Resource deleted based on delete-at annotation: 2026-10-05T03:00:00Z",
        due_ns=1_791_162_000_000_000_000,
        occurred_ns=1_791_162_000_500_000_000,
        dry_run=False,
        cluster="prod-eu",
    )


def notifier(url: str, results: list[str], clock: FakeClock, **kwargs: Any) -> WebhookNotifier:
    return WebhookNotifier(
        [url],
        clock=clock,
        backoff=lambda: Backoff(clock, initial=0.01, maximum=0.02),
        on_result=results.append,
        **kwargs,
    )


@contextlib.asynccontextmanager
async def running(target: WebhookNotifier, clock: FakeClock | None = None) -> AsyncIterator[None]:
    """Run ``target``; with ``clock``, fake time passes by itself meanwhile (retries wait)."""
    task = asyncio.create_task(target.run())
    try:
        if clock is None:
            yield
        else:
            async with fake_time_flowing(clock):
                yield
    finally:
        task.cancel()
        with contextlib.suppress(asyncio.CancelledError):
            await task


async def test_a_document_is_delivered_with_a_chat_text(receiver: Receiver) -> None:
    results: list[str] = []
    clock = FakeClock()
    target = notifier(receiver.url, results, clock)
    async with running(target, clock):
        target.offer(document())
        await asyncio.wait_for(receiver.got.wait(), 5)
    [got] = receiver.received
    assert got["kind"] == "ConfigMap"
    assert (got["namespace"], got["name"], got["uid"]) == ("team", "cm", "uid-1")
    assert (got["action"], got["reason"], got["cluster"]) == ("delete", "Deleted", "prod-eu")
    assert got["due"] == "2026-10-05T01:00:00Z"
    assert got["occurred"] == "2026-10-05T01:00:00.5Z"
    assert got["dry_run"] is False
    assert got["text"].startswith("[prod-eu] Deleted: ConfigMap team/cm: Resource deleted")
    assert results == ["delivered"]


async def test_a_503_is_retried_with_backoff(receiver: Receiver) -> None:
    receiver.statuses = [503, 503]
    results: list[str] = []
    clock = FakeClock()
    target = notifier(receiver.url, results, clock)
    async with running(target, clock):
        target.offer(document())
        await asyncio.wait_for(receiver.got.wait(), 5)
    assert len(receiver.received) == 1
    assert results == ["delivered"]


async def test_a_4xx_is_final(receiver: Receiver) -> None:
    receiver.statuses = [400]
    results: list[str] = []
    clock = FakeClock()
    target = notifier(receiver.url, results, clock)
    async with running(target, clock):
        target.offer(document("first"))
        target.offer(document("second"))
        await asyncio.wait_for(receiver.got.wait(), 5)
    assert [d["name"] for d in receiver.received] == ["second"]
    assert results == ["failed", "delivered"]


async def test_a_hanging_receiver_blocks_nothing_and_times_out(receiver: Receiver) -> None:
    receiver.hang = asyncio.Event()
    results: list[str] = []
    failed = asyncio.Event()

    def note(result: str) -> None:
        results.append(result)
        if result == "failed":
            failed.set()

    clock = FakeClock()
    target = WebhookNotifier(
        [receiver.url],
        clock=clock,
        timeout=0.2,
        attempts=2,
        backoff=lambda: Backoff(clock, initial=0.01, maximum=0.02),
        on_result=note,
    )
    async with running(target, clock):
        loop = asyncio.get_running_loop()
        started = loop.time()
        for index in range(50):
            target.offer(document(f"cm-{index}"))  # the action goes on at once
        assert loop.time() - started < 0.05
        await asyncio.wait_for(failed.wait(), 5)
    assert receiver.received == []


async def test_when_full_the_oldest_is_dropped_and_counted(receiver: Receiver) -> None:
    results: list[str] = []
    clock = FakeClock()
    target = notifier(receiver.url, results, clock, capacity=2)
    for name in ("a", "b", "c", "d"):
        target.offer(document(name))  # not running yet: the queue fills up
    assert results == ["dropped", "dropped"]
    async with running(target, clock):
        while True:
            receiver.got.clear()
            if len(receiver.received) >= 2:
                break
            await asyncio.wait_for(receiver.got.wait(), 5)
    assert [d["name"] for d in receiver.received] == ["c", "d"]


def test_which_events_are_notified() -> None:
    for reason in ("UpcomingDeletion", "UpcomingRestart", "Deleted", "RestartTriggered"):
        assert is_notifiable(reason)
    for reason in ("ActionSkipped", "DeletionFailed", "CircuitBreakerTripped", "RolloutStalled"):
        assert is_notifiable(reason)
    # A trip is notified once; each held object's ActionsHalted only on request.
    assert not is_notifiable("ActionsHalted")
    assert is_notifiable("ActionsHalted", held_actions=True)
    for reason in ("ActionDeferred", "DryRunDelete", "InvalidAnnotation", "ActionThrottled"):
        assert not is_notifiable(reason)


async def test_without_urls_nothing_is_queued() -> None:
    target = WebhookNotifier([], clock=FakeClock())
    target.offer(document())
    assert not target.enabled


async def test_the_retry_waits_its_backoff_on_the_injected_clock(receiver: Receiver) -> None:
    """The wait between attempts is the controller's clock's: nothing is retried until
    the backoff has passed on it, and then at once."""
    clock = FakeClock()
    receiver.statuses = [503]
    results: list[str] = []
    target = WebhookNotifier(
        [receiver.url],
        clock=clock,
        backoff=lambda: Backoff(clock, initial=30.0, maximum=30.0),
        on_result=results.append,
    )
    async with running(target):
        target.offer(document())
        await eventually(lambda: clock.sleeper_deadlines())
        (deadline,) = clock.sleeper_deadlines()
        assert 30.0 <= deadline - clock.monotonic() < 60.0  # 30 s plus up to 100 % jitter
        assert results == []
        assert receiver.received == []
        await clock.advance(deadline - clock.monotonic() - 0.001)
        assert receiver.received == []
        await clock.advance(0.001)
        await asyncio.wait_for(receiver.got.wait(), 5)
    assert results == ["delivered"]


@pytest.mark.parametrize(
    ("raw", "shown"),
    [
        ("plain", "plain"),
        ("<!channel>", "&lt;!channel&gt;"),
        ("<https://evil.invalid|click here>", "&lt;https://evil.invalid|click here&gt;"),
        ("a & b", "a &amp; b"),
        ("&lt; already", "&amp;lt; already"),
    ],
)
def test_chat_escape(raw: str, shown: str) -> None:
    assert chat_escape(raw) == shown


def test_the_text_is_escaped_for_chat_and_the_message_kept() -> None:
    """Caught: an annotation value in an Event message (an invalid value is quoted in it)
    reached Slack as markup: ``<!channel>`` mentioned everyone."""
    message = 'invalid duration "<!channel> <https://evil.invalid|x> &"'
    document = notification_document(
        kind="ConfigMap",
        namespace="team",
        name="cache",
        uid="uid-1",
        action="delete",
        reason="InvalidAnnotationValue",
        message=message,
        due_ns=None,
        occurred_ns=1_791_162_000_500_000_000,
        dry_run=False,
        cluster="prod-eu",
    )
    assert document["message"] == message
    assert document["text"] == (
        "[prod-eu] InvalidAnnotationValue: ConfigMap team/cache: invalid duration "
        '"&lt;!channel&gt; &lt;https://evil.invalid|x&gt; &amp;"'
    )
