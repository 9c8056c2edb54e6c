"""The namespace-defaults store: what each Namespace sets for the objects in it.

Namespace defaults (docs/annotations.md#namespace-defaults) need a Namespace's annotations
whether or not Namespaces are in the watch list, so this store runs informers of its own on
Namespaces: the same metadata-only reflector loop as every other informer
(:class:`~lifecycle_controller.controller.watch.reflector.Informer`), each into a cache of its own
(which keeps only lifecycle annotations and labels). Cluster-wide, one
informer reads every Namespace; with exact ``--watch-namespace`` names, one informer per name
lists and watches with ``fieldSelector=metadata.name=<name>``, so RBAC on just those
Namespace objects suffices.

The same store says whether a Namespace is exempt from the policies that are not enforced
(:meth:`NamespaceDefaultsStore.exempt`, which policy matching reads).

A change of a Namespace's defaults or exemption
(:func:`~lifecycle_controller.core.decision.namespace_defaults.namespace_defaults_changed`)
calls ``on_change(name)`` (the requeue rules re-evaluate that namespace's objects,
:mod:`~lifecycle_controller.controller.reconcile.requeue`), and reports its invalid values once, as
Warning Events on the Namespace (``report``) and a log line.

A named Namespace that does not exist (a typo in ``--watch-namespace``) is logged at warning
and listed by :meth:`NamespaceDefaultsStore.missing` for readiness
(:mod:`~lifecycle_controller.controller.namespace.presence`, the keeper of that informer).

While a policy in force has a ``namespaceSelector`` (:meth:`NamespaceDefaultsStore.
keep_labels`), the same caches keep every Namespace's labels
(:class:`~lifecycle_controller.controller.namespace.labels.NamespaceLabelViews`), which it
reads (:meth:`NamespaceDefaultsStore.labels`); a change of them once the store has synced (a
new Namespace too) calls ``on_labels_change(name)``. When that need starts or ends, the
Namespaces are listed again, the caches kept meanwhile: each Namespace then found with labels
to keep is a change, so its objects are decided again with its labels (one relabelled while
they were unknown is not missed), and the labels no longer needed leave the caches.

Reading Namespaces is not granted by older installations: when it is forbidden (or the API
does not serve Namespaces), the store logs an error, counts as synced with no defaults for
that scope (the controller behaves as it did without this feature) and tries again later.
"""

from __future__ import annotations

import asyncio
import random
from collections.abc import Awaitable, Callable, Mapping, Sequence
from dataclasses import replace
from functools import partial

import structlog

from lifecycle_controller.controller.namespace.labels import (
    NamespaceLabelViews,
    labels_changed,
    labels_of,
)
from lifecycle_controller.controller.namespace.presence import PresenceKeeper
from lifecycle_controller.controller.watch.cache import CachedObject, MetadataCache
from lifecycle_controller.controller.watch.cache_writer import CacheWriter
from lifecycle_controller.controller.watch.ports import (
    ChangeKind,
    InformerMetrics,
    InformerSettings,
    Keeper,
    MetadataSource,
)
from lifecycle_controller.controller.watch.projection import MetadataProjection
from lifecycle_controller.controller.watch.reflector import Informer
from lifecycle_controller.controller.watch.supervisor import (
    InformerSupervisor,
    Stop,
    Stopped,
)
from lifecycle_controller.core.decision.events import Event
from lifecycle_controller.core.decision.namespace_defaults import (
    NamespaceDefaults,
    namespace_default_annotations,
    namespace_defaults_changed,
    parse_namespace_defaults,
)
from lifecycle_controller.core.objects.resources import ObjectKey, ObjectRef
from lifecycle_controller.kube.resources import NAMESPACES
from lifecycle_controller.machinery.backoff import Backoff
from lifecycle_controller.machinery.clock import Clock

__all__ = ["NamespaceDefaultsStore"]

_log = structlog.get_logger(__name__)

Report = Callable[[ObjectRef, Event], Awaitable[object]]


