"""The shared metadata cache: what the informers know, and what reconciles read.

Reconciles read objects from here, never from the API (docs/behaviour.md#guarded-writes:
every write is guarded by resourceVersion or UID preconditions, so a stale read costs a retry,
never a wrong action). Two writers, each through its own door:

* the informers (:mod:`lifecycle_controller.controller.watch.cache_writer`) store what they list
  and watch, with :meth:`MetadataCache.put` and :meth:`MetadataCache.delete`;
* the controller's own API calls on objects (:mod:`lifecycle_controller.controller.act.writes`,
  the one module that makes them) give their answers back with
  :meth:`MetadataCache.write_back`: a patch's response, a delete, a re-read after a conflict,
  and the restart facts of :class:`RestartFacts` (see there why), a lifecycle policy's
  acknowledged occurrences among them.

What is stored, and why so little
---------------------------------
A :class:`CachedObject` is a slotted, frozen projection of a ``PartialObjectMetadata``: UID,
resourceVersion, name, namespace, creation and deletion timestamps, generation, and only the
annotations under ``lifecycle.cezary.dev/``. managedFields, labels, owner references and every
other annotation are dropped at the door, which keeps an entry well under 1 KB
(docs/architecture.md#metadata-only).

**Only objects that carry at least one lifecycle annotation are stored.** A cluster has far
more Pods, ConfigMaps and Secrets than annotated objects, and the controller never acts on an
unannotated one. The informer still has to deliver old/new pairs for the relevance predicate
(docs/behaviour.md#relevance-predicate), and the rule that makes this work without
remembering unannotated objects is: *an object absent from the cache had no lifecycle
annotation when last seen* (or was never seen, which the informer tells apart by the watch
event type). So:

* an annotated object that loses its last lifecycle annotation is delivered as an update whose
  ``old`` is the cached (annotated) record and whose ``new`` has no lifecycle annotations; it
  is then removed from the cache;
* an unannotated object that gains one arrives as an update with ``old=None`` (meaning
  "previously unannotated"), which the relevance predicate reads exactly like an old object
  without annotations: "an action annotation was added" passes;
* changes where neither side carries a lifecycle annotation cannot pass any relevance rule and
  are not delivered at all, so there are no phantom creates for unannotated objects.

**With lifecycle policies** (docs/policies.md#what-a-policy-costs) an object that a policy
could match, judged on its resource type, scope, name and labels, is kept too, annotated or
not, with the rest of its metadata that matching reads (labels, every annotation, owner
references) as an :class:`~lifecycle_controller.core.policy.match.ObjectView` in
:attr:`CachedObject.view`. The cache's :attr:`MetadataCache.policy_views` (given when it is
built, when policies are on) says which; every projection goes through
:meth:`MetadataCache.project`, so the informers and the controller's own writes keep the same
objects. The rule above then
reads "had no lifecycle annotation and no policy could match it when last seen".

The alternative, a set of ``(key, uid)`` seen without annotations, was rejected: it costs memory
per unannotated object (the thing we wanted to avoid) and buys nothing the predicate uses.

What the cache knows of an object by its UID (:class:`RestartFacts`) goes when the object
leaves the API server (:meth:`MetadataCache.forget`: a delete seen by an informer or made by
the controller, or another object under the same name), not merely when it stops being kept.

Synced flags are kept per (resource type, scope), where the scope is a namespace for
per-namespace informers (docs/behaviour.md#read-scoping) or ``None`` for a cluster-wide one;
a type is synced when every scope registered for it has completed its first full list.
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator, Mapping, Set
from dataclasses import dataclass, field
from types import MappingProxyType
from typing import Any, Protocol

from cachetools import LRUCache

from lifecycle_controller.core.decision.outcomes import ObjectFacts
from lifecycle_controller.core.objects.copies import controller_owner
from lifecycle_controller.core.objects.keys import PREFIX
from lifecycle_controller.core.objects.resources import ObjectKey, ResourceType
from lifecycle_controller.core.policy.field_paths import split_read
from lifecycle_controller.core.policy.in_force import NameTest, never_kept
from lifecycle_controller.core.policy.match import ObjectView
from lifecycle_controller.core.text.timestamps import (
    TimestampError,
    format_rfc3339_nano,
    parse_rfc3339,
    parse_rfc3339_or_none,
)

__all__ = [
    "CachedObject",
    "MetadataCache",
    "PolicyViews",
    "RestartFact",
    "RestartFacts",
    "object_facts",
]

_EMPTY: Mapping[str, str] = MappingProxyType({})


@dataclass(frozen=True, slots=True)
class CachedObject:
    """The part of an object's metadata the controller needs (timestamps as the API gives them).

    ``annotations`` holds only ``lifecycle.cezary.dev/`` keys and is read-only.
    """

    uid: str
    resource_version: str
    name: str
    namespace: str | None
    creation_timestamp: str
    deletion_timestamp: str | None = None
    annotations: Mapping[str, str] = field(default_factory=lambda: _EMPTY)
    generation: int | None = None
    controller_owner: tuple[str, str] | None = None
    #: What policy matching reads, for an object a policy could match (else None).
    view: ObjectView | None = None

    @classmethod
    def from_metadata(
        cls, metadata: Mapping[str, Any], *, view: ObjectView | None = None
    ) -> CachedObject:
        """Project an object's ``metadata`` dict (managedFields and the rest are dropped)."""
        raw = metadata.get("annotations") or {}
        lifecycle = {str(k): str(v) for k, v in raw.items() if str(k).startswith(PREFIX)}
        generation = metadata.get("generation")
        return cls(
            uid=str(metadata.get("uid", "")),
            resource_version=str(metadata.get("resourceVersion", "")),
            name=str(metadata.get("name", "")),
            namespace=metadata.get("namespace") or None,
            creation_timestamp=str(metadata.get("creationTimestamp", "")),
            deletion_timestamp=metadata.get("deletionTimestamp") or None,
            annotations=MappingProxyType(lifecycle) if lifecycle else _EMPTY,
            generation=generation if isinstance(generation, int) else None,
            controller_owner=controller_owner(metadata) if lifecycle or view else None,
            view=view,
        )

    @property
    def annotated(self) -> bool:
        """True when the object carries at least one lifecycle annotation."""
        return bool(self.annotations)

    @property
    def kept(self) -> bool:
        """Whether the cache stores it: annotated, or a policy could match it."""
        return bool(self.annotations) or self.view is not None


