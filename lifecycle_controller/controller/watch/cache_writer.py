"""How one informer applies what it observed to the shared cache, and reports the change.

:class:`CacheWriter` is the :class:`~lifecycle_controller.controller.watch.ports.Keeper`
of the metadata-only informers (the annotated types, Namespaces, CRDs): each informer keeps
one (resource type, scope) of a :class:`~lifecycle_controller.controller.watch.cache.MetadataCache`
through one. It is given each object's ``metadata``.

The cache's storage rule (only annotated objects, and those a policy could match, are kept, see
:mod:`~lifecycle_controller.controller.watch.cache`) decides what is delivered to the event handler:
an add or update when the old or the new state carries a lifecycle annotation, a delete when
a cached object goes or an annotated one is deleted. ``on_object_change(kind, key, old,
new)`` is synchronous and must not block (the composition root applies the scope and
relevance predicates there and adds keys to the work queue); ``old=None`` means "not kept
before":

* ``"add"``: a new object (initial list included, docs/behaviour.md#relevance-predicate);
* ``"update"``: ``old`` is the cached record or None, ``new`` the current state (possibly
  with no lifecycle annotation left: it has then been dropped from the cache);
* ``"delete"``: ``old`` is the last cached record (None if it was never kept), ``new`` the
  final state from the watch, or None for a delete synthesised by a list.

``on_change_seen()`` (optional) hears of every completed list and every ADDED, MODIFIED or
DELETED event whether or not the object is kept: discovery's CRD informer uses it. A handler
that raises is logged and never stops the informer.

**Events it keeps nothing of** (:class:`UnkeptEvents`). In a busy cluster most watch events
of an annotated type are changes to objects that carry no
lifecycle annotation: the controller will never act on them, yet decoding each one was most of
its CPU (docs/performance.md#the-cost-of-churn). Such an event changes nothing kept when all of
these are true, and then only its resourceVersion is read:

* it is an ADDED or MODIFIED protobuf frame (a DELETED one may end what is known of a UID;
  bookmarks, errors and JSON lines are always decoded);
* the bytes of the lifecycle annotation prefix are nowhere in the frame (strings are plain
  UTF-8 in protobuf, so an annotation under the prefix cannot hide);
* the keeper allows it (:meth:`NameKeeper.kept_test` is not None: the shared cache's keeper
  allows it while nobody hears of every change and no policy may keep every object of the
  type, such as one that selects by labels alone);
* the cache does not store the object (an object that just lost its last lifecycle
  annotation is still stored, so its event is decoded and it leaves the cache as before), and no
  lifecycle policy may keep it, judged on its namespace and name alone
  (:meth:`~lifecycle_controller.core.policy.in_force.PolicySet.may_keep`: a policy of the
  type that may reach them, or an invalid policy), asked for each frame since policies come
  and go (the test is built once per policy set and type, one call per frame). With 1,000
  policies each naming a few objects, the other objects of the type are dropped as they are
  without policies.

The informer is told of each dropped event (its type and resourceVersion) so that its
resourceVersion, its metrics and its liveness move as if it had been applied. While a
streaming list's initial events come, :class:`UnkeptListed` applies the same test to each
ADDED frame and drops it without a word (nothing is applied before the list's bookmark), so a
list with policies decodes only the objects a policy may keep; it reads only the namespace
and name, in one pattern match for a frame laid out as Go writes it
(:func:`~lifecycle_controller.kube.frame_names.object_names`), since no resourceVersion is
needed there.
"""

from __future__ import annotations

from collections.abc import Callable, Hashable, Iterable, Mapping
from typing import Any, Protocol

import structlog

from lifecycle_controller.controller.watch.cache import CachedObject, MetadataCache
from lifecycle_controller.controller.watch.ports import (
    ChangeHandler,
    ChangeKind,
    ChangeSeen,
    Keeper,
    Skipped,
)
from lifecycle_controller.core.objects.keys import PREFIX
from lifecycle_controller.core.objects.resources import ObjectKey
from lifecycle_controller.core.policy.in_force import NameTest
from lifecycle_controller.kube import EventFilter, ResourceType
from lifecycle_controller.kube.frame_names import (
    object_identity,
    object_names,
    skip_unkept_frames,
)
from lifecycle_controller.kube.watch_protobuf import FrameSkipper

__all__ = [
    "CacheWriter",
    "KeptTest",
    "NameKeeper",
    "NamespaceMerge",
    "UnkeptEvents",
    "UnkeptListed",
]

#: Whether an event of an unannotated object, by its namespace ("" for a cluster-scoped one)
#: and name, may change what a keeper keeps (:meth:`NameKeeper.kept_test`).
KeptTest = Callable[[str, str], bool]


