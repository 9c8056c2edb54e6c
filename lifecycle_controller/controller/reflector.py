"""The reflector: one informer keeps the metadata cache in step with the API server.

One asyncio task per (resource type, namespace or cluster-wide) runs client-go's reflector
loop over metadata-only requests (docs/architecture.md#informer-loop):

1. **List.** By default a *streaming list*: one metadata-only watch with
   ``sendInitialEvents=true`` (client-go's WatchList) that starts with an ADDED event per
   current object (a consistent read, served from the API server's watch cache) and a
   bookmark marking the end of those initial events, then goes on as an ordinary watch, so a
   list costs one request and bounded memory on both sides. A server that refuses it
   (400/422: older, or the feature turned off) makes the informer list in pages from then on:
   ``PartialObjectMetadata`` in pages (``limit``, following ``continue``), consistent reads
   (an expired continue token restarts the list). Each listed object is compared with the
   cache and reported; keys of the scope that are cached but no longer listed get a
   *synthesised* delete (client-go's ``DeletedFinalStateUnknown``). The scope is marked
   synced after the first full list.
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
   again (docs/reliability.md); the Namespace-defaults informers turn that cap off. A second
   connection failure in a row relists instead of re-watching, so the first request after an
   outage is a list that proves the server is back (and catches deletes missed meanwhile).
   An informer whose request is answered after failures calls ``on_answered_again``; the
   app uses it to cut the Namespace-defaults informers' longer waits short
   (:meth:`Informer.retry_now`), so they resume with the others.
4. From its second consecutive failed list or watch until its next successful one, the
   informer is :attr:`Informer.disconnected`; the leader's readiness reports it
   (docs/behaviour.md#readiness). Both changes of that state are logged once, at warning;
   the single failures in between only at debug.

Only ``metadata`` is read from each object, projected into :class:`CachedObject` at once
(managedFields and everything else are never kept). Changes are reported to one
synchronous, non-blocking handler ``on_object_change(kind, key, old, new)``; the composition
root applies the scope and relevance predicates there and adds keys to the work queue.
What is delivered follows the cache's rule (see :mod:`~lifecycle_controller.controller.cache`):
only changes where the old or the new state carries a lifecycle annotation, with ``old=None``
meaning "not annotated before":

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
import random
from collections.abc import AsyncIterator, Callable, Mapping
from typing import Any

import structlog

from lifecycle_controller.controller.cache import MetadataCache
from lifecycle_controller.controller.cache_writer import CacheWriter
from lifecycle_controller.controller.informer_ports import (
    ChangeHandler,
    ChangeSeen,
    InformerMetrics,
    InformerSettings,
    MetadataSource,
    NoInformerMetrics,
    ResourceGoneHandler,
)
from lifecycle_controller.controller.informer_recovery import (
    Step,
    WatchEnd,
    recovery_after,
    recovery_for,
)
from lifecycle_controller.core.keys import PREFIX
from lifecycle_controller.core.resources import ObjectKey
from lifecycle_controller.kube import (
    ApiError,
    Forbidden,
    Gone,
    NotFound,
    ResourceType,
    TransportError,
    is_added_event,
)
from lifecycle_controller.kube.paging import pages
from lifecycle_controller.machinery.backoff import Backoff
from lifecycle_controller.machinery.clock import Clock
from lifecycle_controller.machinery.tasks import being_cancelled

__all__ = ["Informer", "WatchEnd"]

_log = structlog.get_logger(__name__)

#: How many times an expired continue token may restart one list before it counts as failed.
_LIST_RESTARTS = 3
#: The annotation of the bookmark that ends a streaming list's initial events.
_INITIAL_EVENTS_END = "k8s.io/initial-events-end"
#: The bytes every event of an object with a lifecycle annotation contains, as a JSON line
#: (Go escapes none of them) or as a protobuf frame (strings are plain UTF-8).
_PREFIX_BYTES = PREFIX.encode()


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
        on_object_change: ChangeHandler,
        clock: Clock,
        metrics: InformerMetrics | None = None,
        settings: InformerSettings | None = None,
        on_resource_gone: ResourceGoneHandler | None = None,
        on_change_seen: ChangeSeen | None = None,
        rng: random.Random | None = None,
        field_selector: str | None = None,
        on_answered_again: Callable[[], None] | None = None,
    ) -> None:
        if namespace is not None and not resource.namespaced:
            raise ValueError(f"{resource} is cluster-scoped: it has no namespace scope")
        self.resource = resource
        self.namespace = namespace
        self._source = source
        self._cache = cache
        self._clock = clock
        self._metrics = NoInformerMetrics() if metrics is None else metrics
        self._settings = InformerSettings() if settings is None else settings
        self._on_gone = on_resource_gone
        self._rng = random.Random() if rng is None else rng
        # Sent only when set (``metadata.name=<name>``: one object, with RBAC by resourceNames).
        self._selector = {"field_selector": field_selector} if field_selector else {}
        s = self._settings
        self._on_answered_again = on_answered_again
        self._wake = asyncio.Event()
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
        self._streaming = self._settings.streaming_list
        self._stream_listed = False
        self._lists = 0
        self._failures = 0
        self._log = _log.bind(resource=str(resource), scope=namespace or "*")
        self._writer = CacheWriter(resource, cache, on_object_change, on_change_seen, self._log)
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
        if self.disconnected:
            self._log.warning("api server answers again", failures=self._failures)
        elif self._failures:
            self._log.debug("api server answers again", failures=self._failures)
        if self._failures and self._on_answered_again is not None:
            self._on_answered_again()
        self._failures = 0
        self._backoff.reset()

    def retry_now(self) -> None:
        """End a backoff wait now (the API server answers another informer again)."""
        if self._failures:
            self._wake.set()

    def _failed(self, error: Exception) -> None:
        """Count one failed list or watch; log once when the informer becomes disconnected."""
        self._failures += 1
        if self._failures == self._settings.disconnected_after:
            self._log.warning(
                "cannot list or watch; retrying with backoff until the api server answers",
                failures=self._failures,
                error=str(error) or type(error).__name__,
            )

    # ------------------------------------------------------------------ the loop

    async def run(self) -> None:
        """List, watch, recover, forever; returns only when the resource type is gone (404)."""
        step = Step.LIST
        expired_in_a_row = 0
        while True:
            try:
                end: WatchEnd | None = None
                if step is Step.LIST:
                    if self._streaming:
                        end = await self._stream_or_fall_back()
                    if end is None:
                        await self.list_once()
                    step = Step.WATCH
                if end is None:
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
                if self._stream_listed:  # the streaming list completed; its watch failed
                    step = Step.WATCH
                self._failed(error)
                recovery = recovery_for(
                    error,
                    step,
                    has_version=self._resource_version is not None,
                    failures=self._failures,
                    transport_cap=self._settings.backoff_transport_max,
                    log=self._log,
                )
            else:
                if end is WatchEnd.CLOSED:
                    self._succeeded()
                recovery = recovery_after(end, expired_in_a_row)
                expired_in_a_row = expired_in_a_row + 1 if end is WatchEnd.EXPIRED else 0
            self._metrics.watch_restarted(self.resource, recovery.reason)
            step = recovery.step
            if recovery.backoff:
                delay = await self._backoff.wait(
                    at_least=recovery.at_least, cap=recovery.cap, wake=self._wake
                )
                self._wake.clear()
                self._log.debug("retrying", reason=recovery.reason, delay=round(delay, 3))

    # ------------------------------------------------------------------ list

    async def list_once(self) -> str:
        """Run one full (paginated) list into the cache; return its resourceVersion.

        The first list of this informer reads from the server's cache (``resourceVersion=0``),
        later ones are consistent reads. Synthesises deletes for cached keys of this scope
        that are gone, and marks the scope synced. Raises KubeError on failure.
        """
        consistent = self._lists > 0
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
        return resource_version

    def _listed(self, resource_version: str, stale: set[ObjectKey]) -> None:
        """A full list is in: synthesise deletes for ``stale`` keys, mark the scope synced."""
        self._writer.deleted_since_list(stale)
        self._metrics.cache_objects(self.resource, self._cache.count(self.resource))
        if self._lists:
            self._metrics.relisted(self.resource)
        self._lists += 1
        self._resource_version = resource_version
        self._succeeded()
        self._cache.mark_synced(self.resource, self.namespace)
        self._writer.change_seen()
        self._log.debug("listed", resource_version=resource_version)

    async def _list_pages(self, resource_version: str | None) -> str:
        stale = set(self._cache.keys(self.resource, namespace=self.namespace))

        async def fetch(continue_token: str | None) -> Mapping[str, Any]:
            return await self._source.list_metadata(
                self.resource,
                namespace=self.namespace,
                limit=self._settings.page_size,
                continue_token=continue_token,
                resource_version=resource_version,
                **self._selector,
            )

        listed_version = ""
        async for page in pages(fetch):
            for item in page.get("items") or ():
                metadata = item.get("metadata") if isinstance(item, Mapping) else None
                if isinstance(metadata, Mapping):
                    stale.discard(self._writer.upsert(metadata, created=True, listed=True))
            listed_version = str((page.get("metadata") or {}).get("resourceVersion", ""))
        self._listed(listed_version, stale)
        return listed_version

    # ------------------------------------------------------------------ streaming list

    async def _stream_or_fall_back(self) -> WatchEnd | None:
        """:meth:`stream_once`; None when the server does not serve streaming lists.

        Such a server refuses the request (400 or 422): this informer then lists in pages
        from now on."""
        try:
            return await self.stream_once()
        except ApiError as error:
            if error.status not in (400, 422) or self._stream_listed:
                raise
            self._streaming = False
            self._log.info(
                "the API server does not serve streaming lists; listing in pages",
                error=str(error),
            )
            return None

    async def stream_once(self) -> WatchEnd:
        """List by a streaming watch (initial events), then keep watching on that stream.

        Until the ``k8s.io/initial-events-end`` bookmark, every ADDED event is a listed
        object, applied as a paginated list applies it; at the bookmark, cached keys of this
        scope that were not listed get synthesised deletes and the scope is synced; after it,
        events apply as in :meth:`watch_once`. While the scope had nothing cached, initial
        objects without a lifecycle annotation cannot change anything and are dropped before
        they are decoded (docs/architecture.md#informer-loop). Returns how the stream ended;
        raises KubeError, and TransportError when it ends before its initial events do.
        """
        self._stream_listed = False
        stale = set(self._cache.keys(self.resource, namespace=self.namespace))
        skip_unannotated = not stale and not self._cache.keeps_unannotated(self.resource)
        listing = True

        def decode_if(raw: bytes | bytearray, start: int, end: int) -> bool:
            if listing and skip_unannotated and is_added_event(raw, start):
                return raw.find(_PREFIX_BYTES, start, end) >= 0
            return True

        stream = self._source.watch_list_metadata(
            self.resource,
            namespace=self.namespace,
            timeout_seconds=self._watch_timeout(),
            decode_if=decode_if,
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
                if not listing:
                    self._apply_event(event_type, obj)
                    continue
                metadata = obj.get("metadata")
                if not isinstance(metadata, Mapping):
                    continue
                if event_type == "ADDED":
                    stale.discard(self._writer.upsert(metadata, created=True, listed=True))
                elif event_type == "BOOKMARK":
                    annotations = metadata.get("annotations") or {}
                    if annotations.get(_INITIAL_EVENTS_END) == "true":
                        listing = False
                        self._listed(str(metadata.get("resourceVersion", "")), stale)
                        self._stream_listed = True
                else:
                    self._apply_event(event_type, obj)
        finally:
            await _aclose(stream)
        if listing:
            raise TransportError("the streaming list ended before its initial events did")
        return WatchEnd.CLOSED

    # ------------------------------------------------------------------ watch

    async def watch_once(self) -> WatchEnd:
        """Watch from :attr:`resource_version` until the stream ends; apply every event.

        Returns how the stream ended; raises KubeError (TransportError for a broken or
        silent stream, Gone, NotFound, Forbidden, ...) when opening or reading it fails.
        """
        if self._resource_version is None:
            raise RuntimeError("watch_once() needs a resourceVersion: call list_once() first")
        timeout = self._watch_timeout()
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

    def _watch_timeout(self) -> int:
        """A random ``timeoutSeconds`` (so many informers do not reconnect in lockstep)."""
        return self._rng.randint(self._settings.watch_timeout_min, self._settings.watch_timeout_max)

    def _apply_event(self, event_type: str, obj: Mapping[str, Any]) -> None:
        metadata = obj.get("metadata") or {}
        version = metadata.get("resourceVersion")
        if version:
            self._resource_version = str(version)
        self._metrics.event_received(self.resource, event_type)
        if event_type == "BOOKMARK":
            return
        if event_type in ("ADDED", "MODIFIED"):
            self._writer.upsert(metadata, created=event_type == "ADDED", listed=False)
            self._writer.change_seen()
        elif event_type == "DELETED":
            self._writer.remove(metadata)
            self._writer.change_seen()
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


async def _aclose(stream: AsyncIterator[Any]) -> None:
    """Close an async generator early (releases the HTTP connection at once)."""
    close = getattr(stream, "aclose", None)
    if close is not None:
        await close()
