"""Webhook notifications about the controller's Events (issue 12, part 2), never in the way.

For each notifiable Event (``Upcoming*``, ``Deleted``, ``RestartTriggered``, ``ActionSkipped``,
``*Failed``, ``CircuitBreakerTripped``, ``RolloutStalled``; each held object's
``ActionsHalted`` only on request) one JSON document is POSTed to every
configured URL. :meth:`WebhookNotifier.offer` never blocks and never raises: documents go
into a bounded in-memory queue (the oldest is dropped when it is full) that one task,
:meth:`WebhookNotifier.run`, drains. Each request has a timeout; 5xx answers and timeouts
are retried with backoff and jitter, other answers are final. Every outcome is counted
through ``on_result`` (``delivered``, ``failed``, ``dropped``), which the wiring points at
``lifecycle_notifications_total{result}``.

The document carries ``kind, namespace, name, uid, action, reason, message, due, occurred,
dry_run, cluster`` and a ``text`` that Slack-compatible chat webhooks show as is.

:class:`NotifyingRecorder` is the one place Events become documents: it decorates the Event
recorder, so every source of Events (execution, the breaker, the rollout tracker, the
warnings before acting) is covered. An Event the recorder folds away as sent before (a
deduped warning, a stable name already posted) is not notified again; one the API refused is
still notified, because the action it reports happened all the same. :class:`WebhookUrls`
is where the URLs come from: the flags' list plus the URL file, re-read when it changes.
The wiring, the guarantees and the format are in docs/notifications.md.
"""

from __future__ import annotations

import asyncio
import collections
import os
from collections.abc import Callable, Sequence
from typing import Any
from urllib.parse import urlsplit

import aiohttp
import structlog

from lifecycle_controller.config.parsing import ConfigError
from lifecycle_controller.config.webhooks import read_webhook_file
from lifecycle_controller.controller.events.recorder import EventRecorder, Recorded
from lifecycle_controller.core.decision import events as catalogue
from lifecycle_controller.core.decision.events import Event
from lifecycle_controller.core.objects.resources import ObjectRef
from lifecycle_controller.core.text.timestamps import format_rfc3339_nano
from lifecycle_controller.kube.connector import close_pool, new_connector
from lifecycle_controller.machinery.backoff import Backoff
from lifecycle_controller.machinery.clock import Clock

__all__ = [
    "NOTIFIABLE_REASONS",
    "NotifyingRecorder",
    "WebhookNotifier",
    "WebhookUrls",
    "chat_escape",
    "is_notifiable",
    "notification_document",
]

NOTIFIABLE_REASONS = frozenset(
    {
        catalogue.DELETED,
        catalogue.RESTART_TRIGGERED,
        catalogue.ACTION_SKIPPED,
        catalogue.BREAKER_TRIPPED,
        catalogue.ROLLOUT_STALLED,
    }
)

_log = structlog.get_logger(__name__)
#: Connections open at once to all receivers together.
_POOL_LIMIT = 16


def is_notifiable(reason: str, *, held_actions: bool = False) -> bool:
    """Whether an Event with ``reason`` is notified; each held action's ``ActionsHalted``
    only with ``held_actions`` (a trip is notified once, by ``CircuitBreakerTripped``)."""
    if reason == catalogue.ACTIONS_HALTED:
        return held_actions
    return (
        reason in NOTIFIABLE_REASONS or reason.startswith("Upcoming") or reason.endswith("Failed")
    )


def chat_escape(text: str) -> str:
    """``text`` as Slack's message formatting shows it literally: ``&``, ``<`` and ``>``
    escaped, so a value from an annotation or a name (``<!channel>``, ``<https://…|click>``)
    can neither mention everyone nor become a link. Only ``text`` is escaped; the document's
    other fields carry the values as they are."""
    return text.replace("&", "&amp;").replace("<", "&lt;").replace(">", "&gt;")


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
    """The JSON document for one Event, with a chat-ready ``text`` (escaped for Slack)."""
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
        "text": chat_escape(f"{prefix}{reason}{dry}: {kind} {where}: {message}"),
    }


def _host(url: str) -> str:
    """The URL's host, the only part of a webhook URL that is logged (the rest is a secret)."""
    try:
        return urlsplit(url).hostname or "?"
    except ValueError:
        return "?"


class WebhookUrls:
    """The flags' URLs plus those of the URL file, re-read whenever the file changes.

    A change is seen through the file's ``stat`` (device, inode, size, modification time,
    following symlinks, so a Secret volume's atomic swap counts), checked before each
    document. A file that has become unreadable or invalid keeps the last good URLs (and is
    logged once per change).
    """

    def __init__(self, urls: Sequence[str] = (), *, file: str | None = None) -> None:
        self._fixed = tuple(urls)
        self._file = file
        self._seen: tuple[int, ...] | None = None
        self._from_file: tuple[str, ...] = ()
        self.current()

    @property
    def configured(self) -> bool:
        return bool(self._fixed) or self._file is not None

    def current(self) -> tuple[str, ...]:
        if self._file is None:
            return self._fixed
        try:
            st = os.stat(self._file)
            stamp: tuple[int, ...] = (st.st_dev, st.st_ino, st.st_size, st.st_mtime_ns)
        except OSError:
            stamp = ()
        if stamp != self._seen:
            self._seen = stamp
            try:
                self._from_file = read_webhook_file(self._file)
                _log.info("notification URL file read", urls=len(self._from_file))
            except ConfigError as error:
                _log.warning("notification URL file kept at its last good URLs", error=str(error))
        return self._fixed + self._from_file