_log = structlog.get_logger(__name__)


class CacheWriter(Keeper):
    """Writes one (resource type, scope)'s observed states into the cache and delivers the
    changes to ``on_object_change`` (and the fact of one to ``on_change_seen``)."""

    def __init__(
        self,
        resource: ResourceType,
        namespace: str | None,
        cache: MetadataCache,
        on_object_change: ChangeHandler,
        on_change_seen: ChangeSeen | None = None,
        on_listed: Callable[[], None] | None = None,
    ) -> None:
        super().__init__()
        if namespace is not None and not resource.namespaced:
            raise ValueError(f"{resource} is cluster-scoped: it has no namespace scope")
        self._resource = resource
        self._namespace = namespace
        self._cache = cache
        self._on_object_change = on_object_change
        self._on_change_seen = on_change_seen
        self._on_listed = on_listed
        #: The policies' name test :attr:`_kept` was built on (see :meth:`kept_test`).
        self._names: NameTest | None = None
        self._kept: KeptTest | None = None
        #: The namespaces being listed again (:meth:`merge`), by namespace.
        self._merges: dict[str, NamespaceMerge] = {}
        #: Full lists completed (a namespace's list read meanwhile is read again).
        self.lists = 0
        self._log = _log.bind(resource=str(resource), scope=namespace or "*")
        cache.register_scope(resource, namespace)

    # ------------------------------------------------------------------ the keeper

    @property
    def synced(self) -> bool:
        return self._cache.is_synced(self._resource, self._namespace)

    def listing(self) -> set[Hashable]:
        return set(self._cache.keys(self._resource, namespace=self._namespace))

    def listed(self, stale: set[Hashable]) -> None:
        self.deleted_since_list(key for key in stale if isinstance(key, ObjectKey))
        self.lists += 1
        self._cache.mark_synced(self._resource, self._namespace)
        if self._on_listed is not None:
            self._on_listed()

    def count(self) -> int:
        return self._cache.count(self._resource)

    def skips_unannotated(self) -> bool:
        return not self._cache.keeps_unannotated(self._resource)

    def unkept_filter(self, on_skipped: Skipped, rest: float = 0.0) -> EventFilter | None:
        return UnkeptEvents(self, on_skipped, rest)

    def listed_filter(self) -> EventFilter | None:
        return UnkeptListed(self)

    def kept_test(self) -> KeptTest | None:
        """None while every event must be decoded: somebody hears of every change
        (discovery's CRD informer, the Namespaces' defaults), or a policy may keep any
        object of the type whatever its name (no frame is then read for its name).
        Otherwise a test of an unannotated object's namespace and name: the cache stores it,
        or may keep it for a policy (the same test until the policies change)."""
        if self._on_change_seen is not None:
            return None
        names = self._cache.name_test(self._resource)
        if names is None:
            return None
        if names is not self._names:
            self._names, self._kept = names, self._kept_by_name(names)
        return self._kept

    def _kept_by_name(self, names: NameTest) -> KeptTest:
        stored = self._cache.kept_names(self._resource)
        if self._resource.namespaced:

            def kept(namespace: str, name: str) -> bool:
                return (namespace, name) in stored or names(namespace, name)

        else:

            def kept(namespace: str, name: str) -> bool:
                return (None, name) in stored or names(None, name)

        return kept

    def _key(self, obj: CachedObject) -> ObjectKey:
        namespace = obj.namespace if self._resource.namespaced else None
        return ObjectKey(self._resource, namespace, obj.name)

    def upsert(self, metadata: Mapping[str, Any], *, created: bool, listed: bool) -> ObjectKey:
        """Apply the current state of one object; return its key.

        ``created``: it is new to the informer (a list or an ADDED event); ``listed``: it
        comes from a list, where an unchanged resourceVersion is not a change."""
        new = self._cache.project(self._resource, metadata)
        key = self._key(new)
        if self._merges:
            self._touched(key)
        self._apply(key, new, created=created, listed=listed)
        return key

    def _apply(self, key: ObjectKey, new: CachedObject, *, created: bool, listed: bool) -> None:
        """Store ``new`` under ``key`` (or drop what is stored) and deliver the change."""
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
            return
        if listed and old.resource_version == new.resource_version and old.view == new.view:
            return  # unchanged (a relist after a policy change may change the view)
        if new.kept:
            self._cache.put(key, new)
        else:
            self._cache.delete(key)
        self._deliver("update", key, old, new)

    def remove(self, metadata: Mapping[str, Any]) -> None:
        """A DELETED event: drop the object, deliver its final state."""
        final = self._cache.project(self._resource, metadata)
        key = self._key(final)
        if self._merges:
            self._touched(key)
        old = self._cache.forget(key, final.uid)
        if old is not None or final.kept:
            self._deliver("delete", key, old, final)

    def deleted_since_list(self, keys: Iterable[ObjectKey]) -> None:
        """Cached keys a full list no longer has: synthesised deletes (final state unknown)."""
        for key in keys:
            if self._merges:
                self._touched(key)
            old = self._cache.forget(key)
            if old is not None:
                self._deliver("delete", key, old, None)

    # ------------------------------------------------------------------ one namespace again

    def merge(self, namespace: str) -> NamespaceMerge:
        """Begin merging a list of ``namespace`` taken exactly at the informer's current
        resourceVersion (see :class:`NamespaceMerge`); :meth:`NamespaceMerge.close` ends it."""
        if self._namespace is not None and namespace != self._namespace:
            raise ValueError(f"{namespace!r} is outside this writer's scope {self._namespace!r}")
        if namespace in self._merges:
            raise RuntimeError(f"namespace {namespace!r} is being merged already")
        merge = self._merges[namespace] = NamespaceMerge(self, namespace)
        return merge

    def _touched(self, key: ObjectKey) -> None:
        """The informer applied a change of ``key``: a merge of its namespace keeps it."""
        merge = self._merges.get(key.namespace or "")
        if merge is not None:
            merge.touched.add(key)

    def _merged(self, merge: NamespaceMerge) -> None:
        if self._merges.get(merge.namespace) is merge:
            del self._merges[merge.namespace]

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


