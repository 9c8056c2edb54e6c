"""The value types that name things: a resource type, one object, one incarnation of it.

Every layer speaks these three, so they are defined once, here in the pure core:

* :class:`ResourceType` is one API resource (group, preferred version, plural, kind, scope)
  as discovery found it; the scope planner selects them, informers watch them, the API door
  builds REST paths from them.
* :class:`ObjectKey` is the identity of one object across every watched type: the work-queue
  key, the cache key, the ``never`` ledger's key and (as :attr:`ObjectKey.id`) the metrics'
  object label. Two keys are equal when group, kind, namespace and name are, whatever the
  API version, so a preferred-version change at rediscovery keeps an object's ledger entry.
* :class:`ObjectRef` is a key plus the UID and resourceVersion of the incarnation an Event
  is about.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from functools import cached_property

from lifecycle_controller.core.objects.keys import RESTARTABLE_GROUP, RESTARTABLE_KINDS

__all__ = ["ObjectKey", "ObjectRef", "ResourceType", "resource_key"]


def resource_key(resource: str, group: str) -> str:
    """The scope-pattern key: ``plural`` for the core group, ``plural.group`` otherwise."""
    return f"{resource}.{group}" if group else resource


def is_restartable(group: str, kind: str) -> bool:
    """Deployments, StatefulSets and DaemonSets of ``apps`` are the kinds a restart applies to."""
    return group == RESTARTABLE_GROUP and kind in RESTARTABLE_KINDS


@dataclass(frozen=True, order=True)
class ResourceType:
    """One API resource: a GroupVersionResource plus the kind and scope discovery gave it."""

    group: str
    version: str
    resource: str
    kind: str
    namespaced: bool

    @cached_property
    def key(self) -> str:
        """The scope-pattern key: ``plural`` for the core group, ``plural.group`` otherwise."""
        return resource_key(self.resource, self.group)

    @cached_property
    def api_version(self) -> str:
        return f"{self.group}/{self.version}" if self.group else self.version

    @cached_property
    def restartable(self) -> bool:
        """True for the workload kinds whose Pod template a restart patches."""
        return is_restartable(self.group, self.kind)

    @cached_property
    def group_version_path(self) -> str:
        return f"/apis/{self.group}/{self.version}" if self.group else f"/api/{self.version}"

    def collection_path(self, namespace: str | None = None) -> str:
        """The list/watch path; all namespaces when ``namespace`` is None."""
        if self.namespaced and namespace is not None:
            return f"{self.group_version_path}/namespaces/{namespace}/{self.resource}"
        return f"{self.group_version_path}/{self.resource}"

    def object_path(self, namespace: str | None, name: str) -> str:
        """The path of one object; ``namespace`` is ignored for cluster-scoped types."""
        if self.namespaced:
            if not namespace:
                raise ValueError(f"{self.key} is namespaced: a namespace is required")
            return f"{self.group_version_path}/namespaces/{namespace}/{self.resource}/{name}"
        return f"{self.group_version_path}/{self.resource}/{name}"

    def __str__(self) -> str:
        return f"{self.key}/{self.version}"

    def __hash__(self) -> int:
        return self._hash

    @cached_property
    def _hash(self) -> int:
        """The fields' hash, computed once: a type keys the cache's maps, looked up for every
        watch event (equality stays the dataclass's, over the same fields)."""
        return hash((self.group, self.version, self.resource, self.kind, self.namespaced))


@dataclass(frozen=True, slots=True, eq=False)
class ObjectKey:
    """The identity of one object: (resource type, namespace, name).

    ``namespace`` is ``None`` for cluster-scoped types. Equality and hash ignore the API
    version (see the module docstring). UIDs are not part of the key: a re-created object
    is the same key, told apart by its UID.
    """

    resource: ResourceType
    namespace: str | None
    name: str
    #: What equality and hash compare, and its hash: computed once, since a key is looked up
    #: in several maps for every event and every reconcile.
    _identity: tuple[str, str, str | None, str] = field(init=False, repr=False)
    _hash: int = field(init=False, repr=False)
    _id: str | None = field(init=False, repr=False, default=None)

    def __post_init__(self) -> None:
        identity = (self.resource.group, self.resource.kind, self.namespace, self.name)
        object.__setattr__(self, "_identity", identity)
        object.__setattr__(self, "_hash", hash(identity))

    @classmethod
    def for_kind(
        cls, *, group: str, version: str, kind: str, namespace: str | None, name: str
    ) -> ObjectKey:
        """A key for an object known by kind only (a manifest, a test): the plural is a guess.

        The plural is not part of a key's identity, so the guess never matters for equality.
        """
        resource = ResourceType(group, version, kind.lower() + "s", kind, namespace is not None)
        return cls(resource, namespace, name)

    def __eq__(self, other: object) -> bool:
        if self is other:
            return True
        if not isinstance(other, ObjectKey):
            return NotImplemented
        return self._hash == other._hash and self._identity == other._identity

    def __hash__(self) -> int:
        return self._hash

    @property
    def id(self) -> str:
        """A stable string for this object (the metrics' per-object label)."""
        known = self._id
        if known is None:  # built on first use: the metrics, ledger and Events ask often
            known = f"{self.resource.key}/{self.namespace or ''}/{self.name}"
            object.__setattr__(self, "_id", known)
        return known

    def log_context(self) -> dict[str, str]:
        """Fields to bind into structlog for anything about this object."""
        return {
            "kind": self.resource.kind,
            "api_version": self.resource.api_version,
            "namespace": self.namespace or "",
            "name": self.name,
        }

    def __str__(self) -> str:
        where = f"{self.namespace}/{self.name}" if self.namespace else self.name
        return f"{self.resource.kind}.{self.resource.api_version} {where}"


@dataclass(frozen=True, slots=True)
class ObjectRef:
    """One incarnation of an object (key + UID + resourceVersion), as an Event names it."""

    key: ObjectKey
    uid: str
    resource_version: str = ""
