"""The reflector: one informer keeps a store in step with the API server.

Every watch of the process runs this loop: the annotated types into the metadata cache,
Namespaces (their defaults), CRDs (rediscovery), lifecycle policies and followed rollouts.
What differs between them is given: a :class:`~.projection.Projection` says what is asked
for and read of each object (metadata only, whole objects), a :class:`~.ports.Keeper` keeps
it (the shared cache through :class:`~.cache_writer.CacheWriter`, the policy store, the
rollout watch), and ``purpose`` names the watch in logs and metrics
(``lifecycle_watch_*{resource,purpose}``). One asyncio task per informer runs client-go's
reflector loop (docs/architecture.md#informer-loop):

1. **List.** A *streaming list* when the projection can (a watch with
   ``sendInitialEvents=true`` whose ADDED events up to the ``k8s.io/initial-events-end``
   bookmark are the list, then an ordinary watch on the same stream); else, and for good
   once a server refuses it (400/422), paged consistent reads (``limit`` + ``continue``; an
   expired continue token restarts the list), each next page asked for before the current
   one is stored, so that the server reads it meanwhile (at most two pages held; leaving the
   list cancels the one in flight: :func:`~lifecycle_controller.kube.paging.pages`). Keys
   kept but not listed get a *synthesised* delete (client-go's ``DeletedFinalStateUnknown``);
   the keeper is synced after the first full list. A keeper that needs no state from before
   its watch lists one object, for the resourceVersion only; one given a
   ``resource_version`` starts with the watch.
2. **Watch** from the list's resourceVersion with ``allowWatchBookmarks`` and a random
   ``timeoutSeconds`` in [300, 600] (so many informers do not reconnect in lockstep),
   remembering the resourceVersion of every event, bookmarks included (an event of an object
   the keeper would keep nothing of is dropped undecoded, its resourceVersion still read:
   :class:`~lifecycle_controller.controller.watch.cache_writer.UnkeptEvents`).
3. **Recover** (:mod:`~lifecycle_controller.controller.watch.recovery`): a normal end
   re-watches at once; ``ERROR 410`` relists; ``ERROR 504`` waits and re-watches; any other
   ERROR waits and relists; a broken or silent stream (the kube door's idle cutoff, ~90 s)
   waits and re-watches, and relists the second time in a row. 403 is retried with backoff
   unless ``stop_when_forbidden`` ends the informer; 404 (the API is gone) stops it through
   ``on_resource_gone``. Waits: 0.8 s doubling to 30 s plus up to 100 % jitter, reset after
   every successful request; after a connection error at most 0.8 s plus jitter
   (docs/reliability.md#watch-recovery). ``on_answered_again`` hears when a request is
   answered after failures; :meth:`Informer.retry_now` cuts a wait short.
4. From its second consecutive failed list or watch until its next successful one, the
   informer is :attr:`Informer.disconnected` (readiness reports it, docs/behaviour.md#readiness);
   both changes are logged once, at warning. :attr:`Informer.delivering` says whether its
   current watch has delivered since it last failed.

Each informer runs in its own task, so one failing informer never stops the others.
"""

from __future__ import annotations

import asyncio
import contextlib
import random
from collections.abc import AsyncIterator, Awaitable, Callable, Hashable, Mapping
from typing import Any

import structlog