class NamespaceMerge:
    """One namespace of a type listed again into the cache while the type's cluster-wide watch
    runs on (a LifecyclePolicy there changed what is kept: docs/architecture.md#scoped-relists).

    The list is taken exactly at the resourceVersion the watch had reached when the merge
    began (``resourceVersionMatch=Exact``), so the cache and the list agree on every object
    until then. What changed an object since is newer than the list, so such an object keeps
    what the cache has: one the informer applied a change of (the writer records it here as
    it applies it, an event it keeps nothing of included), or whose cached state the
    controller's own writes replaced (:meth:`~lifecycle_controller.controller.watch.cache.
    MetadataCache.write_back`: it is no longer the one stored when the merge began). Every
    other listed object goes through the writer's own path, as a full list's does (kept or
    dropped by the policies in force now, an add delivered for one newly kept); at
    :meth:`finish`, a key the cache stored in the namespace that the list did not find, and
    that nothing changed since, is dropped. Nothing outside the namespace is read or touched.
    """

    __slots__ = ("_before", "_kept", "_listed", "_writer", "namespace", "touched")

    def __init__(self, writer: CacheWriter, namespace: str) -> None:
        self._writer = writer
        self.namespace = namespace
        #: Keys the informer applied a change of since the merge began.
        self.touched: set[ObjectKey] = set()
        self._listed: set[ObjectKey] = set()
        self._kept = writer.kept_test()
        cache, resource = writer._cache, writer._resource
        #: What the cache stored in the namespace when the merge began (stored identities).
        self._before: dict[ObjectKey, CachedObject | None] = {
            key: cache.get(key) for key in cache.keys(resource, namespace=namespace)
        }

    def _unchanged(self, key: ObjectKey) -> bool:
        """Nothing changed ``key`` since the merge began: the list's state is current."""
        return key not in self.touched and self._writer._cache.get(key) is self._before.get(key)

    def put(self, part: Mapping[str, Any]) -> None:
        """One listed object (the part the informer's projection keeps). One without a
        lifecycle annotation that the cache does not store and no policy may keep, judged on
        its name as the watch's filter judges it (:meth:`CacheWriter.kept_test`, asked once
        per merge as a streaming list's filter asks it once per list: a policy change that
        concerns this namespace lists it again), is passed over unprojected: it would be
        dropped."""
        writer = self._writer
        if _passed_over(part, self._kept):
            return
        new = writer._cache.project(writer._resource, part)
        key = writer._key(new)
        if key.namespace != self.namespace:
            return  # not of this namespace: never touched
        self._listed.add(key)
        if self._unchanged(key):
            writer._apply(key, new, created=True, listed=True)
            self._before[key] = writer._cache.get(key)

    def finish(self) -> None:
        """The list is complete: drop what it did not find and nothing changed since."""
        gone = [k for k in self._before if k not in self._listed and self._unchanged(k)]
        self._writer.deleted_since_list(gone)

    def close(self) -> None:
        """End the merge (finished or not): the writer stops recording for it."""
        self._writer._merged(self)