class PolicyViews(Protocol):
    """Which objects the policies in force could match (the policy store implements it)."""

    def watches(self, resource: ResourceType) -> bool:
        """A policy selects this type (its unannotated objects must be decoded and judged)."""
        ...

    def view(
        self,
        resource: ResourceType,
        metadata: Mapping[str, Any],
        fields: Mapping[str, Any] | None = None,
        read: frozenset[tuple[str, ...]] | None = None,
    ) -> ObjectView | None:
        """The object's view when a policy could match it, else None; with the paths of
        ``fields`` (its other top-level fields) the conditions read, and those alone;
        ``read``: the paths ``fields`` were read with (None: the whole object)."""
        ...

    def reads(self, resource: ResourceType) -> frozenset[tuple[str, ...]]:
        """The paths beyond metadata the conditions for ``resource`` read (empty: none)."""
        ...

    def name_test(self, resource: ResourceType) -> NameTest | None:
        """Whether :meth:`view` may keep an object of ``resource`` so named, judged before
        its metadata is decoded: a test of (namespace (None: cluster-scoped), name) that is
        never False for one it would keep, the same test until the policies change; None
        when any object of the type may be kept, whatever its name."""
        ...


Scope = str | None
"""A namespace for a per-namespace informer, ``None`` for a cluster-wide one."""


@dataclass(frozen=True, slots=True)
class RestartFact:
    """What this process knows of a workload's last restart, beyond its metadata.

    ``marker`` is the Pod template's ``restartedAt`` as last seen (a restart's response, or
    one read of the workload for the restart guard; None: the template has none);
    ``at_ns`` is when this process restarted it (the marker has whole seconds on workloads
    restarted by other tools).
    """

    marker: str | None
    at_ns: int | None = None


