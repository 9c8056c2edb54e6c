"""The informers' metrics protocol, served by the controller's one :class:`Metrics` registry."""

from __future__ import annotations

from lifecycle_controller.kube import ResourceType
from lifecycle_controller.serving.metrics import Metrics

__all__ = ["InformerMetricsAdapter"]


class InformerMetricsAdapter:
    """Adapts :class:`Metrics` to the informers' metrics protocol."""

    def __init__(self, metrics: Metrics) -> None:
        self._metrics = metrics

    def watch_restarted(self, resource: ResourceType, reason: str) -> None:
        self._metrics.count_watch_restart(resource.key, reason)

    def relisted(self, resource: ResourceType) -> None:
        self._metrics.count_relist(resource.key)

    def event_received(self, resource: ResourceType, event_type: str) -> None:
        pass

    def cache_objects(self, resource: ResourceType, count: int) -> None:
        self._metrics.set_cache_objects(resource.key, count)
