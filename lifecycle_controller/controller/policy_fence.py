"""The fence of a policy-driven deletion: the deciding policy, confirmed on the API server.

A deletion a lifecycle policy decides is decided on the controller's copy of that policy (the
:class:`~lifecycle_controller.controller.policy_store.PolicyStore`, fed by a watch). The
DELETE's UID and resourceVersion preconditions protect it from a change of the *object*
(docs/behaviour.md#guarded-writes), but the request knows nothing of the *policy*: if an
administrator narrows or deletes the policy while the policy watch is behind (slow,
reconnecting, its events held up), the controller would carry out a deletion the policy no
longer allows. A policy is another object, so it gets a fence of its own:

* the decision's **basis** is the deciding policy as the store held it when the decision was
  made (:meth:`PolicyFence.basis`: its UID and ``metadata.generation``, read with no ``await``
  after deciding);
* before the deletion is sent, :meth:`PolicyFence.check` compares the basis with the policy on
  the API server, read by a GET without a resourceVersion: a quorum read, from etcd, not from
  a cache that may be as far behind as the watch. It goes only if the policy exists with the
  same UID and generation;
* the server's answer is kept for ``fresh_for`` seconds (2 s) and concurrent checks of one
  policy share one read, so a burst of a thousand deletions by one policy costs a handful of
  GETs. Those 2 s are the staleness the fence accepts: a change older than that always stops
  the deletion;
* otherwise (the policy is gone, has another UID or generation, or could not be read: an API
  server that cannot answer a GET would not take the DELETE either) the deletion is held:
  :meth:`PolicyFence.check` returns a :class:`~lifecycle_controller.core.decision.guardrails.Hold`
  (``policy_unconfirmed``) that the reconciler treats like any hold, requeueing the object
  after ``retry_after``. By then the store's watch has usually caught up, and the next
  decision is made on the policy as it now is. It is logged, and counted in
  ``lifecycle_policy_fence_checks_total{result}``.

Restarts are not fenced: a restart a stale policy decides is a rolling replacement of Pods
the workload lives through; a deletion cannot be undone.
"""

from __future__ import annotations

import asyncio
from dataclasses import dataclass
from typing import Any, Protocol

import structlog

from lifecycle_controller.controller.policy_store import PolicyStore
from lifecycle_controller.core.decision.guardrails import Hold, HoldReason
from lifecycle_controller.core.decision.outcomes import Delete
from lifecycle_controller.core.objects.resources import ResourceType
from lifecycle_controller.core.policy.model import PolicyRef
from lifecycle_controller.core.text.durations import NS_PER_SECOND
from lifecycle_controller.kube import KubeError, NotFound
from lifecycle_controller.machinery.clock import Clock

__all__ = ["FenceMetrics", "PolicyBasis", "PolicyFence", "PolicyReads"]

_log = structlog.get_logger(__name__)


class PolicyReads(Protocol):
    """The one read the fence makes (``KubeClient`` is one)."""

    async def get(
        self, resource: ResourceType, namespace: str | None, name: str
    ) -> dict[str, Any]: ...


class FenceMetrics(Protocol):
    """``result``: ``confirmed`` (read), ``recent`` (read within ``fresh_for``), ``changed``
    or ``error`` (held); the family is serving/policy_metrics.py's."""

    def count_policy_fence(self, result: str) -> None: ...


class NoFenceMetrics:
    def count_policy_fence(self, result: str) -> None:
        pass


@dataclass(frozen=True, slots=True)
class PolicyBasis:
    """The policy a decision was made on: which one, its UID and its generation."""

    ref: PolicyRef
    resource: ResourceType
    uid: str
    generation: int


#: What a read found: (uid, generation), or None when the policy does not exist.
_Found = tuple[str, int | None] | None


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
        self._clock = clock
        self._fresh_for = fresh_for
        self._retry_after_ns = int(retry_after * NS_PER_SECOND)
        self._metrics = metrics or NoFenceMetrics()
        #: The last answer per policy and when it was read (monotonic seconds).
        self._seen: dict[PolicyRef, tuple[float, _Found]] = {}
        self._reading: dict[PolicyRef, asyncio.Task[_Found]] = {}

    def basis(self, ref: PolicyRef | None) -> PolicyBasis | None:
        """The deciding policy as the store holds it now (call with no ``await`` since the
        decision was made)."""
        if ref is None:
            return None
        doc = self._store.doc(ref)
        if doc is None:
            return None
        resource = self._store.resource_of(ref)
        return PolicyBasis(ref, resource, doc.uid, doc.parsed.generation)

    async def check(self, basis: PolicyBasis | None, decision: Delete) -> Hold | None:
        """None: the deletion may go; else the hold that stops it (see the module). No
        basis (the store no longer holds the deciding policy) holds it too."""
        if basis is None:
            self._metrics.count_policy_fence("changed")
            return self._hold(decision, f"{decision.policy} is no longer in force")
        seen = self._seen.get(basis.ref)
        result = "recent"
        if seen is None or self._clock.monotonic() - seen[0] > self._fresh_for:
            result = "confirmed"
            try:
                found = await self._read(basis)
            except KubeError as error:
                self._metrics.count_policy_fence("error")
                _log.warning(
                    "policy deletion held: its policy could not be confirmed",
                    policy=str(basis.ref),
                    error=str(error),
                )
                return self._hold(decision, f"{basis.ref} could not be read: {error}")
        else:
            found = seen[1]
        if found == (basis.uid, basis.generation):
            self._metrics.count_policy_fence(result)
            return None
        self._metrics.count_policy_fence("changed")
        now = "deleted" if found is None else f"at generation {found[1]}"
        _log.info(
            "policy deletion held: its policy changed since the decision",
            policy=str(basis.ref),
            decided_on_generation=basis.generation,
            policy_now=now,
        )
        return self._hold(decision, f"{basis.ref} changed since the decision ({now})")

    async def _read(self, basis: PolicyBasis) -> _Found:
        """One GET per policy at a time; every check waiting for it shares the answer."""
        task = self._reading.get(basis.ref)
        if task is None:
            task = asyncio.create_task(self._get(basis))
            self._reading[basis.ref] = task
            task.add_done_callback(lambda _: self._reading.pop(basis.ref, None))
        return await asyncio.shield(task)

    async def _get(self, basis: PolicyBasis) -> _Found:
        ref = basis.ref
        try:
            obj = await self._api.get(basis.resource, ref.namespace, ref.name)
        except NotFound:
            found: _Found = None
        else:
            metadata = obj.get("metadata") or {}
            generation = metadata.get("generation")
            found = (
                str(metadata.get("uid", "")),
                generation if isinstance(generation, int) else None,
            )
        self._seen[ref] = (self._clock.monotonic(), found)
        return found

    def _hold(self, decision: Delete, why: str) -> Hold:
        return Hold(
            reason=HoldReason.POLICY_UNCONFIRMED,
            held=decision,
            requeue_after_ns=self._retry_after_ns,
            action=decision.action,
            due_ns=decision.due_ns,
            policy=decision.policy,
            log=why,
        )
