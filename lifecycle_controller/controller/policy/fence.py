"""The fence of a policy-driven deletion: the view it was decided on, read again from etcd.

A deletion a lifecycle policy decides is decided on the controller's copies: the policies
(the :class:`~lifecycle_controller.controller.policy.store.PolicyStore`, fed by a watch) and,
for a ``namespaceSelector``, the labels of the object's Namespace (the namespace store,
another watch). The DELETE's UID and resourceVersion preconditions protect it from a change
of the *object* (docs/behaviour.md#guarded-writes), but the request knows nothing of the
rest: while a watch is behind (slow, reconnecting, its events held up) an administrator may
narrow or delete the policy, create a policy that outranks it or an invalid one that holds
the object, or relabel the Namespace out of the selector, and the controller would carry out
a deletion its view no longer allows. So the fence reads that view again:

* :meth:`PolicyFence.view` is the fact the pass asks for before a policy deletion
  (``MissingFact.POLICY_CONFIRMATION``): every ``ClusterLifecyclePolicy``, the
  ``LifecyclePolicy`` objects of the object's namespace (the only policies that may concern
  it) and, when one of them has a ``namespaceSelector``, that Namespace's labels, each read
  without a resourceVersion: quorum reads, from etcd, not from a cache that may be as far
  behind as the watch. Each item is parsed as the store parses it (a generation the store
  holds is not parsed again), into a :class:`~lifecycle_controller.core.policy.in_force.
  PolicySet` the pass resolves the object on, exactly as it resolves it on the store's;
* the pure verdict decides on both and lets the deletion go only when the fresh view decides
  it too, by the same policy object at the same generation (:mod:`lifecycle_controller.core.
  policy.fence`); otherwise, or when a read failed (an API server that cannot answer a read
  would not take the DELETE either), the deletion is held (``policy_unconfirmed``) and the
  object requeued after ``retry_after``. By then the watches have usually caught up, and the
  next decision is made on the view as it now is;
* each read is kept for ``fresh_for`` seconds (2 s) and concurrent checks share it: a burst
  of deletions in one namespace costs one list of each policy kind (and one GET of the
  Namespace) per 2 s, whatever its size; deletions in *k* namespaces at once, one list of
  cluster policies and *k* of namespaced ones (and *k* GETs). Those 2 s are the staleness the
  fence accepts: a change older than that always stops the deletion. A policy the store sees
  deleted is forgotten at once (:meth:`PolicyFence.forget`): the reads that held it are
  dropped, so a later check reads again rather than confirm on a view that still has it, and
  the fence keeps no deleted policy in memory.

:meth:`PolicyFence.checked` counts each check in ``lifecycle_policy_fence_checks_total
{result}`` and logs a held one. Restarts are not fenced: a restart a stale view decides is a
rolling replacement of Pods the workload lives through; a deletion cannot be undone.
"""

from __future__ import annotations

import asyncio
from collections import OrderedDict
from collections.abc import Awaitable, Callable, Hashable, Mapping
from dataclasses import dataclass
from types import MappingProxyType
from typing import Any, Generic, Protocol, TypeVar

import structlog

from lifecycle_controller.controller.policy.store import PolicyStore
from lifecycle_controller.core.decision.guardrails import Hold, HoldReason
from lifecycle_controller.core.decision.outcomes import Delete
from lifecycle_controller.core.objects.resources import ResourceType
from lifecycle_controller.core.policy.decide import PolicyConfirmation, Verdict
from lifecycle_controller.core.policy.in_force import PolicySet
from lifecycle_controller.core.policy.model import Policy, PolicyInvalid, PolicyRef
from lifecycle_controller.core.text.durations import NS_PER_SECOND
from lifecycle_controller.kube import NotFound
from lifecycle_controller.kube.paging import list_whole
from lifecycle_controller.kube.resources import CLUSTER_POLICIES, NAMESPACES, POLICIES
from lifecycle_controller.machinery.clock import Clock

__all__ = ["FenceMetrics", "FreshView", "PolicyFence", "PolicyReads"]

_log = structlog.get_logger(__name__)


