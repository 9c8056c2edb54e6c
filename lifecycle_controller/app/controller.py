"""One controller instance: the servers on every replica, the pipeline while leading.

Its shape follows the data flow:

    discovery ─► informers ─► metadata cache ─► (scope + relevance) ─► work queue ─► workers
                                                                        └─► reconciler ─► API

Leadership gates the whole pipeline: only the leader runs discovery, informers and workers;
the probes and /metrics run on every replica. :meth:`Controller.drain` is the graceful half
of shutdown (docs/reliability.md#shutdown); the process around it is ``app/process.py``.
"""

from __future__ import annotations

import asyncio
import os
import socket
from contextlib import AsyncExitStack
from dataclasses import dataclass, replace

import structlog

from lifecycle_controller.app.guardrails import build_guardrails
from lifecycle_controller.app.informer_metrics import InformerMetricsAdapter
from lifecycle_controller.app.loop_activity import LoopActivity
from lifecycle_controller.app.policies import PolicyPipeline, policy_store
from lifecycle_controller.config import Settings
from lifecycle_controller.controller.events.background import BackgroundRecorder
from lifecycle_controller.controller.events.notify import (
    NotifyingRecorder,
    WebhookNotifier,
    WebhookUrls,
)
from lifecycle_controller.controller.events.recorder import EventRecorder, KubeEventRecorder
from lifecycle_controller.controller.guardrails.state import RestartPacing
from lifecycle_controller.controller.leadership.elector import LeaderElector
from lifecycle_controller.controller.leadership.lease import default_identity
from lifecycle_controller.controller.namespace.defaults import NamespaceDefaultsStore
from lifecycle_controller.controller.policy.matched_store import MatchedStore
from lifecycle_controller.controller.policy.references import ReferenceWatch
from lifecycle_controller.controller.reconcile.assembly import build_reconciler
from lifecycle_controller.controller.reconcile.reconciler import Reconciler
from lifecycle_controller.controller.reconcile.requeue import ChangeFilter, Requeue
from lifecycle_controller.controller.watch.cache import MetadataCache
from lifecycle_controller.controller.watch.discovery import Discovery
from lifecycle_controller.controller.watch.informers import InformerSet
from lifecycle_controller.controller.work.result import ReconcileFunc, Result
from lifecycle_controller.controller.work.workers import run_workers
from lifecycle_controller.core import Action, Ledger
from lifecycle_controller.core.objects.resources import ObjectKey
from lifecycle_controller.core.policy.match import REFERENCES_NOT_SYNCED
from lifecycle_controller.kube import KubeClient, ResourceType
from lifecycle_controller.machinery.budget import ActionBudget
from lifecycle_controller.machinery.clock import Clock, RealClock
from lifecycle_controller.machinery.ratelimit import default_controller_rate_limiter
from lifecycle_controller.machinery.tasks import cancel_and_wait
from lifecycle_controller.machinery.workqueue import WorkQueue
from lifecycle_controller.serving.metrics import Metrics
from lifecycle_controller.serving.server import (
    REFERENCES_PENDING,
    MetricsServer,
    ProbeServer,
    caches_stale,
    resource_coverage,
)

_log = structlog.get_logger(__name__)
CONTROLLER_NAME = "lifecycle"
#: The longest the workers wait at start for every informer's first list (seconds).
WORKERS_WAIT_FOR_LISTS = 10.0


def controller_metrics(settings: Settings) -> Metrics:
    """The one registry of a controller instance, labelled from its settings."""
    election = settings.leader_election
    return Metrics(
        controller=CONTROLLER_NAME,
        queue_name=CONTROLLER_NAME,
        leader_election_id=election.name if election.enabled else "",
        max_concurrent_reconciles=settings.workers,
    )


