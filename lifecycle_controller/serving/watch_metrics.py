"""The watch families: every watch of the process, by resource and purpose.

Every watch runs the one reflector loop (controller/watch/reflector.py); these families count them
all alike, whatever they keep. ``purpose`` is one of :data:`WATCH_PURPOSES`: ``objects`` (the
annotated types, into the metadata cache), ``namespace-defaults``, ``crds`` (rediscovery),
``policies``, ``rollouts`` (followed restarts) and ``references`` (the reference fields of
Pods and workloads, while a policy reads ``referencedBy``). The informer families that predate them
(``lifecycle_watch_restarts_total``, ``lifecycle_relists_total``, ``lifecycle_cache_objects``,
in :mod:`~lifecycle_controller.serving.metrics`) keep counting the ``objects`` watches only,
as before, so the alerts and dashboards built on them read what they always read.

Kept beside :mod:`~lifecycle_controller.serving.metrics` (which owns the registry); watch
events are counted in plain numbers (:mod:`~lifecycle_controller.serving.loop_metrics`):
one arrives for every change of every watched object.
"""

from __future__ import annotations

from prometheus_client import CollectorRegistry

from lifecycle_controller.serving.loop_metrics import LoopCounter

__all__ = ["WATCH_PURPOSES", "WatchMetrics"]

#: What a watch is for (the ``purpose`` label).
WATCH_PURPOSES = ("objects", "namespace-defaults", "crds", "policies", "rollouts", "references")


class WatchMetrics:
    """``lifecycle_watch_ends_total``, ``lifecycle_watch_relists_total`` and
    ``lifecycle_watch_events_total``, each by ``resource`` and ``purpose``."""

    def __init__(self, registry: CollectorRegistry) -> None:
        self.ends = LoopCounter(
            "lifecycle_watch_ends",
            "Watches (or the lists before them) that ended and were opened again, or stopped "
            "(reason not_found), by resource, purpose and reason.",
            ["resource", "purpose", "reason"],
            registry=registry,
        )
        self.relists = LoopCounter(
            "lifecycle_watch_relists",
            "Full lists other than a watch's first one (after 410 Gone, an outage, a policy "
            "change), by resource and purpose.",
            ["resource", "purpose"],
            registry=registry,
        )
        self.events = LoopCounter(
            "lifecycle_watch_events",
            "Watch events received (ADDED, MODIFIED, DELETED, BOOKMARK), by resource, purpose "
            "and type.",
            ["resource", "purpose", "type"],
            registry=registry,
        )

    def count_end(self, resource: str, purpose: str, reason: str) -> None:
        """A watch on ``resource`` for ``purpose`` ended (``reason``: the informer's)."""
        self.ends.labels(resource, purpose, reason).inc()

    def count_relist(self, resource: str, purpose: str) -> None:
        self.relists.labels(resource, purpose).inc()

    def count_event(self, resource: str, purpose: str, event_type: str) -> None:
        self.events.labels(resource, purpose, event_type).inc()