class PolicyReads(Protocol):
    """The reads the fence makes (``KubeClient`` has them)."""

    async def get(
        self, resource: ResourceType, namespace: str | None, name: str
    ) -> dict[str, Any]: ...

    async def list_objects(
        self,
        resource: ResourceType,
        *,
        namespace: str | None = None,
        limit: int = 500,
        continue_token: str | None = None,
    ) -> dict[str, Any]: ...


class FenceMetrics(Protocol):
    """``result``: ``confirmed`` (read for this check), ``recent`` (a read of the last
    ``fresh_for`` seconds), ``changed`` or ``error`` (held); the family is
    serving/policy_metrics.py's."""

    def count_policy_fence(self, result: str) -> None: ...


class NoFenceMetrics:
    def count_policy_fence(self, result: str) -> None:
        pass


@dataclass(frozen=True, slots=True)
class FreshView:
    """What the API server has now for the objects of one namespace: the policies that may
    concern them and, when a ``namespaceSelector`` reads them, the Namespace's labels (None:
    unknown, as the store's view says while it does not know them)."""

    policies: PolicySet
    namespace_labels: Mapping[str, str] | None
    #: Every read was made for an earlier check, within ``fresh_for``.
    recent: bool


_Parsed = tuple[Policy | PolicyInvalid, ...]
_K = TypeVar("_K", bound=Hashable)
_V = TypeVar("_V")


class _SharedReads(Generic[_K, _V]):
    """Reads kept ``fresh_for`` seconds per key; concurrent askers share one read in flight.
    A failed read is not kept (the next check reads again)."""

    def __init__(self, clock: Clock, fresh_for: float) -> None:
        self._clock = clock
        self._fresh_for = fresh_for
        #: The last answer per key and when it was read, oldest first.
        self._seen: OrderedDict[_K, tuple[float, _V]] = OrderedDict()
        self._reading: dict[_K, asyncio.Task[_V]] = {}

    async def get(self, key: _K, read: Callable[[], Awaitable[_V]]) -> tuple[_V, bool]:
        """The answer, and whether it was kept from an earlier read."""
        now = self._clock.monotonic()
        while self._seen:  # forget what expired (oldest first): the map stays small
            oldest = next(iter(self._seen.values()))
            if now - oldest[0] <= self._fresh_for:
                break
            self._seen.popitem(last=False)
        seen = self._seen.get(key)
        if seen is not None:
            return seen[1], True
        task = self._reading.get(key)
        if task is None:
            task = asyncio.create_task(self._read(key, read))
            self._reading[key] = task
            task.add_done_callback(lambda done: self._read_done(key, done))
        return await asyncio.shield(task), False

    def forget(self, key: _K) -> None:
        """Drop the answer kept for ``key``; one being read is not kept either (the checks
        already waiting for it still get it)."""
        self._seen.pop(key, None)
        self._reading.pop(key, None)

    async def _read(self, key: _K, read: Callable[[], Awaitable[_V]]) -> _V:
        answer = await read()
        if self._reading.get(key) is asyncio.current_task():  # not forgotten meanwhile
            self._seen.pop(key, None)
            self._seen[key] = (self._clock.monotonic(), answer)
        return answer

    def _read_done(self, key: _K, task: asyncio.Task[_V]) -> None:
        if self._reading.get(key) is task:
            del self._reading[key]