def _passed_over(part: Mapping[str, Any], kept: KeptTest | None) -> bool:
    """A listed object the cache would keep nothing of, judged on its name and annotations
    alone (``kept`` None: every object must be projected to be judged)."""
    if kept is None:
        return False
    metadata = part.get("metadata")
    if not isinstance(metadata, dict):  # a metadata projection's part is the metadata
        metadata = part
    annotations = metadata.get("annotations") or {}
    if any(str(key).startswith(PREFIX) for key in annotations):
        return False
    return not kept(str(metadata.get("namespace") or ""), str(metadata.get("name", "")))


#: How Go's encoder starts a protobuf WatchEvent of each type that may be dropped: field 1
#: (the type), its length, the type.
_MODIFIED = b"\n\x08MODIFIED"
_ADDED = b"\n\x05ADDED"
_PREFIX_BYTES = PREFIX.encode()


class NameKeeper(Protocol):
    """What the filter asks the keeper (the shared cache's: :class:`~lifecycle_controller.
    controller.watch.cache_writer.CacheWriter`)."""

    def kept_test(self) -> KeptTest | None:
        """None while every event must be decoded now; otherwise whether an event of an
        unannotated object, by its namespace (empty for a cluster-scoped one) and name, may
        change what it keeps: it stores the object, or may keep it."""
        ...


class UnkeptListed:
    """The filter of one streaming list's initial events (all ADDED): it refuses, without a
    word, the frames :class:`UnkeptEvents` refuses, reading only the object's namespace and
    name (nothing is applied before the list's bookmark, so no resourceVersion is needed).

    The keeper's test is asked once, at the first frame, and kept for the list: a change of
    the policies that changes what the type's informers keep lists the type again (a new
    filter); one that does not (an invalid policy coming or going) changes nothing this list
    may drop, an unannotated object no valid policy may keep, which nothing acts on (the
    watch after the list asks the keeper at every event again)."""

    __slots__ = ("_asked", "_keeper", "_kept")

    def __init__(self, keeper: NameKeeper) -> None:
        self._keeper = keeper
        self._asked = False
        self._kept: KeptTest | None = None

    def __call__(self, raw: bytes | bytearray, start: int, end: int) -> bool:
        """True: decode the frame; False: it was dropped."""
        if not raw.startswith(_ADDED, start) or raw.find(_PREFIX_BYTES, start, end) >= 0:
            return True
        kept = self._kept_test()
        if kept is None:
            return True
        names = object_names(raw, start, end)
        return names is None or kept(*names)

    @property
    def skipper(self) -> FrameSkipper:
        """The same test over a run of frames (a
        :class:`~lifecycle_controller.kube.watch_protobuf.SkippingFilter`)."""
        return self.skip

    def skip(self, buffer: bytearray, start: int, stop: int, most: int) -> tuple[int, int]:
        """Drop the frames from ``start`` that :meth:`__call__` would drop, up to the first it
        would not (:func:`~lifecycle_controller.kube.frame_names.skip_unkept_frames`)."""
        kept = self._kept_test()
        if kept is None:
            return start, 0
        return skip_unkept_frames(buffer, start, stop, most, marker=_PREFIX_BYTES, kept=kept)

    def _kept_test(self) -> KeptTest | None:
        if not self._asked:
            self._kept, self._asked = self._keeper.kept_test(), True
        return self._kept


class UnkeptEvents:
    """A :class:`~lifecycle_controller.kube.watch_lines.RestingFilter` that refuses the
    frames described in the module docstring, reports each to ``on_skipped``, and has the
    watch rest ``rest`` seconds after a read it refused whole."""

    __slots__ = ("_keeper", "_on_skipped", "rest_after_refused")

    def __init__(self, keeper: NameKeeper, on_skipped: Skipped, rest: float = 0.0) -> None:
        self._keeper = keeper
        self._on_skipped = on_skipped
        self.rest_after_refused = rest

    def __call__(self, raw: bytes | bytearray, start: int, end: int) -> bool:
        """True: decode the frame; False: it was dropped (and reported)."""
        if raw.startswith(_MODIFIED, start):
            event_type = "MODIFIED"
        elif raw.startswith(_ADDED, start):
            event_type = "ADDED"
        else:
            return True
        if raw.find(_PREFIX_BYTES, start, end) >= 0:
            return True
        kept = self._keeper.kept_test()
        if kept is None:
            return True
        identity = object_identity(raw, start, end)
        if identity is None:
            return True
        name, namespace, version = identity
        if kept(namespace, name):
            return True
        self._on_skipped(event_type, version)
        return False
