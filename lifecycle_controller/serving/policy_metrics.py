"""The lifecycle-policy families: actions by source, the objects each policy decides for, and
those it holds or is kept from.

Kept beside :mod:`~lifecycle_controller.serving.metrics` (which owns the registry) so that the
policy series read in one place (docs/policies.md#metrics).
"""

from __future__ import annotations

from prometheus_client import CollectorRegistry, Gauge

from lifecycle_controller.serving.loop_metrics import LoopCounter

__all__ = ["PolicyMetrics"]


class PolicyMetrics:
    """``lifecycle_actions_by_source_total`` and ``lifecycle_policy_matched_objects``."""

    def __init__(self, registry: CollectorRegistry) -> None:
        self.actions_by_source = LoopCounter(
            "lifecycle_actions_by_source",
            "Due lifecycle actions by what decided them (annotation or policy) and outcome.",
            ["action", "source", "result"],
            registry=registry,
        )
        self.matched = Gauge(
            "lifecycle_policy_matched_objects",
            "Objects each lifecycle policy decides for (its status.matched).",
            ["policy"],
            registry=registry,
        )
        self.held = Gauge(
            "lifecycle_policy_held_objects",
            "Objects a lifecycle policy holds (reason invalid or condition-error: nothing acts "
            "on them in that family until it is fixed) or would match but for their "
            "protection (reason protected).",
            ["policy", "reason"],
            registry=registry,
        )
        self._series: set[str] = set()
        self._held_series: set[tuple[str, str]] = set()

    def count_action_source(self, action: str, source: str, result: str) -> None:
        """One due action's outcome by source: ``annotation`` or ``policy``."""
        self.actions_by_source.labels(action, source, result).inc()

    def set_matched(self, counts: dict[str, int]) -> None:
        """Every policy's matched objects; a policy not in ``counts`` loses its series."""
        for policy in self._series - counts.keys():
            self.matched.remove(policy)
        self._series = set(counts)
        for policy, count in counts.items():
            self.matched.labels(policy).set(count)

    def set_held(self, counts: dict[tuple[str, str], int]) -> None:
        """Every ``(policy, reason)`` count; a pair not in ``counts`` loses its series."""
        for pair in self._held_series - counts.keys():
            self.held.remove(*pair)
        self._held_series = set(counts)
        for (policy, reason), count in counts.items():
            self.held.labels(policy, reason).set(count)
