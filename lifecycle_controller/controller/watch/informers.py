"""Informers for a changing set of resource types: one reflector task per (type, scope).

:class:`InformerSet` starts and stops informers for whole resource types; each runs
:class:`~lifecycle_controller.controller.watch.reflector.Informer` (client-go's reflector loop over
metadata-only requests, or whole objects cut down to the paths policies' conditions read:
docs/architecture.md#informer-loop) in its own task of the
:class:`~lifecycle_controller.controller.watch.supervisor.InformerSupervisor`, so one
failing informer never stops the others; a type the API server no longer serves (404) ends
its watches until :meth:`InformerSet.ensure` starts them again. Changes reach one synchronous,
non-blocking handler ``on_object_change(kind, key, old, new)``; the composition root applies
the scope and relevance predicates there and adds keys to the work queue.
"""

from __future__ import annotations

import asyncio
import random
from collections.abc import Callable, Iterable, Sequence
from functools import partial

from lifecycle_controller.controller.watch.cache import MetadataCache
from lifecycle_controller.controller.watch.cache_writer import CacheWriter
from lifecycle_controller.controller.watch.namespace_relist import NamespaceRelists
from lifecycle_controller.controller.watch.ports import (
    ChangeHandler,
    ChangeKind,
    InformerMetrics,
    InformerSettings,
    MetadataSource,
    NoInformerMetrics,
    ObjectSource,
    ResourceGoneHandler,
)
from lifecycle_controller.controller.watch.projection import (
    FieldProjection,
    MetadataProjection,
    Projection,
)
from lifecycle_controller.controller.watch.reflector import Informer
from lifecycle_controller.controller.watch.supervisor import InformerSupervisor
from lifecycle_controller.kube import ResourceType
from lifecycle_controller.machinery.clock import Clock

__all__ = [
    "ChangeHandler",
    "ChangeKind",
    "InformerMetrics",
    "InformerSet",
    "InformerSettings",
    "MetadataSource",
]

_Key = tuple[ResourceType, str | None]