class PolicyFence:
    """See the module docstring; one per pipeline."""

    def __init__(
        self,
        store: PolicyStore,
        api: PolicyReads,
        clock: Clock,
        *,
        fresh_for: float = 2.0,
        retry_after: float = 1.0,
        metrics: FenceMetrics | None = None,
    ) -> None:
        self._store = store
        self._api = api
        self.retry_after_ns = int(retry_after * NS_PER_SECOND)
        self._metrics = metrics or NoFenceMetrics()
        #: Policies per (kind, namespace): every cluster policy, a namespace's policies.
        self._policies: _SharedReads[tuple[ResourceType, str | None], _Parsed] = _SharedReads(
            clock, fresh_for
        )
        self._labels: _SharedReads[str, Mapping[str, str] | None] = _SharedReads(clock, fresh_for)
        #: The last set built per namespace, from which reads (the same reads: the same set),
        #: all on the cluster policies of ``_sets_cluster`` (a new read of them clears it).
        self._sets: dict[str | None, tuple[_Parsed, PolicySet]] = {}
        self._sets_cluster: _Parsed | None = None
        store.on_removed.append(self.forget)

    async def view(self, namespace: str | None) -> FreshView:
        """The fresh view for an object in ``namespace`` (None: cluster-scoped); raises
        ``KubeError`` when a read fails."""
        cluster, recent = await self._policies.get(
            (CLUSTER_POLICIES, None), lambda: self._list(CLUSTER_POLICIES, None)
        )
        namespaced: _Parsed = ()
        if namespace is not None:  # a LifecyclePolicy matches objects of its namespace only
            namespaced, recent_too = await self._policies.get(
                (POLICIES, namespace), lambda: self._list(POLICIES, namespace)
            )
            recent = recent and recent_too
        policies = self._set(namespace, cluster, namespaced)
        labels: Mapping[str, str] | None = None
        if namespace is not None and policies.selects_namespaces_by_label():
            labels, recent_too = await self._labels.get(
                namespace, lambda: self._namespace_labels(namespace)
            )
            recent = recent and recent_too
        return FreshView(policies, labels, recent)

    def forget(self, ref: PolicyRef) -> None:
        """``ref`` was deleted (the store saw it go): drop the read of its kind that holds it,
        and the sets built on that read, so the next check reads again."""
        self._policies.forget((PolicyStore.resource_of(ref), ref.namespace))
        if ref.namespace is None:  # every set was built on the cluster policies
            self._sets.clear()
            self._sets_cluster = None
        else:
            self._sets.pop(ref.namespace, None)

    def _set(self, namespace: str | None, cluster: _Parsed, namespaced: _Parsed) -> PolicySet:
        """The policies as one set, built once per pair of reads (its per-type indexes too)."""
        if self._sets_cluster is not cluster:
            self._sets.clear()  # so it holds only the namespaces of the last 2 s or so
            self._sets_cluster = cluster
        built = self._sets.get(namespace)
        if built is not None and built[0] is namespaced:
            return built[1]
        policies = PolicySet.of(
            (*cluster, *namespaced), self._store.protection, self._store.stopwatch
        )
        self._sets[namespace] = (namespaced, policies)
        return policies

    async def _list(self, resource: ResourceType, namespace: str | None) -> _Parsed:
        async def page(token: str | None) -> Mapping[str, Any]:
            return await self._api.list_objects(
                resource,
                namespace=namespace,
                limit=PolicyStore.PAGE_SIZE,
                continue_token=token,
            )

        items, _ = await list_whole(page)
        parsed = (self._store.parse_current(resource, item) for item in items)
        return tuple(p for p in parsed if p is not None)

    async def _namespace_labels(self, name: str) -> Mapping[str, str] | None:
        try:
            namespace = await self._api.get(NAMESPACES, None, name)
        except NotFound:
            return None  # gone: its objects go with it, no selector is judged on it
        raw = (namespace.get("metadata") or {}).get("labels")
        if not isinstance(raw, Mapping):
            return MappingProxyType({})
        return MappingProxyType({str(k): str(v) for k, v in raw.items()})

    def confirmation_failed(self, error: Exception) -> PolicyConfirmation:
        """The fact when the fresh view could not be read: no policy deletion goes."""
        return PolicyConfirmation(None, self.retry_after_ns, problem=str(error) or repr(error))

    def checked(self, confirmation: PolicyConfirmation, verdict: Verdict) -> None:
        """Count (and log, when held) a policy deletion's check; nothing when the verdict did
        not use ``confirmation`` (the store's view no longer decides a policy deletion)."""
        decision = verdict.decision
        if not isinstance(decision, Delete) or not decision.policy:
            return
        final = verdict.final
        if isinstance(final, Hold) and final.reason is HoldReason.POLICY_UNCONFIRMED:
            if confirmation.problem is not None:
                self._metrics.count_policy_fence("error")
                _log.warning(
                    "policy deletion held: the policies in force could not be read",
                    policy=decision.policy,
                    error=confirmation.problem,
                )
            else:
                self._metrics.count_policy_fence("changed")
                _log.info(
                    "policy deletion held: the API server's view decides otherwise",
                    policy=decision.policy,
                    why=final.log,
                )
            return
        self._metrics.count_policy_fence("recent" if confirmation.recent else "confirmed")
