"""Which change becomes work: every rule that turns a change into keys on the work queue.

One room for them, so that "why was this object decided again?" has one place to read. The
composition root hands these rules to the objects that notice the changes, at construction:

===============================================  ==============================================
change                                           keys enqueued
===============================================  ==============================================
an object added or updated (the cache's          that object, when the scope allows it, it is
handler, :class:`ChangeFilter`)                  not an annotation copy left alone, and the
                                                 change can alter a decision: a lifecycle
                                                 annotation or a policy view, new or changed
an object deleted                                none (what was known of it ends)
a Namespace's defaults changed                   its cached objects the scope allows
a Namespace's labels changed                     the same, while a policy in force selects
                                                 namespaces by label
who uses a reference target changed              the kept objects it names (a StatefulSet's
                                                 claim template: the kept claims of its
                                                 ordinals), viewed by a policy, in scope
the reference index synced                       the objects of the referenced kinds a policy
                                                 may decide, in scope
the policies changed (:class:`PolicyRequeue`)    per running type whose decisions change: its
                                                 objects a policy may decide, in scope (in the
                                                 changed LifecyclePolicies' namespaces when
                                                 only those changed); the type is listed again
                                                 (whole, or in those namespaces) when what its
                                                 informers keep changed
a waiting key may go (a breaker reset, a         that key
limit's place given back, a rollout slot free)
===============================================  ==============================================

"A policy may decide" means the cache keeps the object for a policy (its ``view``). Every
other consequence of a change (the rollout tracker's hint that an object moved, unknown
annotation keys noted, a deletion forgotten) stays with the object that owns it; the rules
here only choose keys (docs/behaviour.md#relevance-predicate,
docs/policies.md#changing-a-policy).
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Set
from dataclasses import dataclass
from typing import Protocol

import structlog

from lifecycle_controller.controller.watch.cache import CachedObject, MetadataCache
from lifecycle_controller.controller.watch.ports import ChangeKind
from lifecycle_controller.core.objects.copies import is_annotation_copy
from lifecycle_controller.core.objects.pod_references import REFERENCED_KINDS, covers, used_kind
from lifecycle_controller.core.objects.relevance import (
    should_enqueue_on_create,
    should_enqueue_on_update,
)
from lifecycle_controller.core.objects.resources import ObjectKey, ResourceType
from lifecycle_controller.core.objects.scope import ScopeConfig
from lifecycle_controller.core.policy.in_force import PolicySet
from lifecycle_controller.core.policy.read_scope import decided_change, kept_change

__all__ = ["ChangeFilter", "PolicyRequeue", "Relists", "Requeue", "named_by"]

_log = structlog.get_logger(__name__)


def named_by(cache: MetadataCache, namespace: str, kind: str, name: str) -> list[ObjectKey]:
    """The keys of the core-group objects a reference target names: one, or for a
    StatefulSet's claim template every claim of its ordinals the cache keeps in that
    namespace (any ordinal: they are looked for among the kept claims)."""
    named = used_kind(kind)
    found: list[ObjectKey] = []
    for resource in cache.types():
        if resource.group != "" or resource.kind != named:
            continue
        if named == kind:
            found.append(ObjectKey(resource, namespace, name))
        else:
            keys = cache.keys(resource, namespace=namespace)
            found.extend(key for key in keys if covers((kind, name), key.name))
    return found


@dataclass(frozen=True, slots=True)
class Requeue:
    """The rules that need only the cache, the scope and the queue (see the module)."""

    cache: MetadataCache
    scope: ScopeConfig
    enqueue: Callable[[ObjectKey], None]
    #: The policies in force (whether one selects namespaces by label).
    policies: Callable[[], PolicySet]

    def allows(self, key: ObjectKey) -> bool:
        """The scope lets the controller act on ``key``."""
        return self.scope.allows_object(key.resource, key.namespace, key.name)

    def waiter_freed(self, key: ObjectKey) -> None:
        """A key a guardrail kept waiting may go now: the breaker was reset, a policy's
        limit gave a place back, a rollout slot came free."""
        self.enqueue(key)

    def namespace_defaults_changed(self, namespace: str) -> None:
        """A Namespace's defaults changed (docs/annotations.md#namespace-defaults)."""
        self._namespace_changed(namespace, "defaults")

    def namespace_labels_changed(self, namespace: str) -> None:
        """A Namespace's labels changed: only a policy's ``namespaceSelector`` reads them
        (docs/policies.md#namespaceselector)."""
        if self.policies().selects_namespaces_by_label():
            self._namespace_changed(namespace, "labels")

    def _namespace_changed(self, namespace: str, what: str) -> None:
        keys = [
            key
            for resource in sorted(self.cache.types())
            if resource.namespaced
            for key in self.cache.keys(resource, namespace=namespace)
            if self.allows(key)
        ]
        if keys:
            _log.info(f"namespace {what} changed", namespace=namespace, objects=len(keys))
        for key in keys:
            self.enqueue(key)

    def reference_changed(self, namespace: str, kind: str, name: str) -> None:
        """Who uses the target (namespace, kind, name) changed."""
        for key in named_by(self.cache, namespace, kind, name):
            obj = self.cache.get(key)
            if obj is not None and obj.view is not None and self.allows(key):
                self.enqueue(key)

    def references_synced(self) -> None:
        """The reference index is complete: the objects it held are decided again."""
        for resource in self.cache.types():
            if resource.group == "" and resource.kind in REFERENCED_KINDS:
                for key in self.policy_keys(resource):
                    self.enqueue(key)

    def policy_keys(
        self, resource: ResourceType, namespaces: frozenset[str] | None = None
    ) -> list[ObjectKey]:
        """The kept objects of ``resource`` a policy may decide for, in scope: in
        ``namespaces`` only when given (a LifecyclePolicy's change concerns its own
        namespace)."""
        return [
            key
            for key, obj in self.cache.items(resource)
            if (namespaces is None or key.namespace in namespaces)
            and obj.view is not None
            and self.allows(key)
        ]


