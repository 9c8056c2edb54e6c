"""The reference index: who uses each ConfigMap, Secret, PVC and ServiceAccount (``referencedBy``).

Open only while a policy in force reads ``referencedBy`` (:meth:`ReferenceWatch.want`),
whatever ``--watch-resource`` says: that flag names what the controller may act on, not what
it may read to decide. Then one informer per referring type (Pods, and the Pod templates of
Deployments, StatefulSets, DaemonSets, ReplicaSets, Jobs and CronJobs) per *scope*, purpose
``references``, through the one reflector. A Pod refers to objects of its own namespace
only, so while only LifecyclePolicies read ``referencedBy`` the scopes are their namespaces
(opened and closed as such policies come and go); once a ClusterLifecyclePolicy reads it,
cluster-wide (or the exact ``--watch-namespace`` names) as before
(docs/architecture.md#scoped-relists). Its projection
(:class:`~lifecycle_controller.controller.watch.projection.ReferenceFields`) keeps only the
references, in a :class:`~lifecycle_controller.core.objects.pod_references.ReferenceIndex`.

A change of who uses (namespace, kind, name) calls :attr:`ReferenceWatch.on_target`, so the
object used is re-evaluated in the same reconcile as any other change (a StatefulSet's claim
template is one target naming every claim of its ordinals: the listener re-queues those it
keeps, :func:`~lifecycle_controller.core.objects.pod_references.covers`); the first full list
of every type in a scope calls :attr:`ReferenceWatch.on_synced`. Until then
:meth:`ReferenceWatch.missing` says why the references of that scope's objects are unknown
(not synced yet, or the controller may not list a type), and a condition reading them holds
the object: nothing is deleted as unused on a partial index. The changes a scope sees before
that call nothing: on_synced re-queues every object they could concern, and the first list of
many StatefulSets does not look through the kept claims once for each. Readiness waits for
the scopes open at start to sync (:attr:`ReferenceWatch.synced`, with
:meth:`ReferenceWatch.disconnected` afterwards), as it does for the other informers, but not
for a type the controller may not list (:meth:`ReferenceWatch.refused`), nor for a scope a
policy opens once the replica has been ready: that is a tenant's policy, held on its own.
"""

from __future__ import annotations

from collections.abc import Callable, Hashable, Mapping
from dataclasses import replace
from functools import partial
from typing import Any, Final

import structlog

from lifecycle_controller.controller.watch.ports import (
    InformerMetrics,
    InformerSettings,
    Keeper,
    ObjectSource,
)
from lifecycle_controller.controller.watch.projection import ReferenceFields
from lifecycle_controller.controller.watch.reflector import Informer
from lifecycle_controller.controller.watch.supervisor import (
    InformerSupervisor,
    Stop,
    Stopped,
)
from lifecycle_controller.core.objects.pod_references import REFERRING_TYPES, ReferenceIndex, Target
from lifecycle_controller.core.objects.resources import ResourceType
from lifecycle_controller.core.policy.match import REFERENCES_NOT_SYNCED, ObjectView
from lifecycle_controller.machinery.clock import Clock

__all__ = ["ReferenceWatch"]

_log = structlog.get_logger(__name__)

