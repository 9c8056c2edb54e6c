"""Following one resource type for the live tools: list it once, then watch it.

``status --watch`` and ``console`` keep the objects they judge in step with the cluster the
way the controller's informers do, without reading the whole type again every few seconds:
a :class:`Follower` lists the type (every page, metadata only unless told to read whole
objects) and then watches it from the list's resourceVersion with bookmarks, so the API
server sends only what changes. Each object is handed to ``keep``, which returns what to keep
of it (None: nothing; the object is then forgotten if it was kept), and every change of what
is kept is told to ``changed`` (the UID, and what is kept of it now or None), so the caller
judges again only the objects that changed.

The controller's reflector (docs/architecture.md#informer-loop) is not reused: the tools may
read no part of the controller but its cache projection (docs/architecture.md#import-layers).
This is the same loop reduced to what a read-only tool needs: a watch that ends normally is
opened again at once from the last resourceVersion seen (bookmarks included); an expired
resourceVersion (410 Gone, raised or as an ERROR event) lists the type again, diffed against
what is kept, so an object deleted meanwhile is forgotten; any other failure is named in
:attr:`Follower.problem` (the tools print it as ``status`` prints a type it could not list),
waited out with the package's backoff, then the watch (after a broken stream) or the list
(after anything else) is tried again. :meth:`Follower.restart` lists again with another
``keep`` (a changed policy keeps other objects, or other fields of them).
"""

from __future__ import annotations

import asyncio
import contextlib
import random
from collections.abc import Callable, Mapping
from typing import Any, Final

from lifecycle_controller.kube import Gone, KubeClient, KubeError, NotFound, TransportError
from lifecycle_controller.kube.paging import pages
from lifecycle_controller.kube.resources import ResourceType
from lifecycle_controller.machinery.backoff import Backoff
from lifecycle_controller.machinery.clock import Clock

__all__ = ["WATCH_SECONDS", "Changed", "Follower", "Keep", "without_managed_fields"]

Item = Mapping[str, Any]
#: What to keep of one listed or watched object (None: nothing).
Keep = Callable[[Item], Item | None]
#: Told of each change of what is kept: the object's UID, and what is kept of it (None: gone).
Changed = Callable[[str, Item | None], None]
#: A watch asks the server to end it after this many seconds, at random in the range, so the
#: followers of one tool do not reconnect together (the controller's range).
WATCH_SECONDS: Final = (300, 600)


class _Expired(Exception):
    """The watch's resourceVersion is too old (ERROR 410): list again."""


class _WatchFailed(Exception):
    """Another ERROR event: wait, then list again."""


def without_managed_fields(item: Item) -> dict[str, Any]:
    """``item`` without ``metadata.managedFields`` (no decision reads them, and they are most
    of an object's metadata: a follower keeps many objects for as long as it runs)."""
    metadata = item.get("metadata")
    if not isinstance(metadata, Mapping) or "managedFields" not in metadata:
        return dict(item)
    kept = {key: value for key, value in metadata.items() if key != "managedFields"}
    return {**item, "metadata": kept}


def _uid(item: Item) -> str:
    metadata = item.get("metadata")
    return str(metadata.get("uid", "")) if isinstance(metadata, Mapping) else ""


def _version(item: Item, default: str) -> str:
    metadata = item.get("metadata")
    found = metadata.get("resourceVersion") if isinstance(metadata, Mapping) else None
    return str(found) if found else default