@dataclass(frozen=True, slots=True)
class ChangeFilter:
    """The cache's change handler: an object's own event (see the module)."""

    requeue: Requeue
    act_on_copies: bool
    #: The rollout tracker's hint that a followed workload changed (told of every change).
    moved: Callable[[ObjectKey], None]
    #: The reconciler's: a deleted object, what was known of it ends.
    object_gone: Callable[[ObjectKey], None]
    #: The accounting's: the lifecycle keys nothing reads, noted (key, uid, annotations).
    note_unknown_keys: Callable[[ObjectKey, str, Iterable[str]], None]

    def __call__(
        self, kind: ChangeKind, key: ObjectKey, old: CachedObject | None, new: CachedObject | None
    ) -> None:
        self.moved(key)
        if kind == "delete":
            self.object_gone(key)
            return
        if new is None:
            return
        if not self.requeue.allows(key):
            return
        if not self.act_on_copies and is_annotation_copy(key.resource, new.controller_owner):
            return
        self.note_unknown_keys(key, new.uid, new.annotations)
        if kind == "add":
            relevant = should_enqueue_on_create(new.annotations) or new.view is not None
        else:  # a policy view that changed (labels, owners, annotations) counts too
            previous = old.annotations if old is not None else {}
            relevant = (
                should_enqueue_on_update(previous, new.annotations)
                or (None if old is None else old.view) != new.view
            )
        if relevant:
            self.requeue.enqueue(key)


class Relists(Protocol):
    """The informers as the policy rule uses them: which types run, and their relists."""

    def running(self) -> Set[ResourceType]: ...

    async def relist(self, resource: ResourceType) -> None: ...

    async def relist_namespaces(
        self, resource: ResourceType, namespaces: Iterable[str]
    ) -> None: ...


@dataclass(frozen=True, slots=True)
class PolicyRequeue:
    """The policies changed (old → new): the objects whose decision that may change, and
    the relists of the types whose kept objects it changes (docs/architecture.md#scoped-relists).
    Built after the informers, whose relists it asks for."""

    requeue: Requeue
    informers: Relists

    async def __call__(self, old: PolicySet, new: PolicySet) -> None:
        for resource in sorted(self.informers.running()):
            decided = decided_change(old, new, resource)
            if not decided:
                continue
            namespaces = None if decided.everywhere else decided.namespaces
            keys = self.requeue.policy_keys(resource, namespaces)
            _log.info(
                "re-evaluating for changed policies",
                resource=str(resource),
                objects=len(keys),
                namespaces=None if namespaces is None else sorted(namespaces),
            )
            for key in keys:
                self.requeue.enqueue(key)
            kept = kept_change(old, new, resource)  # objects it dropped may match now
            if kept.everywhere:
                await self.informers.relist(resource)
            elif kept.namespaces:
                await self.informers.relist_namespaces(resource, kept.namespaces)