_Key = tuple[ResourceType, str | None]

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
        on_target: Callable[[str, str, str], None] = lambda namespace, kind, name: None,
        on_synced: Callable[[], None] = lambda: None,
    ) -> None:
        self._source = source
        self._clock = clock
        #: Exact namespaces to watch (``--watch-namespace`` without globs); None: all.
        self._namespaces: tuple[str | None, ...] = namespaces or (None,)
        #: One watch per (referring type, scope): a 404 ends it, a 403 is tried again after
        #: FORBIDDEN_RETRY_SECONDS (the chart's RBAC may be granted later).
        self._watches: InformerSupervisor[_Key] = InformerSupervisor(
            clock=clock,
            metrics=metrics,
            settings=InformerSettings(stop_when_forbidden=True) if settings is None else settings,
            on_stop=self._stopped,
        )
        self._types = types
        self.index = ReferenceIndex()
        #: The open scopes (a namespace, None: cluster-wide), each one's keepers.
        self._scopes: dict[str | None, _Scope] = {}
        self._forbidden: set[_Key] = set()
        #: Told (namespace, kind, name) when who uses it changed.
        self.on_target = on_target
        #: Told each time a scope has been listed by every type (objects held for it may go).
        self.on_synced = on_synced

    @property
    def running(self) -> bool:
        return bool(self._scopes)

    @property
    def scopes(self) -> frozenset[str | None]:
        """The open scopes: namespaces, or None for cluster-wide."""
        return frozenset(self._scopes)

    @property
    def synced(self) -> bool:
        """Every open scope has been listed by every type (False while none is open)."""
        return self.running and all(scope.synced for scope in self._scopes.values())

    def _scope_of(self, namespace: str | None) -> _Scope | None:
        """The open scope that holds the references of an object in ``namespace``."""
        return self._scopes.get(None) or (
            None if namespace is None else self._scopes.get(namespace)
        )

    def refused(self, namespace: str | None = None) -> str | None:
        """Why the controller may not list a referring type (None: it may): in the scope of
        ``namespace``, or of any open scope when None. RBAC, not an outage: readiness does
        not wait for it (a tenant's policy reading ``referencedBy`` does not take the
        controller out of its Service); the policies reading it hold their objects and
        say why."""
        forbidden = {
            resource.key
            for resource, scope in self._forbidden
            if namespace is None or scope in (None, namespace)
        }
        if not forbidden:
            return None
        names = ", ".join(sorted(forbidden))
        return (
            f"references unknown: the controller may not list and watch {names} "
            "(the chart's rbac.readReferences switch grants it)"
        )

    def missing(self, namespace: str | None = None) -> str | None:
        """Why the references are unknown (None: they are known): of the objects in
        ``namespace``, or of any open scope when None."""
        refused = self.refused(namespace)
        if refused is not None:
            return refused
        if namespace is None:
            return None if self.synced else REFERENCES_NOT_SYNCED
        scope = self._scope_of(namespace)
        return None if scope is not None and scope.synced else REFERENCES_NOT_SYNCED

    def disconnected(self) -> list[str]:
        """The reference informers that cannot reach the API server right now (readiness
        reports them, as it does the other informers): ``"pods (references)"``."""
        return sorted(
            f"{resource}{'' if namespace is None else f' in {namespace}'} (references)"
            for resource, namespace in self._watches.disconnected()
        )

    def referenced_by(self, namespace: str | None, kind: str, name: str) -> tuple[str, ...]:
        return self.index.referenced_by(namespace, kind, name)

    def view_of(self, view: ObjectView) -> ObjectView:
        """``view`` with what uses it, or with why that is unknown."""
        missing = self.missing(view.namespace)
        if missing is not None:
            return replace(view, referenced_by=None, references_missing=missing)
        found = self.index.referenced_by(view.namespace, view.resource.kind, view.name)
        return replace(view, referenced_by=found)

    def want(self, wanted: bool, namespaces: frozenset[str] | None = None) -> None:
        """Open the informers (a policy reads ``referencedBy``: in ``namespaces`` only when
        given, those of the LifecyclePolicies that read it; else cluster-wide) or close
        them (none does). Scopes no longer wanted close, new ones open."""
        scopes: set[str | None] = set()
        if wanted and namespaces is None:
            scopes.update(self._namespaces)
        elif wanted and namespaces is not None:
            bound = self._namespaces != (None,)
            scopes.update(n for n in namespaces if not bound or n in self._namespaces)
        closing = [scope for scope in self._scopes if scope not in scopes]
        opening = sorted((s for s in scopes if s not in self._scopes), key=lambda s: s or "")
        if not self._scopes and opening:
            _log.info(
                "a policy reads referencedBy: watching the reference fields of Pods and workloads",
                namespaces=None if None in scopes else sorted(s for s in scopes if s),
            )
        for scope in closing:
            self._close(scope)
        for scope in opening:
            self._open(scope)
        if closing and not self._scopes:
            _log.info("no policy reads referencedBy: the reference index is closed")
            self.index = ReferenceIndex()

    def _open(self, namespace: str | None) -> None:
        scope = self._scopes[namespace] = _Scope()
        for resource in self._types:
            keeper = _ReferenceKeeper(self, resource, namespace)
            scope.keepers.append(keeper)
            self._watches.start(
                (resource, namespace),
                partial(self._informer, keeper),
                name=f"references {resource} {namespace or '*'}",
                forbidden=partial(self._clock.sleep, FORBIDDEN_RETRY_SECONDS),
            )

    def _informer(self, keeper: _ReferenceKeeper) -> Informer:
        return self._watches.informer(
            keeper.resource,
            namespace=keeper.namespace,
            projection=ReferenceFields(self._source, keeper.resource.kind),
            keeper=keeper,
            purpose="references",
        )

    def _close(self, namespace: str | None) -> None:
        """Stop one scope and forget what its informers put in the index (quietly: no
        policy reading it concerns that scope any more)."""
        scope = self._scopes.pop(namespace)
        for keeper in scope.keepers:
            self._watches.cancel((keeper.resource, namespace))
            keeper.forget()
            self._forbidden.discard((keeper.resource, namespace))

    def _stopped(self, stopped: Stopped[_Key]) -> None:
        """A 403 marks the type refused in its scope (warned once) until a list succeeds;
        a 404 just ends the watch."""
        if stopped.why is not Stop.FORBIDDEN:
            return
        if stopped.key not in self._forbidden:
            resource, namespace = stopped.key
            _log.warning(
                "may not list the reference fields; policies reading referencedBy hold",
                resource=str(resource),
                namespace=namespace,
            )
        self._forbidden.add(stopped.key)

    def _kept(self, keeper: _ReferenceKeeper) -> None:
        self._forbidden.discard((keeper.resource, keeper.namespace))
        scope = self._scopes.get(keeper.namespace)
        if scope is None or scope.notified or not scope.synced:
            return
        scope.notified = True
        _log.info(
            "the reference index is synced", namespace=keeper.namespace, referrers=len(self.index)
        )
        self.on_synced()

    def _put(self, namespace: str, referrer: str, targets: frozenset[Target]) -> None:
        changed = self.index.put(namespace, referrer, targets)
        scope = self._scope_of(namespace)
        if scope is None or not scope.notified:
            return  # every object reading this scope is held; on_synced re-queues them all
        for kind, name in changed:
            self.on_target(namespace, kind, name)

    async def aclose(self) -> None:
        self.want(False)
        await self._watches.aclose()