class _Known:
    """Everything known of one UID's restarts: its fact and an acknowledged occurrence."""

    __slots__ = ("acknowledged_ns", "fact")

    def __init__(self) -> None:
        self.fact: RestartFact | None = None
        self.acknowledged_ns: int | None = None


class RestartFacts:
    """Restart facts by object UID, the :data:`MAX` most recently used kept (a
    ``cachetools.LRUCache``: writing or reading a UID's facts keeps them longest).

    The metadata-only informers never see Pod templates, so the restart marker a new
    restart must differ from, and the last restart the restart guard measures from, are
    remembered here when the controller's own writes and reads return them. So is the
    latest occurrence a lifecycle policy skipped (catch-up), acknowledged in memory instead
    of on the object (docs/architecture.md#policy-anchors): a recurring policy restart counts
    from the later of the two (:meth:`anchor`).
    """

    MAX = 100_000

    def __init__(self) -> None:
        self._known: LRUCache[str, _Known] = LRUCache(maxsize=self.MAX)

    def _touch(self, uid: str) -> _Known:
        known = self._known.get(uid)
        if known is None:
            known = _Known()
            self._known[uid] = known
        return known

    def get(self, uid: str) -> RestartFact | None:
        known = self._known.get(uid)
        return None if known is None else known.fact

    def put(self, uid: str, fact: RestartFact) -> None:
        self._touch(uid).fact = fact

    def acknowledge(self, uid: str, at_ns: int) -> None:
        """A policy skipped the occurrence due at ``at_ns`` (the latest one is kept)."""
        known = self._touch(uid)
        if known.acknowledged_ns is None or at_ns > known.acknowledged_ns:
            known.acknowledged_ns = at_ns

    def anchor(self, uid: str) -> str | None:
        """What a recurring policy restart counts from: the later of the template marker
        and the acknowledged occurrence (None: neither is known)."""
        known = self._known.get(uid)
        if known is None:
            return None
        marker = None if known.fact is None else known.fact.marker
        acknowledged = known.acknowledged_ns
        if acknowledged is None:
            return marker
        seen = parse_rfc3339_or_none(marker)
        if seen is not None and seen >= acknowledged:
            return marker
        return format_rfc3339_nano(acknowledged)

    def forget(self, uid: str) -> None:
        self._known.pop(uid, None)

    def __len__(self) -> int:
        return len(self._known)