@dataclass
class _Pipeline:
    """What exists while this replica leads: the cache, queue, informers and discovery."""

    discovery: Discovery
    informers: InformerSet
    queue: WorkQueue[ObjectKey]
    reconciler: Reconciler
    events: BackgroundRecorder
    namespaces: NamespaceDefaultsStore | None = None
    #: The reference index, open only while a policy reads ``referencedBy``.
    references: ReferenceWatch | None = None
    #: This replica has answered ready once (the reference index gates readiness no more).
    was_ready: bool = False

    def listed(self) -> bool:
        """The informers and the namespace-defaults store have listed once."""
        return self.informers.synced() and (self.namespaces is None or self.namespaces.synced())

    def synced(self) -> bool:
        """:meth:`listed`, and the reference index has synced while it is open."""
        return self.listed() and self.references_pending() is None

    def idle(self) -> bool:
        """Synced, and no object queued or being reconciled: every object known has been
        decided since it last changed (a policy's status may say how far its dry-run
        reports go: docs/reliability.md#policy-audit)."""
        return self.synced() and not len(self.queue) and not self.queue.in_flight

    def references_pending(self) -> str | None:
        """Why the open reference index has not synced (None: synced, or not open)."""
        references = self.references
        if references is None or not references.running or references.synced:
            return None
        return f"{REFERENCES_PENDING}: {references.missing() or REFERENCES_NOT_SYNCED}"

    def references_gate(self) -> str | None:
        """Why readiness waits for the reference index: its first sync only, before this
        replica has been ready, and never for types the controller may not list (RBAC: the
        policies reading ``referencedBy`` hold their objects and say so in their status).
        Readiness is about the controller, not about a tenant's policy
        (docs/behaviour.md#readiness)."""
        pending = self.references_pending()
        if pending is None or self.was_ready:
            return None
        references = self.references
        return None if references is None or references.refused() is not None else pending

    def ready(self) -> bool:
        """:meth:`listed`, and the reference index past :meth:`references_gate`; latches
        :attr:`was_ready`."""
        ready = self.listed() and self.references_gate() is None
        self.was_ready = self.was_ready or ready
        return ready

    def sync_error(self) -> str | None:
        """Once every informer has listed, why the caches are not current: informers that
        cannot list or watch (an outage), or the reference index still in its first sync.
        Before, the reference's "waiting ..." reason stands."""
        if not self.listed():
            return None
        return caches_stale(self.disconnected()) or self.references_gate()

    def disconnected(self) -> list[str]:
        stores = [] if self.namespaces is None else self.namespaces.disconnected()
        references = [] if self.references is None else self.references.disconnected()
        return sorted([*self.informers.disconnected(), *stores, *references])


