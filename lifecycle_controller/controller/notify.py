"""Webhook notifications about the controller's Events (issue 12, part 2), never in the way.

For each notifiable Event (``Upcoming*``, ``Deleted``, ``RestartTriggered``, ``ActionSkipped``,
``*Failed``, ``ActionsHalted``, ``RolloutStalled``) one JSON document is POSTed to every
configured URL. :meth:`WebhookNotifier.offer` never blocks and never raises: documents go
into a bounded in-memory queue (the oldest is dropped when it is full) that one task,
:meth:`WebhookNotifier.run`, drains. Each request has a timeout; 5xx answers and timeouts
are retried with backoff and jitter, other answers are final. Every outcome is counted
through ``on_result`` (``delivered``, ``failed``, ``dropped``), which the wiring points at
``lifecycle_notifications_total{result}``.

The document carries ``kind, namespace, name, uid, action, reason, message, due, occurred,
dry_run, cluster`` and a ``text`` that Slack-compatible chat webhooks show as is.
"""

from __future__ import annotations

import asyncio
import collections
from collections.abc import Callable, Sequence
from typing import Any

import aiohttp
import structlog

from lifecycle_controller.core.timestamps import format_rfc3339_nano
from lifecycle_controller.machinery.backoff import Backoff
from lifecycle_controller.machinery.clock import Clock

__all__ = ["NOTIFIABLE_REASONS", "WebhookNotifier", "is_notifiable", "notification_document"]

NOTIFIABLE_REASONS = frozenset(
    {"Deleted", "RestartTriggered", "ActionSkipped", "ActionsHalted", "RolloutStalled"}
)

_log = structlog.get_logger(__name__)


def is_notifiable(reason: str) -> bool:
    return (
        reason in NOTIFIABLE_REASONS or reason.startswith("Upcoming") or reason.endswith("Failed")
    )


def notification_document(
    *,
    kind: str,
    namespace: str | None,
    name: str,
    uid: str,
    action: str | None,
    reason: str,
    message: str,
    due_ns: int | None,
    occurred_ns: int,
    dry_run: bool,
    cluster: str,
) -> dict[str, Any]:
    """The JSON document for one Event, with a chat-ready ``text``."""
    where = f"{namespace}/{name}" if namespace else name
    prefix = f"[{cluster}] " if cluster else ""
    dry = " (dry-run)" if dry_run else ""
    return {
        "kind": kind,
        "namespace": namespace or "",
        "name": name,
        "uid": uid,
        "action": action or "",
        "reason": reason,
        "message": message,
        "due": None if due_ns is None else format_rfc3339_nano(due_ns),
        "occurred": format_rfc3339_nano(occurred_ns),
        "dry_run": dry_run,
        "cluster": cluster,
        "text": f"{prefix}{reason}{dry}: {kind} {where}: {message}",
    }


class WebhookNotifier:
    """A bounded queue of documents and the one task that delivers them."""

    def __init__(
        self,
        urls: Sequence[str],
        *,
        clock: Clock,
        capacity: int = 1000,
        timeout: float = 5.0,
        attempts: int = 5,
        backoff: Callable[[], Backoff] | None = None,
        on_result: Callable[[str], None] = lambda result: None,
    ) -> None:
        self._urls = tuple(urls)
        self._queue: collections.deque[dict[str, Any]] = collections.deque()
        self._capacity = capacity
        self._timeout = aiohttp.ClientTimeout(total=timeout)
        self._attempts = attempts
        self._backoff = backoff or (lambda: Backoff(clock, initial=0.5, maximum=30.0))
        self._on_result = on_result
        self._ready = asyncio.Event()

    @property
    def enabled(self) -> bool:
        return bool(self._urls)

    def offer(self, document: dict[str, Any]) -> None:
        """Queue one document; drops the oldest when full. Never blocks, never raises."""
        if not self._urls:
            return
        if len(self._queue) >= self._capacity:
            self._queue.popleft()
            self._on_result("dropped")
        self._queue.append(document)
        self._ready.set()

    async def run(self) -> None:
        """Deliver queued documents until cancelled."""
        async with aiohttp.ClientSession(timeout=self._timeout) as session:
            while True:
                while not self._queue:
                    self._ready.clear()
                    await self._ready.wait()
                document = self._queue.popleft()
                for url in self._urls:
                    await self._deliver(session, url, document)

    async def _deliver(
        self, session: aiohttp.ClientSession, url: str, document: dict[str, Any]
    ) -> None:
        backoff = self._backoff()
        for attempt in range(1, self._attempts + 1):
            retry = False
            try:
                async with session.post(url, json=document) as response:
                    if response.status < 300:
                        self._on_result("delivered")
                        return
                    retry = response.status >= 500
                    problem = f"HTTP {response.status}"
            except (TimeoutError, aiohttp.ClientError) as error:
                retry = True
                problem = type(error).__name__
            if not retry or attempt == self._attempts:
                break
            await asyncio.sleep(backoff.next_delay())
        _log.warning("notification not delivered", reason=document.get("reason"), error=problem)
        self._on_result("failed")
