"""The blast-radius parts of a leader's pipeline, wired: the circuit breaker and the rollout
tracker (with its rollout watch).

Both live only while this replica leads; the breaker latches in a ConfigMap beside the Lease
(docs/behaviour.md#blast-radius-controls), the tracker follows every restart's rollout and
limits how many run at once (docs/behaviour.md#rollout-verification).
"""

from __future__ import annotations

from collections.abc import Callable

from lifecycle_controller.app.informer_metrics import InformerMetricsAdapter
from lifecycle_controller.config import Settings
from lifecycle_controller.controller.events.recorder import EventRecorder
from lifecycle_controller.controller.guardrails.breaker import CircuitBreaker
from lifecycle_controller.controller.rollout.tracker import RolloutTracker
from lifecycle_controller.controller.rollout.watch import RolloutWatch
from lifecycle_controller.controller.watch.cache import MetadataCache
from lifecycle_controller.core.objects.resources import ObjectKey
from lifecycle_controller.kube import KubeClient
from lifecycle_controller.kube.breaker_store import breaker_name
from lifecycle_controller.machinery.clock import Clock
from lifecycle_controller.machinery.workqueue import WorkQueue
from lifecycle_controller.serving.metrics import Metrics

__all__ = ["build_guardrails"]


def build_guardrails(
    settings: Settings,
    kube: KubeClient,
    clock: Clock,
    metrics: Metrics,
    recorder: EventRecorder,
    queue: WorkQueue[ObjectKey],
    cache: MetadataCache,
    *,
    wake: Callable[[ObjectKey], None],
) -> tuple[CircuitBreaker, RolloutTracker]:
    """The circuit breaker (latched beside the Lease) and the rollout tracker; ``wake`` is
    told each key either lets go (a reset, a rollout slot free), the tracker's reads look at
    ``queue`` and ``cache``."""
    guardrails = settings.guardrails
    election = settings.leader_election
    namespace = election.namespace or kube.default_namespace
    breaker = CircuitBreaker(
        kube,
        namespace=namespace,
        name=breaker_name(election.name),
        limit=guardrails.breaker_max_actions,
        window=guardrails.breaker_window,
        clock=clock,
        metrics=metrics,
        recorder=recorder,
        reset_command=(
            "lifecycle-controller breaker reset "
            f"--leader-election-id {election.name} --leader-election-namespace {namespace}"
        ),
        on_release=wake,
    )
    metrics.set_breaker_open(False)
    # With exact --watch-namespace names the informers read per namespace (namespaced Roles
    # suffice), and so does the rollout watch.
    per_namespace = settings.scope.informer_namespaces() is not None
    rollouts = RolloutTracker(
        kube,
        recorder,
        clock,
        metrics.rollout,
        limit=guardrails.max_concurrent_rollouts,
        timeout=guardrails.rollout_timeout,
        watch=RolloutWatch(
            kube,
            clock,
            per_namespace=per_namespace,
            metrics=InformerMetricsAdapter(metrics, purpose="rollouts"),
        ),
        wake=wake,
        version_of=lambda key: o.resource_version if (o := cache.get(key)) else None,
        busy=lambda: len(queue) > 0,
    )
    return breaker, rollouts
