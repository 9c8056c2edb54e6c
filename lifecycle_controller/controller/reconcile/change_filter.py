"""Which cache changes become work: the filter between the informers and the work queue.

Every change the shared cache reports (docs/behaviour.md#relevance-predicate) passes here
once: the rollout tracker hears that the object moved; a deletion ends what the controller
knew of the object; anything else is queued only when the watch scope allows the object, it
is not an annotation copy the controller leaves alone (docs/annotations.md#annotation-copies),
and the change can alter a decision: a new object with a lifecycle annotation or a policy view,
or a change of its lifecycle annotations or of what policies see of it (labels, owners).
Unknown annotation keys are noted on the way (their one Warning per value).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

from lifecycle_controller.controller.reconcile.reconciler import Reconciler
from lifecycle_controller.controller.watch.cache import CachedObject
from lifecycle_controller.controller.watch.ports import ChangeKind
from lifecycle_controller.core import ObjectKey
from lifecycle_controller.core.objects.copies import is_annotation_copy
from lifecycle_controller.core.objects.relevance import (
    should_enqueue_on_create,
    should_enqueue_on_update,
)
from lifecycle_controller.core.objects.scope import ScopeConfig

__all__ = ["ChangeFilter"]


@dataclass(frozen=True, slots=True)
class ChangeFilter:
    """The cache's change handler (see the module docstring)."""

    scope: ScopeConfig
    act_on_copies: bool
    reconciler: Reconciler
    enqueue: Callable[[ObjectKey], None]
    #: The rollout tracker's hint that a followed workload changed.
    moved: Callable[[ObjectKey], None]

    def __call__(
        self, kind: ChangeKind, key: ObjectKey, old: CachedObject | None, new: CachedObject | None
    ) -> None:
        self.moved(key)
        if kind == "delete":
            self.reconciler.object_gone(key)
            return
        if new is None:
            return
        resource = key.resource
        if not self.scope.allows_object(resource, key.namespace, key.name):
            return
        if not self.act_on_copies and is_annotation_copy(resource, new.controller_owner):
            return
        self.reconciler.accounting.note_unknown_keys(key, new.uid, new.annotations)
        if kind == "add":
            relevant = should_enqueue_on_create(new.annotations) or new.view is not None
        else:  # a policy view that changed (labels, owners, annotations) counts too
            previous = old.annotations if old is not None else {}
            relevant = (
                should_enqueue_on_update(previous, new.annotations)
                or (None if old is None else old.view) != new.view
            )
        if relevant:
            self.enqueue(key)
