"""controller-runtime and client-go metric families, and the adapters that feed them.

``controller_runtime_*{controller}`` (reconciles, errors, durations, workers),
``workqueue_*{name}`` (client-go's work queue metrics), ``leader_election_master_status{name}``
(with leader election only) and ``rest_client_requests_total{code,method}``, with client-go's
names, help texts and buckets. :class:`~lifecycle_controller.serving.metrics.Metrics` owns one
:class:`RuntimeMetrics` in its registry; the engines see only the adapters
(:class:`QueueMetricsAdapter` satisfies ``workqueue.QueueMetrics``, :class:`ReconcileMetrics`
satisfies ``workers.ReconcileObserver``).
"""

from __future__ import annotations

from collections.abc import Hashable
from typing import Protocol

from prometheus_client import CollectorRegistry, Gauge

from lifecycle_controller.serving.loop_metrics import LoopCounter, LoopHistogram

__all__ = [
    "RECONCILE_BUCKETS",
    "RECONCILE_RESULTS",
    "WORKQUEUE_BUCKETS",
    "QueueMetricsAdapter",
    "QueueTiming",
    "ReconcileMetrics",
    "RuntimeMetrics",
]

RECONCILE_RESULTS = ("success", "error", "requeue_after", "terminal")
#: controller-runtime's ``controller_runtime_reconcile_time_seconds`` buckets.
RECONCILE_BUCKETS = (
    *(0.005, 0.01, 0.025, 0.05, 0.1, 0.15, 0.2, 0.25, 0.3, 0.35, 0.4, 0.45, 0.5),
    *(0.6, 0.7, 0.8, 0.9, 1.0, 1.25, 1.5, 1.75, 2.0, 2.5, 3.0, 3.5, 4.0, 4.5, 5),
    *(6, 7, 8, 9, 10, 15, 20, 25, 30, 40, 50, 60),
)
#: client-go's workqueue duration buckets: ``ExponentialBuckets(10e-9, 10, 10)``.
WORKQUEUE_BUCKETS = tuple(1e-8 * 10**i for i in range(10))


class QueueTiming(Protocol):
    """What a work queue offers for the two on-demand workqueue gauges."""

    def unfinished_work_seconds(self) -> float:
        """Sum of the processing time of every in-flight key."""
        ...

    def longest_running_processor_seconds(self) -> float:
        """Processing time of the longest in-flight key."""
        ...


