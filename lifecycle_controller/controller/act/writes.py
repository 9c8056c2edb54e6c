"""The controller's own API calls on the objects it manages, and their write-back to the cache.

Every write the controller makes on an object (an action's patch or delete, a ``never``
record, a policy's acknowledgement of a skipped occurrence, kept in memory) and the two
reads a reconcile may need (a re-read after a conflict, the Pod
template's restart marker for the restart guard) go through :class:`ObjectWriter`, and only
it hands their answers back to the metadata cache (:meth:`MetadataCache.write_back
<lifecycle_controller.controller.watch.cache.MetadataCache.write_back>`). The informers are the
cache's only other writer.

Each write is guarded (docs/behaviour.md#guarded-writes): a merge patch carries the
``metadata.resourceVersion`` it was decided on (and, for records, the UID), a delete carries
UID and resourceVersion preconditions. Before any write the leader's fencing check runs:
:class:`~lifecycle_controller.controller.work.result.NotLeading` when this replica may not write.
"""

from __future__ import annotations

import contextlib
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any, Protocol

from lifecycle_controller.controller.watch.cache import CachedObject, MetadataCache, RestartFact
from lifecycle_controller.controller.work.result import NotLeading
from lifecycle_controller.core import ObjectKey, ResourceType
from lifecycle_controller.core.objects import keys
from lifecycle_controller.core.objects.rollout import restart_marker_of
from lifecycle_controller.kube import NotFound
from lifecycle_controller.machinery.clock import Clock

__all__ = ["ObjectApi", "ObjectWriter", "Patched", "guarded"]


class ObjectApi(Protocol):
    """The part of the API client the writer uses (``KubeClient`` is one)."""

    async def merge_patch(
        self, resource: ResourceType, namespace: str | None, name: str, body: Mapping[str, Any]
    ) -> dict[str, Any]: ...

    async def delete(
        self,
        resource: ResourceType,
        namespace: str | None,
        name: str,
        *,
        uid: str | None = None,
        resource_version: str | None = None,
        answer: bool = True,
        propagation: str | None = None,
    ) -> object: ...

    async def get_metadata(
        self, resource: ResourceType, namespace: str | None, name: str
    ) -> dict[str, Any]: ...

    async def get(
        self, resource: ResourceType, namespace: str | None, name: str
    ) -> dict[str, Any]: ...


def guarded(
    patch: Mapping[str, Any], resource_version: str, *, uid: str | None = None
) -> dict[str, Any]:
    """A copy of ``patch`` with ``metadata.resourceVersion`` (and ``uid``, if given) set,
    other metadata kept."""
    body = dict(patch)
    metadata = dict(body.get("metadata") or {})
    metadata["resourceVersion"] = resource_version
    if uid is not None:
        metadata["uid"] = uid
    body["metadata"] = metadata
    return body


@dataclass(frozen=True, slots=True)
class Patched:
    """A patch's answer: the whole response, and its metadata as the cache holds it."""

    response: dict[str, Any]
    fresh: CachedObject


@dataclass
class ObjectWriter:
    """Guarded writes and the reads a reconcile needs, each written back to the cache."""

    api: ObjectApi
    cache: MetadataCache
    clock: Clock
    may_write: Callable[[], bool] = lambda: True

    def _fence(self) -> None:
        if not self.may_write():
            raise NotLeading("leader lease not fresh; write postponed")

    async def patch(
        self,
        key: ObjectKey,
        obj: CachedObject,
        body: Mapping[str, Any],
        *,
        with_uid: bool = False,
        restart: bool = False,
    ) -> Patched | None:
        """One guarded merge patch of ``obj``; None when the object is gone.

        ``restart``: the patch restarts a workload; its response's template marker and the
        time are remembered as the object's restart fact.
        """
        self._fence()
        patch = guarded(body, obj.resource_version, uid=obj.uid if with_uid else None)
        try:
            response = await self.api.merge_patch(key.resource, key.namespace, key.name, patch)
        except NotFound:
            self.cache.write_back(key, None)
            return None
        fresh = self.cache.project(key.resource, _object(response))
        fact = None
        if restart:
            fact = RestartFact(restart_marker_of(response, keys.RESTARTED_AT), self.clock.now_ns())
        self.cache.write_back(key, fresh, decided_on=obj, restart=fact)
        return Patched(response, fresh)

    async def delete(
        self, key: ObjectKey, *, uid: str, resource_version: str, propagation: str | None = None
    ) -> None:
        """One delete with UID and resourceVersion preconditions (and a policy's
        ``deletionPropagation``); gone already counts as done."""
        self._fence()
        with contextlib.suppress(NotFound):
            await self.api.delete(
                key.resource,
                key.namespace,
                key.name,
                uid=uid,
                resource_version=resource_version,
                answer=False,  # the deleted object: nobody reads it
                propagation=propagation,
            )
        self.cache.write_back(key, None)

    async def reread(self, key: ObjectKey) -> CachedObject | None:
        """The object's current metadata straight from the API (after a conflict); the whole
        object when the policies' conditions read its fields beyond metadata."""
        try:
            if self.cache.reads(key.resource):
                response = await self.api.get(key.resource, key.namespace, key.name)
            else:
                response = await self.api.get_metadata(key.resource, key.namespace, key.name)
        except NotFound:
            self.cache.write_back(key, None)
            return None
        fresh = self.cache.project(key.resource, _object(response))
        self.cache.write_back(key, fresh)
        return fresh

    async def read_restart_marker(self, key: ObjectKey, obj: CachedObject) -> RestartFact:
        """Read the workload once for its Pod template's restart marker (the restart guard
        after a failover: the metadata-only cache never holds templates)."""
        workload = await self.api.get(key.resource, key.namespace, key.name)
        fact = RestartFact(restart_marker_of(workload, keys.RESTARTED_AT))
        self.cache.write_back(key, obj, decided_on=obj, restart=fact)
        return fact

    def acknowledge(self, key: ObjectKey, obj: CachedObject, at_ns: int) -> None:
        """A lifecycle policy skipped the occurrence due at ``at_ns`` (catch-up): remember it
        as the workload's restart fact, in memory (docs/architecture.md#policy-anchors)."""
        self.cache.write_back(key, obj, decided_on=obj, acknowledged_ns=at_ns)


def _object(response: Mapping[str, Any]) -> Mapping[str, Any]:
    """A response's object as the cache projects it (its metadata, and its fields for the
    conditions that read them); an answer without metadata counts as empty metadata."""
    return response if isinstance(response.get("metadata"), Mapping) else {"metadata": {}}
