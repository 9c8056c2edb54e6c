"""The reference index: who uses each ConfigMap, Secret, PVC and ServiceAccount (``referencedBy``).

Open only while a policy in force reads ``referencedBy`` (:meth:`ReferenceWatch.want`),
whatever ``--watch-resource`` says: that flag names what the controller may act on, not what
it may read to decide. Then one informer per referring type (Pods, and the Pod templates of
Deployments, StatefulSets, DaemonSets, ReplicaSets, Jobs and CronJobs), purpose
``references``, through the one reflector; its projection
(:class:`~lifecycle_controller.controller.informer_projection.ReferenceFields`) keeps only the
references, in a :class:`~lifecycle_controller.core.objects.pod_references.ReferenceIndex`.

A change of who uses (namespace, kind, name) calls :attr:`ReferenceWatch.on_target`, so the
object used is re-evaluated in the same reconcile as any other change (a StatefulSet's claim
template is one target naming every claim of its ordinals: the listener re-queues those it
keeps, :func:`~lifecycle_controller.core.objects.pod_references.covers`); the first full list
of every type calls :attr:`ReferenceWatch.on_synced`. Until then :meth:`ReferenceWatch.missing`
says why the references are unknown (not synced yet, or the controller may not list a type),
and a condition reading them holds the object: nothing is deleted as unused on a partial index.
The changes before that call nothing: on_synced re-queues every object they could concern,
and the first list of many StatefulSets does not look through the kept claims once for each.
Readiness waits for it too while it is open (:attr:`ReferenceWatch.synced`, with
:meth:`ReferenceWatch.disconnected` afterwards), as it does for the other informers.
"""

from __future__ import annotations

import asyncio
import random
from collections.abc import Callable, Hashable, Mapping
from dataclasses import replace
from typing import Any, Final

import structlog

from lifecycle_controller.controller.informer_ports import (
    InformerMetrics,
    InformerSettings,
    Keeper,
    ObjectSource,
)
from lifecycle_controller.controller.informer_projection import ReferenceFields
from lifecycle_controller.controller.reflector import Informer
from lifecycle_controller.core.objects.pod_references import REFERRING_TYPES, ReferenceIndex, Target
from lifecycle_controller.core.objects.resources import ResourceType
from lifecycle_controller.core.policy.match import REFERENCES_NOT_SYNCED, ObjectView
from lifecycle_controller.kube import Forbidden
from lifecycle_controller.machinery.clock import Clock

__all__ = ["ReferenceWatch"]

_log = structlog.get_logger(__name__)

#: How long after a 403 a type's list is tried again (the chart's RBAC may be granted later).
FORBIDDEN_RETRY_SECONDS: Final = 60.0


