"""Every Prometheus metric the controller exposes, in one registry owned by one object.

:class:`Metrics` is built once by the composition root and handed, as small adapters and bound
methods, to the engines that observe something. No engine imports ``prometheus_client``; they
call plain methods (``count_action(...)``, ``set_next_action(...)``) or implement a protocol
of their own layer (:meth:`Metrics.queue_metrics` satisfies ``workqueue.QueueMetrics``,
:meth:`Metrics.reconcile_metrics` satisfies ``workers.ReconcileObserver``,
:meth:`Metrics.observe_request` is a ``kube.client.RequestObserver``). The controller-runtime
and client-go families and those adapters live in
:mod:`~lifecycle_controller.serving.runtime_metrics`; this module keeps the lifecycle ones.

The registry is private to the instance (never the global ``REGISTRY``), so tests can build
as many as they like; it carries the process, platform and GC collectors the global one would.
No ``*_created`` series are exported: prometheus-client adds one per counter, histogram and
child by default, doubling the series count for a start-time nobody queries (controller-runtime
exports none). The client switches them off process-wide only, so building a :class:`Metrics`
does that.

Families (labels from bounded sets only; never a namespace+name, uid or free text):

* reference discovery metrics: ``lifecycle_controller_discovery_resources{result,reason}``
  (reset on every attempt) and ``lifecycle_controller_discovery_ready``;
* beyond the reference (docs/behaviour.md#metrics): ``lifecycle_actions_total{action,kind,result}``,
  ``lifecycle_next_action_timestamp_seconds{action,kind,namespace}``,
  ``lifecycle_misconfigurations_total{kind,reason}``, ``lifecycle_action_lateness_seconds``;
* client-go workqueue metrics ``workqueue_*{name}``;
* controller-runtime ``controller_runtime_*{controller}``;
* ``leader_election_master_status{name}`` (only with leader election: an empty
  ``leader_election_id`` exports no such series), ``rest_client_requests_total{code,method}``;
* informers: ``lifecycle_watch_restarts_total{resource,reason}``,
  ``lifecycle_relists_total{resource}``, ``lifecycle_cache_objects{resource}`` (the annotated
  types' informers), and every watch by purpose, ``lifecycle_watch_*{resource,purpose}``, in
  :mod:`~lifecycle_controller.serving.watch_metrics`;
* ``lifecycle_ledger_arms`` and ``lifecycle_event_loop_lag_seconds``;
* ``lifecycle_observations_persisted_total{result}``: writes of the persisted ``never``
  observation (``--persist-observations``; results in ``core.decision.observed.PERSIST_RESULTS``);
* the policy families (``lifecycle_actions_by_source_total``,
  ``lifecycle_policy_matched_objects``, ``lifecycle_policy_fence_checks_total``) in
  :mod:`~lifecycle_controller.serving.policy_metrics`;
* blast-radius controls: ``lifecycle_breaker_open``, ``lifecycle_breaker_trips_total``,
  ``lifecycle_rollout_duration_seconds``, ``lifecycle_rollouts_total{kind,result}``
  (``completed``, ``stalled``) and ``lifecycle_rollouts_in_progress``;
* webhook notifications: ``lifecycle_notifications_total{result}`` (``delivered``,
  ``failed``, ``dropped``; docs/notifications.md#metric).

``result`` of ``lifecycle_actions_total``:

* ``success``: the delete or restart was carried out (NotFound on delete counts: the object
  is gone, which is what was asked);
* ``error``: the API call failed (after the quiet conflict retries); a Warning Event follows;
* ``dry_run``: the action was due but only announced (global or per-object dry-run);
* ``skipped``: the occurrence was due but skipped by the catch-up policy (``never`` or
  a duration that was exceeded) and acknowledged instead;
* ``throttled``: the action was due but deferred by an action budget
  (``--max-*-per-minute``); counted each time it is deferred, so it can exceed the number
  of distinct actions.
"""

from __future__ import annotations

import heapq
import itertools
import math
from collections.abc import Hashable, Iterable, Mapping
from dataclasses import dataclass, field

