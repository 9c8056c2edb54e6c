"""Discovery planning: which resource types the controller watches, kept current.

The scope rules are pure (:mod:`lifecycle_controller.core.objects.scope`); this module does the I/O
around them and keeps the watch set current:

* **Fetch** (:func:`lifecycle_controller.kube.discovery.fetch_discovery`: aggregated
  discovery with a legacy fallback, one preferred version per group-resource). A failing or
  ``Stale`` group version makes discovery incomplete (docs/behaviour.md#discovery-modes).
* **Startup** (:meth:`Discovery.initial`). Explicit mode (``--watch-resource`` set): one
  attempt; incomplete discovery or a coverage problem is fatal (:class:`DiscoveryFatal`,
  ``explicit resource discovery failed: ...``), except that a failing group no watch pattern
  can match is tolerated (docs/behaviour.md#discovery-modes). Broad mode: retry every 30 s
  until complete; partial results are never used.
* **Rediscovery** (:meth:`Discovery.run`, docs/behaviour.md#rediscovery). Every ``interval``
  (60 s by default) and soon after any CustomResourceDefinition change (a metadata-only watch;
  if RBAC forbids it, the period alone is used), discovery runs again and the difference is
  published as ``on_change(added, removed)``. What a later attempt cannot see is treated as
  unchanged: a failing group keeps its watched types, a total failure changes nothing.

Metrics (``lifecycle_controller_discovery_resources{result,reason}``, reset per attempt) go
through the small :class:`DiscoveryMetrics` protocol; readiness reads
:attr:`Discovery.not_ready_reason`. All waiting uses the injected clock.
"""

from __future__ import annotations

import asyncio
import enum
import inspect
from collections.abc import Awaitable, Callable, Mapping
from dataclasses import dataclass, field, replace
from typing import Protocol

import structlog

from lifecycle_controller.controller.watch.cache import CachedObject, MetadataCache
from lifecycle_controller.controller.watch.cache_writer import CacheWriter
from lifecycle_controller.controller.watch.ports import (
    ChangeKind,
    InformerMetrics,
    InformerSettings,
    MetadataSource,
)
from lifecycle_controller.controller.watch.projection import MetadataProjection
from lifecycle_controller.controller.watch.supervisor import InformerSupervisor
from lifecycle_controller.core.objects.resources import ObjectKey
from lifecycle_controller.core.objects.scope import (
    REASON_GROUP_DISCOVERY,
    RESULT_FAILED,
    ResourcePlan,
    ScopeConfig,
    carry_over,
    plan_resources,
)
from lifecycle_controller.kube import (
    CRDS,
    KubeError,
    ResourceType,
)
from lifecycle_controller.kube.api_ports import RawRequests
from lifecycle_controller.kube.discovery import (
    DiscoverySnapshot,
    failures_text,
    fetch_discovery,
    group_of,
)
from lifecycle_controller.machinery.backoff import Backoff
from lifecycle_controller.machinery.clock import Clock
from lifecycle_controller.machinery.tasks import sleep_or_wake

__all__ = [
    "DEFAULT_REDISCOVERY_INTERVAL",
    "DEFAULT_RETRY_INTERVAL",
    "NOT_COMPLETED",
    "CrdWatchState",
    "Discovery",
    "DiscoveryAttempt",
    "DiscoveryFatal",
    "DiscoveryMetrics",
    "NoDiscoveryMetrics",
    "OnChange",
]


class CrdWatchState(enum.StrEnum):
    """Where the CRD informer that triggers rediscovery stands."""

    NOT_STARTED = "not started"
    WATCHING = "watching"
    STOPPED = "stopped"
    FORBIDDEN = "forbidden"  # RBAC forbids it: the period alone rediscovers


class DiscoveryClient(RawRequests, MetadataSource, Protocol):
    """What discovery needs of the API: discovery documents and the CRD informer's calls."""


_log = structlog.get_logger(__name__)

#: Broad mode polls this often until discovery is complete (docs/behaviour.md#discovery-modes).
DEFAULT_RETRY_INTERVAL = 30.0
#: Periodic rediscovery (docs/behaviour.md#rediscovery, ``--rediscovery-interval``).
DEFAULT_REDISCOVERY_INTERVAL = 60.0
#: After a CRD event, wait this long so that bursts coalesce and discovery catches up.
DEFAULT_CRD_SETTLE = 2.0
#: Readiness reason before the first complete discovery (docs/behaviour.md#readiness).
NOT_COMPLETED = "resource discovery has not completed"


