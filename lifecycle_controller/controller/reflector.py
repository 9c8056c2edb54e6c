"""The reflector: one informer keeps the metadata cache in step with the API server.

One asyncio task per (resource type, namespace or cluster-wide) runs client-go's reflector
loop over metadata-only requests (docs/architecture.md#informer-loop):

1. **List** ``PartialObjectMetadata`` in pages (``limit``, following ``continue``). The first
   list asks for ``resourceVersion=0`` (served from the API server's watch cache); every later
   list is a consistent read (no resourceVersion). An expired continue token (410) restarts
   the list. Each item is compared with the cache and reported; keys of the scope that are
   cached but no longer listed get a *synthesised* delete (client-go's
   ``DeletedFinalStateUnknown``). The scope is marked synced after the first full list.
2. **Watch** from the list's resourceVersion with ``allowWatchBookmarks`` and a random
   ``timeoutSeconds`` in [300, 600] (so many informers do not reconnect in lockstep),
   remembering the resourceVersion of every event, bookmarks included.
3. A watch that the server ends normally is re-opened at once from the last resourceVersion.
   ``ERROR 410`` (history compacted) relists; an ``ERROR 504`` (resourceVersion too large)
   waits and re-watches the same version; any other ERROR waits and relists. A broken or
   silent stream (the kube door enforces an idle cutoff, ~90 s: bookmarks arrive about once a
   minute, so a longer silence means a dead connection) waits and re-watches. 403 is logged
   loudly and retried with backoff (RBAC may be fixed without a restart), unless
   ``stop_when_forbidden`` makes it end the informer; 404 means the API is gone: the informer
   reports it through ``on_resource_gone`` and stops.
   Waits use exponential backoff with jitter (0.8 s doubling to 30 s, plus up to 100 %
   jitter, reset after 2 min without failures: client-go's reflector), on the injected clock.
   The backoff also starts again from 0.8 s after every successful request (a completed list,
   a watch event, a watch the server ended normally), and the delay after a connection error
   is capped at 0.8 s plus jitter: a server that is down is retried about once a
   second per informer, and a watch resumes within about 2 s of the API server answering
   again (docs/reliability.md). A second connection failure in a row relists instead of
   re-watching, so the first request after an outage is a list that proves the server is
   back (and catches deletes missed meanwhile).
4. From its second consecutive failed list or watch until its next successful one, the
   informer is :attr:`Informer.disconnected`; the leader's readiness reports it
   (docs/behaviour.md#readiness).

Only ``metadata`` is read from each object, projected into :class:`CachedObject` at once
(managedFields and everything else are never kept). Changes are reported to one synchronous,
non-blocking handler ``on_event(kind, key, old, new)``; the composition root applies the scope
and relevance predicates there and adds keys to the work queue. What is delivered follows the
cache's rule (see :mod:`~lifecycle_controller.controller.cache`): only changes where the old
or the new state carries a lifecycle annotation, with ``old=None`` meaning "not annotated before":

* ``"add"``: new object (initial list included, see docs/behaviour.md#relevance-predicate);
  ``old`` is None.
* ``"update"``: ``old`` is the cached record or None, ``new`` the current state (possibly with
  no lifecycle annotations left: it has then been dropped from the cache).
* ``"delete"``: ``old`` is the last cached record (None if it was never annotated), ``new`` the
  final state from the watch, or None for a delete synthesised by a relist.

``on_change_seen()`` (optional) hears of every completed list and every ADDED, MODIFIED or
DELETED event whether or not the object is cached: discovery's CRD informer uses it.

Each informer runs in its own task (started and stopped by
:class:`~lifecycle_controller.controller.informers.InformerSet`), so one failing informer never
stops the others. Its ports (source, handler, metrics, settings) are in
:mod:`~lifecycle_controller.controller.informer_ports`.
"""

from __future__ import annotations

import asyncio
import enum
import random
from collections.abc import AsyncIterator, Mapping
from dataclasses import dataclass
from typing import Any

import structlog

from lifecycle_controller.controller.cache import CachedObject, MetadataCache
from lifecycle_controller.controller.informer_ports import (
    ChangeSeen,
    EventHandler,
    EventKind,
    InformerMetrics,
    InformerSettings,
    MetadataSource,
    NoInformerMetrics,
    ResourceGoneHandler,
)
from lifecycle_controller.core.resources import ObjectKey
from lifecycle_controller.kube import (
    ApiError,
    Forbidden,
    Gone,
    NotFound,
    ResourceType,
    ServerError,
    TooManyRequests,
    TransportError,
    Unauthorized,
)
from lifecycle_controller.machinery.backoff import Backoff
from lifecycle_controller.machinery.clock import Clock
from lifecycle_controller.machinery.tasks import being_cancelled