from prometheus_client import (
    CollectorRegistry,
    Counter,
    Gauge,
    GCCollector,
    Histogram,
    PlatformCollector,
    ProcessCollector,
    disable_created_metrics,
)

from lifecycle_controller.core.decision.events import MISCONFIGURATION_LABELS
from lifecycle_controller.core.decision.observed import PERSIST_RESULTS
from lifecycle_controller.serving.loop_metrics import LoopCounter, LoopGauge, LoopHistogram
from lifecycle_controller.serving.policy_metrics import PolicyMetrics
from lifecycle_controller.serving.rollout_metrics import ROLLOUT_BUCKETS, RolloutFamilies
from lifecycle_controller.serving.runtime_metrics import (
    QueueMetricsAdapter,
    ReconcileMetrics,
    RuntimeMetrics,
)
from lifecycle_controller.serving.watch_metrics import WatchMetrics

__all__ = [
    "ACTIONS",
    "ACTION_RESULTS",
    "DISCOVERY_REASONS",
    "DISCOVERY_RESULTS",
    "LATENESS_BUCKETS",
    "LOOP_LAG_BUCKETS",
    "MISCONFIGURATION_REASONS",
    "NOTIFICATION_RESULTS",
    "ROLLOUT_BUCKETS",
    "Metrics",
]

ACTIONS = ("delete", "restart")
ACTION_RESULTS = ("success", "error", "dry_run", "skipped", "throttled")
#: Every ``reason`` label, in the order the Event catalogue defines them.
MISCONFIGURATION_REASONS = tuple(dict.fromkeys(MISCONFIGURATION_LABELS.values()))
DISCOVERY_RESULTS = ("discovered", "skipped", "failed")
NOTIFICATION_RESULTS = ("delivered", "failed", "dropped")
DISCOVERY_REASONS = (
    "watchable",
    "configured",
    "subresource",
    "unsupported_verbs",
    "request_missing",
    "request_unwatchable",
    "group_discovery",
    "invalid_group_version",
    "cache_sync",
)

#: Schedule lateness (done minus due): the SLO of this controller. The buckets reach an hour,
#: well past the five minutes of the ``LifecycleActionsLate`` alert: a quantile that falls in
#: ``+Inf`` reads as the highest finite bound, so a threshold must sit below it to ever fire.
LATENESS_BUCKETS = (0.05, 0.1, 0.25, 0.5, 1, 2, 5, 10, 30, 60, 120, 300, 600, 1800, 3600)
#: How late the event loop runs a timer.
LOOP_LAG_BUCKETS = (0.001, 0.005, 0.01, 0.05, 0.1, 0.5, 1, 5)

_LabelSet = tuple[str, str, str]  # (action, kind, namespace)


@dataclass
class _Earliest:
    """The due times of every object in one label set: a min-heap with lazy deletion.

    ``live`` maps an object's entry to the sequence number of its current heap entry; heap
    entries whose sequence number is no longer live are skipped when they surface and the
    heap is rebuilt when stale entries outnumber live ones, so updates cost O(log n)
    amortised and reading the minimum is O(1) amortised.
    """

    heap: list[tuple[float, int, Hashable]] = field(default_factory=list)
    live: dict[Hashable, int] = field(default_factory=dict)

    def push(self, entry: Hashable, due: float, seq: int) -> None:
        self.live[entry] = seq
        heapq.heappush(self.heap, (due, seq, entry))

    def remove(self, entry: Hashable) -> None:
        self.live.pop(entry, None)
        if len(self.heap) > 2 * len(self.live) + 16:
            self.heap = [item for item in self.heap if self.live.get(item[2]) == item[1]]
            heapq.heapify(self.heap)

    def minimum(self) -> float | None:
        while self.heap and self.live.get(self.heap[0][2]) != self.heap[0][1]:
            heapq.heappop(self.heap)
        return self.heap[0][0] if self.heap else None


