"""Every Prometheus metric the controller exposes, in one registry owned by one object.

:class:`Metrics` is built once by the composition root and handed, as small adapters and bound
methods, to the engines that observe something. No engine imports ``prometheus_client``; they
call plain methods (``count_action(...)``, ``set_next_action(...)``) or implement a protocol
of their own layer (:class:`QueueMetricsAdapter` satisfies ``workqueue.QueueMetrics``,
:class:`ReconcileMetrics` satisfies ``workers.ReconcileObserver``,
:meth:`Metrics.observe_request` is a ``kube.client.RequestObserver``).

The registry is private to the instance (never the global ``REGISTRY``), so tests can build
as many as they like; it carries the process, platform and GC collectors the global one would.

Families (labels from bounded sets only; never a namespace+name, uid or free text):

* reference discovery metrics: ``lifecycle_controller_discovery_resources{result,reason}``
  (reset on every attempt) and ``lifecycle_controller_discovery_ready``;
* beyond the reference (docs/behaviour.md#metrics): ``lifecycle_actions_total{action,kind,result}``,
  ``lifecycle_next_action_timestamp{action,kind,namespace}``,
  ``lifecycle_misconfigurations_total{kind,reason}``, ``lifecycle_action_lateness_seconds``;
* client-go workqueue metrics ``workqueue_*{name}``;
* controller-runtime ``controller_runtime_*{controller}``;
* ``leader_election_master_status{name}``, ``rest_client_requests_total{code,method}``;
* informers: ``lifecycle_watch_restarts_total{resource,reason}``,
  ``lifecycle_relists_total{resource}``, ``lifecycle_cache_objects{resource}``;
* ``lifecycle_ledger_arms`` and ``lifecycle_event_loop_lag_seconds``.

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
from typing import Protocol

from prometheus_client import (
    CollectorRegistry,
    Counter,
    Gauge,
    GCCollector,
    Histogram,
    PlatformCollector,
    ProcessCollector,
)

from lifecycle_controller.core.events import MISCONFIGURATION_LABELS
from lifecycle_controller.machinery.clock import Clock

__all__ = [
    "ACTIONS",
    "ACTION_RESULTS",
    "DISCOVERY_REASONS",
    "DISCOVERY_RESULTS",
    "LATENESS_BUCKETS",
    "LOOP_LAG_BUCKETS",
    "MISCONFIGURATION_REASONS",
    "RECONCILE_RESULTS",
    "Metrics",
    "QueueMetricsAdapter",
    "QueueTiming",
    "ReconcileMetrics",
]

ACTIONS = ("delete", "restart")
ACTION_RESULTS = ("success", "error", "dry_run", "skipped", "throttled")
#: Every ``reason`` label, in the order the Event catalogue defines them.
MISCONFIGURATION_REASONS = tuple(dict.fromkeys(MISCONFIGURATION_LABELS.values()))
DISCOVERY_RESULTS = ("discovered", "skipped", "failed")
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
RECONCILE_RESULTS = ("success", "error", "requeue_after", "terminal")

#: Schedule lateness (done minus due): the SLO of this controller.
LATENESS_BUCKETS = (0.05, 0.1, 0.25, 0.5, 1, 2, 5, 10, 30, 60, 300)
#: How late the event loop runs a timer.
LOOP_LAG_BUCKETS = (0.001, 0.005, 0.01, 0.05, 0.1, 0.5, 1, 5)
#: controller-runtime's ``controller_runtime_reconcile_time_seconds`` buckets.
RECONCILE_BUCKETS = (
    *(0.005, 0.01, 0.025, 0.05, 0.1, 0.15, 0.2, 0.25, 0.3, 0.35, 0.4, 0.45, 0.5),
    *(0.6, 0.7, 0.8, 0.9, 1.0, 1.25, 1.5, 1.75, 2.0, 2.5, 3.0, 3.5, 4.0, 4.5, 5),
    *(6, 7, 8, 9, 10, 15, 20, 25, 30, 40, 50, 60),
)
#: client-go's workqueue duration buckets: ``ExponentialBuckets(10e-9, 10, 10)``.
WORKQUEUE_BUCKETS = tuple(1e-8 * 10**i for i in range(10))

_LabelSet = tuple[str, str, str]  # (action, kind, namespace)


class QueueTiming(Protocol):
    """What a work queue offers for the two on-demand workqueue gauges."""

    def unfinished_work_seconds(self) -> float:
        """Sum of the processing time of every in-flight key."""
        ...

    def longest_running_processor_seconds(self) -> float:
        """Processing time of the longest in-flight key."""
        ...


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
            self._gauge.labels(*labels).set(minimum)
            return
        self._sets.pop(labels, None)
        self._gauge.remove(*labels)


class Metrics:
    """The controller's metrics registry and every metric in it.

    ``controller`` labels the controller-runtime families, ``queue_name`` the workqueue
    families, ``leader_election_id`` the leader status gauge.
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
        self._define_controller_metrics()
        self._define_machinery_metrics()
        self._next_actions = _NextActions(self.next_action_timestamp)
        self._precreate(max_concurrent_reconciles)

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
        self.actions = Counter(
            "lifecycle_actions",
            "Due lifecycle actions by outcome (success, error, dry_run, skipped, throttled).",
            ["action", "kind", "result"],
            registry=r,
        )
        self.next_action_timestamp = Gauge(
            "lifecycle_next_action_timestamp",
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
        self.action_lateness = Histogram(
            "lifecycle_action_lateness_seconds",
            "Seconds from an action's due time to its completion.",
            buckets=LATENESS_BUCKETS,
            registry=r,
        )

    def _define_controller_metrics(self) -> None:
        r = self.registry
        self.reconcile_total = Counter(
            "controller_runtime_reconcile",
            "Total number of reconciliations per controller.",
            ["controller", "result"],
            registry=r,
        )
        self.reconcile_errors = Counter(
            "controller_runtime_reconcile_errors",
            "Total number of reconciliation errors per controller.",
            ["controller"],
            registry=r,
        )
        self.reconcile_time = Histogram(
            "controller_runtime_reconcile_time_seconds",
            "Length of time per reconciliation per controller.",
            ["controller"],
            buckets=RECONCILE_BUCKETS,
            registry=r,
        )
        self.active_workers = Gauge(
            "controller_runtime_active_workers",
            "Number of currently used workers per controller.",
            ["controller"],
            registry=r,
        )
        self.max_concurrent_reconciles = Gauge(
            "controller_runtime_max_concurrent_reconciles",
            "Maximum number of concurrent reconciles per controller.",
            ["controller"],
            registry=r,
        )
        self.leader_status = Gauge(
            "leader_election_master_status",
            "1 if this instance is the leader of the named lease, 0 otherwise.",
            ["name"],
            registry=r,
        )
        self.rest_client_requests = Counter(
            "rest_client_requests",
            "Number of HTTP requests to the Kubernetes API, by status code and method.",
            ["code", "method"],
            registry=r,
        )

    def _define_machinery_metrics(self) -> None:
        r = self.registry
        self.queue_depth = Gauge(
            "workqueue_depth", "Current depth of workqueue.", ["name"], registry=r
        )
        self.queue_adds = Counter(
            "workqueue_adds", "Total number of adds handled by workqueue.", ["name"], registry=r
        )
        self.queue_latency = Histogram(
            "workqueue_queue_duration_seconds",
            "How long in seconds an item stays in workqueue before being requested.",
            ["name"],
            buckets=WORKQUEUE_BUCKETS,
            registry=r,
        )
        self.queue_work_duration = Histogram(
            "workqueue_work_duration_seconds",
            "How long in seconds processing an item from workqueue takes.",
            ["name"],
            buckets=WORKQUEUE_BUCKETS,
            registry=r,
        )
        self.queue_retries = Counter(
            "workqueue_retries",
            "Total number of retries handled by workqueue.",
            ["name"],
            registry=r,
        )
        self.queue_unfinished_work = Gauge(
            "workqueue_unfinished_work_seconds",
            "How many seconds of work has been done that is in progress and hasn't been "
            "observed by work_duration.",
            ["name"],
            registry=r,
        )
        self.queue_longest_running = Gauge(
            "workqueue_longest_running_processor_seconds",
            "How many seconds has the longest running processor for workqueue been running.",
            ["name"],
            registry=r,
        )
        self.watch_restarts = Counter(
            "lifecycle_watch_restarts",
            "Watch streams re-opened, by resource and reason.",
            ["resource", "reason"],
            registry=r,
        )
        self.relists = Counter(
            "lifecycle_relists", "Full re-lists of a resource.", ["resource"], registry=r
        )
        self.cache_objects = Gauge(
            "lifecycle_cache_objects",
            "Objects held in the metadata cache.",
            ["resource"],
            registry=r,
        )
        self.ledger_arms = Gauge(
            "lifecycle_ledger_arms",
            "Occurrences remembered as observed before due (catch-up ledger entries).",
            registry=r,
        )
        self.event_loop_lag = Histogram(
            "lifecycle_event_loop_lag_seconds",
            "How late the asyncio event loop woke a periodic timer.",
            buckets=LOOP_LAG_BUCKETS,
            registry=r,
        )

    def _precreate(self, max_concurrent_reconciles: int) -> None:
        """Create the label combinations known up front, so their zeros are exported."""
        for result in RECONCILE_RESULTS:
            self.reconcile_total.labels(self.controller, result)
        self.reconcile_errors.labels(self.controller)
        self.reconcile_time.labels(self.controller)
        self.active_workers.labels(self.controller).set(0)
        self.max_concurrent_reconciles.labels(self.controller).set(max_concurrent_reconciles)
        self.leader_status.labels(self.leader_election_id).set(0)
        for family in (self.queue_depth, self.queue_unfinished_work, self.queue_longest_running):
            family.labels(self.queue_name).set(0)
        for counter in (self.queue_adds, self.queue_retries):
            counter.labels(self.queue_name)
        for histogram in (self.queue_latency, self.queue_work_duration):
            histogram.labels(self.queue_name)
        self.discovery_ready.set(0)

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

        ``lifecycle_next_action_timestamp{action,kind,namespace}`` shows the minimum over every
        object of that label set and is deleted when the set becomes empty. Each object holds
        at most one due time per action; a new call replaces the previous one (even under
        other labels). Cluster-scoped objects use ``namespace=""``. O(log n) amortised.
        """
        if action not in ACTIONS:
            raise ValueError(f"unknown action {action!r}; expected one of {ACTIONS}")
        if due_ts is not None and not math.isfinite(due_ts):
            raise ValueError(f"due_ts must be finite, got {due_ts}")
        self._next_actions.set((key_id, action), (action, kind, namespace), due_ts)

    def forget_object(self, key_id: Hashable) -> None:
        """Forget every next action of ``key_id`` (the object was deleted)."""
        for action in ACTIONS:
            self._next_actions.set((key_id, action), ("", "", ""), None)

    @property
    def tracked_next_actions(self) -> int:
        """How many (object, action) due times are tracked (for tests and debugging)."""
        return len(self._next_actions)

    # --- controller-runtime / client-go ---------------------------------------------------

    def queue_metrics(self) -> QueueMetricsAdapter:
        """A ``workqueue.QueueMetrics`` for the controller's queue (``name=queue_name``)."""
        return QueueMetricsAdapter(self)

    def reconcile_metrics(self) -> ReconcileMetrics:
        """A ``workers.ReconcileObserver`` for the controller's workers."""
        return ReconcileMetrics(self)

    def set_max_concurrent_reconciles(self, n: int) -> None:
        """The configured number of workers."""
        self.max_concurrent_reconciles.labels(self.controller).set(n)

    def set_leader(self, leading: bool) -> None:
        """Whether this instance holds the lease ``leader_election_id`` now."""
        self.leader_status.labels(self.leader_election_id).set(1 if leading else 0)

    def observe_request(self, method: str, code: str) -> None:
        """A ``kube.client.RequestObserver``: one API request ended with ``code``."""
        self.rest_client_requests.labels(code, method.upper()).inc()

    # --- informers, ledger ----------------------------------------------------------------

    def count_watch_restart(self, resource: str, reason: str) -> None:
        """A watch on ``resource`` (its scope key, e.g. ``deployments.apps``) re-opened.

        ``reason`` from a small fixed set chosen by the informer (``expired``, ``closed``,
        ``error``, ``timeout``...).
        """
        self.watch_restarts.labels(resource, reason).inc()

    def count_relist(self, resource: str) -> None:
        """``resource`` was listed from scratch (first sync or after 410 Gone)."""
        self.relists.labels(resource).inc()

    def set_cache_objects(self, resource: str, count: int) -> None:
        """The metadata cache holds ``count`` objects of ``resource``."""
        self.cache_objects.labels(resource).set(count)

    def forget_resource(self, resource: str) -> None:
        """Drop the per-resource gauge of a resource no longer watched (counters stay)."""
        self.cache_objects.remove(resource)

    def set_ledger_arms(self, count: int) -> None:
        """The catch-up ledger holds ``count`` entries."""
        self.ledger_arms.set(count)

    # --- event loop -----------------------------------------------------------------------

    async def run_loop_lag_monitor(self, clock: Clock, *, interval: float = 0.5) -> None:
        """Sleep ``interval`` on ``clock`` forever and record how late each wake-up was.

        A busy or blocked event loop wakes the timer late; the histogram shows by how much.
        Run as a task; cancel it to stop.
        """
        if not (interval > 0 and math.isfinite(interval)):
            raise ValueError(f"interval must be a positive number of seconds, got {interval}")
        while True:
            started = clock.monotonic()
            await clock.sleep(interval)
            self.event_loop_lag.observe(max(0.0, clock.monotonic() - started - interval))


class QueueMetricsAdapter:
    """``workqueue.QueueMetrics`` on top of :class:`Metrics` (client-go metric names).

    A key handed to a worker (``get``) until it is ``done`` is a busy worker, so this adapter
    also keeps ``controller_runtime_active_workers``. Call :meth:`attach` with the queue to
    export the two on-demand gauges.
    """

    def __init__(self, metrics: Metrics) -> None:
        name = metrics.queue_name
        self._adds = metrics.queue_adds.labels(name)
        self._depth = metrics.queue_depth.labels(name)
        self._latency = metrics.queue_latency.labels(name)
        self._work = metrics.queue_work_duration.labels(name)
        self._retries = metrics.queue_retries.labels(name)
        self._unfinished = metrics.queue_unfinished_work.labels(name)
        self._longest = metrics.queue_longest_running.labels(name)
        self._active = metrics.active_workers.labels(metrics.controller)
        self._busy = 0

    def attach(self, queue: QueueTiming) -> None:
        """Read unfinished and longest-running work from ``queue`` at every scrape."""
        self._unfinished.set_function(queue.unfinished_work_seconds)
        self._longest.set_function(queue.longest_running_processor_seconds)

    def add(self) -> None:
        """A key became pending."""
        self._adds.inc()

    def depth(self, n: int) -> None:
        """The number of pending keys is now ``n``."""
        self._depth.set(n)

    def get(self, key: Hashable, queued_for_s: float) -> None:
        """``key`` was handed to a worker after waiting ``queued_for_s`` seconds."""
        self._latency.observe(max(0.0, queued_for_s))
        self._busy += 1
        self._active.set(self._busy)

    def done(self, key: Hashable, worked_for_s: float) -> None:
        """A worker finished ``key`` after ``worked_for_s`` seconds."""
        self._work.observe(max(0.0, worked_for_s))
        self._busy = max(0, self._busy - 1)
        self._active.set(self._busy)

    def retry(self) -> None:
        """A key was re-added after a delay."""
        self._retries.inc()


class ReconcileMetrics:
    """``workers.ReconcileObserver`` on top of :class:`Metrics` (controller-runtime names).

    ``outcome`` is a ``ReconcileOutcome`` (a ``str`` enum: success, error, requeue_after,
    terminal). Errors and terminal errors both count in ``reconcile_errors_total``, as in
    controller-runtime.
    """

    def __init__(self, metrics: Metrics) -> None:
        controller = metrics.controller
        self._family = metrics.reconcile_total
        self._controller = controller
        self._errors = metrics.reconcile_errors.labels(controller)
        self._time = metrics.reconcile_time.labels(controller)

    def observe(self, outcome: str, seconds: float) -> None:
        """One reconcile ended with ``outcome`` after ``seconds``."""
        result = str(outcome)
        self._family.labels(self._controller, result).inc()
        if result in ("error", "terminal"):
            self._errors.inc()
        self._time.observe(max(0.0, seconds))
