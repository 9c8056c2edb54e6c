"""One work item, as a short sequence: read → decide → act → record → result.

``Reconciler.__call__(key)`` is what the workers run. It neither decides (that is
:func:`lifecycle_controller.core.decide`) nor carries anything out (that is the
:class:`~lifecycle_controller.controller.execution.Executor`); it sequences them:

1. **read** the object from the metadata cache (gone: forget it, done);
2. **decide** at ``now`` (with the namespace's defaults), apply the decision's
   ``never``-ledger operations, log it, and **record** its Events and the next-action metric;
3. **act**: a decision without a write is settled (metrics, requeue); a write goes to the
   executor. A 409 Conflict is retried quietly (docs/behaviour.md#quiet-conflict-retries):
   re-read that one object from the API and decide again, a few times, before the failure
   Warning and the rate-limited retry; a Wait's ``never`` record
   (docs/behaviour.md#persisted-observations) is written the same way, and its failure
   changes nothing else;
4. **result**: the outcome's ledger operations, then either the requeue the core asked for
   or, when the write changed what decides (a consumed ``restart-at`` uncovering a recurring
   schedule, a new anchor), another pass at once on the state the write returned.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import structlog

from lifecycle_controller.controller.cache import CachedObject, MetadataCache, object_facts
from lifecycle_controller.controller.execution import NS, ActionMetrics, Executor, NoActionMetrics
from lifecycle_controller.controller.observations import ObservationWriter
from lifecycle_controller.controller.result import Result
from lifecycle_controller.core import (
    Decision,
    DecisionSettings,
    Delete,
    DryRun,
    Ledger,
    LedgerOp,
    ObjectKey,
    ObjectRef,
    Patch,
    Wait,
    should_enqueue_on_update,
)
from lifecycle_controller.core.namespace_defaults import NamespaceDefaults, decide_in_namespace
from lifecycle_controller.core.timestamps import format_rfc3339_nano
from lifecycle_controller.kube import Conflict, KubeClient, NotFound
from lifecycle_controller.machinery.clock import Clock

__all__ = ["Reconciler"]

_log = structlog.get_logger(__name__)


@dataclass
class Reconciler:
    """Callable per work item; see the module docstring for the sequence."""

    cache: MetadataCache
    kube: KubeClient
    executor: Executor
    ledger: Ledger
    settings: DecisionSettings
    clock: Clock
    metrics: ActionMetrics
    conflict_retries: int = 3
    #: Passes one reconcile may run back to back after writes that changed what decides.
    max_passes: int = 8
    #: The defaults of a namespace (docs/annotations.md#namespace-defaults); None: none.
    namespace_defaults: Callable[[str | None], NamespaceDefaults | None] | None = None
    #: ``--persist-observations``: writes a Wait's ``never`` record (None: off).
    observations: ObservationWriter | None = None

    @classmethod
    def build(
        cls,
        *,
        executor: Executor,
        ledger: Ledger,
        settings: DecisionSettings,
        metrics: ActionMetrics | None = None,
        namespace_defaults: Callable[[str | None], NamespaceDefaults | None] | None = None,
        observations: ObservationWriter | None = None,
    ) -> Reconciler:
        """A reconciler that reads the executor's cache and shares its client and clock."""
        return cls(
            cache=executor.cache,
            kube=executor.kube,
            executor=executor,
            ledger=ledger,
            settings=settings,
            clock=executor.clock,
            metrics=metrics or NoActionMetrics(),
            namespace_defaults=namespace_defaults,
            observations=observations,
        )

    async def __call__(self, key: ObjectKey) -> Result | None:
        obj = self.cache.get(key)
        conflicts = passes = 0
        while True:
            if obj is None:
                self.forget(key)
                return None
            decision = self._decide(key, obj)
            ref = ObjectRef(key, obj.uid, obj.resource_version)
            await self.executor.emit(ref, decision.events, decision)
            self.executor.publish_next_action(key, decision)
            if not isinstance(decision, Patch | Delete):
                if (
                    isinstance(decision, Wait)
                    and decision.record
                    and self.observations
                    and await self.observations.write(key, obj, decision.record) == "conflict"
                    and conflicts < self.conflict_retries
                ):
                    conflicts += 1  # the record, like any write: re-read and decide again
                    obj = await self._reread(key)
                    continue
                return self.executor.settle(key, decision)
            try:
                done = await self.executor.carry_out(
                    key, obj, decision, quiet_conflict=conflicts < self.conflict_retries
                )
            except Conflict:
                if conflicts >= self.conflict_retries:
                    raise
                conflicts += 1
                _log.debug("conflict; re-reading and deciding again", attempt=conflicts)
                obj = await self._reread(key)
                continue
            if done.gone:
                self.forget(key)
                return None
            self._apply_ledger(key, decision.on_success.ledger_ops)
            passes += 1
            fresh = done.fresh
            if (
                fresh is None
                or passes >= self.max_passes
                or not should_enqueue_on_update(obj.annotations, fresh.annotations)
            ):
                return done.result
            obj = self.cache.get(key)  # the write changed what decides: decide again now

    def forget(self, key: ObjectKey) -> None:
        """The object is gone: drop its ledger arm and its next-action metric."""
        self.ledger.forget(key)
        self.metrics.set_ledger_arms(len(self.ledger))
        self.executor.forget(key)

    # ------------------------------------------------------------------ steps

    def _decide(self, key: ObjectKey, obj: CachedObject) -> Decision:
        facts = object_facts(
            key.resource, obj, restart_marker=self.executor.restart_marker(obj.uid)
        )
        if self.observations is not None:
            self.observations.check(obj)
        lookup = self.namespace_defaults
        decision = decide_in_namespace(
            annotations=obj.annotations,
            facts=facts,
            now_ns=self.clock.now_ns(),
            settings=self.settings,
            ledger=self.ledger,
            defaults=None if lookup is None else lookup(key.namespace),
        )
        self._apply_ledger(key, decision.ledger_ops)
        _log_decision(decision)
        return decision

    def _apply_ledger(self, key: ObjectKey, ops: tuple[LedgerOp, ...]) -> None:
        self.ledger.apply(key, ops)
        self.metrics.set_ledger_arms(len(self.ledger))

    async def _reread(self, key: ObjectKey) -> CachedObject | None:
        """The object's current metadata straight from the API (after a conflict)."""
        try:
            response = await self.kube.get_metadata(key.resource, key.namespace, key.name)
        except NotFound:
            return None
        fresh = CachedObject.from_metadata(response.get("metadata") or {})
        self.cache.refresh(key, fresh)
        return fresh


def _log_decision(decision: Decision) -> None:
    fields: dict[str, Any] = {"decision": type(decision).__name__}
    if decision.action is not None:
        fields["action"] = decision.action.value
    if decision.due_ns is not None:
        fields["due"] = format_rfc3339_nano(decision.due_ns)
    if isinstance(decision, Patch | DryRun):
        fields["operation"] = decision.operation.value
    if isinstance(decision, Wait):
        fields["requeue_after_s"] = decision.requeue_after_ns / NS
    if decision.log:
        fields["detail"] = decision.log
    _log.info("decided", **fields)