from lifecycle_controller.controller.watch.ports import (
    InformerMetrics,
    InformerSettings,
    Keeper,
    NoInformerMetrics,
    ResourceGoneHandler,
)
from lifecycle_controller.controller.watch.projection import Projection
from lifecycle_controller.controller.watch.recovery import (
    Step,
    WatchEnd,
    recovery_after,
    recovery_for,
    watch_end_of,
)
from lifecycle_controller.core.objects.keys import PREFIX
from lifecycle_controller.kube import (
    ApiError,
    EventFilter,
    Forbidden,
    Gone,
    NotFound,
    ResourceType,
    RestingFilter,
    TransportError,
    is_added_event,
)
from lifecycle_controller.kube.collector import collector_paused
from lifecycle_controller.kube.frame_names import skip_unkept_frames
from lifecycle_controller.kube.paging import pages
from lifecycle_controller.kube.watch_protobuf import FrameSkipper, SkippingFilter
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
    """List + watch one resource type in one scope into a keeper; see the module docstring.

    :meth:`run` is the whole loop; :meth:`list_once` and :meth:`watch_once` are its two steps,
    public so that tests (and an owner that must list before it runs, the policy store) can
    drive the protocol one step at a time.
    """

    def __init__(
        self,
        *,
        resource: ResourceType,
        namespace: str | None,
        projection: Projection,
        keeper: Keeper,
        clock: Clock,
        purpose: str = "objects",
        metrics: InformerMetrics | None = None,
        settings: InformerSettings | None = None,
        on_resource_gone: ResourceGoneHandler | None = None,
        rng: random.Random | None = None,
        field_selector: str | None = None,
        on_answered_again: Callable[[], None] | None = None,
        resource_version: str | None = None,
        gate: Callable[[], Awaitable[object]] | None = None,
    ) -> None:
        if namespace is not None and not resource.namespaced:
            raise ValueError(f"{resource} is cluster-scoped: it has no namespace scope")
        self.resource = resource
        self.namespace = namespace
        self.purpose = purpose
        self._projection = projection
        self._keeper = keeper
        self._clock = clock
        self._metrics = NoInformerMetrics() if metrics is None else metrics
        self._settings = InformerSettings() if settings is None else settings
        self._on_gone = on_resource_gone
        self._rng = random.Random() if rng is None else rng
        self._field_selector = field_selector or None
        s = self._settings
        self._on_answered_again = on_answered_again
        self._wake = asyncio.Event()
        self._backoff = s.backoff(clock, self._rng)
        self._resource_version = resource_version
        #: Awaited before the first list reads anything (then dropped): a streaming list
        #: opens its request first (:meth:`stream_once`).
        self._gate = gate
        self._streaming = s.streaming_list and projection.streams and keeper.full_lists
        self._stream_listed = False
        self._lists = 0
        self._failures = 0
        self._delivering = False
        self._log = _log.bind(resource=str(resource), scope=namespace or "*", purpose=purpose)

    @property
    def projection(self) -> Projection:
        """What this informer asks for and keeps of each object."""
        return self._projection

    @property
    def resource_version(self) -> str | None:
        """The last resourceVersion seen (list or any watch event); None before the first list."""
        return self._resource_version

    @property
    def synced(self) -> bool:
        return self._keeper.synced

    @property
    def failures(self) -> int:
        """Consecutive failed lists or watches (0 after any successful request)."""
        return self._failures

    @property
    def disconnected(self) -> bool:
        """True while the store cannot be kept current: from the ``disconnected_after``-th
        consecutive failed list or watch (any cause) until the next successful request."""
        return self._failures >= self._settings.disconnected_after

    @property
    def delivering(self) -> bool:
        """Its watch delivered an event (a bookmark counts) and has not failed since."""
        return self._delivering

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
        self._delivering = False
        if self._failures == self._settings.disconnected_after:
            self._log.warning(
                "cannot list or watch; retrying with backoff until the api server answers",
                failures=self._failures,
                error=str(error) or type(error).__name__,
            )

    # ------------------------------------------------------------------ the loop

    async def run(self) -> None:
        """List, watch, recover, forever; returns only when the resource type is gone (404).

        An informer that knows a resourceVersion already (given, or :meth:`list_once` was
        called) starts with the watch."""
        step = Step.LIST if self._resource_version is None else Step.WATCH
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
                # An optional watch's owner reports it (the policy store, once).
                log = self._log.debug if self._settings.stop_when_forbidden else self._log.warning
                log("resource type no longer served; informer stops", error=str(error))
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
                elif end is not WatchEnd.CLOSED_EARLY:
                    self._delivering = False  # an ERROR event
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
        """Run one full (paginated) list into the keeper; return its resourceVersion.

        The first list of this informer reads from the server's cache (``resourceVersion=0``),
        later ones are consistent reads. Synthesises deletes for keys the keeper held that
        are gone, and marks it synced. A keeper without :attr:`~Keeper.full_lists` is given
        nothing: one object is asked for, for the resourceVersion. Raises KubeError.
        """
        await self._through_gate()
        if not self._keeper.full_lists:
            page = await self._list_page(limit=1, continue_token=None, resource_version=None)
            version = str((page.get("metadata") or {}).get("resourceVersion", ""))
            self._listed(version, set())
            return version
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

    async def _through_gate(self) -> None:
        """Wait for :attr:`_gate` the first time a list asks (a no-op afterwards)."""
        gate, self._gate = self._gate, None
        if gate is not None:
            await gate()

    def _listed(self, resource_version: str, stale: set[Hashable]) -> None:
        """A full list is in: synthesise deletes for ``stale`` keys, mark the keeper synced."""
        self._keeper.listed(stale)
        self._count()
        if self._lists:
            self._metrics.relisted(self.resource)
        self._lists += 1
        self._resource_version = resource_version
        self._succeeded()
        self._keeper.change_seen()
        self._log.debug("listed", resource_version=resource_version)

    def _count(self) -> None:
        count = self._keeper.count()
        if count is not None:
            self._metrics.cache_objects(self.resource, count)

    async def _list_page(
        self,
        *,
        limit: int,
        continue_token: str | None,
        resource_version: str | None,
        namespace: str | None = None,
        exactly: bool = False,
    ) -> Mapping[str, Any]:
        return await self._projection.list_page(
            self.resource,
            namespace=namespace or self.namespace,
            limit=limit,
            continue_token=continue_token,
            resource_version=resource_version,
            field_selector=self._field_selector,
            **({"resource_version_match": "Exact"} if exactly else {}),
        )

    async def _list_pages(self, resource_version: str | None) -> str:
        stale = self._keeper.listing()

        async def fetch(continue_token: str | None) -> Mapping[str, Any]:
            return await self._list_page(
                limit=self._settings.page_size,
                continue_token=continue_token,
                resource_version=resource_version,
            )

        listed_version = ""
        # The next page is asked for before this one is stored: the server works meanwhile.
        async with contextlib.aclosing(pages(fetch, ahead=True)) as listed:
            async for page in listed:
                with collector_paused():  # stored and freed before the collector sees it
                    listed_version = self._store_page(page, stale)
                    del page
        self._listed(listed_version, stale)
        return listed_version

    def _store_page(self, page: Mapping[str, Any], stale: set[Hashable]) -> str:
        """Hand the kept part of each listed object to the keeper (its key leaves ``stale``);
        the page's resourceVersion."""
        kept = self._projection.kept
        for item in page.get("items") or ():
            mapping = isinstance(item, (dict, Mapping))  # dict first: no ABC check
            part = kept(item) if mapping else None
            if part is not None:
                stale.discard(self._keeper.upsert(part, created=True, listed=True))
        return str((page.get("metadata") or {}).get("resourceVersion", ""))

    async def list_exactly(
        self, namespace: str, version: str, put: Callable[[Mapping[str, Any]], None]
    ) -> None:
        """One namespace of this cluster-wide informer's type exactly as at ``version``
        (``resourceVersionMatch=Exact``, with its projection), each object's kept part handed
        to ``put``, the keeper not told (:mod:`.namespace_relist` merges). Raises KubeError
        (410 Gone once ``version`` is compacted)."""

        async def fetch(continue_token: str | None) -> Mapping[str, Any]:
            return await self._list_page(
                limit=self._settings.page_size,
                continue_token=continue_token,
                resource_version=version,
                namespace=namespace,
                exactly=True,
            )

        async for page in pages(fetch):
            for item in page.get("items") or ():
                part = self._projection.kept(item) if isinstance(item, Mapping) else None
                if part is not None:
                    put(part)

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
        object, kept as a paginated list keeps it; at the bookmark, keys the keeper held
        that were not listed get synthesised deletes and it is synced; after it, events
        apply as in :meth:`watch_once`. Initial objects the keeper would keep nothing of are
        dropped before they are decoded (docs/architecture.md#informer-loop). An informer
        given a ``gate`` opens the request, then waits for it before the first frame is read,
        and asks the keeper only then what the list keeps.
        Returns how the stream ended; raises KubeError, and TransportError when it ends
        before its initial events do.
        """
        self._stream_listed = False
        listing = True
        decode_if = _ListThenWatch(
            self._keeper, self._keeper.unkept_filter(self._skipped, self._settings.watch_rest)
        )
        gated = self._gate is not None

        async def before_reading() -> None:
            await self._through_gate()
            decode_if.prepare(self._keeper)  # what the list keeps, as the keeper says now

        stream = self._projection.watch_list(
            self.resource,
            namespace=self.namespace,
            timeout_seconds=self._watch_timeout(),
            field_selector=self._field_selector,
            decode_if=decode_if,
            before_reading=before_reading if gated else None,
        )
        try:
            async for event in stream:
                obj = event.get("object")
                if not isinstance(obj, Mapping):
                    continue
                event_type = str(event.get("type", ""))
                if event_type == "ERROR":
                    return watch_end_of(obj, self._log)
                if not listing:
                    self._apply_event(event_type, obj)
                    continue
                metadata = obj.get("metadata")
                if not isinstance(metadata, Mapping):
                    continue
                if event_type == "ADDED":
                    part = self._projection.kept(obj)
                    if part is not None:
                        decode_if.stale.discard(
                            self._keeper.upsert(part, created=True, listed=True)
                        )
                elif event_type == "BOOKMARK":
                    annotations = metadata.get("annotations") or {}
                    if annotations.get(_INITIAL_EVENTS_END) == "true":
                        listing = decode_if.listing = False
                        self._listed(str(metadata.get("resourceVersion", "")), decode_if.stale)
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

        def skipped(event_type: str, version: str) -> None:
            nonlocal received
            if not received:
                self._succeeded()
                received = True
            self._skipped(event_type, version)

        stream = self._projection.watch(
            self.resource,
            namespace=self.namespace,
            resource_version=self._resource_version,
            timeout_seconds=timeout,
            field_selector=self._field_selector,
            decode_if=self._keeper.watch_filter()
            or self._keeper.unkept_filter(skipped, self._settings.watch_rest),
        )
        try:
            async for event in stream:
                obj = event.get("object")
                if not isinstance(obj, Mapping):
                    continue
                event_type = str(event.get("type", ""))
                if event_type == "ERROR":
                    return watch_end_of(obj, self._log)
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

    def _skipped(self, event_type: str, version: str) -> None:
        """An event dropped undecoded (:meth:`~lifecycle_controller.controller.watch.ports.
        Keeper.unkept_filter`): what applying it would have changed, its resourceVersion and
        the counts."""
        self._resource_version = version
        self._delivering = True
        self._metrics.event_received(self.resource, event_type)

    def _apply_event(self, event_type: str, obj: Mapping[str, Any]) -> None:
        metadata = obj.get("metadata") or {}
        version = metadata.get("resourceVersion")
        if version:
            self._resource_version = str(version)
        self._delivering = True
        self._metrics.event_received(self.resource, event_type)
        if event_type == "BOOKMARK":
            return
        part = self._projection.kept(obj)
        if part is None:
            return
        if event_type in ("ADDED", "MODIFIED"):
            self._keeper.upsert(part, created=event_type == "ADDED", listed=False)
            self._keeper.change_seen()
        elif event_type == "DELETED":
            self._keeper.remove(part)
            self._keeper.change_seen()
        else:
            self._log.warning("unknown watch event type", event_type=event_type)
            return
        self._count()


class _ListThenWatch:
    """The filter of a streaming list: while its initial events come, an ADDED frame without
    a lifecycle annotation is dropped when the keeper may skip those, else when the keeper's
    filter for the list (``listed``: :meth:`~lifecycle_controller.controller.watch.ports.
    Keeper.listed_filter`, which reports nothing, since nothing is applied before the
    bookmark) refuses it (and the stream never rests: a list is read as fast as it comes);
    after them, the keeper's unkept filter, resting as it says."""

    __slots__ = ("_listed", "_skip_unannotated", "_skipper", "_unkept", "listing", "stale")

    def __init__(self, keeper: Keeper, unkept: EventFilter | None) -> None:
        self._unkept = unkept
        self.listing = True
        self.stale: set[Hashable] = set()
        self._skip_unannotated = False
        self._listed: EventFilter | None = None
        self._skipper: FrameSkipper | None = None
        self.prepare(keeper)

    def prepare(self, keeper: Keeper) -> None:
        """What the list keeps, as ``keeper`` says now (again before the first frame when
        the list was gated): the keys it holds (``stale`` until listed again), and the
        filter of the initial events."""
        self.stale = keeper.listing()
        self._skip_unannotated = not self.stale and keeper.skips_unannotated()
        self._listed = keeper.listed_filter()
        if self._skip_unannotated:
            self._skipper = _skip_unannotated
        elif isinstance(self._listed, SkippingFilter):
            self._skipper = self._listed.skipper
        else:
            self._skipper = None

    @property
    def skipper(self) -> FrameSkipper | None:
        """While the initial events come, the list filter's over a run of frames
        (:class:`~lifecycle_controller.kube.watch_protobuf.SkippingFilter`); then none."""
        return self._skipper if self.listing else None

    @property
    def rest_after_refused(self) -> float:
        if self.listing or not isinstance(self._unkept, RestingFilter):
            return 0.0
        return self._unkept.rest_after_refused

    def __call__(self, raw: bytes | bytearray, start: int, end: int) -> bool:
        if not self.listing:
            return self._unkept is None or self._unkept(raw, start, end)
        if self._skip_unannotated:
            return not is_added_event(raw, start) or raw.find(_PREFIX_BYTES, start, end) >= 0
        return self._listed is None or self._listed(raw, start, end)  # it passes non-ADDED


def _skip_unannotated(buffer: bytearray, start: int, stop: int, most: int) -> tuple[int, int]:
    """The run of ADDED frames without a lifecycle annotation from ``start``, dropped."""
    return skip_unkept_frames(buffer, start, stop, most, marker=_PREFIX_BYTES, kept=None)


async def _aclose(stream: AsyncIterator[Any]) -> None:
    """Close an async generator early (releases the HTTP connection at once)."""
    close = getattr(stream, "aclose", None)
    if close is not None:
        await close()
