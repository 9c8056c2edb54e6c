"""The fake API server's memory: objects, one global resourceVersion, history, watchers.

Kept apart from the HTTP layer so that a test can also change the "cluster" directly
(``store.create(...)``, ``store.patch(...)``, ``store.delete(...)``): every change, from a test
or from a request, takes the next global resourceVersion and is appended to the history the
watches replay from, exactly as etcd's revision does for a real API server.

What it keeps honestly, because the controller's correctness rests on it:

* **resourceVersion**: one monotonically increasing counter for the whole store; every write
  stamps the object with a new value; a list carries the counter's current value.
* **Preconditions**: a merge patch carrying ``metadata.resourceVersion`` applies only to that
  version (409 Conflict otherwise); a PUT must carry the current resourceVersion; a DELETE
  honours ``preconditions.uid`` and ``preconditions.resourceVersion`` (409), and 404 when
  the object is absent. A create meets 409 AlreadyExists.
* **History and compaction**: watches replay every change after their resourceVersion;
  :meth:`Store.compact` forgets the history, after which older resourceVersions answer 410
  Gone (lists with a continue token, watches with an ERROR event), as after etcd compaction.
* **Finalizers**: deleting an object that has finalizers only sets ``deletionTimestamp``.

Errors are raised as :class:`ApiStatus`, which the server turns into a ``Status`` answer.
"""

from __future__ import annotations

import asyncio
import copy
import itertools
import time
import uuid
from collections.abc import Callable, Iterator, Mapping
from dataclasses import dataclass, field
from typing import Any

from lifecycle_controller.kube import ResourceType
from lifecycle_controller.kube.microtime import micro_time

__all__ = ["ApiStatus", "Store", "WatchEvent", "Watcher", "merge_patch"]

ObjectId = tuple[ResourceType, str | None, str]
"""(resource type, namespace or None, name)."""


class ApiStatus(Exception):
    """A non-2xx answer: the HTTP status and the ``Status`` reason and message."""

    def __init__(self, code: int, reason: str, message: str) -> None:
        super().__init__(message)
        self.code = code
        self.reason = reason
        self.message = message

    def status(self) -> dict[str, Any]:
        """The ``meta/v1`` ``Status`` body a real API server answers with."""
        return {
            "kind": "Status",
            "apiVersion": "v1",
            "metadata": {},
            "status": "Failure",
            "message": self.message,
            "reason": self.reason,
            "code": self.code,
        }


def not_found(resource: ResourceType, name: str) -> ApiStatus:
    what = f"{resource.resource}.{resource.group}" if resource.group else resource.resource
    return ApiStatus(404, "NotFound", f'{what} "{name}" not found')


def conflict(resource: ResourceType, name: str, why: str) -> ApiStatus:
    what = f"{resource.resource}.{resource.group}" if resource.group else resource.resource
    return ApiStatus(409, "Conflict", f'Operation cannot be fulfilled on {what} "{name}": {why}')


def merge_patch(target: Any, patch: Any) -> Any:
    """RFC 7386 JSON merge patch: ``null`` removes a key, objects merge, the rest replaces."""
    if not isinstance(patch, Mapping):
        return copy.deepcopy(patch)
    result = dict(target) if isinstance(target, Mapping) else {}
    for key, value in patch.items():
        if value is None:
            result.pop(key, None)
        else:
            result[key] = merge_patch(result.get(key), value)
    return result


@dataclass(frozen=True)
class WatchEvent:
    """One change, as a watch delivers it; ``revision`` orders the history."""

    revision: int
    resource: ResourceType
    type: str  # ADDED, MODIFIED, DELETED
    object: dict[str, Any]

    @property
    def namespace(self) -> str | None:
        namespace = self.object.get("metadata", {}).get("namespace")
        return str(namespace) if namespace else None


@dataclass(eq=False)
class Watcher:
    """One open watch: what it selects, and the queue the store feeds it.

    ``None`` on the queue ends the stream; a ``dict`` is a raw event (an ERROR or BOOKMARK).
    """

    resource: ResourceType
    namespace: str | None
    bookmarks: bool = False
    queue: asyncio.Queue[WatchEvent | dict[str, Any] | None] = field(default_factory=asyncio.Queue)

    def wants(self, event: WatchEvent) -> bool:
        return event.resource == self.resource and (
            self.namespace is None or event.namespace == self.namespace
        )


