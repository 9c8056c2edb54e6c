"""How one informer applies what it observed to the shared cache, and reports the change.

The cache's storage rule (only annotated objects, and those a policy could match, are kept, see
:mod:`~lifecycle_controller.controller.cache`) decides what is delivered to the event handler:
an add or update when the old or the new state carries a lifecycle annotation, a delete when
a cached object goes or an annotated one is deleted. A handler that raises is logged and
never stops the informer.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import Any

from lifecycle_controller.controller.cache import CachedObject, MetadataCache
from lifecycle_controller.controller.informer_ports import ChangeHandler, ChangeKind, ChangeSeen
from lifecycle_controller.core.resources import ObjectKey
from lifecycle_controller.kube import ResourceType

__all__ = ["CacheWriter"]


class CacheWriter:
    """Writes one resource type's observed states into the cache and delivers the changes."""

    def __init__(
        self,
        resource: ResourceType,
        cache: MetadataCache,
        on_object_change: ChangeHandler,
        on_change_seen: ChangeSeen | None,
        log: Any,
    ) -> None:
        self._resource = resource
        self._cache = cache
        self._on_object_change = on_object_change
        self._on_change_seen = on_change_seen
        self._log = log

    def _key(self, obj: CachedObject) -> ObjectKey:
        namespace = obj.namespace if self._resource.namespaced else None
        return ObjectKey(self._resource, namespace, obj.name)

    def upsert(self, metadata: Mapping[str, Any], *, created: bool, listed: bool) -> ObjectKey:
        """Apply the current state of one object; return its key.

        ``created``: it is new to the informer (a list or an ADDED event); ``listed``: it
        comes from a list, where an unchanged resourceVersion is not a change."""
        new = self._cache.project(self._resource, metadata)
        key = self._key(new)
        old = self._cache.get(key)
        if old is not None and old.uid != new.uid:
            # Deleted and recreated under the same name while we were not watching.
            self._cache.forget(key)
            self._deliver("delete", key, old, None)
            old = None
            created = True
        if old is None:
            if new.kept:
                self._cache.put(key, new)
                self._deliver("add" if created else "update", key, None, new)
            return key
        if listed and old.resource_version == new.resource_version and old.view == new.view:
            return key  # unchanged (a relist after a policy change may change the view)
        if new.kept:
            self._cache.put(key, new)
        else:
            self._cache.delete(key)
        self._deliver("update", key, old, new)
        return key

    def remove(self, metadata: Mapping[str, Any]) -> None:
        """A DELETED event: drop the object, deliver its final state."""
        final = self._cache.project(self._resource, metadata)
        key = self._key(final)
        old = self._cache.forget(key, final.uid)
        if old is not None or final.kept:
            self._deliver("delete", key, old, final)

    def deleted_since_list(self, keys: Iterable[ObjectKey]) -> None:
        """Cached keys a full list no longer has: synthesised deletes (final state unknown)."""
        for key in keys:
            old = self._cache.forget(key)
            if old is not None:
                self._deliver("delete", key, old, None)

    def change_seen(self) -> None:
        """Tell ``on_change_seen`` (if any) that something of this type changed."""
        if self._on_change_seen is None:
            return
        try:
            self._on_change_seen()
        except Exception:
            self._log.exception("change handler failed")

    def _deliver(
        self, kind: ChangeKind, key: ObjectKey, old: CachedObject | None, new: CachedObject | None
    ) -> None:
        try:
            self._on_object_change(kind, key, old, new)
        except Exception:
            self._log.exception("event handler failed", change=kind, **key.log_context())
