"""The latest whole state of each workload whose rollout is followed, from one watch per type.

Following a rollout needs the workload's status, which the metadata-only informers do not
carry. Reading it (a GET, or a batched list, each time the workload changed) cost about four
reads per restarted Deployment, the largest cost of a restart storm after the restarts
themselves. While at least one workload of a type is followed, :class:`RolloutWatch` keeps
one watch of whole objects of that type open (JSON, every namespace), from the
resourceVersion of the first followed restart's answer, and keeps the latest state of each
followed workload. When the informers read only the namespaces named in
``--watch-namespace`` (namespaced Roles suffice, docs/behaviour.md#read-scoping), there is one
such watch per type and namespace instead. Lines about other workloads are dropped
undecoded: a line is decoded only when a followed UID is found in its raw bytes.

The follower (:class:`~lifecycle_controller.controller.rollouts.RolloutTracker`) is given
its turn when the cache or this watch moved, evaluates the kept state when it is new, and
while the watch delivers waits a few turns for it rather than read; when the watch lags too
long, fails, is refused, or has not delivered yet, it reads the workload as before. So the
watch only ever saves reads. The watch of a type ends when its last followed workload is no
longer followed (docs/behaviour.md#rollout-verification).
"""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator, Callable, Mapping
from typing import Any, Protocol

import structlog

from lifecycle_controller.core import ObjectKey
from lifecycle_controller.core.resources import ResourceType
from lifecycle_controller.kube import EventFilter, Gone, KubeError
from lifecycle_controller.kube.errors import error_for_status
from lifecycle_controller.machinery.backoff import Backoff
from lifecycle_controller.machinery.clock import Clock

__all__ = ["RolloutWatch", "WatchSource"]

_Scope = tuple[ResourceType, str | None]

_log = structlog.get_logger(__name__)

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


class WatchSource(Protocol):
    """What the rollout watch needs of the API client (``KubeClient`` has both)."""

    def watch_objects(
        self,
        resource: ResourceType,
        *,
        namespace: str | None = None,
        resource_version: str,
        timeout_seconds: int,
        decode_if: EventFilter | None = None,
    ) -> AsyncIterator[dict[str, Any]]: ...

    async def list_objects(
        self, resource: ResourceType, *, namespace: str | None = None, limit: int = 500
    ) -> dict[str, Any]: ...


