"""Whether a Namespace named by ``--watch-namespace`` exists, seen from its own informer.

With exact ``--watch-namespace`` names the namespace-defaults store
(:mod:`~lifecycle_controller.controller.namespace.defaults`) lists and watches each named Namespace
by ``metadata.name``. Its cache keeps only annotated Namespaces, so it cannot tell "exists
without defaults" from "does not exist"; a mistyped name would otherwise pass in silence,
the controller watching an empty namespace forever. :class:`PresenceKeeper` is that
informer's keeper: it hands every object on to the cache's keeper and notes, from what each
list finds and from the watch events, whether the Namespace is there. The store logs a
change of that and readiness shows a missing one (docs/behaviour.md#readiness).
"""

from __future__ import annotations

from collections.abc import Callable, Hashable, Mapping
from typing import Any

from lifecycle_controller.controller.watch.cache_writer import CacheWriter
from lifecycle_controller.controller.watch.ports import Keeper

__all__ = ["PresenceKeeper"]


class PresenceKeeper(Keeper):
    """The keeper of one named Namespace's informer: the cache's, noting its existence.

    ``present`` is None until the first list answered, then whether the Namespace exists;
    ``on_change(present)`` hears each change of it. It decodes every line of a list (none is
    skipped undecoded: an unannotated Namespace exists too).
    """

    def __init__(self, cache: CacheWriter, name: str, on_change: Callable[[bool], None]) -> None:
        super().__init__()
        self._cache = cache
        self.name = name
        self._on_change = on_change
        self.present: bool | None = None
        self._found = False

    def _saw(self, present: bool) -> None:
        if present != self.present:
            self.present = present
            self._on_change(present)

    def _named(self, metadata: Mapping[str, Any]) -> bool:
        return metadata.get("name") == self.name

    @property
    def synced(self) -> bool:
        return self._cache.synced

    def listing(self) -> set[Hashable]:
        self._found = False
        return self._cache.listing()

    def upsert(self, obj: Mapping[str, Any], *, created: bool, listed: bool) -> Hashable:
        if self._named(obj):
            if listed:
                self._found = True
            else:
                self._saw(True)
        return self._cache.upsert(obj, created=created, listed=listed)

    def remove(self, obj: Mapping[str, Any]) -> None:
        if self._named(obj):
            self._saw(False)
        self._cache.remove(obj)

    def listed(self, stale: set[Hashable]) -> None:
        self._cache.listed(stale)
        self._saw(self._found)

    def change_seen(self) -> None:
        self._cache.change_seen()

    def count(self) -> int:
        return self._cache.count()