__all__ = ["Informer", "WatchEnd"]

_log = structlog.get_logger(__name__)

#: How many times an expired continue token may restart one list before it counts as failed.
_LIST_RESTARTS = 3


class WatchEnd(enum.Enum):
    """How one watch stream ended without raising."""

    CLOSED = "closed"  # the server ended it (timeoutSeconds): re-watch from the last RV now
    CLOSED_EARLY = "closed_early"  # ended at once with nothing in it: back off, re-watch
    EXPIRED = "expired"  # ERROR 410: relist
    TOO_LARGE = "too_large"  # ERROR 504 (RV ahead of the cache): back off, same RV
    ERROR = "error"  # another ERROR event: back off, relist


class _Step(enum.Enum):
    LIST = "list"
    WATCH = "watch"


@dataclass(frozen=True)
class _Recovery:
    step: _Step
    reason: str
    backoff: bool
    at_least: float = 0.0
    cap: float | None = None


class Informer:
    """List + watch one resource type in one scope into the cache; report changes.

    :meth:`run` is the whole loop; :meth:`list_once` and :meth:`watch_once` are its two steps,
    public so that tests can drive the protocol one step at a time.
    """

    def __init__(
        self,
        *,
        resource: ResourceType,
        namespace: str | None,
        source: MetadataSource,
        cache: MetadataCache,
        on_event: EventHandler,
        clock: Clock,
        metrics: InformerMetrics | None = None,
        settings: InformerSettings | None = None,
        on_resource_gone: ResourceGoneHandler | None = None,
        on_change_seen: ChangeSeen | None = None,
        rng: random.Random | None = None,
        field_selector: str | None = None,
    ) -> None:
        if namespace is not None and not resource.namespaced:
            raise ValueError(f"{resource} is cluster-scoped: it has no namespace scope")
        self.resource = resource
        self.namespace = namespace
        self._source = source
        self._cache = cache
        self._on_event = on_event
        self._clock = clock
        self._metrics = NoInformerMetrics() if metrics is None else metrics
        self._settings = InformerSettings() if settings is None else settings
        self._on_gone = on_resource_gone
        self._on_change_seen = on_change_seen
        self._rng = random.Random() if rng is None else rng
        # Sent only when set (``metadata.name=<name>``: one object, with RBAC by resourceNames).
        self._selector = {"field_selector": field_selector} if field_selector else {}
        s = self._settings
        self._backoff = Backoff(
            clock,
            initial=s.backoff_initial,
            maximum=s.backoff_max,
            factor=s.backoff_factor,
            jitter=s.backoff_jitter,
            reset_after=s.backoff_reset_after,
            rng=self._rng,
        )
        self._resource_version: str | None = None
        self._lists = 0
        self._failures = 0
        self._log = _log.bind(resource=str(resource), scope=namespace or "*")
        cache.register_scope(resource, namespace)

    @property
    def resource_version(self) -> str | None:
        """The last resourceVersion seen (list or any watch event); None before the first list."""
        return self._resource_version

    @property
    def synced(self) -> bool:
        return self._cache.is_synced(self.resource, self.namespace)

    @property
    def failures(self) -> int:
        """Consecutive failed lists or watches (0 after any successful request)."""
        return self._failures

    @property
    def disconnected(self) -> bool:
        """True while the cache cannot be kept current: from the ``disconnected_after``-th
        consecutive failed list or watch (any cause) until the next successful request."""
        return self._failures >= self._settings.disconnected_after

    def _succeeded(self) -> None:
        """A request was answered: start the backoff over and clear the failure count."""
        if self._failures:
            self._log.info("api server answers again", failures=self._failures)
        self._failures = 0
        self._backoff.reset()

    # ------------------------------------------------------------------ the loop

    async def run(self) -> None:
        """List, watch, recover, forever; returns only when the resource type is gone (404)."""
        step = _Step.LIST
        expired_in_a_row = 0
        while True:
            try:
                if step is _Step.LIST:
                    await self.list_once()
                    step = _Step.WATCH
                end = await self.watch_once()
            except asyncio.CancelledError:
                raise
            except NotFound as error:
                self._log.warning(
                    "resource type no longer served; informer stops", error=str(error)
                )
                self._metrics.watch_restarted(self.resource, "not_found")
                if self._on_gone is not None:
                    self._on_gone(self.resource)
                return
            except Exception as error:
                if being_cancelled():
                    raise asyncio.CancelledError from error  # a cancel turned into an error
                if isinstance(error, Forbidden) and self._settings.stop_when_forbidden:
                    raise
                self._failures += 1
                recovery = self._recovery_for(error, step)
            else:
                if end is WatchEnd.CLOSED:
                    self._succeeded()
                recovery = self._recovery_after(end, expired_in_a_row)
                expired_in_a_row = expired_in_a_row + 1 if end is WatchEnd.EXPIRED else 0
            self._metrics.watch_restarted(self.resource, recovery.reason)
            step = recovery.step
            if recovery.backoff:
                delay = await self._backoff.wait(at_least=recovery.at_least, cap=recovery.cap)
                self._log.debug("retrying", reason=recovery.reason, delay=round(delay, 3))

    def _recovery_after(self, end: WatchEnd, expired_in_a_row: int) -> _Recovery:
        if end is WatchEnd.CLOSED:
            return _Recovery(_Step.WATCH, end.value, backoff=False)
        if end is WatchEnd.EXPIRED:
            # Relist at once, but a second 410 right after a fresh list waits first.
            return _Recovery(_Step.LIST, end.value, backoff=expired_in_a_row > 0)
        if end in (WatchEnd.CLOSED_EARLY, WatchEnd.TOO_LARGE):
            return _Recovery(_Step.WATCH, end.value, backoff=True)
        return _Recovery(_Step.LIST, end.value, backoff=True)

    def _recovery_for(self, error: Exception, step: _Step) -> _Recovery:
        """Map a failure in ``step`` to what happens next (404 is handled by the caller)."""
        after_list = step is _Step.LIST or self._resource_version is None
        same = _Step.LIST if after_list else _Step.WATCH
        if isinstance(error, Gone):
            return _Recovery(_Step.LIST, "expired", backoff=after_list)
        if isinstance(error, Forbidden):
            self._log.error(
                "access forbidden: grant list and watch on this resource (RBAC)",
                step=step.value,
                error=str(error),
            )
            return _Recovery(_Step.LIST, "forbidden", backoff=True)
        if isinstance(error, Unauthorized):
            self._log.error("credentials rejected", step=step.value, error=str(error))
            return _Recovery(_Step.LIST, "unauthorized", backoff=True)
        if isinstance(error, TooManyRequests):
            self._log.info("throttled by the API server", step=step.value)
            return _Recovery(same, "throttled", backoff=True, at_least=error.retry_after or 0.0)
        if isinstance(error, TransportError | ServerError):
            self._log.info("connection lost or server error", step=step.value, error=str(error))
            reason = "transport" if isinstance(error, TransportError) else "server_error"
            # Failing again: relist, so the first answer after an outage is a full list.
            retry = _Step.LIST if self._failures > 1 else same
            cap = self._settings.backoff_transport_max if reason == "transport" else None
            return _Recovery(retry, reason, backoff=True, cap=cap)
        if isinstance(error, ApiError):
            self._log.warning("request refused", step=step.value, error=str(error))
            return _Recovery(_Step.LIST, "api_error", backoff=True)
        self._log.exception("unexpected informer failure", step=step.value)
        return _Recovery(_Step.LIST, "unexpected", backoff=True)

    # ------------------------------------------------------------------ list

    async def list_once(self) -> str:
        """Run one full (paginated) list into the cache; return its resourceVersion.

        The first list of this informer reads from the server's cache (``resourceVersion=0``),
        later ones are consistent reads. Synthesises deletes for cached keys of this scope
        that are gone, and marks the scope synced. Raises KubeError on failure.
        """
        relist = self._lists > 0
        consistent = relist
        restarts = 0
        while True:
            try:
                resource_version = await self._list_pages(None if consistent else "0")
                break
            except Gone:
                # An expired continue token: start over with a consistent list.
                restarts += 1
                if restarts > _LIST_RESTARTS:
                    raise
                consistent = True
                self._log.info("list continue token expired; listing again")
        self._lists += 1
        self._resource_version = resource_version
        self._succeeded()
        if relist:
            self._metrics.relisted(self.resource)
        self._cache.mark_synced(self.resource, self.namespace)
        self._change_seen()
        self._log.debug("listed", resource_version=resource_version)
        return resource_version

    async def _list_pages(self, resource_version: str | None) -> str:
        stale = set(self._cache.keys(self.resource, namespace=self.namespace))
        continue_token: str | None = None
        while True:
            page = await self._source.list_metadata(
                self.resource,
                namespace=self.namespace,
                limit=self._settings.page_size,
                continue_token=continue_token,
                resource_version=resource_version,
                **self._selector,
            )
            for item in page.get("items") or ():
                metadata = item.get("metadata") if isinstance(item, Mapping) else None
                if isinstance(metadata, Mapping):
                    stale.discard(self._upsert(metadata, created=True, listed=True))
            list_meta = page.get("metadata") or {}
            continue_token = list_meta.get("continue") or None
            if continue_token is None:
                break
        for key in stale:
            old = self._cache.delete(key)
            if old is not None:
                self._emit("delete", key, old, None)
        self._metrics.cache_objects(self.resource, self._cache.count(self.resource))
        return str(list_meta.get("resourceVersion", ""))

    # ------------------------------------------------------------------ watch

    async def watch_once(self) -> WatchEnd:
        """Watch from :attr:`resource_version` until the stream ends; apply every event.

        Returns how the stream ended; raises KubeError (TransportError for a broken or
        silent stream, Gone, NotFound, Forbidden, ...) when opening or reading it fails.
        """
        if self._resource_version is None:
            raise RuntimeError("watch_once() needs a resourceVersion: call list_once() first")
        timeout = self._rng.randint(
            self._settings.watch_timeout_min, self._settings.watch_timeout_max
        )
        started = self._clock.monotonic()
        received = False
        stream = self._source.watch_metadata(
            self.resource,
            namespace=self.namespace,
            resource_version=self._resource_version,
            timeout_seconds=timeout,
            **self._selector,
        )
        try:
            async for event in stream:
                obj = event.get("object")
                if not isinstance(obj, Mapping):
                    continue
                event_type = str(event.get("type", ""))
                if event_type == "ERROR":
                    return self._classify_error(obj)
                if not received:
                    self._succeeded()
                received = True
                self._apply_event(event_type, obj)
        finally:
            await _aclose(stream)
        if not received and self._clock.monotonic() - started < self._settings.min_watch_seconds:
            return WatchEnd.CLOSED_EARLY
        return WatchEnd.CLOSED

    def _apply_event(self, event_type: str, obj: Mapping[str, Any]) -> None:
        metadata = obj.get("metadata") or {}
        version = metadata.get("resourceVersion")
        if version:
            self._resource_version = str(version)
        self._metrics.event_received(self.resource, event_type)
        if event_type == "BOOKMARK":
            return
        if event_type in ("ADDED", "MODIFIED"):
            self._upsert(metadata, created=event_type == "ADDED", listed=False)
            self._change_seen()
        elif event_type == "DELETED":
            self._remove(metadata)
            self._change_seen()
        else:
            self._log.warning("unknown watch event type", event_type=event_type)
            return
        self._metrics.cache_objects(self.resource, self._cache.count(self.resource))

    def _classify_error(self, status: Mapping[str, Any]) -> WatchEnd:
        code = status.get("code")
        message = str(status.get("message", ""))
        if code == 410:
            self._log.info("watch expired; relisting", message=message)
            return WatchEnd.EXPIRED
        if code == 504 or "too large resource version" in message.lower():
            self._log.info("watch resourceVersion ahead of the server cache", message=message)
            return WatchEnd.TOO_LARGE
        self._log.warning("watch error event", code=code, message=message)
        return WatchEnd.ERROR

    # ------------------------------------------------------------------ cache + delivery

    def _key(self, obj: CachedObject) -> ObjectKey:
        namespace = obj.namespace if self.resource.namespaced else None
        return ObjectKey(self.resource, namespace, obj.name)

    def _upsert(self, metadata: Mapping[str, Any], *, created: bool, listed: bool) -> ObjectKey:
        """Apply the current state of one object; return its key."""
        new = CachedObject.from_metadata(metadata)
        key = self._key(new)
        old = self._cache.get(key)
        if old is not None and old.uid != new.uid:
            # Deleted and recreated under the same name while we were not watching.
            self._cache.delete(key)
            self._emit("delete", key, old, None)
            old = None
            created = True
        if old is None:
            if new.annotated:
                self._cache.put(key, new)
                self._emit("add" if created else "update", key, None, new)
            return key
        if listed and old.resource_version == new.resource_version:
            return key
        if new.annotated:
            self._cache.put(key, new)
        else:
            self._cache.delete(key)
        self._emit("update", key, old, new)
        return key

    def _remove(self, metadata: Mapping[str, Any]) -> None:
        final = CachedObject.from_metadata(metadata)
        key = self._key(final)
        old = self._cache.delete(key)
        if old is not None or final.annotated:
            self._emit("delete", key, old, final)

    def _change_seen(self) -> None:
        if self._on_change_seen is None:
            return
        try:
            self._on_change_seen()
        except Exception:
            self._log.exception("change handler failed")

    def _emit(
        self, kind: EventKind, key: ObjectKey, old: CachedObject | None, new: CachedObject | None
    ) -> None:
        try:
            self._on_event(kind, key, old, new)
        except Exception:
            self._log.exception("event handler failed", change=kind, **key.log_context())


async def _aclose(stream: AsyncIterator[Any]) -> None:
    """Close an async generator early (releases the HTTP connection at once)."""
    close = getattr(stream, "aclose", None)
    if close is not None:
        await close()