class _NextActions:
    """Per-label-set minimum of per-object due times, feeding one gauge."""

    def __init__(self, gauge: Gauge) -> None:
        self._gauge = gauge
        self._objects: dict[tuple[Hashable, str], tuple[_LabelSet, float]] = {}
        self._sets: dict[_LabelSet, _Earliest] = {}
        self._shown: dict[_LabelSet, float] = {}  # what the gauge holds
        self._seq = itertools.count()

    def __len__(self) -> int:
        return len(self._objects)

    def set(self, entry: tuple[Hashable, str], labels: _LabelSet, due: float | None) -> None:
        previous = self._objects.pop(entry, None)
        if previous is None and due is None:
            return
        if previous is not None:
            if previous == (labels, due):
                self._objects[entry] = previous
                return
            self._sets[previous[0]].remove(entry)
        if due is not None:
            self._objects[entry] = (labels, due)
            self._sets.setdefault(labels, _Earliest()).push(entry, due, next(self._seq))
        touched = {labels} if previous is None else {labels, previous[0]}
        for label_set in touched:
            self._publish(label_set)

    def _publish(self, labels: _LabelSet) -> None:
        earliest = self._sets.get(labels)
        minimum = None if earliest is None else earliest.minimum()
        if minimum is not None:
            if self._shown.get(labels) != minimum:  # a burst's objects share one due time
                self._shown[labels] = minimum
                self._gauge.labels(*labels).set(minimum)
            return
        self._sets.pop(labels, None)
        if self._shown.pop(labels, None) is not None:
            self._gauge.remove(*labels)