class RolloutWatch:
    """Whole states of the followed workloads, kept from one watch per resource type."""

    def __init__(
        self,
        kube: WatchSource,
        clock: Clock,
        *,
        per_namespace: bool = False,
        timeout_seconds: int = 300,
    ) -> None:
        self.kube = kube
        self.clock = clock
        #: One watch per type and namespace (the informers' namespaces are exact names).
        self.per_namespace = per_namespace
        self.timeout_seconds = timeout_seconds
        self._followed: dict[_Scope, dict[bytes, ObjectKey]] = {}  # by metadata UID
        self._uid_of: dict[ObjectKey, bytes] = {}
        #: The latest state kept per followed key, with its resourceVersion (what the
        #: ticker compares for a follower that moved).
        self._states: dict[ObjectKey, tuple[str, Mapping[str, Any]]] = {}
        self._watches: dict[_Scope, asyncio.Task[None]] = {}
        self._ending: set[asyncio.Task[None]] = set()  # cancelled, not finished yet
        self._streaming: set[_Scope] = set()  # watches that delivered since they opened
        #: Told the key of every state kept (the tracker's hint that a follower moved).
        self.on_state: Callable[[ObjectKey], None] = lambda key: None

    @property
    def watching(self) -> frozenset[_Scope]:
        """The (type, namespace or None) watches open or being opened."""
        return frozenset(scope for scope, task in self._watches.items() if not task.done())

    def _scope(self, key: ObjectKey) -> _Scope:
        return (key.resource, key.namespace if self.per_namespace else None)

    def follow(self, key: ObjectKey, uid: str, resource_version: str) -> None:
        """Keep ``key``'s states from now on; ``resource_version``: its restart's answer
        (the type's watch, when it is not open yet, starts there)."""
        self.unfollow(key)
        scope = self._scope(key)
        self._followed.setdefault(scope, {})[uid.encode()] = key
        self._uid_of[key] = uid.encode()
        watch = self._watches.get(scope)
        if watch is None or watch.done():
            self._watches[scope] = asyncio.create_task(
                self._run(scope, resource_version), name=f"rollout watch {key.resource}"
            )

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
            self._streaming.discard(scope)
            watch = self._watches.pop(scope, None)
            if watch is not None:
                watch.cancel()
                self._ending.add(watch)
                watch.add_done_callback(self._ending.discard)

    def streaming(self, key: ObjectKey) -> bool:
        """Is the watch that keeps ``key``'s states open and delivering (an event or a
        bookmark since it opened)?"""
        return key in self._uid_of and self._scope(key) in self._streaming

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

    async def _run(self, scope: _Scope, version: str) -> None:
        """Watch while any workload of ``scope`` is followed, from ``version``."""
        resource = scope[0]
        backoff = Backoff(self.clock, initial=1.0, maximum=30.0)
        while self._followed.get(scope):
            try:
                version = await self._watch(scope, version)
            except Gone:
                self._streaming.discard(scope)
                version = await self._current_version(scope, backoff)
            except KubeError as error:
                self._streaming.discard(scope)
                _log.debug("rollout watch failed", resource=str(resource), error=str(error))
                await backoff.wait()
            except Exception:  # never let a surprise end following: the reads still work
                self._streaming.discard(scope)
                _log.exception("rollout watch broke; retrying", resource=str(resource))
                await backoff.wait()

    async def _watch(self, scope: _Scope, version: str) -> str:
        """One watch until the server ends it; returns the resourceVersion to go on from."""
        resource, namespace = scope
        stream = self.kube.watch_objects(
            resource,
            namespace=namespace,
            resource_version=version,
            timeout_seconds=self.timeout_seconds,
            decode_if=self.decodes(scope),
        )
        async for event in stream:
            self._streaming.add(scope)
            obj = event.get("object")
            if not isinstance(obj, dict):
                continue
            kind = event.get("type")
            if kind == "ERROR":
                code = obj.get("code")
                raise error_for_status(code if isinstance(code, int) else 500, obj)
            metadata = obj.get("metadata")
            if not isinstance(metadata, dict):
                continue
            version = str(metadata.get("resourceVersion") or version)
            if kind != "BOOKMARK":
                self._keep(scope, str(kind), obj, metadata)
        return version

    def _keep(
        self, scope: _Scope, kind: str, obj: dict[str, Any], metadata: dict[str, Any]
    ) -> None:
        key = self._followed.get(scope, {}).get(str(metadata.get("uid") or "").encode())
        if key is None:
            return
        if kind == "DELETED":
            self._states.pop(key, None)
            return
        obj.setdefault("kind", key.resource.kind)
        self._states[key] = (str(metadata.get("resourceVersion") or ""), obj)
        self.on_state(key)

    async def _current_version(self, scope: _Scope, backoff: Backoff) -> str:
        """The watch fell too far behind (410 Gone): go on from now; the states missed in
        between are read by the followers, whose cache has moved past the kept ones."""
        while True:
            try:
                listed = await self.kube.list_objects(scope[0], namespace=scope[1], limit=1)
            except KubeError as error:
                _log.debug("rollout watch cannot go on", resource=str(scope[0]), error=str(error))
                await backoff.wait()
                continue
            metadata = listed.get("metadata") or {}
            return str(metadata.get("resourceVersion") or "")

    async def aclose(self) -> None:
        """Stop every watch and forget every state (the leader's work ends)."""
        watches = [*self._watches.values(), *self._ending]
        self._watches.clear()
        self._followed.clear()
        self._uid_of.clear()
        self._states.clear()
        self._streaming.clear()
        for watch in watches:
            watch.cancel()
        await asyncio.gather(*watches, return_exceptions=True)
