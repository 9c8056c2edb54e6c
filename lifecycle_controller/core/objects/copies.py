"""Annotation copies: objects whose lifecycle annotations were copied there by their owner.

Some built-in controllers copy the metadata annotations of the object they manage onto the
objects they create for it: the Deployment controller onto every ReplicaSet, the
StatefulSet and DaemonSet controllers onto every ControllerRevision (checked against a real
kube-controller-manager; Pods, Jobs of a CronJob and the rest get their annotations from a
Pod or Job template instead, never from the owner's own metadata). A ``restart-cron`` on a
Deployment therefore also sits on each of its ReplicaSets, and a ``delete-at`` would delete
them as well. Such copies are not the user's request, so the controller ignores an object
whose controlling owner is one of these copying kinds (docs/annotations.md#annotation-copies),
unless ``--act-on-annotation-copies`` restores the old behaviour.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, Final

from lifecycle_controller.core.objects.resources import ResourceType

__all__ = ["COPYING_OWNERS", "controller_owner", "is_annotation_copy"]

GroupKind = tuple[str, str]

#: (child group, child kind) → the owner kinds that copy their annotations onto it.
COPYING_OWNERS: Final[Mapping[GroupKind, frozenset[GroupKind]]] = {
    ("apps", "ReplicaSet"): frozenset({("apps", "Deployment")}),
    ("apps", "ControllerRevision"): frozenset({("apps", "StatefulSet"), ("apps", "DaemonSet")}),
}


def controller_owner(metadata: Mapping[str, Any]) -> GroupKind | None:
    """(group, kind) of the object's controlling owner reference, if it has one."""
    for reference in metadata.get("ownerReferences") or ():
        if isinstance(reference, Mapping) and reference.get("controller") is True:
            api_version = str(reference.get("apiVersion", ""))
            group = api_version.rpartition("/")[0]
            return group, str(reference.get("kind", ""))
    return None


def is_annotation_copy(resource: ResourceType, owner: GroupKind | None) -> bool:
    """True when ``owner`` is a controller that copies its annotations onto ``resource``."""
    if owner is None:
        return False
    return owner in COPYING_OWNERS.get((resource.group, resource.kind), frozenset())
