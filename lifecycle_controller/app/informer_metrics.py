"""The informers' metrics protocol, served by the controller's one :class:`Metrics` registry."""

from __future__ import annotations

import asyncio

from lifecycle_controller.kube import ResourceType
from lifecycle_controller.serving.metrics import Metrics

__all__ = ["InformerMetricsAdapter"]


class InformerMetricsAdapter:
    """Adapts :class:`Metrics` to the informers' metrics protocol; every event received and
    every relist also sets ``activity`` (the lag probe samples fast while work arrives:
    :mod:`lifecycle_controller.app.loop_activity`)."""

    def __init__(self, metrics: Metrics, activity: asyncio.Event | None = None) -> None:
        self._metrics = metrics
        self._activity = activity if activity is not None else asyncio.Event()

    def watch_restarted(self, resource: ResourceType, reason: str) -> None:
        self._metrics.count_watch_restart(resource.key, reason)

    def relisted(self, resource: ResourceType) -> None:
        self._activity.set()
        self._metrics.count_relist(resource.key)

    def event_received(self, resource: ResourceType, event_type: str) -> None:
        self._activity.set()

    def cache_objects(self, resource: ResourceType, count: int) -> None:
        self._metrics.set_cache_objects(resource.key, count)