class MetadataCache:
    """Annotated objects by key, per resource type, plus per-(type, scope) synced flags.

    Not thread-safe; used from one event loop, where every method is atomic.
    """

    def __init__(self, policy_views: PolicyViews | None = None) -> None:
        self._objects: dict[ResourceType, dict[ObjectKey, CachedObject]] = {}
        #: (namespace, name) of every stored object, per type: :meth:`contains` without a key.
        self._names: dict[ResourceType, set[tuple[str | None, str]]] = {}
        self._synced: dict[ResourceType, dict[Scope, bool]] = {}
        self._restarts = RestartFacts()
        self._views = policy_views

    @property
    def policy_views(self) -> PolicyViews | None:
        """Which unannotated objects lifecycle policies keep (None: annotated objects only)."""
        return self._views

    # ------------------------------------------------------------------ objects

    def project(self, resource: ResourceType, metadata: Mapping[str, Any]) -> CachedObject:
        """The cached form of an object's ``metadata`` (see "What is stored"), or of an
        object cut down by a field projection (``metadata`` and the paths conditions read:
        those are kept in its view)."""
        fields: Mapping[str, Any] | None = None
        read: frozenset[tuple[str, ...]] | None = frozenset()  # metadata only: nothing more
        if isinstance(metadata.get("metadata"), Mapping):  # an object, not its metadata
            fields, read = split_read(metadata)
            metadata = metadata["metadata"]
        views = self.policy_views
        view = None if views is None else views.view(resource, metadata, fields, read)
        return CachedObject.from_metadata(metadata, view=view)

    def reads(self, resource: ResourceType) -> frozenset[tuple[str, ...]]:
        """The paths beyond metadata the policies' conditions read of ``resource``: a fresh
        read of one of its objects must read the object, not only its metadata."""
        views = self.policy_views
        return frozenset() if views is None else views.reads(resource)

    def keeps_unannotated(self, resource: ResourceType) -> bool:
        """Whether unannotated objects of ``resource`` may be kept (a policy selects it)."""
        views = self.policy_views
        return views is not None and views.watches(resource)

    def name_test(self, resource: ResourceType) -> NameTest | None:
        """Whether an unannotated object of ``resource`` may be kept, by its namespace and
        name (a policy may match it: never False for one :meth:`project` would keep), as
        one test, the same until the policies change (the listing asks it for every frame);
        None when any may be kept, whatever its name: its frames must be decoded to be
        judged."""
        views = self.policy_views
        return never_kept if views is None else views.name_test(resource)

    def get(self, key: ObjectKey) -> CachedObject | None:
        return self._objects.get(key.resource, {}).get(key)

    def contains(self, resource: ResourceType, namespace: str | None, name: str) -> bool:
        """Whether an object is stored under this key (no :class:`ObjectKey` is built)."""
        names = self._names.get(resource)
        return names is not None and (namespace, name) in names

    def kept_names(self, resource: ResourceType) -> Set[tuple[str | None, str]]:
        """The (namespace, name) of every object of ``resource`` stored, as a live view: it
        follows every later put and delete, even across :meth:`drop_type` (an informer's
        filter asks it for every event of an object without a lifecycle annotation)."""
        return self._names.setdefault(resource, set())

    def put(self, key: ObjectKey, obj: CachedObject) -> None:
        """Store ``obj`` under ``key`` (callers store annotated objects only)."""
        self._objects.setdefault(key.resource, {})[key] = obj
        self._names.setdefault(key.resource, set()).add((key.namespace, key.name))

    def delete(self, key: ObjectKey) -> CachedObject | None:
        """Remove ``key``; return what was stored, or ``None``."""
        by_type = self._objects.get(key.resource)
        if by_type is None:
            return None
        old = by_type.pop(key, None)
        if old is not None:
            self._names[key.resource].discard((key.namespace, key.name))
        return old

    def forget(self, key: ObjectKey, uid: str | None = None) -> CachedObject | None:
        """The object left the API server (deleted, or another one took its name): remove
        ``key`` and what is known of its UID (``uid``, and the stored object's); return what
        was stored."""
        old = self.delete(key)
        for gone in {uid, None if old is None else old.uid}:
            if gone:
                self._restarts.forget(gone)
        return old

    # ------------------------------------------------------------------ our own writes

    def write_back(
        self,
        key: ObjectKey,
        fresh: CachedObject | None,
        *,
        decided_on: CachedObject | None = None,
        restart: RestartFact | None = None,
        acknowledged_ns: int | None = None,
    ) -> None:
        """Store a state the controller got from the API itself (``None``: it deleted ``key``).

        * After a patch (``decided_on`` is the state it was decided on) or a re-read after a
          conflict, the next pass over ``key`` (a requeue can come before the watch event)
          must not decide on the old state and spend a conflict. When the informer has
          already stored a different state than the one a patch was decided on, that state
          is at least as new and is kept. The watch event of the patch then finds the same
          annotations here and is not delivered again, so the writer runs the pass that event
          would have run.
        * After a delete, ``key`` is dropped now, before the watch event confirms it: a pass
          in between would otherwise see the object again and send a second delete. What
          is known of its UID goes with it (:meth:`forget`).
        * ``restart`` records what a restart (or a read of the workload) told of its Pod
          template, and ``acknowledged_ns`` an occurrence a lifecycle policy skipped, under
          the object's UID (``fresh`` or the cached state names it). With ``fresh`` the very
          state it was decided on, nothing new is known of the object: only those are kept.
        """
        current = self.get(key)
        uid = (fresh or current or decided_on or _NO_OBJECT).uid
        if fresh is None:
            self.forget(key, uid)
            return
        if uid and restart is not None:
            self._restarts.put(uid, restart)
        if uid and acknowledged_ns is not None:
            self._restarts.acknowledge(uid, acknowledged_ns)
        if fresh is decided_on:
            return
        if (
            decided_on is not None
            and current is not None
            and current is not decided_on
            and current.resource_version != decided_on.resource_version
        ):
            return
        if fresh.kept:
            self.put(key, fresh)
        else:
            self.delete(key)

    def restart_fact(self, uid: str) -> RestartFact | None:
        """What the controller's own writes and reads told of the workload's last restart."""
        return self._restarts.get(uid)

    def restart_anchor(self, uid: str) -> str | None:
        """What a recurring policy restart of the workload counts from, beyond its metadata:
        the later of its template marker and an occurrence a policy skipped
        (:meth:`RestartFacts.anchor`)."""
        return self._restarts.anchor(uid)

    # ------------------------------------------------------------------ reading

    def keys(self, resource: ResourceType, *, namespace: Scope = None) -> list[ObjectKey]:
        """Keys of ``resource``; only those in ``namespace`` when one is given."""
        by_type = self._objects.get(resource, {})
        if namespace is None:
            return list(by_type)
        return [key for key in by_type if key.namespace == namespace]

    def items(self, resource: ResourceType) -> Iterator[tuple[ObjectKey, CachedObject]]:
        """A snapshot of (key, object) pairs of ``resource``."""
        return iter(list(self._objects.get(resource, {}).items()))

    def count(self, resource: ResourceType) -> int:
        return len(self._objects.get(resource, {}))

    def counts(self) -> dict[ResourceType, int]:
        """Objects per resource type (for a gauge); types with a registered scope included."""
        types = set(self._objects) | set(self._synced)
        return {resource: self.count(resource) for resource in types}

    def types(self) -> set[ResourceType]:
        """Types with objects or a registered scope."""
        return set(self._objects) | set(self._synced)

    def __len__(self) -> int:
        return sum(len(by_type) for by_type in self._objects.values())

    # ------------------------------------------------------------------ synced flags

    def register_scope(self, resource: ResourceType, namespace: Scope) -> None:
        """Declare that an informer fills (resource, namespace); not synced until marked."""
        self._synced.setdefault(resource, {}).setdefault(namespace, False)

    def mark_synced(self, resource: ResourceType, namespace: Scope) -> None:
        """The first full list of (resource, namespace) is in the cache."""
        self._synced.setdefault(resource, {})[namespace] = True

    def is_synced(self, resource: ResourceType, namespace: Scope = None) -> bool:
        return self._synced.get(resource, {}).get(namespace, False)

    def type_synced(self, resource: ResourceType) -> bool:
        """Every scope registered for ``resource`` has synced (False when none is registered)."""
        scopes = self._synced.get(resource)
        return scopes is not None and bool(scopes) and all(scopes.values())

    def all_synced(self, types: Iterable[ResourceType]) -> bool:
        """Every one of ``types`` has synced (vacuously true for no types)."""
        return all(self.type_synced(resource) for resource in types)

    def drop_type(self, resource: ResourceType) -> None:
        """Forget a resource type entirely: its objects and its synced flags."""
        self._objects.pop(resource, None)
        names = self._names.get(resource)
        if names is not None:
            names.clear()  # kept, empty: filters hold it (kept_names)
        self._synced.pop(resource, None)


_NO_OBJECT = CachedObject("", "", "", None, "")


def object_facts(
    resource: ResourceType, obj: CachedObject, *, restart_marker: str | None = None
) -> ObjectFacts:
    """What :func:`lifecycle_controller.core.decision.decide` needs to know about a cached object.

    Apps Deployments, StatefulSets and DaemonSets always have a Pod template (API validation
    requires one), so the metadata-only cache can answer ``has_pod_template`` by kind.
    """
    try:
        creation_ns: int | None = parse_rfc3339(obj.creation_timestamp)
    except TimestampError:
        creation_ns = None
    return ObjectFacts(
        key=ObjectKey(resource, obj.namespace, obj.name),
        uid=obj.uid,
        resource_version=obj.resource_version,
        creation_ns=creation_ns,
        terminating=obj.deletion_timestamp is not None,
        has_pod_template=resource.restartable,
        restart_marker=restart_marker,
        controller_owner=obj.controller_owner,
    )