OnChange = Callable[[frozenset[ResourceType], frozenset[ResourceType]], Awaitable[None] | None]
"""Called with (added, removed) resource types whenever the watch set changes."""


class DiscoveryFatal(Exception):
    """Startup cannot continue; ``str()`` is the one line the process prints before exit 1."""


class DiscoveryMetrics(Protocol):
    """Where discovery reports ``lifecycle_controller_discovery_resources``.

    See docs/behaviour.md#metrics.
    """

    def record_discovery_attempt(self, counts: Mapping[tuple[str, str], int]) -> None:
        """Replace every series with ``{(result, reason): count}`` of the latest attempt."""
        ...


class NoDiscoveryMetrics:
    """The default: metrics go nowhere."""

    def record_discovery_attempt(self, counts: Mapping[tuple[str, str], int]) -> None:
        return None


# --------------------------------------------------------------------------- attempts


@dataclass(frozen=True)
class DiscoveryAttempt:
    """One discovery attempt, planned.

    ``error`` is set when the attempt cannot be trusted as complete for this scope (a total
    failure, an empty answer, or a failing group some watch pattern could match); then
    ``plan`` covers the healthy groups only (or is None after a total failure).
    """

    plan: ResourcePlan | None
    failed: Mapping[str, str] = field(default_factory=dict)
    blocking: Mapping[str, str] = field(default_factory=dict)
    error: str | None = None


Fetch = Callable[[], Awaitable[DiscoverySnapshot]]


