"""The lifecycle-policy families: actions by source, the objects each policy decides for, and
those it holds or is kept from, the checks of the policy fence (controller/policy/fence.py) and
the writes of the ``matchedAt`` store (controller/policy/matched_store.py).

Kept beside :mod:`~lifecycle_controller.serving.metrics` (which owns the registry) so that the
policy series read in one place (docs/policies.md#metrics).
"""

from __future__ import annotations

from prometheus_client import CollectorRegistry, Counter, Gauge

from lifecycle_controller.serving.loop_metrics import LoopCounter

__all__ = ["FENCE_RESULTS", "PolicyMetrics"]

#: ``result`` of ``lifecycle_policy_fence_checks_total``: the deletion confirmed on the API
#: server's view by a read made for it, by a read of the last 2 s, held because that view
#: decides otherwise, or because a read failed.
FENCE_RESULTS = ("confirmed", "recent", "changed", "error")


class PolicyMetrics:
    """``lifecycle_actions_by_source_total``, ``lifecycle_policy_matched_objects`` and
    ``lifecycle_policy_fence_checks_total``."""

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
            "Objects a lifecycle policy holds: nothing acts on them in that family while it "
            "does (reason invalid, condition-error, namespace-unknown: their Namespace's "
            "labels are not known yet, references-unknown: what uses them is not known yet), "
            "would match but for their protection (reason protected), or whose actions wait "
            "for its limit (reason limit).",
            ["policy", "reason"],
            registry=registry,
        )
        self._series: set[str] = set()
        self._held_series: set[tuple[str, str]] = set()
        self.fence = Counter(
            "lifecycle_policy_fence_checks",
            "Policy deletions checked against the policies in force on the API server, by result.",
            ["result"],
            registry=registry,
        )
        for result in FENCE_RESULTS:
            self.fence.labels(result)
        self.matched_at_writes = Counter(
            "lifecycle_matched_at_writes",
            "Writes of the matchedAt store (--persist-observations): records written or "
            "deleted; none while nothing changes.",
            registry=registry,
        )

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

    def count_fence(self, result: str) -> None:
        """One policy deletion's fence check ended with ``result`` (in ``FENCE_RESULTS``)."""
        self.fence.labels(result).inc()

    def count_matched_at_write(self) -> None:
        """The ``matchedAt`` store sent one write (a record written or deleted)."""
        self.matched_at_writes.inc()