class _Scope:
    """One open scope of the index: an informer per referring type."""

    __slots__ = ("keepers", "notified")

    def __init__(self) -> None:
        self.keepers: list[_ReferenceKeeper] = []
        #: ``on_synced`` was told of this scope.
        self.notified = False

    @property
    def synced(self) -> bool:
        return all(keeper.synced for keeper in self.keepers)


class _ReferenceKeeper(Keeper):
    """One type's share of the index: keys are (namespace, ``"Kind/name"``)."""

    def __init__(
        self, watch: ReferenceWatch, resource: ResourceType, namespace: str | None
    ) -> None:
        super().__init__()
        self._watch = watch
        self.resource = resource
        self.namespace = namespace
        self._keys: set[Hashable] = set()

    def forget(self) -> None:
        """Take what this keeper put out of the index, telling nobody (its scope closed)."""
        for key in self._keys:
            if isinstance(key, tuple) and len(key) == 2:
                self._watch.index.put(str(key[0]), str(key[1]), frozenset())
        self._keys.clear()

    def _key(self, obj: Mapping[str, Any]) -> tuple[str, str]:
        metadata = obj.get("metadata") or {}
        return (
            str(metadata.get("namespace") or ""),
            f"{self.resource.kind}/{metadata.get('name')}",
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
        self._watch._kept(self)
