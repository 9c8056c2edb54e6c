"""The informers' metrics protocol, served by the controller's one :class:`Metrics` registry."""

from __future__ import annotations

import asyncio

from lifecycle_controller.kube import ResourceType
from lifecycle_controller.serving.metrics import Metrics
from lifecycle_controller.serving.watch_metrics import WATCH_PURPOSES

__all__ = ["InformerMetricsAdapter"]


class InformerMetricsAdapter:
    """Adapts :class:`Metrics` to the informers' metrics protocol for the watches of one
    ``purpose``: every watch counts in ``lifecycle_watch_*{resource,purpose}``, the
    ``objects`` watches (the annotated types) also in the informer families that predate
    them. Every event received and every relist also sets ``activity`` (the lag probe samples
    fast while work arrives: :mod:`lifecycle_controller.app.loop_activity`)."""

    def __init__(
        self, metrics: Metrics, activity: asyncio.Event | None = None, *, purpose: str = "objects"
    ) -> None:
        if purpose not in WATCH_PURPOSES:
            raise ValueError(f"unknown watch purpose {purpose!r}")
        self._metrics = metrics
        self._watch = metrics.watch
        self._activity = activity if activity is not None else asyncio.Event()
        self._purpose = purpose
        self._objects = purpose == "objects"

    def watch_restarted(self, resource: ResourceType, reason: str) -> None:
        if self._objects:
            self._metrics.count_watch_restart(resource.key, reason)
        self._watch.count_end(resource.key, self._purpose, reason)

    def relisted(self, resource: ResourceType) -> None:
        self._activity.set()
        if self._objects:
            self._metrics.count_relist(resource.key)
        self._watch.count_relist(resource.key, self._purpose)

    def event_received(self, resource: ResourceType, event_type: str) -> None:
        self._activity.set()
        self._watch.count_event(resource.key, self._purpose, event_type)

    def cache_objects(self, resource: ResourceType, count: int) -> None:
        if self._objects:
            self._metrics.set_cache_objects(resource.key, count)
