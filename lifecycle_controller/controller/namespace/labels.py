"""The labels of every Namespace, kept by the namespace store for ``namespaceSelector``.

A ``ClusterLifecyclePolicy``'s ``namespaceSelector`` is judged over the labels of the
object's Namespace. The namespace-defaults store already watches Namespaces (metadata only,
through the reflector); :class:`NamespaceLabelViews` is the policy-views side of its cache,
so that every Namespace is kept with its labels alone (no annotations beyond the lifecycle
ones, no other metadata): about 0.9 KB per Namespace.

Only while :attr:`NamespaceLabelViews.wanted` (a policy in force has a
``namespaceSelector``): otherwise the cache keeps the Namespaces with lifecycle annotations
(their defaults) and nothing else, as before ``namespaceSelector`` existed. The store lists
the Namespaces again when that changes (:meth:`~lifecycle_controller.controller.namespace.defaults.
NamespaceDefaultsStore.keep_labels`).

:func:`labels_changed` tells the store when a Namespace's labels changed, so that the
objects in it are re-evaluated.
"""

from __future__ import annotations

from collections.abc import Mapping
from types import MappingProxyType
from typing import Any, Final

from lifecycle_controller.controller.watch.cache import CachedObject
from lifecycle_controller.core.objects.resources import ResourceType
from lifecycle_controller.core.policy.in_force import NameTest, never_kept
from lifecycle_controller.core.policy.match import ObjectView

__all__ = ["NamespaceLabelViews", "labels_changed", "labels_of"]

_EMPTY: Final[Mapping[str, str]] = MappingProxyType({})


class NamespaceLabelViews:
    """Keeps every Namespace, with a view holding only its name and labels, while
    :attr:`wanted`."""

    def __init__(self) -> None:
        #: A policy in force selects namespaces by label (the store says so).
        self.wanted = False

    def watches(self, resource: ResourceType) -> bool:
        return self.wanted and resource.group == "" and resource.kind == "Namespace"

    def view(
        self,
        resource: ResourceType,
        metadata: Mapping[str, Any],
        fields: Mapping[str, Any] | None = None,
        read: frozenset[tuple[str, ...]] | None = None,
    ) -> ObjectView | None:
        if not self.watches(resource):
            return None
        raw = metadata.get("labels")
        labels = (
            MappingProxyType({str(k): str(v) for k, v in raw.items()})
            if isinstance(raw, Mapping) and raw
            else _EMPTY
        )
        return ObjectView(
            resource=resource, namespace=None, name=str(metadata.get("name", "")), labels=labels
        )

    def reads(self, resource: ResourceType) -> frozenset[tuple[str, ...]]:
        """Nothing beyond a Namespace's metadata."""
        return frozenset()

    def name_test(self, resource: ResourceType) -> NameTest | None:
        """Every Namespace may be kept, whatever its name (None); nothing else."""
        return None if self.watches(resource) else never_kept


def labels_of(obj: CachedObject | None) -> Mapping[str, str] | None:
    """A cached Namespace's labels (None: not cached)."""
    if obj is None or obj.view is None:
        return None
    return obj.view.labels


def labels_changed(old: CachedObject | None, new: CachedObject | None) -> bool:
    """Whether a Namespace's labels differ between two states (a new or gone one: yes)."""
    return labels_of(old) != labels_of(new)