@dataclass
class _Snapshot:
    """A paginated list in progress: the items as of ``revision``."""

    revision: int
    items: list[dict[str, Any]]


class Store:
    """Objects by (type, namespace, name) with the global resourceVersion and history.

    ``now_ns`` gives the creation and deletion timestamps (a FakeClock's ``now_ns``, so that
    ages agree with the controller's clock); ``start_revision`` is deliberately not small.
    """

    def __init__(
        self, *, now_ns: Callable[[], int] | None = None, start_revision: int = 1000
    ) -> None:
        self._now_ns = now_ns or time.time_ns
        self.revision = start_revision
        #: The oldest revision still in the history: older resourceVersions get 410 Gone.
        self.compacted = start_revision
        self._objects: dict[ObjectId, dict[str, Any]] = {}
        self._history: list[WatchEvent] = []
        self._watchers: list[Watcher] = []
        self._snapshots: dict[str, _Snapshot] = {}
        self._tokens = itertools.count(1)

    # ------------------------------------------------------------------ reading

    def get(self, resource: ResourceType, namespace: str | None, name: str) -> dict[str, Any]:
        """A copy of the object; raises 404 ApiStatus when absent."""
        obj = self._objects.get(self._id(resource, namespace, name))
        if obj is None:
            raise not_found(resource, name)
        return copy.deepcopy(obj)

    def find(
        self, resource: ResourceType, namespace: str | None, name: str
    ) -> dict[str, Any] | None:
        """A copy of the object, or None."""
        obj = self._objects.get(self._id(resource, namespace, name))
        return None if obj is None else copy.deepcopy(obj)

    def objects(self, resource: ResourceType, namespace: str | None = None) -> list[dict[str, Any]]:
        """Copies of every object of ``resource`` (in ``namespace``), sorted by namespace/name."""
        return [copy.deepcopy(obj) for _, obj in self._select(resource, namespace)]

    def _select(
        self, resource: ResourceType, namespace: str | None
    ) -> Iterator[tuple[ObjectId, dict[str, Any]]]:
        for object_id in sorted(self._objects, key=lambda i: (i[1] or "", i[2])):
            if object_id[0] == resource and (namespace is None or object_id[1] == namespace):
                yield object_id, self._objects[object_id]

    def list_page(
        self,
        resource: ResourceType,
        namespace: str | None,
        *,
        limit: int | None = None,
        continue_token: str | None = None,
        resource_version: str | None = None,
    ) -> tuple[list[dict[str, Any]], str, str | None, int]:
        """(items, list resourceVersion, continue token or None, items left), paginated like
        etcd (the API server reports the items left as ``remainingItemCount``).

        Later pages are served from the snapshot of the first one, at its resourceVersion; a
        continue token older than the last compaction is 410 Gone (reason Expired).
        """
        if continue_token:
            snapshot = self._snapshots.get(continue_token)
            if snapshot is None or snapshot.revision < self.compacted:
                raise ApiStatus(
                    410,
                    "Expired",
                    "The provided continue parameter is too old to display a consistent list "
                    "result. You can start a new list without the continue parameter.",
                )
            del self._snapshots[continue_token]
        else:
            if resource_version not in (None, "", "0") and int(resource_version) < self.compacted:
                too_old = f"too old resource version: {resource_version} ({self.compacted})"
                raise ApiStatus(410, "Expired", too_old)
            items = [copy.deepcopy(obj) for _, obj in self._select(resource, namespace)]
            snapshot = _Snapshot(self.revision, items)
        page_size = limit if limit and limit > 0 else len(snapshot.items)
        page, rest = snapshot.items[:page_size], snapshot.items[page_size:]
        token = None
        if rest:
            token = f"fake-continue-{next(self._tokens)}"
            self._snapshots[token] = _Snapshot(snapshot.revision, rest)
        return page, str(snapshot.revision), token, len(rest)

    # ------------------------------------------------------------------ writing

    def create(
        self, resource: ResourceType, namespace: str | None, body: Mapping[str, Any]
    ) -> dict[str, Any]:
        """Store a new object (uid, creationTimestamp, resourceVersion set); 409 if it exists."""
        obj = copy.deepcopy(dict(body))
        metadata = obj.setdefault("metadata", {})
        name = metadata.get("name")
        if not name and metadata.get("generateName"):
            name = f"{metadata['generateName']}{uuid.uuid4().hex[:5]}"
        if not name:
            raise ApiStatus(422, "Invalid", "metadata.name: Required value: name is required")
        scoped = namespace if resource.namespaced else None
        if resource.namespaced and not scoped:
            scoped = metadata.get("namespace") or "default"
        object_id = self._id(resource, scoped, name)
        if object_id in self._objects:
            what = f"{resource.resource}.{resource.group}" if resource.group else resource.resource
            raise ApiStatus(409, "AlreadyExists", f'{what} "{name}" already exists')
        metadata["name"] = name
        if scoped:
            metadata["namespace"] = scoped
        else:
            metadata.pop("namespace", None)
        metadata["uid"] = str(uuid.uuid4())
        metadata.setdefault("creationTimestamp", _seconds_timestamp(self._now_ns()))
        metadata.pop("deletionTimestamp", None)
        if isinstance(obj.get("spec"), Mapping):
            metadata["generation"] = 1
        obj.setdefault("apiVersion", resource.api_version)
        obj.setdefault("kind", resource.kind)
        self._commit(object_id, obj, "ADDED")
        return copy.deepcopy(obj)

    def patch(
        self,
        resource: ResourceType,
        namespace: str | None,
        name: str,
        patch: Mapping[str, Any],
    ) -> dict[str, Any]:
        """A JSON merge patch; ``metadata.resourceVersion`` in it is a precondition (409)."""
        object_id = self._id(resource, namespace, name)
        current = self._objects.get(object_id)
        if current is None:
            raise not_found(resource, name)
        wanted = (patch.get("metadata") or {}).get("resourceVersion")
        if wanted is not None and str(wanted) != current["metadata"]["resourceVersion"]:
            raise conflict(
                resource,
                name,
                "the object has been modified; please apply your changes to the latest "
                "version and try again",
            )
        updated = merge_patch(current, patch)
        return self._update(object_id, current, updated)

    def replace(
        self, resource: ResourceType, namespace: str | None, name: str, body: Mapping[str, Any]
    ) -> dict[str, Any]:
        """PUT: the body must carry the current resourceVersion (409 otherwise, 422 if none)."""
        object_id = self._id(resource, namespace, name)
        current = self._objects.get(object_id)
        if current is None:
            raise not_found(resource, name)
        wanted = (body.get("metadata") or {}).get("resourceVersion")
        if not wanted:
            raise ApiStatus(
                422,
                "Invalid",
                "metadata.resourceVersion: Invalid value: 0x0: must be specified for an update",
            )
        if str(wanted) != current["metadata"]["resourceVersion"]:
            raise conflict(
                resource,
                name,
                "the object has been modified; please apply your changes to the latest "
                "version and try again",
            )
        return self._update(object_id, current, copy.deepcopy(dict(body)))

    def _update(
        self, object_id: ObjectId, current: dict[str, Any], updated: dict[str, Any]
    ) -> dict[str, Any]:
        metadata = updated.setdefault("metadata", {})
        for fixed in ("name", "namespace", "uid", "creationTimestamp", "deletionTimestamp"):
            if fixed in current["metadata"]:
                metadata[fixed] = current["metadata"][fixed]
            else:
                metadata.pop(fixed, None)
        if "generation" in current["metadata"]:
            changed = updated.get("spec") != current.get("spec")
            metadata["generation"] = current["metadata"]["generation"] + (1 if changed else 0)
        metadata["resourceVersion"] = current["metadata"]["resourceVersion"]
        if updated == current:
            return copy.deepcopy(current)  # a no-op write keeps the resourceVersion
        if metadata.get("deletionTimestamp") and not metadata.get("finalizers"):
            self._remove(object_id, updated)
            return copy.deepcopy(updated)
        self._commit(object_id, updated, "MODIFIED")
        return copy.deepcopy(updated)

    def delete(
        self,
        resource: ResourceType,
        namespace: str | None,
        name: str,
        *,
        uid: str | None = None,
        resource_version: str | None = None,
    ) -> dict[str, Any]:
        """Delete with preconditions; with finalizers only ``deletionTimestamp`` is set."""
        object_id = self._id(resource, namespace, name)
        current = self._objects.get(object_id)
        if current is None:
            raise not_found(resource, name)
        metadata = current["metadata"]
        if uid is not None and uid != metadata["uid"]:
            raise conflict(
                resource,
                name,
                f"Precondition failed: UID in precondition: {uid}, "
                f"UID in object meta: {metadata['uid']}",
            )
        if resource_version is not None and resource_version != metadata["resourceVersion"]:
            raise conflict(
                resource,
                name,
                f"Precondition failed: ResourceVersion in precondition: {resource_version}, "
                f"ResourceVersion in object meta: {metadata['resourceVersion']}",
            )
        if metadata.get("finalizers"):
            if metadata.get("deletionTimestamp"):
                return copy.deepcopy(current)
            updated = copy.deepcopy(current)
            updated["metadata"]["deletionTimestamp"] = _seconds_timestamp(self._now_ns())
            self._commit(object_id, updated, "MODIFIED")
            return copy.deepcopy(updated)
        return self._remove(object_id, copy.deepcopy(current))

    def _remove(self, object_id: ObjectId, final: dict[str, Any]) -> dict[str, Any]:
        del self._objects[object_id]
        self.revision += 1
        final["metadata"]["resourceVersion"] = str(self.revision)
        self._publish(WatchEvent(self.revision, object_id[0], "DELETED", copy.deepcopy(final)))
        return copy.deepcopy(final)

    def _commit(self, object_id: ObjectId, obj: dict[str, Any], event_type: str) -> None:
        self.revision += 1
        obj["metadata"]["resourceVersion"] = str(self.revision)
        self._objects[object_id] = obj
        self._publish(WatchEvent(self.revision, object_id[0], event_type, copy.deepcopy(obj)))

    # ------------------------------------------------------------------ history and watches

    def compact(self) -> None:
        """Forget the history (and open list snapshots): older resourceVersions are 410."""
        self.compacted = self.revision
        self._history.clear()
        self._snapshots.clear()

    def watch(
        self,
        resource: ResourceType,
        namespace: str | None,
        resource_version: str | None,
        *,
        bookmarks: bool = False,
        initial_events_end: bool = False,
    ) -> Watcher:
        """Register a watcher and queue what it missed since ``resource_version``.

        ``0`` or empty starts with an ADDED event per current object (and, with
        ``initial_events_end``, the bookmark that ends a streaming list's initial events); a
        resourceVersion older than the last compaction gets an ERROR 410 event and the end of
        the stream.
        """
        watcher = Watcher(resource, namespace, bookmarks)
        if resource_version in (None, "", "0"):
            for _, obj in self._select(resource, namespace):
                watcher.queue.put_nowait(
                    WatchEvent(self.revision, resource, "ADDED", copy.deepcopy(obj))
                )
            if initial_events_end:
                metadata = {
                    "resourceVersion": str(self.revision),
                    "annotations": {"k8s.io/initial-events-end": "true"},
                }
                obj = {"kind": resource.kind, "apiVersion": resource.api_version}
                watcher.queue.put_nowait(
                    {"type": "BOOKMARK", "object": {**obj, "metadata": metadata}}
                )
        elif int(resource_version) < self.compacted:
            watcher.queue.put_nowait(expired_event(resource_version, self.compacted))
            watcher.queue.put_nowait(None)
            return watcher
        else:
            since = int(resource_version)
            for event in self._history:
                if event.revision > since and watcher.wants(event):
                    watcher.queue.put_nowait(event)
        self._watchers.append(watcher)
        return watcher

    def unwatch(self, watcher: Watcher) -> None:
        if watcher in self._watchers:
            self._watchers.remove(watcher)

    @property
    def open_watches(self) -> int:
        return len(self._watchers)

    def watchers(self, resource: ResourceType | None = None) -> list[Watcher]:
        return [w for w in self._watchers if resource is None or w.resource == resource]

    def _publish(self, event: WatchEvent) -> None:
        self._history.append(event)
        for watcher in self._watchers:
            if watcher.wants(event):
                watcher.queue.put_nowait(event)

    @staticmethod
    def _id(resource: ResourceType, namespace: str | None, name: str) -> ObjectId:
        return (resource, namespace if resource.namespaced else None, name)


def expired_event(resource_version: str, compacted: int) -> dict[str, Any]:
    """The ERROR event a real watch sends for a resourceVersion lost to compaction."""
    status = ApiStatus(
        410, "Expired", f"too old resource version: {resource_version} ({compacted})"
    ).status()
    return {"type": "ERROR", "object": status}


def _seconds_timestamp(now_ns: int) -> str:
    """RFC 3339 with whole seconds, as ``metav1.Time`` serialises."""
    return micro_time(now_ns - now_ns % 1_000_000_000)[:19] + "Z"