class ReferenceWatch:
    """See the module docstring; one per pipeline."""

    def __init__(
        self,
        source: ObjectSource,
        clock: Clock,
        *,
        namespaces: tuple[str, ...] | None = None,
        metrics: InformerMetrics | None = None,
        settings: InformerSettings | None = None,
        types: tuple[ResourceType, ...] = REFERRING_TYPES,
    ) -> None:
        self._source = source
        self._clock = clock
        #: Exact namespaces to watch (``--watch-namespace`` without globs); None: all.
        self._namespaces: tuple[str | None, ...] = namespaces or (None,)
        self._metrics = metrics
        self._settings = (
            InformerSettings(stop_when_forbidden=True) if settings is None else settings
        )
        self._types = types
        self.index = ReferenceIndex()
        self._keepers: list[_ReferenceKeeper] = []
        self._tasks: list[asyncio.Task[None]] = []
        self._informers: dict[tuple[ResourceType, str | None], Informer] = {}
        self._forbidden: set[ResourceType] = set()
        self._notified = False
        #: Told (namespace, kind, name) when who uses it changed.
        self.on_target: Callable[[str, str, str], None] = lambda namespace, kind, name: None
        #: Told once every type has been listed (objects held for it may go now).
        self.on_synced: Callable[[], None] = lambda: None

    @property
    def running(self) -> bool:
        return bool(self._tasks)

    @property
    def synced(self) -> bool:
        return self.running and all(keeper.synced for keeper in self._keepers)

    def missing(self) -> str | None:
        """Why the references are unknown (None: they are known)."""
        if self._forbidden:
            names = ", ".join(sorted(r.key for r in self._forbidden))
            return (
                f"references unknown: the controller may not list and watch {names} "
                "(the chart's referencedBy RBAC switch grants it)"
            )
        if not self.synced:
            return REFERENCES_NOT_SYNCED
        return None

    def disconnected(self) -> list[str]:
        """The reference informers that cannot reach the API server right now (readiness
        reports them, as it does the other informers): ``"pods (references)"``."""
        return sorted(
            f"{resource}{'' if namespace is None else f' in {namespace}'} (references)"
            for (resource, namespace), informer in self._informers.items()
            if informer.disconnected
        )

    def referenced_by(self, namespace: str | None, kind: str, name: str) -> tuple[str, ...]:
        return self.index.referenced_by(namespace, kind, name)

    def view_of(self, view: ObjectView) -> ObjectView:
        """``view`` with what uses it, or with why that is unknown."""
        missing = self.missing()
        if missing is not None:
            return replace(view, referenced_by=None, references_missing=missing)
        found = self.index.referenced_by(view.namespace, view.resource.kind, view.name)
        return replace(view, referenced_by=found)

    def want(self, wanted: bool) -> None:
        """Open the informers (a policy reads ``referencedBy``) or close them (none does)."""
        if wanted and not self._tasks:
            self._start()
        elif not wanted and self._tasks:
            self._stop()

    def _start(self) -> None:
        _log.info(
            "a policy reads referencedBy: watching the reference fields of Pods and workloads"
        )
        self._notified = False
        for resource in self._types:
            for namespace in self._namespaces:
                keeper = _ReferenceKeeper(self, resource)
                self._keepers.append(keeper)
                self._tasks.append(
                    asyncio.create_task(
                        self._run(resource, namespace, keeper), name=f"references {resource}"
                    )
                )

    def _stop(self) -> None:
        _log.info("no policy reads referencedBy: the reference index is closed")
        for task in self._tasks:
            task.cancel()
        self._tasks.clear()
        self._keepers.clear()
        self._informers.clear()
        self._forbidden.clear()
        self.index = ReferenceIndex()

    async def _run(self, resource: ResourceType, namespace: str | None, keeper: Keeper) -> None:
        while True:
            informer = Informer(
                resource=resource,
                namespace=namespace,
                projection=ReferenceFields(self._source, resource.kind),
                keeper=keeper,
                clock=self._clock,
                purpose="references",
                metrics=self._metrics,
                settings=self._settings,
                rng=random.Random(),
            )
            self._informers[(resource, namespace)] = informer
            try:
                await informer.run()
                return
            except Forbidden:
                if resource not in self._forbidden:
                    _log.warning(
                        "may not list the reference fields; policies reading referencedBy hold",
                        resource=str(resource),
                    )
                self._forbidden.add(resource)
            await self._clock.sleep(FORBIDDEN_RETRY_SECONDS)

    def _kept(self, resource: ResourceType) -> None:
        self._forbidden.discard(resource)
        if not self._notified and self.synced:
            self._notified = True
            _log.info("the reference index is synced", referrers=len(self.index))
            self.on_synced()

    def _put(self, namespace: str, referrer: str, targets: frozenset[Target]) -> None:
        changed = self.index.put(namespace, referrer, targets)
        if not self._notified:
            return  # every object reading the index is held; on_synced re-queues them all
        for kind, name in changed:
            self.on_target(namespace, kind, name)

    async def aclose(self) -> None:
        tasks = list(self._tasks)
        self._stop()
        await asyncio.gather(*tasks, return_exceptions=True)


class _ReferenceKeeper(Keeper):
    """One type's share of the index: keys are (namespace, ``"Kind/name"``)."""

    def __init__(self, watch: ReferenceWatch, resource: ResourceType) -> None:
        super().__init__()
        self._watch = watch
        self._resource = resource
        self._keys: set[Hashable] = set()

    def _key(self, obj: Mapping[str, Any]) -> tuple[str, str]:
        metadata = obj.get("metadata") or {}
        return (
            str(metadata.get("namespace") or ""),
            f"{self._resource.kind}/{metadata.get('name')}",
        )

    def listing(self) -> set[Hashable]:
        return set(self._keys)

    def upsert(self, obj: Mapping[str, Any], *, created: bool, listed: bool) -> Hashable:
        key = self._key(obj)
        self._keys.add(key)
        self._watch._put(*key, frozenset(obj.get("references") or ()))
        return key

    def remove(self, obj: Mapping[str, Any]) -> None:
        key = self._key(obj)
        self._keys.discard(key)
        self._watch._put(*key, frozenset())

    def listed(self, stale: set[Hashable]) -> None:
        for key in stale:
            if isinstance(key, tuple) and len(key) == 2:
                self._keys.discard(key)
                self._watch._put(str(key[0]), str(key[1]), frozenset())
        super().listed(stale)
        self._watch._kept(self._resource)