class Discovery:
    """Discovers, plans and keeps the watch set current for one scope.

    Typical wiring in the composition root::

        discovery = Discovery(kube, settings.scope, clock=clock, metrics=metrics)
        initial = await discovery.initial()          # may raise DiscoveryFatal
        start_informers(initial)
        tasks.create_task(discovery.run(on_change))  # rediscovery until cancelled
    """

    def __init__(
        self,
        client: DiscoveryClient,
        scope: ScopeConfig,
        *,
        clock: Clock,
        metrics: DiscoveryMetrics | None = None,
        retry_interval: float = DEFAULT_RETRY_INTERVAL,
        interval: float = DEFAULT_REDISCOVERY_INTERVAL,
        crd_settle: float = DEFAULT_CRD_SETTLE,
        watch_crds: bool = True,
        crd_informer: InformerSettings | None = None,
        fetch: Fetch | None = None,
        watch_metrics: InformerMetrics | None = None,
    ) -> None:
        self._client = client
        self._scope = scope
        self._clock = clock
        self._metrics = metrics or NoDiscoveryMetrics()
        self._retry_interval = retry_interval
        self._interval = interval
        self._crd_settle = crd_settle
        self._watch_crds_enabled = watch_crds
        self._crd_settings = replace(crd_informer or InformerSettings(), stop_when_forbidden=True)
        #: What the CRD informer counts (``lifecycle_watch_*{purpose="crds"}``).
        self._watch_metrics = watch_metrics
        self._fetch: Fetch = fetch or (lambda: fetch_discovery(client))
        self._watched: frozenset[ResourceType] = frozenset()
        self._plan: ResourcePlan | None = None
        self._not_ready: str | None = NOT_COMPLETED
        self._trigger = asyncio.Event()
        self._attempts = 0
        self._crd_watch_state = CrdWatchState.NOT_STARTED

    # --- state -----------------------------------------------------------------------------

    @property
    def watched(self) -> frozenset[ResourceType]:
        """The current watch set (empty until :meth:`initial` returns)."""
        return self._watched

    @property
    def plan(self) -> ResourcePlan | None:
        """The plan of the latest attempt that produced one."""
        return self._plan

    @property
    def complete(self) -> bool:
        return self._not_ready is None

    def serves(self, key: str) -> bool | None:
        """Whether the latest discovery found resource ``key`` (watched or not); None before
        the first plan. Lets the policy store skip asking for kinds that are not served."""
        plan = self._plan
        if plan is None:
            return None
        return any(r.key == key for r in plan.watched) or any(k == key for k, _ in plan.skipped)

    @property
    def not_ready_reason(self) -> str | None:
        """None once discovery is complete; otherwise why not (for ``/readyz``)."""
        return self._not_ready

    @property
    def attempts(self) -> int:
        """How many discovery attempts ran (for tests and diagnostics)."""
        return self._attempts

    @property
    def crd_watch_state(self) -> CrdWatchState:
        """``not started``, ``watching``, ``stopped``, or ``forbidden`` (period only)."""
        return self._crd_watch_state

    def trigger(self) -> None:
        """Ask :meth:`run` for an early rediscovery (after the settle delay)."""
        self._trigger.set()

    # --- one attempt -----------------------------------------------------------------------

    async def attempt(self) -> DiscoveryAttempt:
        """Fetch and plan once, record the metric series, log what was found."""
        self._attempts += 1
        try:
            snapshot = await self._fetch()
        except KubeError as error:
            text = f"server preferred resources are incomplete: {error}"
            _log.error("resource discovery failed", error=str(error))
            self._metrics.record_discovery_attempt({(RESULT_FAILED, REASON_GROUP_DISCOVERY): 1})
            return DiscoveryAttempt(plan=None, error=text)
        resources = snapshot.resources
        if not resources and not snapshot.failed:
            self._metrics.record_discovery_attempt({(RESULT_FAILED, REASON_GROUP_DISCOVERY): 1})
            return DiscoveryAttempt(plan=None, error="server returned no preferred resources")
        blocking = {
            gv: reason
            for gv, reason in snapshot.failed.items()
            if self._scope.may_select_group(group_of(gv))
        }
        for gv, reason in sorted(blocking.items()):
            _log.error("resource discovery failed for an API group", group_version=gv, error=reason)
        plan = plan_resources(resources, self._scope)
        for key, reason in plan.skipped:
            _log.debug("skipping discovered resource", resource=key, reason=reason)
        failed_count = {(RESULT_FAILED, REASON_GROUP_DISCOVERY): len(snapshot.failed)}
        if blocking:
            # Like the reference: an incomplete attempt reports only the failed groups.
            self._metrics.record_discovery_attempt(failed_count)
            text = f"server preferred resources are incomplete: {failures_text(blocking)}"
            return DiscoveryAttempt(plan, snapshot.failed, blocking, text)
        self._plan = plan
        if snapshot.failed:
            for gv, reason in sorted(snapshot.failed.items()):
                _log.warning(
                    "ignoring a failing API group that no watch pattern can match",
                    group_version=gv,
                    error=reason,
                )
            self._metrics.record_discovery_attempt({**plan.counts, **failed_count})
        else:
            self._metrics.record_discovery_attempt(plan.counts)
        self._log_plan_problems(plan)
        return DiscoveryAttempt(plan, snapshot.failed)

    @staticmethod
    def _log_plan_problems(plan: ResourcePlan) -> None:
        for pattern in plan.missing:
            _log.error("required resource is missing", pattern=pattern)
        for key in plan.unwatchable:
            _log.error("required resource is unwatchable", resource=key)
        for key in plan.conflicts:
            _log.error(
                "requested cluster-scoped resource conflicts with namespace filters",
                resource=key,
            )

    # --- startup ---------------------------------------------------------------------------

    async def initial(self) -> tuple[ResourceType, ...]:
        """The first complete discovery; returns the watch set sorted by key.

        Explicit mode raises :class:`DiscoveryFatal` at the first problem. Broad mode
        retries every ``retry_interval`` until discovery is complete.
        """
        deferred = False
        while True:
            result = await self.attempt()
            if result.error is None and result.plan is not None:
                if result.plan.error is not None:
                    self._not_ready = result.plan.error
                    raise DiscoveryFatal(f"explicit resource discovery failed: {result.plan.error}")
                return self._accept_initial(result.plan)
            self._not_ready = result.error
            if self._scope.explicit:
                raise DiscoveryFatal(f"explicit resource discovery failed: {result.error}")
            if result.plan is not None:
                _log.info(
                    "discarding partial discovery results; no partial watch set will be started",
                    resources=len(result.plan.watched),
                )
            if not deferred:
                _log.info(
                    "deferring controller setup until complete discovery succeeds",
                    retry_interval=self._retry_interval,
                )
                deferred = True
            else:
                _log.info(
                    "complete resource discovery still unavailable; controller remains degraded"
                )
            await self._clock.sleep(self._retry_interval)

    def _accept_initial(self, plan: ResourcePlan) -> tuple[ResourceType, ...]:
        ordered = tuple(plan.watched)
        self._watched = frozenset(ordered)
        self._not_ready = None
        if not ordered:
            _log.info("no resource watches requested after applying configuration")
        for resource in ordered:
            _log.info("configuring resource watch", resource=resource.key, version=resource.version)
        return ordered

    # --- rediscovery -----------------------------------------------------------------------

    async def run(self, on_change: OnChange) -> None:
        """Rediscover every ``interval`` and after CRD changes until cancelled."""
        async with asyncio.TaskGroup() as tasks:
            if self._watch_crds_enabled:
                tasks.create_task(self._watch_crds(), name="discovery-crd-watch")
            await self._rediscover_forever(on_change)

    async def _rediscover_forever(self, on_change: OnChange) -> None:
        while True:
            if await self._wait_for_trigger(self._interval):
                await self._clock.sleep(self._crd_settle)
            self._trigger.clear()
            await self.rediscover(on_change)

    async def _wait_for_trigger(self, timeout: float) -> bool:
        """Sleep up to ``timeout``; True when :meth:`trigger` cut the wait short."""
        return await sleep_or_wake(self._clock, timeout, self._trigger)

    async def rediscover(self, on_change: OnChange) -> None:
        """One rediscovery: publish (added, removed) if the watch set changed."""
        result = await self.attempt()
        if result.plan is None:
            _log.warning("rediscovery failed; keeping the current watch set", error=result.error)
            return
        previous = set(self._watched)
        failed_groups = {group_of(gv) for gv in result.failed}
        new = carry_over(previous, result.plan.watched, failed_groups)
        if result.error is None:
            if result.plan.error is not None:
                _log.error(
                    "resource coverage incomplete after rediscovery", error=result.plan.error
                )
            self._not_ready = result.plan.error
        current = frozenset(new)
        added = current - self._watched
        removed = self._watched - current
        if not added and not removed:
            return
        _log.info(
            "resource types changed",
            added=sorted(str(resource) for resource in added),
            removed=sorted(str(resource) for resource in removed),
        )
        try:
            outcome = on_change(added, removed)
            if inspect.isawaitable(outcome):
                await outcome
        except Exception:
            _log.exception("applying discovery changes failed; retrying at the next rediscovery")
            return
        self._watched = current

    # --- CRD watch -------------------------------------------------------------------------

    async def _watch_crds(self) -> None:
        """Trigger rediscovery on every CRD change; give up quietly when forbidden.

        A metadata-only informer on CRDs (the same reflector loop as every other informer, in
        a cache of its own) whose every list and event triggers rediscovery; while the CRD
        API is not served (404) it is run again after a backoff, a 403 ends it.
        """
        watches: InformerSupervisor[ResourceType] = InformerSupervisor(
            clock=self._clock, metrics=self._watch_metrics, settings=self._crd_settings
        )
        informer = watches.informer(
            CRDS,
            projection=MetadataProjection(self._client),
            keeper=CacheWriter(CRDS, None, MetadataCache(), _ignore_event, self.trigger),
            purpose="crds",
        )
        retry = Backoff(
            self._clock,
            initial=self._crd_settings.backoff_initial,
            maximum=self._crd_settings.backoff_max,
            factor=self._crd_settings.backoff_factor,
            jitter=self._crd_settings.backoff_jitter,
            reset_after=self._crd_settings.backoff_reset_after,
        )
        watches.start(CRDS, informer, name="crd informer", gone=retry.wait)
        self._crd_watch_state = CrdWatchState.WATCHING
        try:
            await watches.first_ended()  # only a 403 ends it
            self._crd_watch_state = CrdWatchState.FORBIDDEN
            _log.info("crd watch forbidden; rediscovery is periodic only")
        finally:
            await watches.aclose()
            if self._crd_watch_state is CrdWatchState.WATCHING:
                self._crd_watch_state = CrdWatchState.STOPPED


def _ignore_event(
    kind: ChangeKind, key: ObjectKey, old: CachedObject | None, new: CachedObject | None
) -> None:
    """CRD objects themselves are not work: only the fact that one changed matters."""
