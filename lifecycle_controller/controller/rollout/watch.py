"""The latest whole state of each workload whose rollout is followed, from one watch per type.

Following a rollout needs the workload's status, which the metadata-only informers do not
carry. Reading it (a GET, or a batched list, each time the workload changed) cost about four
reads per restarted Deployment, the largest cost of a restart storm after the restarts
themselves. While at least one workload of a type is followed, :class:`RolloutWatch` keeps
one watch of whole objects of that type open (JSON, every namespace), from the
resourceVersion of the first followed restart's answer, and keeps the latest state of each
followed workload. The watch is an :class:`~lifecycle_controller.controller.watch.reflector.
Informer` (whole objects, purpose ``rollouts``) whose keeper needs no state from before it:
it starts with the watch, and a list after a 410 asks for one object, for the
resourceVersion to go on from (the states missed in between are read by the followers,
whose cache has moved past the kept ones). When the informers read only the namespaces named in
``--watch-namespace`` (namespaced Roles suffice, docs/behaviour.md#read-scoping), there is one
such watch per type and namespace instead. Lines about other workloads are dropped
undecoded: a line is decoded only when a followed UID is found in its raw bytes.

The follower (:class:`~lifecycle_controller.controller.rollout.tracker.RolloutTracker`) is given
its turn when the cache or this watch moved, evaluates the kept state when it is new, and
while the watch delivers waits a few turns for it rather than read; when the watch lags too
long, fails, is refused, or has not delivered yet, it reads the workload as before. So the
watch only ever saves reads. The watch of a type ends when its last followed workload is no
longer followed (docs/behaviour.md#rollout-verification).
"""

from __future__ import annotations

import random
from collections.abc import Callable, Hashable, Mapping
from typing import Any

from lifecycle_controller.controller.watch.ports import (
    InformerMetrics,
    InformerSettings,
    Keeper,
    ObjectSource,
)
from lifecycle_controller.controller.watch.projection import WholeObjects
from lifecycle_controller.controller.watch.reflector import Informer
from lifecycle_controller.controller.watch.supervisor import InformerSupervisor
from lifecycle_controller.core import ObjectKey
from lifecycle_controller.core.objects.resources import ResourceType
from lifecycle_controller.kube import EventFilter
from lifecycle_controller.machinery.clock import Clock

__all__ = ["RolloutWatch", "WatchSource"]

_Scope = tuple[ResourceType, str | None]

_UID = b'"uid"'
_BLANK = b" \t\r\n"
#: Lines decoded whatever they are about: a bookmark moves the resourceVersion on, an error
#: ends the watch.
_ALWAYS = (b"BOOKMARK", b"ERROR")
_TYPE = b'"type"'


def _string_after(raw: bytes | bytearray, at: int, end: int) -> tuple[bytes | None, int]:
    """The JSON string value after a key that ends at ``at`` (``: "value"``, any blanks),
    and where reading stopped; None when no string value follows."""
    while at < end and raw[at] in _BLANK:
        at += 1
    if at >= end or raw[at] != ord(":"):
        return None, at
    at += 1
    while at < end and raw[at] in _BLANK:
        at += 1
    if at >= end or raw[at] != ord('"'):
        return None, at
    close = raw.find(b'"', at + 1, end)
    if close < 0:
        return None, end
    return bytes(raw[at + 1 : close]), close + 1


WatchSource = ObjectSource
"""What the rollout watch needs of the API client (``KubeClient`` has it)."""