class RuntimeMetrics:
    """The controller-runtime and client-go families in ``registry``, zeros pre-created.

    ``controller`` labels the controller-runtime families, ``queue_name`` the workqueue
    families, ``leader_election_id`` the leader status gauge.
    """

    def __init__(
        self,
        registry: CollectorRegistry,
        *,
        controller: str,
        queue_name: str,
        leader_election_id: str,
        max_concurrent_reconciles: int,
    ) -> None:
        self.controller = controller
        self.queue_name = queue_name
        self.leader_election_id = leader_election_id
        r = registry
        self.reconcile_total = LoopCounter(
            "controller_runtime_reconcile",
            "Total number of reconciliations per controller.",
            ["controller", "result"],
            registry=r,
        )
        self.reconcile_errors = LoopCounter(
            "controller_runtime_reconcile_errors",
            "Total number of reconciliation errors per controller.",
            ["controller"],
            registry=r,
        )
        self.reconcile_time = LoopHistogram(
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
        self.rest_client_requests = LoopCounter(
            "rest_client_requests",
            "Number of HTTP requests to the Kubernetes API, by status code and method.",
            ["code", "method"],
            registry=r,
        )
        self.queue_depth = Gauge(
            "workqueue_depth", "Current depth of workqueue.", ["name"], registry=r
        )
        self.queue_adds = LoopCounter(
            "workqueue_adds", "Total number of adds handled by workqueue.", ["name"], registry=r
        )
        self.queue_latency = LoopHistogram(
            "workqueue_queue_duration_seconds",
            "How long in seconds an item stays in workqueue before being requested.",
            ["name"],
            buckets=WORKQUEUE_BUCKETS,
            registry=r,
        )
        self.queue_work_duration = LoopHistogram(
            "workqueue_work_duration_seconds",
            "How long in seconds processing an item from workqueue takes.",
            ["name"],
            buckets=WORKQUEUE_BUCKETS,
            registry=r,
        )
        self.queue_retries = LoopCounter(
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
        self._precreate(max_concurrent_reconciles)

    def _precreate(self, max_concurrent_reconciles: int) -> None:
        """Create the label combinations known up front, so their zeros are exported."""
        for result in RECONCILE_RESULTS:
            self.reconcile_total.labels(self.controller, result)
        self.reconcile_errors.labels(self.controller)
        self.reconcile_time.labels(self.controller)
        self.active_workers.labels(self.controller).set(0)
        self.max_concurrent_reconciles.labels(self.controller).set(max_concurrent_reconciles)
        if self.leader_election_id:  # no election, no lease name: no series at all
            self.leader_status.labels(self.leader_election_id).set(0)
        for family in (self.queue_depth, self.queue_unfinished_work, self.queue_longest_running):
            family.labels(self.queue_name).set(0)
        for counter in (self.queue_adds, self.queue_retries):
            counter.labels(self.queue_name)
        for histogram in (self.queue_latency, self.queue_work_duration):
            histogram.labels(self.queue_name)

    def set_max_concurrent_reconciles(self, n: int) -> None:
        """The configured number of workers."""
        self.max_concurrent_reconciles.labels(self.controller).set(n)

    def set_leader(self, leading: bool) -> None:
        """Whether this instance holds the lease ``leader_election_id`` now (ignored without
        one: leader election is off)."""
        if self.leader_election_id:
            self.leader_status.labels(self.leader_election_id).set(1 if leading else 0)

    def observe_request(self, method: str, code: str) -> None:
        """A ``kube.client.RequestObserver``: one API request ended with ``code``."""
        self.rest_client_requests.labels(code, method.upper()).inc()


class QueueMetricsAdapter:
    """``workqueue.QueueMetrics`` on top of :class:`RuntimeMetrics` (client-go metric names).

    A key handed to a worker (``get``) until it is ``done`` is a busy worker, so this adapter
    also keeps ``controller_runtime_active_workers``. Call :meth:`attach` with the queue to
    export the two on-demand gauges.
    """

    def __init__(self, metrics: RuntimeMetrics) -> None:
        name = metrics.queue_name
        self._adds = metrics.queue_adds.labels(name)
        self._depth = metrics.queue_depth.labels(name)
        self._latency = metrics.queue_latency.labels(name)
        self._work = metrics.queue_work_duration.labels(name)
        self._retries = metrics.queue_retries.labels(name)
        self._unfinished = metrics.queue_unfinished_work.labels(name)
        self._longest = metrics.queue_longest_running.labels(name)
        self._active = metrics.active_workers.labels(metrics.controller)
        # The two gauges moved by every key are read when scraped, not set per key: a burst
        # moves them thousands of times between two scrapes.
        self._pending = 0
        self._busy = 0
        self._depth.set_function(lambda: self._pending)
        self._active.set_function(lambda: self._busy)

    def attach(self, queue: QueueTiming) -> None:
        """Read unfinished and longest-running work from ``queue`` at every scrape."""
        self._unfinished.set_function(queue.unfinished_work_seconds)
        self._longest.set_function(queue.longest_running_processor_seconds)

    def add(self) -> None:
        """A key became pending."""
        self._adds.inc()

    def depth(self, n: int) -> None:
        """The number of pending keys is now ``n``."""
        self._pending = n

    def get(self, key: Hashable, queued_for_s: float) -> None:
        """``key`` was handed to a worker after waiting ``queued_for_s`` seconds."""
        self._latency.observe(max(0.0, queued_for_s))
        self._busy += 1

    def done(self, key: Hashable, worked_for_s: float) -> None:
        """A worker finished ``key`` after ``worked_for_s`` seconds."""
        self._work.observe(max(0.0, worked_for_s))
        self._busy = max(0, self._busy - 1)

    def retry(self) -> None:
        """A key was re-added after a delay."""
        self._retries.inc()


class ReconcileMetrics:
    """``workers.ReconcileObserver`` on top of :class:`RuntimeMetrics` (controller-runtime names).

    ``outcome`` is a ``ReconcileOutcome`` (a ``str`` enum: success, error, requeue_after,
    terminal). Errors and terminal errors both count in ``reconcile_errors_total``, as in
    controller-runtime.
    """

    def __init__(self, metrics: RuntimeMetrics) -> None:
        controller = metrics.controller
        self._outcomes = metrics.reconcile_total
        self._controller = controller
        self._errors = metrics.reconcile_errors.labels(controller)
        self._time = metrics.reconcile_time.labels(controller)

    def observe(self, outcome: str, seconds: float) -> None:
        """One reconcile ended with ``outcome`` after ``seconds``."""
        result = str(outcome)
        self._outcomes.labels(self._controller, result).inc()
        if result in ("error", "terminal"):
            self._errors.inc()
        self._time.observe(max(0.0, seconds))