class Controller:
    """One controller instance: servers on every replica, the pipeline on the leader."""

    def __init__(
        self,
        settings: Settings,
        kube: KubeClient,
        *,
        clock: Clock | None = None,
        metrics: Metrics | None = None,
        identity: str | None = None,
    ) -> None:
        self.settings = settings
        self.kube = kube
        self.clock = clock or RealClock()
        self.identity = identity or default_identity()
        self.metrics = metrics if metrics is not None else controller_metrics(settings)
        self.ledger = Ledger()
        self.elector: LeaderElector | None = None
        election = settings.leader_election
        if election.enabled:
            self.elector = LeaderElector(
                kube,
                replace(election, namespace=election.namespace or kube.default_namespace),
                identity=self.identity,
                clock=self.clock,
                on_status=self.metrics.set_leader,
            )
        self._pipeline: _Pipeline | None = None
        #: The leader's ``matchedAt`` store (``--persist-observations`` only).
        self.matched_store: MatchedStore | None = None
        self._stopping = False
        self.activity = LoopActivity()  # when the lag probe samples fast
        # Evaluated at every scrape, so the gauge is right even when nobody probes /readyz.
        self.metrics.discovery_ready.set_function(self._discovery_ready)
        self.probes: ProbeServer | None = None
        self.metrics_server: MetricsServer | None = None

    # ------------------------------------------------------------------ state

    @property
    def pipeline(self) -> _Pipeline | None:
        return self._pipeline

    def is_leader(self) -> bool:
        return self.elector is None or self.elector.is_leader

    def may_write(self) -> bool:
        return self.elector is None or self.elector.may_write()

    def not_ready_reason(self) -> str | None:
        """None when ready; the reference's readiness reasons otherwise."""
        check = resource_coverage(
            leader_election=self.elector is not None,
            is_leader=self.is_leader,
            discovery_complete=lambda: (
                self._pipeline is not None and self._pipeline.discovery.not_ready_reason is None
            ),
            caches_synced=lambda: self._pipeline is not None and self._pipeline.ready(),
            sync_error=lambda: None if self._pipeline is None else self._pipeline.sync_error(),
        )
        return check()

    def readiness_notes(self) -> list[str]:
        """``/readyz`` lines that do not make this replica unready (docs/behaviour.md#readiness)."""
        store = None if self._pipeline is None else self._pipeline.namespaces
        references = None if self._pipeline is None else self._pipeline.references
        refused = None if references is None else references.refused()
        return [
            f"watched namespace {name} does not exist (--watch-namespace)"
            for name in ([] if store is None else store.missing())
        ] + ([] if refused is None else [f"policies reading referencedBy hold: {refused}"])

    def _discovery_ready(self) -> float:
        """``lifecycle_controller_discovery_ready``: 1 when this instance's coverage is complete."""
        return 1.0 if self.not_ready_reason() is None and self._pipeline is not None else 0.0

    def _liveness(self) -> str | None:
        if self.elector is not None and not self.elector.healthy():
            return "leader lease renewal is stuck"
        return None

    # ------------------------------------------------------------------ running

    async def drain(self) -> None:
        """Graceful shutdown: start no reconcile (queued keys are left to the next leader),
        wait for those in flight (a write sent gets its response) and for the Events pending.
        Bound it with a timeout; cancelling :meth:`run` afterwards releases the Lease."""
        self._stopping = True
        pipeline = self._pipeline
        if pipeline is not None:
            await pipeline.queue.shutdown_with_drain()
            await pipeline.events.flush()  # the actions done get their Events

    async def run(self) -> None:
        """Serve probes and metrics, then lead (or wait to lead) until cancelled.

        Raises DiscoveryFatal (explicit-mode discovery failure) and LeadershipLost.
        """
        async with AsyncExitStack() as stack:
            await self._start_servers(stack)
            lag = asyncio.create_task(self.activity.probe(self.metrics.event_loop_lag))
            stack.push_async_callback(cancel_and_wait, lag)
            if self.elector is None:
                await self._lead()
            else:
                await self.elector.run(self._lead)

    async def _start_servers(self, stack: AsyncExitStack) -> None:
        serving = self.settings.serving
        self.probes = ProbeServer(
            bind_address=serving.health_probe_address,
            readiness=self.not_ready_reason,
            liveness={"leader-election": self._liveness},
            readiness_notes=self.readiness_notes,
        )
        if serving.health_probe_address != "0":
            await self.probes.start()
            stack.push_async_callback(self.probes.aclose)
        self.metrics_server = MetricsServer(
            bind_address=serving.metrics_address,
            registry=self.metrics.registry,
            secure=serving.metrics_secure,
            api=self.kube,
            cert_dir=serving.metrics_cert_path or None,
            cert_name=serving.metrics_cert_name,
            key_name=serving.metrics_cert_key,
            enable_http2=serving.enable_http2,
            clock=self.clock,
        )
        if self.metrics_server.enabled:
            await self.metrics_server.start()
            stack.push_async_callback(self.metrics_server.aclose)

    async def _lead(self) -> None:
        """The leader's work: discovery, informers, workers; returns only when cancelled."""
        settings = self.settings
        discovery = Discovery(
            self.kube,
            settings.scope,
            clock=self.clock,
            metrics=self.metrics,
            interval=settings.rediscovery_interval,
            watch_metrics=InformerMetricsAdapter(self.metrics, purpose="crds"),
        )
        _log.info(
            "starting",
            identity=self.identity,
            dry_run=settings.actions.dry_run,
            watch_resources=list(settings.scope.watch_resources),
            ignore_resources=list(settings.scope.ignore_resources),
            watch_namespaces=list(settings.scope.watch_namespaces),
            ignore_namespaces=list(settings.scope.ignore_namespaces),
            workers=settings.workers,
        )
        # The policy store comes first: the cache is built with it (it keeps what a policy
        # could match). What the store calls is built below, so it reaches those through
        # closures, called only once the pipeline runs (the Namespaces' views when objects
        # are viewed, a change of the policies after they are loaded).
        store = policy_store(  # docs/policies.md
            self.kube,
            self.clock,
            self.metrics,
            settings,
            served=discovery.serves,
            on_change=lambda old, new: policies.changed(old, new),
            namespace_labels=lambda name: namespaces.labels(name),
            namespace_exempt=lambda name: namespaces.exempt(name),
        )
        cache = MetadataCache(policy_views=store)  # which objects policies keep
        queue: WorkQueue[ObjectKey] = WorkQueue(
            rate_limiter=default_controller_rate_limiter(self.clock),
            clock=self.clock,
            metrics=self.activity.queue_metrics(queue_metrics := self.metrics.queue_metrics()),
            name=CONTROLLER_NAME,
        )
        queue_metrics.attach(queue)
        # Which change becomes work: every rule is there, handed below to what notices it.
        requeue = Requeue(
            cache=cache, scope=settings.scope, enqueue=queue.add, policies=lambda: store.current
        )
        actions = settings.actions
        recorder: EventRecorder = KubeEventRecorder(
            self.kube,
            clock=self.clock,
            reporting_instance=os.environ.get("POD_NAME") or socket.gethostname(),
        )
        notifier = self._notifier()
        if notifier is not None:  # docs/notifications.md: every Event source, leader only
            cluster = settings.notifications.cluster_name
            recorder = NotifyingRecorder(
                recorder,
                notifier,
                clock=self.clock,
                cluster=cluster,
                held_actions=settings.notifications.held_actions,
            )
        recorder = events = BackgroundRecorder(recorder, clock=self.clock)  # no worker waits
        breaker, rollouts = build_guardrails(
            self.settings,
            self.kube,
            self.clock,
            self.metrics,
            recorder,
            queue,
            cache,
            wake=requeue.waiter_freed,
        )
        namespaces = NamespaceDefaultsStore(  # docs/annotations.md#namespace-defaults
            source=self.kube,
            clock=self.clock,
            names=settings.scope.informer_namespaces(),
            on_change=requeue.namespace_defaults_changed,
            on_labels_change=requeue.namespace_labels_changed,
            report=recorder.record,
            metrics=InformerMetricsAdapter(self.metrics, purpose="namespace-defaults"),
        )
        references = ReferenceWatch(  # open only while a policy reads referencedBy
            self.kube,
            self.clock,
            namespaces=settings.scope.informer_namespaces(),
            metrics=InformerMetricsAdapter(self.metrics, purpose="references"),
            on_target=requeue.reference_changed,
            on_synced=requeue.references_synced,
        )
        reconciler = build_reconciler(
            api=self.kube,
            cache=cache,
            recorder=recorder,
            clock=self.clock,
            ledger=self.ledger,
            settings=actions.decision_settings(),
            metrics=self.metrics,
            may_write=self.may_write,
            budgets={
                Action.DELETE: ActionBudget(actions.max_deletes_per_minute, clock=self.clock),
                Action.RESTART: ActionBudget(actions.max_restarts_per_minute, clock=self.clock),
            },
            breaker=breaker,
            rollouts=rollouts,
            pacing=RestartPacing.of_seconds(
                settings.guardrails.min_restart_interval, settings.guardrails.restart_jitter
            ),
            namespace_defaults=namespaces.get,
            observation_metrics=self.metrics,
            policies=store,
            fence_metrics=self.metrics,
            policy_default_limit=actions.policy_default_limit,
            references=references,
            on_limit_freed=requeue.waiter_freed,
            places_api=self.kube,  # a limit's places recorded before they are used
        )
        informers = InformerSet(
            source=self.kube,
            cache=cache,
            on_object_change=ChangeFilter(
                requeue,
                act_on_copies=actions.act_on_annotation_copies,
                moved=rollouts.moved,
                object_gone=reconciler.object_gone,
                note_unknown_keys=reconciler.accounting.note_unknown_keys,
            ),
            clock=self.clock,
            namespaces=settings.scope.informer_namespaces(),
            metrics=InformerMetricsAdapter(self.metrics, self.activity.arrived),
            on_resource_gone=lambda _resource: discovery.trigger(),
            on_answered_again=namespaces.retry_now,  # docs/reliability.md#namespace-informers
            objects=self.kube,
            reads=lambda resource: store.current.reads(resource),
            gated=True,  # until the policies are loaded (released below)
        )
        assert reconciler.policies is not None
        policies = PolicyPipeline(
            store,
            references,
            reconciler.policies,
            kube=self.kube,
            clock=self.clock,
            metrics=self.metrics,
            recorder=recorder,
            informers=informers,
            requeue=requeue,
            keep_namespace_labels=namespaces.keep_labels,
            idle=lambda: self._pipeline is not None and self._pipeline.idle(),
        )
        self._pipeline = _Pipeline(
            discovery, informers, queue, reconciler, events, namespaces, references
        )
        self.activity.follow(queue, events, self._pipeline.synced)
        namespace_task: asyncio.Task[None] | None = None
        try:
            watched = await discovery.initial()  # logs an empty watch set itself
            await self._open_lists_while_loading(informers, policies, watched)
            # After the policies: whether it keeps the Namespaces' labels is known at its list.
            namespace_task = asyncio.create_task(namespaces.run(), name="namespace defaults")
            await breaker.load()  # the latched state, before any worker acts
            await namespaces.wait_synced()  # no action before the namespace defaults are known
            await self._wait_for_lists(informers)
            matched_store = await self._load_matched_at(reconciler)
            queue.start()

            async def on_change(
                added: frozenset[ResourceType], removed: frozenset[ResourceType]
            ) -> None:
                await self._watch(informers, added=added, removed=removed)

            async with asyncio.TaskGroup() as group:
                group.create_task(discovery.run(on_change), name="rediscovery")
                group.create_task(breaker.run(), name="circuit-breaker")
                group.create_task(policies.run(), name="policies")
                if matched_store is not None:
                    group.create_task(matched_store.run(), name="matchedAt store")
                if notifier is not None:
                    group.create_task(notifier.run(), name="notifications")
                group.create_task(
                    run_workers(
                        queue,
                        self._unless_stopping(reconciler),
                        settings.workers,
                        name=CONTROLLER_NAME,
                        observer=self.metrics.reconcile_metrics(),
                    ),
                    name="workers",
                )
        finally:
            queue.shutdown()
            if namespace_task is not None:
                await cancel_and_wait(namespace_task)
            await rollouts.aclose()
            await informers.aclose()
            await queue.aclose()
            await events.aclose()
            self._pipeline = None

    async def _load_matched_at(self, reconciler: Reconciler) -> MatchedStore | None:
        """With ``--persist-observations``, the ``matchedAt`` store, its instants loaded
        before any worker passes over an object (docs/reliability.md#matchedat-store)."""
        if not self.settings.actions.persist_observations or reconciler.policies is None:
            return None
        election = self.settings.leader_election
        matched = reconciler.policies.matched_at
        matched.sync(reconciler.policies.store.current)
        store = MatchedStore(
            self.kube,
            self.clock,
            matched,
            namespace=election.namespace or self.kube.default_namespace,
            lease=election.name,
            on_write=self.metrics.policy.count_matched_at_write,
        )
        await store.load()
        self.matched_store = store
        return store

    async def _open_lists_while_loading(
        self,
        informers: InformerSet,
        policies: PolicyPipeline,
        watched: tuple[ResourceType, ...],
    ) -> None:
        """Load the policies while the informers of ``watched`` open their lists, which read
        nothing until the policies are in: what a list keeps depends on them (docs/
        reliability.md#start-up). A type whose policies read fields beyond its metadata
        starts over with them first; then the lists read."""
        loading = asyncio.create_task(policies.load(), name="lifecycle policies load")
        try:
            await self._watch(informers, added=frozenset(watched), removed=frozenset())
            await loading
            await informers.reproject()
        finally:
            await cancel_and_wait(loading)  # done unless this is cancelled
            informers.release()

    async def _wait_for_lists(self, informers: InformerSet) -> None:
        """Hold the workers until every informer has listed once, as client-go's
        WaitForCacheSync does, for at most :data:`WORKERS_WAIT_FOR_LISTS` seconds
        (docs/reliability.md#start-up): the first reconciles then neither slow the lists down
        nor run on half a cache, and one type that cannot be listed holds the others only
        that long."""
        if await informers.wait_synced(WORKERS_WAIT_FOR_LISTS):
            return
        _log.warning(
            "starting workers before every informer has listed",
            waited_seconds=WORKERS_WAIT_FOR_LISTS,
            not_listed=informers.not_listed(),
        )

    def _notifier(self) -> WebhookNotifier | None:
        """The webhook notifier, when a URL or a URL file is configured (else None)."""
        notifications = self.settings.notifications
        if not notifications.enabled:
            return None
        urls = WebhookUrls(notifications.webhooks, file=notifications.webhook_file)
        return WebhookNotifier(urls, clock=self.clock, on_result=self.metrics.count_notification)

    def _unless_stopping(self, reconciler: Reconciler) -> ReconcileFunc[ObjectKey]:
        """``reconciler``, except that once :meth:`drain` began a key is dropped unreconciled."""

        async def reconcile(key: ObjectKey) -> Result | None:
            if self._stopping:
                return None  # never sent: the next leader's list finds it again
            return await reconciler(key)

        return reconcile

    async def _watch(
        self,
        informers: InformerSet,
        *,
        added: frozenset[ResourceType],
        removed: frozenset[ResourceType],
    ) -> None:
        for resource in sorted(removed):
            _log.info("stopping informer", resource=str(resource))
            await informers.stop(resource)
            self.metrics.drop_resource_series(resource.key)
        for resource in sorted(added):
            self.metrics.declare_kind(
                resource.kind,
                actions=("delete", "restart") if resource.restartable else ("delete",),
            )
        started = await informers.ensure(sorted(added))
        if started:
            _log.info("watching", resources=[str(r) for r in started])