class WebhookNotifier:
    """A bounded queue of documents and the one task that delivers them."""

    def __init__(
        self,
        urls: Sequence[str] | WebhookUrls,
        *,
        clock: Clock,
        capacity: int = 1000,
        timeout: float = 5.0,
        attempts: int = 5,
        backoff: Callable[[], Backoff] | None = None,
        on_result: Callable[[str], None] = lambda result: None,
    ) -> None:
        self._urls = urls if isinstance(urls, WebhookUrls) else WebhookUrls(urls)
        self._queue: collections.deque[dict[str, Any]] = collections.deque()
        self._capacity = capacity
        self._timeout = aiohttp.ClientTimeout(total=timeout)
        self._attempts = attempts
        self._clock = clock
        self._backoff = backoff or (lambda: Backoff(clock, initial=0.5, maximum=30.0))
        self._on_result = on_result
        self._ready = asyncio.Event()

    @property
    def enabled(self) -> bool:
        return self._urls.configured

    def offer(self, document: dict[str, Any]) -> None:
        """Queue one document; drops the oldest when full. Never blocks, never raises."""
        if not self._urls.configured:
            return
        if len(self._queue) >= self._capacity:
            self._queue.popleft()
            self._on_result("dropped")
        self._queue.append(document)
        self._ready.set()

    async def run(self) -> None:
        """Deliver queued documents until cancelled; one document goes to all URLs at once.

        Documents still queued when it is cancelled are counted ``dropped``.
        """
        # The API client's connector: an https receiver cut off mid-response at shutdown
        # leaks no socket (kube/connector.py).
        connector = new_connector(limit=_POOL_LIMIT, ssl_context=True)
        session = aiohttp.ClientSession(timeout=self._timeout, connector=connector)
        try:
            while True:
                while not self._queue:
                    self._ready.clear()
                    await self._ready.wait()
                document = self._queue.popleft()
                urls = self._urls.current()
                await asyncio.gather(*(self._deliver(session, url, document) for url in urls))
        finally:
            await close_pool(session)
            while self._queue:
                self._queue.popleft()
                self._on_result("dropped")

    async def _deliver(
        self, session: aiohttp.ClientSession, url: str, document: dict[str, Any]
    ) -> None:
        backoff = self._backoff()
        for attempt in range(1, self._attempts + 1):
            retry = False
            try:
                # A redirect is not followed: it would turn the POST into a GET on 301/302
                # and could hand the document to another host.
                async with session.post(url, json=document, allow_redirects=False) as response:
                    if response.status < 300:
                        self._on_result("delivered")
                        return
                    retry = response.status >= 500
                    problem = f"HTTP {response.status}"
            except (TimeoutError, aiohttp.ClientError) as error:
                retry = True
                problem = type(error).__name__
            except Exception as error:  # a notification never stops the leader
                problem = f"{type(error).__name__}: {error}"
            if not retry or attempt == self._attempts:
                break
            await self._clock.sleep(backoff.next_delay())
        _log.warning(
            "notification not delivered",
            reason=document.get("reason"),
            host=_host(url),
            attempts=attempt,
            error=problem,
        )
        self._on_result("failed")


class NotifyingRecorder:
    """An :class:`EventRecorder` that also offers each notifiable Event to the notifier.

    The Event is written first (its API call is what the action waits for anyway); then the
    document is queued, which never blocks. Not notified: Events the recorder reports as
    sent before (:attr:`Recorded.SUPPRESSED`). Notified: new Events, repeats counted on a
    series (each one is an occurrence, such as one more recurring restart), and Events the
    API refused (:attr:`Recorded.FAILED`).
    """

    def __init__(
        self,
        inner: EventRecorder,
        notifier: WebhookNotifier,
        *,
        clock: Clock,
        cluster: str,
        held_actions: bool = False,
    ) -> None:
        self._inner = inner
        self._notifier = notifier
        self._clock = clock
        self._cluster = cluster
        self._held_actions = held_actions

    async def record(self, ref: ObjectRef, event: Event) -> Recorded | None:
        verdict = await self._inner.record(ref, event)
        if verdict is not Recorded.SUPPRESSED and is_notifiable(
            event.reason, held_actions=self._held_actions
        ):
            key = ref.key
            self._notifier.offer(
                notification_document(
                    kind=key.resource.kind,
                    namespace=key.namespace,
                    name=key.name,
                    uid=ref.uid,
                    action=event.action,
                    reason=event.reason,
                    message=event.message,
                    due_ns=event.due_ns,
                    occurred_ns=self._clock.now_ns() if event.at_ns is None else event.at_ns,
                    dry_run=event.dry_run,
                    cluster=self._cluster,
                )
            )
        return verdict