class InformerSet:
    """Informers for a changing set of resource types, one task per (type, scope).

    With ``namespaces`` (exact names, docs/behaviour.md#read-scoping) every namespaced type
    gets one informer per namespace, so namespaced Roles suffice; cluster-scoped types are
    always watched cluster-wide. ``None`` means cluster-wide for every type. A type is listed
    again whole (:meth:`relist`) or in some namespaces only (:meth:`relist_namespaces`). With
    ``gated``, the informers started before :meth:`release` open their lists but read nothing
    until then (docs/reliability.md#start-up).
    """

    def __init__(
        self,
        *,
        source: MetadataSource,
        cache: MetadataCache,
        on_object_change: ChangeHandler,
        clock: Clock,
        namespaces: Sequence[str] | None = None,
        metrics: InformerMetrics | None = None,
        settings: InformerSettings | None = None,
        on_resource_gone: ResourceGoneHandler | None = None,
        rng: random.Random | None = None,
        on_answered_again: Callable[[], None] | None = None,
        objects: ObjectSource | None = None,
        reads: Callable[[ResourceType], frozenset[tuple[str, ...]]] | None = None,
        gated: bool = False,
    ) -> None:
        self._projection = MetadataProjection(source)
        #: Set while lists may read: with ``gated``, only once :meth:`release` is called (the
        #: lists of the annotated types wait for the policies; a streaming list opens its
        #: request meanwhile: docs/reliability.md#start-up).
        self._released = asyncio.Event()
        if not gated:
            self._released.set()
        #: Whole objects, for the types whose policies' conditions read beyond metadata
        #: (``reads``: those paths); every other type is metadata-only.
        self._objects = objects
        self._reads = reads
        self._on_answered_again = on_answered_again
        self._cache = cache
        self._on_object_change = on_object_change
        self._clock = clock
        self._namespaces = None if namespaces is None else sorted(set(namespaces))
        self._metrics = NoInformerMetrics() if metrics is None else metrics
        self._settings = InformerSettings() if settings is None else settings
        self._on_gone = on_resource_gone
        self._rng = random.Random() if rng is None else rng
        #: One watch per (type, scope); a 404 ends it (:meth:`ensure` starts it again).
        self._watches: InformerSupervisor[_Key] = InformerSupervisor(
            clock=clock, metrics=self._metrics, settings=self._settings, rng=self._rng
        )
        #: The scopes of each type's watches (also of those a 404 ended).
        self._started: dict[ResourceType, list[str | None]] = {}
        #: False until the first :meth:`ensure` (the initial watch set, even an empty one):
        #: before it "every informer has listed" would be true of none, and report ready.
        self._ensured = False
        #: The cache writer of each informer, and per type the namespaces of its cluster-wide
        #: informer waiting to be listed again (:meth:`relist_namespaces`, made when asked).
        self._writers: dict[_Key, CacheWriter] = {}
        self._relists: dict[ResourceType, NamespaceRelists] = {}

    def scopes(self, resource: ResourceType) -> list[str | None]:
        """The scopes one type is watched in: its namespaces, or [None] for cluster-wide."""
        if self._namespaces is None or not resource.namespaced:
            return [None]
        return list(self._namespaces)

    async def ensure(self, types: Iterable[ResourceType]) -> list[ResourceType]:
        """Start informers for every type in ``types`` not running yet; return those started.

        A type whose informers stopped (the API was gone) is started again. Types not in
        ``types`` are left alone: use :meth:`stop` for those.
        """
        started: list[ResourceType] = []
        self._ensured = True
        for resource in types:
            scopes = self._started.get(resource, [])
            if scopes and all(self._watches.running((resource, s)) for s in scopes):
                continue
            if scopes:  # stopped because the API was gone: start over from nothing
                await self._watches.stop(*((resource, scope) for scope in scopes))
                await self._close_relists(resource)
                self._cache.drop_type(resource)
            self._start(resource, self.scopes(resource))
            started.append(resource)
        return started

    def _start(self, resource: ResourceType, scopes: Iterable[str | None]) -> None:
        self._started[resource] = list(scopes)
        for scope in self._started[resource]:
            self._start_scope(resource, scope)

    def _start_scope(self, resource: ResourceType, scope: str | None) -> None:
        self._watches.start(
            (resource, scope),
            partial(self._informer, resource, scope),
            name=f"informer {resource} {scope or '*'}",
        )

    def _informer(self, resource: ResourceType, scope: str | None) -> Informer:
        writer = CacheWriter(
            resource, scope, self._cache, self._on_object_change, on_listed=self._watches.listed
        )
        self._writers[(resource, scope)] = writer
        return self._watches.informer(
            resource,
            namespace=scope,
            projection=self.projection(resource),
            keeper=writer,
            purpose="objects",
            on_resource_gone=self._on_gone,
            on_answered_again=self._on_answered_again,
            gate=None if self._released.is_set() else self._released.wait,
        )

    def projection(self, resource: ResourceType) -> Projection:
        """What the informers of ``resource`` ask for: the paths the policies' conditions
        read, or metadata only (chosen at each start and relist)."""
        paths = frozenset() if self._reads is None else self._reads(resource)
        if paths and self._objects is not None:
            return FieldProjection(self._objects, paths)
        return self._projection

    async def relist(self, resource: ResourceType) -> None:
        """List ``resource`` again from scratch, keeping its cached objects meanwhile (a
        lifecycle policy that selects it changed: objects to keep may differ)."""
        for _ in await self._restart(resource):
            self._metrics.relisted(resource)

    async def _restart(self, resource: ResourceType) -> list[str | None]:
        """Start the informers of ``resource`` over; return their scopes."""
        scopes = self._started.get(resource)
        if not scopes:
            return []
        await self._watches.stop(*((resource, scope) for scope in scopes))
        await self._close_relists(resource)  # the lists from scratch read every namespace
        self._start(resource, scopes)
        return list(scopes)

    async def relist_namespaces(self, resource: ResourceType, namespaces: Iterable[str]) -> None:
        """List ``resource`` again in ``namespaces`` only (the LifecyclePolicies there changed
        what is kept: docs/architecture.md#scoped-relists), keeping its cached objects
        meanwhile. A cluster-wide informer goes on watching; each namespace is listed at its
        watch's resourceVersion and merged into the cache for that namespace alone
        (:class:`~lifecycle_controller.controller.watch.namespace_relist.NamespaceRelists`).
        Per-namespace informers (``--watch-namespace``) of those namespaces are started over.
        A type not listed yet (its first list still reading) is listed again whole."""
        wanted = set(namespaces)
        scopes = self._started.get(resource)
        if not scopes or not wanted:
            return
        if not resource.namespaced or not self._cache.type_synced(resource):
            await self.relist(resource)
            return
        if None in scopes:
            self._namespace_relists(resource).request(wanted)
            return
        for scope in sorted(wanted & {s for s in scopes if s is not None}):
            await self._watches.stop((resource, scope))
            self._start_scope(resource, scope)
            self._metrics.relisted(resource)

    def _namespace_relists(self, resource: ResourceType) -> NamespaceRelists:
        relists = self._relists.get(resource)
        if relists is None:
            relists = self._relists[resource] = NamespaceRelists(
                self._informer_of(resource, None),
                self._writers[(resource, None)],
                self._clock,
                settings=self._settings,
                rng=random.Random(self._rng.random()),
            )
        return relists

    def namespace_relists(self, resource: ResourceType) -> NamespaceRelists | None:
        """The namespaces of ``resource`` listed again, if any ever was (tests read it)."""
        return self._relists.get(resource)

    async def _close_relists(self, resource: ResourceType) -> None:
        relists = self._relists.pop(resource, None)
        if relists is not None:
            await relists.aclose()

    def release(self) -> None:
        """Let gated lists read (see ``gated``); informers started from now on are not gated."""
        self._released.set()

    async def reproject(self) -> None:
        """Start over, before they read anything, the gated informers whose projection is no
        longer what :meth:`projection` chooses (the policies, loaded meanwhile, read fields
        of the type beyond its metadata): nothing of theirs was read, so this is no relist."""
        for resource in sorted(self._started):
            wanted = _projected(self.projection(resource))
            if any(
                _projected(self._informer_of(resource, scope).projection) != wanted
                for scope in self._started[resource]
            ):
                await self._restart(resource)

    async def stop(self, resource: ResourceType) -> None:
        """Stop the informers of ``resource`` and drop its objects and synced flags."""
        scopes = self._started.pop(resource, [])
        await self._watches.stop(*((resource, scope) for scope in scopes))
        await self._close_relists(resource)
        for scope in scopes:
            self._writers.pop((resource, scope), None)
        self._cache.drop_type(resource)
        self._metrics.cache_objects(resource, 0)

    def running(self) -> set[ResourceType]:
        """Types with informers (including ones that stopped because their API is gone)."""
        return set(self._started)

    def synced(self) -> bool:
        """Every scope of every type has completed its first list (True when the initial watch
        set is empty; False before it was applied)."""
        return self._ensured and self._cache.all_synced(self._started)

    async def wait_synced(self, timeout: float) -> bool:
        """Return once :meth:`synced`, or after ``timeout`` seconds of the clock; True when
        synced (the workers wait here at start: docs/reliability.md#start-up)."""
        return await self._watches.wait_synced(timeout, self.synced)

    def _informer_of(self, resource: ResourceType, scope: str | None) -> Informer:
        informer = self._watches.informer_of((resource, scope))
        assert informer is not None, "every started scope has an informer"
        return informer

    def informers(self) -> list[Informer]:
        """The informers started (their state: synced, disconnected, delivering)."""
        return list(self._watches.informers().values())

    def disconnected(self) -> list[str]:
        """The running informers that cannot reach the API server (or are refused) right now:
        ``"<resource>"`` or ``"<resource> in <namespace>"``, sorted (readiness reports them)."""
        return sorted(_scoped(*key) for key in self._watches.disconnected())

    def not_listed(self) -> list[str]:
        """The informers that have not completed a first list, named as :meth:`disconnected`
        names them, sorted."""
        return sorted(
            _scoped(resource, scope)
            for (resource, scope), informer in self._watches.informers().items()
            if not informer.synced
        )

    async def aclose(self) -> None:
        """Stop every informer (objects stay in the cache). Idempotent."""
        self._started.clear()
        self._writers.clear()
        await self._watches.aclose()
        for resource in list(self._relists):
            await self._close_relists(resource)

    async def __aenter__(self) -> InformerSet:
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.aclose()


def _projected(projection: Projection) -> tuple[type, frozenset[tuple[str, ...]]]:
    """What a projection asks for: its kind and the paths it keeps beyond metadata."""
    paths = projection.paths if isinstance(projection, FieldProjection) else frozenset()
    return type(projection), paths


def _scoped(resource: ResourceType, scope: str | None) -> str:
    """How the informer of ``resource`` in ``scope`` is named in readiness and logs."""
    return str(resource) if scope is None else f"{resource} in {scope}"