class RolloutWatch:
    """Whole states of the followed workloads, kept from one watch per resource type."""

    def __init__(
        self,
        kube: WatchSource,
        clock: Clock,
        *,
        per_namespace: bool = False,
        settings: InformerSettings | None = None,
        metrics: InformerMetrics | None = None,
        rng: random.Random | None = None,
    ) -> None:
        self.kube = kube
        self.clock = clock
        #: One watch per type and namespace (the informers' namespaces are exact names).
        self.per_namespace = per_namespace
        self._projection = WholeObjects(kube)
        #: One watch per followed scope; a 404 ends it (the next :meth:`follow` starts it).
        self._watches: InformerSupervisor[_Scope] = InformerSupervisor(
            clock=clock, metrics=metrics, settings=settings, rng=rng
        )
        self._followed: dict[_Scope, dict[bytes, ObjectKey]] = {}  # by metadata UID
        self._uid_of: dict[ObjectKey, bytes] = {}
        #: The latest state kept per followed key, with its resourceVersion (what the
        #: ticker compares for a follower that moved).
        self._states: dict[ObjectKey, tuple[str, Mapping[str, Any]]] = {}
        #: Told the key of every state kept (the tracker's hint that a follower moved).
        self.on_state: Callable[[ObjectKey], None] = lambda key: None

    @property
    def watching(self) -> frozenset[_Scope]:
        """The (type, namespace or None) watches open or being opened."""
        return frozenset(self._watches.running_keys())

    def informers(self) -> list[Informer]:
        """The watches open or being opened, one per followed (type, namespace or None)."""
        return [
            informer
            for scope, informer in self._watches.informers().items()
            if self._watches.running(scope)
        ]

    def _scope(self, key: ObjectKey) -> _Scope:
        return (key.resource, key.namespace if self.per_namespace else None)

    def follow(self, key: ObjectKey, uid: str, resource_version: str) -> None:
        """Keep ``key``'s states from now on; ``resource_version``: its restart's answer
        (the type's watch, when it is not open yet, starts there)."""
        self.unfollow(key)
        scope = self._scope(key)
        self._followed.setdefault(scope, {})[uid.encode()] = key
        self._uid_of[key] = uid.encode()
        if not self._watches.running(scope):
            informer = self._watches.informer(
                scope[0],
                namespace=scope[1],
                projection=self._projection,
                keeper=_FollowedKeeper(self, scope),
                purpose="rollouts",
                resource_version=resource_version,
            )
            self._watches.start(scope, informer, name=f"rollout watch {key.resource}")

    def unfollow(self, key: ObjectKey) -> None:
        """``key`` is no longer followed; the last one of its type ends the type's watch."""
        uid = self._uid_of.pop(key, None)
        self._states.pop(key, None)
        if uid is None:
            return
        scope = self._scope(key)
        followed = self._followed.get(scope, {})
        followed.pop(uid, None)
        if not followed:
            self._followed.pop(scope, None)
            self._watches.cancel(scope)

    def streaming(self, key: ObjectKey) -> bool:
        """Is the watch that keeps ``key``'s states open and delivering (an event or a
        bookmark since it opened)?"""
        if key not in self._uid_of:
            return False
        informer = self._watches.informer_of(self._scope(key))
        return informer is not None and informer.delivering

    def version(self, key: ObjectKey) -> str | None:
        """The resourceVersion of the state kept for ``key`` (None: none kept yet)."""
        kept = self._states.get(key)
        return None if kept is None else kept[0]

    def state(self, key: ObjectKey) -> dict[str, Any] | None:
        """The latest state kept for ``key``: a copy the caller may change at the top and in
        its metadata (None: none kept yet)."""
        kept = self._states.get(key)
        if kept is None:
            return None
        obj = kept[1]
        return {**obj, "metadata": dict(obj.get("metadata") or {})}

    def decodes(self, scope: _Scope) -> EventFilter:
        """The filter of one watch (type, namespace or None): a line is decoded when a
        followed UID is in it (any ``uid`` field: an owner's too, then :meth:`_keep` finds it
        is not the workload's), and bookmarks and errors always."""

        def wanted(raw: bytes | bytearray, start: int, end: int) -> bool:
            at = raw.find(_TYPE, start, end)
            if at >= 0 and _string_after(raw, at + len(_TYPE), end)[0] in _ALWAYS:
                return True
            followed = self._followed.get(scope, {})
            at = raw.find(_UID, start, end)
            while at >= 0:
                value, at = _string_after(raw, at + len(_UID), end)
                if value is not None and value in followed:
                    return True
                at = raw.find(_UID, at, end)
            return False

        return wanted

    def _keep(self, scope: _Scope, obj: Mapping[str, Any], *, deleted: bool) -> None:
        metadata = obj.get("metadata")
        if not isinstance(metadata, Mapping):
            return
        key = self._followed.get(scope, {}).get(str(metadata.get("uid") or "").encode())
        if key is None:
            return
        if deleted:
            self._states.pop(key, None)
            return
        kept = dict(obj)
        kept.setdefault("kind", key.resource.kind)
        self._states[key] = (str(metadata.get("resourceVersion") or ""), kept)
        self.on_state(key)

    async def aclose(self) -> None:
        """Stop every watch and forget every state (the leader's work ends)."""
        self._followed.clear()
        self._uid_of.clear()
        self._states.clear()
        await self._watches.aclose()


class _FollowedKeeper(Keeper):
    """What one rollout watch keeps: the latest state of each followed workload of its
    scope, nothing from before the watch (lists only find where it goes on from)."""

    full_lists = False

    def __init__(self, watch: RolloutWatch, scope: _Scope) -> None:
        super().__init__()
        self._watch = watch
        self._scope = scope

    def upsert(self, obj: Mapping[str, Any], *, created: bool, listed: bool) -> Hashable:
        self._watch._keep(self._scope, obj, deleted=False)
        return str((obj.get("metadata") or {}).get("uid") or "")

    def remove(self, obj: Mapping[str, Any]) -> None:
        self._watch._keep(self._scope, obj, deleted=True)

    def watch_filter(self) -> EventFilter:
        return self._watch.decodes(self._scope)
