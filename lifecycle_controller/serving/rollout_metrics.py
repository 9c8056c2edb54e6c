"""The rollout-verification families: rollouts by outcome, their duration, those in progress,
and where the followed workloads' states came from.

Kept beside :mod:`~lifecycle_controller.serving.metrics` (which owns the registry) so that
what :class:`~lifecycle_controller.controller.rollout.tracker.RolloutTracker` feeds reads in one
place (docs/behaviour.md#rollout-verification).
"""

from __future__ import annotations

from prometheus_client import CollectorRegistry, Counter, Gauge, Histogram

__all__ = ["ROLLOUT_BUCKETS", "ROLLOUT_STATE_SOURCES", "RolloutFamilies"]

#: How long a restart's rollout took, patch to complete.
ROLLOUT_BUCKETS = (1, 5, 15, 30, 60, 120, 300, 600, 900, 1800)
#: Where a followed workload's state came from: the rollout watch, or a read from the API.
ROLLOUT_STATE_SOURCES = ("watch", "read")


class RolloutFamilies:
    """``lifecycle_rollouts_total``, ``lifecycle_rollout_duration_seconds``,
    ``lifecycle_rollouts_in_progress`` and ``lifecycle_rollout_states_total``."""

    def __init__(self, registry: CollectorRegistry) -> None:
        self.duration = Histogram(
            "lifecycle_rollout_duration_seconds",
            "Seconds from a restart's template patch to its completed rollout.",
            buckets=ROLLOUT_BUCKETS,
            registry=registry,
        )
        self.rollouts = Counter(
            "lifecycle_rollouts",
            "Rollouts started by restarts, by outcome (completed, stalled).",
            ["kind", "result"],
            registry=registry,
        )
        self.in_progress = Gauge(
            "lifecycle_rollouts_in_progress",
            "Restarted workloads whose rollout is being followed now.",
            registry=registry,
        )
        self.states = Counter(
            "lifecycle_rollout_states",
            "States of followed workloads evaluated, by source: the rollout watch (watch) or a "
            "read from the API (read).",
            ["source"],
            registry=registry,
        )
        self._states = {source: self.states.labels(source) for source in ROLLOUT_STATE_SOURCES}

    def observe_rollout(self, kind: str, result: str, seconds: float) -> None:
        """A followed rollout ended ``completed`` (its duration observed) or ``stalled``."""
        self.rollouts.labels(kind, result).inc()
        if result == "completed":
            self.duration.observe(max(0.0, seconds))

    def set_rollouts_in_progress(self, count: int) -> None:
        self.in_progress.set(count)

    def count_rollout_state(self, source: str) -> None:
        """One followed workload's state evaluated, from the rollout ``watch`` or a ``read``."""
        self._states[source].inc()
