"""Dropping the watch events of objects an informer keeps nothing of, before they are decoded.

In a busy cluster most watch events of an annotated type are changes to objects that carry no
lifecycle annotation: the controller will never act on them, yet decoding each one was most of
its CPU (docs/performance.md#the-cost-of-churn). Such an event changes nothing kept when all of
these hold, and then only its resourceVersion is read:

* it is an ADDED or MODIFIED protobuf frame (a DELETED one may end what is known of a UID;
  bookmarks, errors and JSON lines are always decoded);
* the bytes of the lifecycle annotation prefix are nowhere in the frame (strings are plain
  UTF-8 in protobuf, so an annotation under the prefix cannot hide);
* the keeper allows it (:meth:`Holder.skips_unheld`: the shared cache's keeper does while no
  lifecycle policy selects the type and nobody hears of every change), asked for each frame
  since policies come and go;
* the keeper does not hold the object (an object that just lost its last lifecycle
  annotation is held, so its event is decoded and it leaves the cache as before).

The informer is told of each dropped event (its type and resourceVersion) so that its
resourceVersion, its metrics and its liveness move as if it had been applied.
"""

from __future__ import annotations

from typing import Protocol

from lifecycle_controller.controller.informer_ports import Skipped
from lifecycle_controller.core.objects.keys import PREFIX
from lifecycle_controller.kube.watch_protobuf import object_identity

__all__ = ["Holder", "UnkeptEvents"]

#: How Go's encoder starts a protobuf WatchEvent of each type that may be dropped: field 1
#: (the type), its length, the type.
_MODIFIED = b"\n\x08MODIFIED"
_ADDED = b"\n\x05ADDED"
_PREFIX_BYTES = PREFIX.encode()


class Holder(Protocol):
    """What the filter asks the keeper (the shared cache's: :class:`~lifecycle_controller.
    controller.cache_writer.CacheWriter`)."""

    def skips_unheld(self) -> bool:
        """Whether events of unannotated objects it does not hold may be dropped now."""
        ...

    def holds(self, namespace: str, name: str) -> bool:
        """Whether it holds the object (``namespace`` empty for a cluster-scoped one)."""
        ...


class UnkeptEvents:
    """An :data:`~lifecycle_controller.kube.EventFilter` that refuses the frames described
    in the module docstring and reports each to ``on_skipped``."""

    def __init__(self, keeper: Holder, on_skipped: Skipped) -> None:
        self._keeper = keeper
        self._on_skipped = on_skipped

    def __call__(self, raw: bytes | bytearray, start: int, end: int) -> bool:
        """True: decode the frame; False: it was dropped (and reported)."""
        if raw.startswith(_MODIFIED, start):
            event_type = "MODIFIED"
        elif raw.startswith(_ADDED, start):
            event_type = "ADDED"
        else:
            return True
        if raw.find(_PREFIX_BYTES, start, end) >= 0 or not self._keeper.skips_unheld():
            return True
        identity = object_identity(raw, start, end)
        if identity is None:
            return True
        name, namespace, version = identity
        if self._keeper.holds(namespace, name):
            return True
        self._on_skipped(event_type, version)
        return False