class Follower:
    """One type (in one namespace, or all) kept in step; see the module docstring."""

    def __init__(
        self,
        kube: KubeClient,
        resource: ResourceType,
        *,
        changed: Changed,
        keep: Keep = without_managed_fields,
        clock: Clock,
        namespace: str | None = None,
        whole: bool = False,
        field_selector: str | None = None,
        rng: random.Random | None = None,
    ) -> None:
        self.resource = resource
        self.namespace = namespace
        #: What is kept, by UID.
        self.items: dict[str, Item] = {}
        #: Why the last list or watch failed ("" it did not, or it has been answered since).
        self.problem = ""
        #: Set once the first list is kept (even a failed one: the caller then shows the
        #: problem and stops waiting).
        self.tried = asyncio.Event()
        #: Whether the type is not served (404): its objects are forgotten, and it is asked
        #: for again after the backoff (the policy CRDs may be installed later).
        self.absent = False
        #: How many lists were made (the first one included).
        self.lists = 0
        self._kube = kube
        self._keep = keep
        self._changed = changed
        self._clock = clock
        self._whole = whole
        self._field_selector = field_selector
        self._rng = rng or random.Random()
        self._backoff = Backoff(clock)
        self._task: asyncio.Task[None] | None = None

    # --- lifetime -------------------------------------------------------------------------

    def start(self, keep: Keep | None = None, *, whole: bool | None = None) -> None:
        """List and watch in a task of its own; ``keep`` and ``whole`` replace the ones given
        when it was made."""
        self._keep = keep or self._keep
        self._whole = self._whole if whole is None else whole
        self._task = asyncio.create_task(self._run(), name=f"follow {self.resource.key}")

    async def stop(self) -> None:
        if self._task is not None:
            self._task.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await self._task
            self._task = None

    async def restart(self, keep: Keep, *, whole: bool) -> None:
        """List again with another ``keep`` (and projection), then watch; what the new list
        does not keep is forgotten (and told)."""
        await self.stop()
        self.start(keep, whole=whole)

    # --- the loop -------------------------------------------------------------------------

    async def _run(self) -> None:
        version: str | None = None
        expired = 0
        while True:
            try:
                if version is None:
                    version = await self._list()
                    self._answered()
                version = await self._watch(version)
                expired = 0
                continue  # ended by the server: watch again from where it stopped
            except (Gone, _Expired):
                version = None  # relist; a second 410 right after a list waits first
                expired += 1
                if expired == 1:
                    continue
            except NotFound:
                self._forget_all()
                self.absent = True
                self.problem = ""
                version = None
            except _WatchFailed as error:
                self.problem = f"{self.resource.key}: {error}"
                version = None
            except TransportError as error:
                self.problem = f"{self.resource.key}: {error}"  # watch again from `version`
            except KubeError as error:
                self.problem = f"{self.resource.key}: {error}"
                version = None
            self.tried.set()
            await self._backoff.wait()

    def _answered(self) -> None:
        self.problem = ""
        self.absent = False
        self._backoff.reset()
        self.tried.set()

    async def _list(self) -> str:
        """Every page; what is kept replaces what was, each difference told. The list's
        resourceVersion (the last page's), where the watch starts."""
        self.lists += 1
        kube, resource, where = self._kube, self.resource, self.namespace

        async def fetch(token: str | None) -> Mapping[str, Any]:
            if self._whole:
                return await kube.list_objects(resource, namespace=where, continue_token=token)
            return await kube.list_metadata(
                resource,
                namespace=where,
                continue_token=token,
                field_selector=self._field_selector,
            )

        listed: dict[str, Item] = {}
        version = ""
        async for page in pages(fetch):
            for item in page.get("items") or ():
                if isinstance(item, Mapping):
                    kept = self._keep(item)
                    if kept is not None:
                        listed[_uid(item)] = kept
            version = str((page.get("metadata") or {}).get("resourceVersion", version))
        for uid in [uid for uid in self.items if uid not in listed]:
            del self.items[uid]
            self._changed(uid, None)
        for uid, kept in listed.items():
            if self.items.get(uid) != kept:
                self.items[uid] = kept
                self._changed(uid, kept)
        return version

    async def _watch(self, version: str) -> str:
        """One watch from ``version`` until the server ends it; the last resourceVersion."""
        seconds = self._rng.randint(*WATCH_SECONDS)
        if self._whole:
            events = self._kube.watch_objects(
                self.resource,
                namespace=self.namespace,
                resource_version=version,
                timeout_seconds=seconds,
            )
        else:
            events = self._kube.watch_metadata(
                self.resource,
                namespace=self.namespace,
                resource_version=version,
                timeout_seconds=seconds,
                field_selector=self._field_selector,
            )
        try:
            async for event in events:
                version = self._apply(event, version)
                if self.problem:
                    self._answered()  # the watch delivers again
        finally:
            close = getattr(events, "aclose", None)
            if close is not None:
                await close()  # the HTTP connection released at once
        return version

    def _apply(self, event: Mapping[str, Any], version: str) -> str:
        kind = str(event.get("type", ""))
        obj = event.get("object")
        obj = obj if isinstance(obj, Mapping) else {}
        if kind == "ERROR":
            if obj.get("code") == 410:
                raise _Expired(str(obj.get("message", "expired")))
            raise _WatchFailed(str(obj.get("message", "")) or f"watch error {obj.get('code')}")
        version = _version(obj, version)
        uid = _uid(obj)
        if kind in ("ADDED", "MODIFIED"):
            kept = self._keep(obj)
            if kept is not None:
                self.items[uid] = kept
                self._changed(uid, kept)
            elif self.items.pop(uid, None) is not None:
                self._changed(uid, None)  # no longer kept (its annotation removed, say)
        elif kind == "DELETED" and self.items.pop(uid, None) is not None:
            self._changed(uid, None)
        return version

    def _forget_all(self) -> None:
        for uid in list(self.items):
            del self.items[uid]
            self._changed(uid, None)