class Metrics:
    """The controller's metrics registry and every metric in it.

    ``controller`` labels the controller-runtime families, ``queue_name`` the workqueue
    families, ``leader_election_id`` the leader status gauge (``""``: leader election is
    off, and the gauge has no series).
    """

    def __init__(
        self,
        *,
        controller: str = "lifecycle",
        queue_name: str = "lifecycle",
        leader_election_id: str = "",
        max_concurrent_reconciles: int = 1,
        process_collectors: bool = True,
    ) -> None:
        disable_created_metrics()  # type: ignore[no-untyped-call]
        self.registry = CollectorRegistry(auto_describe=True)
        self.controller = controller
        self.queue_name = queue_name
        self.leader_election_id = leader_election_id
        if process_collectors:
            ProcessCollector(registry=self.registry)
            PlatformCollector(registry=self.registry)
            GCCollector(registry=self.registry)
        self._define_reference_metrics()
        self._define_action_metrics()
        self.runtime = RuntimeMetrics(
            self.registry,
            controller=controller,
            queue_name=queue_name,
            leader_election_id=leader_election_id,
            max_concurrent_reconciles=max_concurrent_reconciles,
        )
        self._define_lifecycle_metrics()
        self._define_guardrail_metrics()
        self.notifications = Counter(
            "lifecycle_notifications",
            "Webhook notification documents by result (delivered, failed, dropped), per URL.",
            ["result"],
            registry=self.registry,
        )
        for result in NOTIFICATION_RESULTS:
            self.notifications.labels(result)
        self._next_actions = _NextActions(self.next_action_timestamp)
        self._ledger_arms_shown: int | None = None
        self.discovery_ready.set(0)

    # --- definitions --------------------------------------------------------------------

    def _define_reference_metrics(self) -> None:
        r = self.registry
        self.discovery_resources = Gauge(
            "lifecycle_controller_discovery_resources",
            "Resources seen in the latest discovery attempt, grouped by outcome.",
            ["result", "reason"],
            registry=r,
        )
        self.discovery_ready = Gauge(
            "lifecycle_controller_discovery_ready",
            "1 when discovery is complete and every required watch cache has synced.",
            registry=r,
        )

    def _define_action_metrics(self) -> None:
        r = self.registry
        self.actions = LoopCounter(
            "lifecycle_actions",
            "Due lifecycle actions by outcome (success, error, dry_run, skipped, throttled).",
            ["action", "kind", "result"],
            registry=r,
        )
        self.policy = PolicyMetrics(r)
        self.next_action_timestamp = Gauge(
            "lifecycle_next_action_timestamp_seconds",
            "Earliest known next action per label set, as a Unix timestamp.",
            ["action", "kind", "namespace"],
            registry=r,
        )
        self.misconfigurations = Counter(
            "lifecycle_misconfigurations",
            "Objects found with lifecycle annotations the controller cannot act on.",
            ["kind", "reason"],
            registry=r,
        )
        self.action_lateness = LoopHistogram(
            "lifecycle_action_lateness_seconds",
            "Seconds from an action's due time to its completion.",
            [],
            buckets=LATENESS_BUCKETS,
            registry=r,
        ).labels()

    def _define_lifecycle_metrics(self) -> None:
        """Informers, the catch-up ledger, the event loop."""
        r = self.registry
        self.watch_restarts = Counter(
            "lifecycle_watch_restarts",
            "Watch streams re-opened, by resource and reason.",
            ["resource", "reason"],
            registry=r,
        )
        self.relists = Counter(
            "lifecycle_relists", "Full re-lists of a resource.", ["resource"], registry=r
        )
        self.cache_objects = LoopGauge(
            "lifecycle_cache_objects",
            "Objects held in the metadata cache.",
            ["resource"],
            registry=r,
        )
        self.watch = WatchMetrics(r)
        self.ledger_arms = Gauge(
            "lifecycle_ledger_arms",
            "Occurrences remembered as observed before due (catch-up ledger entries).",
            registry=r,
        )
        self.observations_persisted = Counter(
            "lifecycle_observations_persisted",
            "Writes of the persisted catch-up never observation, by result.",
            ["result"],
            registry=r,
        )
        for result in PERSIST_RESULTS:
            self.observations_persisted.labels(result)
        self.event_loop_lag = Histogram(
            "lifecycle_event_loop_lag_seconds",
            "How late the asyncio event loop woke a periodic timer.",
            buckets=LOOP_LAG_BUCKETS,
            registry=r,
        )

    def _define_guardrail_metrics(self) -> None:
        """The circuit breaker and rollout verification (docs/behaviour.md#metrics)."""
        r = self.registry
        self.breaker_open = Gauge(
            "lifecycle_breaker_open", "1 while the circuit breaker is open (tripped).", registry=r
        )
        self.breaker_trips = Counter(
            "lifecycle_breaker_trips",
            "Times this controller tripped the circuit breaker.",
            registry=r,
        )
        self.rollout = RolloutFamilies(r)

    def set_breaker_open(self, open_: bool) -> None:
        """The circuit breaker is open (1) or closed (0)."""
        self.breaker_open.set(1 if open_ else 0)

    def count_breaker_trip(self) -> None:
        """This controller tripped the circuit breaker."""
        self.breaker_trips.inc()

    def count_notification(self, result: str) -> None:
        """One notification document ``delivered``, ``failed`` or ``dropped``."""
        self.notifications.labels(result).inc()

    # --- discovery (reference) ------------------------------------------------------------

    def record_discovery_attempt(self, counts: Mapping[tuple[str, str], int]) -> None:
        """Replace every ``discovery_resources`` series with ``{(result, reason): count}``.

        Series not named in ``counts`` disappear (the reference resets them per attempt).
        """
        self.discovery_resources.clear()
        for (result, reason), count in counts.items():
            self.discovery_resources.labels(result, reason).set(count)

    def set_discovery_ready(self, ready: bool) -> None:
        """Discovery complete and every required watch cache synced (1) or not (0)."""
        self.discovery_ready.set(1 if ready else 0)

    # --- actions (docs/behaviour.md#metrics) ----------------------------------------------

    def declare_kind(self, kind: str, *, actions: Iterable[str] = ACTIONS) -> None:
        """Pre-create the zero series of ``kind`` (call when discovery starts watching it).

        ``actions`` are the actions possible for this kind (``restart`` only for workloads).
        """
        for action in actions:
            for result in ACTION_RESULTS:
                self.actions.labels(action, kind, result)
        for reason in MISCONFIGURATION_REASONS:
            self.misconfigurations.labels(kind, reason)

    def count_action(self, action: str, kind: str, result: str) -> None:
        """One due ``action`` on an object of ``kind`` ended with ``result`` (module doc)."""
        self.actions.labels(action, kind, result).inc()

    def count_action_source(self, action: str, source: str, result: str) -> None:
        self.policy.count_action_source(action, source, result)

    def count_misconfiguration(self, kind: str, reason: str) -> None:
        """An object of ``kind`` carries a configuration the controller rejects."""
        self.misconfigurations.labels(kind, reason).inc()

    def observe_lateness(self, seconds: float) -> None:
        """An action completed ``seconds`` after it was due (negative values count as 0)."""
        self.action_lateness.observe(max(0.0, seconds))

    def set_next_action(
        self,
        key_id: Hashable,
        action: str,
        kind: str,
        namespace: str,
        due_ts: float | None,
    ) -> None:
        """Record object ``key_id``'s next ``action`` (Unix seconds), or forget it (``None``).

        ``lifecycle_next_action_timestamp_seconds{action,kind,namespace}`` shows the minimum
        over every object of that label set and is deleted when the set becomes empty. Each
        object holds at most one due time per action; a new call replaces the previous one
        (even under other labels). Cluster-scoped objects use ``namespace=""``. O(log n) amortised.
        """
        if action not in ACTIONS:
            raise ValueError(f"unknown action {action!r}; expected one of {ACTIONS}")
        if due_ts is not None and not math.isfinite(due_ts):
            raise ValueError(f"due_ts must be finite, got {due_ts}")
        self._next_actions.set((key_id, action), (action, kind, namespace), due_ts)

    def drop_object_series(self, key_id: Hashable) -> None:
        """Forget every next action of ``key_id`` (the object was deleted)."""
        for action in ACTIONS:
            self._next_actions.set((key_id, action), ("", "", ""), None)

    @property
    def tracked_next_actions(self) -> int:
        """How many (object, action) due times are tracked (for tests and debugging)."""
        return len(self._next_actions)

    # --- controller-runtime / client-go (serving/runtime_metrics.py) ----------------------

    def queue_metrics(self) -> QueueMetricsAdapter:
        """A ``workqueue.QueueMetrics`` for the controller's queue (``name=queue_name``)."""
        return QueueMetricsAdapter(self.runtime)

    def reconcile_metrics(self) -> ReconcileMetrics:
        """A ``workers.ReconcileObserver`` for the controller's workers."""
        return ReconcileMetrics(self.runtime)

    def set_max_concurrent_reconciles(self, n: int) -> None:
        """The configured number of workers."""
        self.runtime.set_max_concurrent_reconciles(n)

    def set_leader(self, leading: bool) -> None:
        """Whether this instance holds the lease ``leader_election_id`` now."""
        self.runtime.set_leader(leading)

    def observe_request(self, method: str, code: str) -> None:
        """A ``kube.client.RequestObserver``: one API request ended with ``code``."""
        self.runtime.observe_request(method, code)

    # --- informers, ledger ----------------------------------------------------------------

    def count_watch_restart(self, resource: str, reason: str) -> None:
        """A watch on ``resource`` (its scope key, e.g. ``deployments.apps``) re-opened.

        ``reason`` from a small fixed set chosen by the informer (``expired``, ``closed``,
        ``error``, ``timeout``...).
        """
        self.watch_restarts.labels(resource, reason).inc()

    def count_relist(self, resource: str) -> None:
        """``resource`` was listed again (after 410 Gone, or a policy keeps other objects)."""
        self.relists.labels(resource).inc()

    def set_cache_objects(self, resource: str, count: int) -> None:
        """The metadata cache holds ``count`` objects of ``resource``."""
        self.cache_objects.labels(resource).set(count)

    def drop_resource_series(self, resource: str) -> None:
        """Drop the per-resource gauge of a resource no longer watched (counters stay)."""
        self.cache_objects.remove(resource)

    def set_ledger_arms(self, count: int) -> None:
        """The catch-up ledger holds ``count`` entries."""
        if count != self._ledger_arms_shown:  # most actions leave the ledger as it was
            self._ledger_arms_shown = count
            self.ledger_arms.set(count)

    def count_policy_fence(self, result: str) -> None:
        self.policy.count_fence(result)

    def count_observation_persisted(self, result: str) -> None:
        """One write of the persisted ``never`` observation ended with ``result``."""
        self.observations_persisted.labels(result).inc()