class NamespaceDefaultsStore:
    """Parsed defaults per Namespace, kept current by metadata-only Namespace informers."""

    def __init__(
        self,
        *,
        source: MetadataSource,
        clock: Clock,
        names: Sequence[str] | None = None,
        on_change: Callable[[str], None] | None = None,
        on_labels_change: Callable[[str], None] | None = None,
        report: Report | None = None,
        settings: InformerSettings | None = None,
        retry_after: float = 60.0,
        rng: random.Random | None = None,
        metrics: InformerMetrics | None = None,
    ) -> None:
        self._projection = MetadataProjection(source)
        self._clock = clock
        #: None: one cluster-wide informer; else one per exact name.
        self._scopes: list[str | None] = [None] if names is None else [*sorted(set(names))]
        self._on_change = on_change
        self._on_labels_change = on_labels_change
        self._report = report
        base = settings or InformerSettings()
        # No quick-retry cap after connection errors: while the API server is unreachable
        # these informers back off on the shared curve (0.8 s doubling to 30 s, with jitter)
        # instead of retrying about once a second; defaults matter only once objects can be
        # read and written again (docs/reliability.md#namespace-informers).
        self._settings = replace(
            base, stop_when_forbidden=True, backoff_transport_max=base.backoff_max
        )
        self._retry_after = retry_after
        #: One watch per scope: a 403 or 404 marks the scope unavailable and is tried again
        #: after a backoff; :meth:`keep_labels` lists it again from scratch.
        self._watches: InformerSupervisor[str | None] = InformerSupervisor(
            clock=clock, metrics=metrics, settings=self._settings, rng=rng, on_stop=self._stopped
        )
        self._views = NamespaceLabelViews()
        self._caches = {scope: MetadataCache(policy_views=self._views) for scope in self._scopes}
        self._presence: dict[str, PresenceKeeper] = {}
        self._unavailable: set[str | None] = set()
        self._defaults: dict[str, NamespaceDefaults] = {}
        self._reports: asyncio.Queue[tuple[ObjectRef, Event]] = asyncio.Queue()
        self._ready = asyncio.Event()

    # ------------------------------------------------------------------ reading

    def get(self, namespace: str | None) -> NamespaceDefaults | None:
        """The defaults of ``namespace`` (None: none known, or a cluster-scoped object)."""
        return None if namespace is None else self._defaults.get(namespace)

    def exempt(self, name: str) -> bool:
        """Whether Namespace ``name`` is exempt: the policies that are not enforced leave its
        objects alone (docs/policies.md#which-objects-a-policy-matches)."""
        defaults = self._defaults.get(name)
        return defaults is not None and defaults.exempt

    def labels(self, name: str) -> Mapping[str, str] | None:
        """The labels of Namespace ``name``; None while unknown: not listed yet, not
        readable, or not there (a namespaceSelector then holds rather than guess)."""
        key = ObjectKey(NAMESPACES, None, name)
        for scope, cache in self._caches.items():
            if scope in (None, name) and cache.is_synced(NAMESPACES, None):
                found = labels_of(cache.get(key))
                if found is not None:
                    return found
        return None

    def keep_labels(self, wanted: bool) -> None:
        """Keep every Namespace's labels (a policy in force has a ``namespaceSelector``), or
        none (no policy has one); a change lists the Namespaces again (module docstring)."""
        if wanted == self._views.wanted:
            return
        self._views.wanted = wanted
        _log.info(
            "keeping every namespace's labels: a policy selects namespaces by label"
            if wanted
            else "no policy selects namespaces by label: their labels are dropped"
        )
        for scope in self._scopes:
            self._watches.relist(scope)

    def cached(self) -> int:
        """How many Namespaces the caches hold: those with lifecycle annotations, and every
        one while their labels are kept."""
        return sum(cache.count(NAMESPACES) for cache in self._caches.values())

    def synced(self) -> bool:
        """Every scope has listed once, or cannot be read (forbidden, not served)."""
        return all(
            scope in self._unavailable or cache.is_synced(NAMESPACES, None)
            for scope, cache in self._caches.items()
        )

    def informers(self) -> list[Informer]:
        """The Namespace informers started, one per scope."""
        return list(self._watches.informers().values())

    def disconnected(self) -> list[str]:
        """Namespace informers that cannot reach the API server right now (readiness)."""
        return sorted(
            "namespaces" if scope is None else f"namespaces/{scope}"
            for scope in self._watches.disconnected()
            if scope not in self._unavailable
        )

    def retry_now(self) -> None:
        """The API server answers again (another informer saw it): stop backing off now."""
        for informer in self._watches.informers().values():
            informer.retry_now()

    async def wait_synced(self) -> None:
        """Return once :meth:`synced` (workers wait for it before acting)."""
        await self._ready.wait()

    def _seen(self, scope: str | None) -> None:
        self._unavailable.discard(scope)
        self._check_synced()

    def _check_synced(self) -> None:
        if self.synced():
            self._ready.set()

    # ------------------------------------------------------------------ running

    async def run(self) -> None:
        """Run the informers and the reporter until cancelled."""
        for scope in self._scopes:
            self._start(scope)
        try:
            await self._run_reporter()
        finally:
            await self._watches.aclose()

    def missing(self) -> list[str]:
        """Named Namespaces (exact ``--watch-namespace``) that their list found absent."""
        return sorted(name for name, keeper in self._presence.items() if keeper.present is False)

    def _presence_changed(self, name: str, present: bool) -> None:
        if present:
            _log.info("watched namespace exists now", kind="Namespace", name=name)
        else:
            _log.warning(
                "watched namespace does not exist; nothing is watched in it until it is created",
                kind="Namespace",
                name=name,
            )

    def _start(self, scope: str | None) -> None:
        """Watch the Namespaces of ``scope``; a 403 or 404 is tried again after a backoff."""
        settings = self._settings
        cache = CacheWriter(
            NAMESPACES, None, self._caches[scope], self._on_object_change, lambda: self._seen(scope)
        )
        keeper: Keeper = cache
        if scope is not None:  # one named Namespace: note whether it exists
            keeper = self._presence[scope] = PresenceKeeper(
                cache, scope, lambda present: self._presence_changed(scope, present)
            )
            settings = replace(settings, streaming_list=False)  # a list of one is cheap
        retry = Backoff(self._clock, initial=self._retry_after, maximum=self._retry_after * 10)
        self._watches.start(
            scope,
            partial(self._informer, scope, keeper, settings),
            name=f"namespace informer {scope}",
            gone=retry.wait,
            forbidden=retry.wait,
            relists=True,
        )

    def _informer(self, scope: str | None, keeper: Keeper, settings: InformerSettings) -> Informer:
        return self._watches.informer(  # a new one lists first
            NAMESPACES,
            projection=self._projection,
            keeper=keeper,
            purpose="namespace-defaults",
            settings=settings,
            field_selector=None if scope is None else f"metadata.name={scope}",
        )

    def _stopped(self, stopped: Stopped[str | None]) -> None:
        """Namespaces are not served (404) or reading them is forbidden: the scope counts as
        synced with no defaults until a list succeeds (logged once)."""
        scope = stopped.key
        if stopped.why is Stop.GONE:
            problem = "namespaces are not served"
        else:
            problem = f"reading namespaces is forbidden: {stopped.error}"
        if scope not in self._unavailable:
            _log.error(
                "namespace defaults unavailable; grant get, list and watch on namespaces",
                scope=scope or "*",
                error=problem,
            )
        self._unavailable.add(scope)
        self._check_synced()

    async def _run_reporter(self) -> None:
        while True:
            ref, event = await self._reports.get()
            if self._report is None:
                continue
            try:
                await self._report(ref, event)
            except Exception:
                _log.exception("recording a namespace Warning failed", name=ref.key.name)

    # ------------------------------------------------------------------ changes

    def _on_object_change(
        self, kind: ChangeKind, key: ObjectKey, old: CachedObject | None, new: CachedObject | None
    ) -> None:
        name = key.name
        before: Mapping[str, str] = old.annotations if old is not None else {}
        after: Mapping[str, str] = new.annotations if new is not None and kind != "delete" else {}
        known = self._defaults.pop(name, None)  # what ``before`` parsed to
        if kind != "delete" and namespace_default_annotations(after):
            assert new is not None
            defaults = parse_namespace_defaults(name, after)
            self._defaults[name] = defaults
            previous = set() if known is None else {(p.key, p.value) for p in known.problems}
            for problem in defaults.problems:
                if (problem.key, problem.value) in previous:
                    continue
                _log.warning(
                    "invalid namespace default",
                    kind="Namespace",
                    name=name,
                    annotation=problem.key,
                    value=problem.value,
                    error=problem.error,
                )
                ref = ObjectRef(key, new.uid, new.resource_version)
                self._reports.put_nowait((ref, problem.event(new.uid)))
        if namespace_defaults_changed(before, after) and self._on_change is not None:
            self._on_change(name)
        # Not while first listing: no worker acts before then (wait_synced), so what is queued
        # meanwhile is decided with every label known, and N Namespaces do not rescan the cache.
        if (
            self._on_labels_change is not None
            and self._ready.is_set()
            and labels_changed(old, None if kind == "delete" else new)
        ):
            self._on_labels_change(name)
