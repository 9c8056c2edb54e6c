"""The reconciler's policy step: resolve an object's policies, decide, and keep the tallies.

For an object the cache keeps because a policy could match it (``CachedObject.view``), the
reconciler asks :class:`PolicyDecisions` instead of deciding on the annotations alone:

* :meth:`PolicyDecisions.prepare` makes the one read a policy restart needs: the workload's
  Pod template marker, once per workload and process, so that a recurring policy restart
  counts from the last restart after a controller restart too (the metadata-only cache never
  holds templates);
* :meth:`PolicyDecisions.decide` resolves the policies
  (:meth:`~lifecycle_controller.core.policy_set.PolicySet.resolve`) and decides with
  :func:`~lifecycle_controller.core.policy_decide.decide_with_policies`; an occurrence a
  policy skipped (catch-up) is acknowledged in memory, instead of on the object: a restart
  fact of the cache, written back through the writer like the marker, so what a recurring
  restart counts from has one owner (``MetadataCache.restart_anchor``) and goes with the
  object;
* the tallies (which policies decide each object, which they overlapped, which hold it or
  are kept from it by its protection, the next action) are what the policies' ``status``
  reports (:mod:`~lifecycle_controller.controller.policy_status`).

A decision per action family comes back, the one to carry out first in front
(:func:`~lifecycle_controller.core.policy_decide.first_to_act`).
"""

from __future__ import annotations

from dataclasses import dataclass

import structlog

from lifecycle_controller.controller.cache import CachedObject, MetadataCache
from lifecycle_controller.controller.policy_store import PolicyStore
from lifecycle_controller.controller.references import ReferenceWatch
from lifecycle_controller.controller.writes import ObjectWriter
from lifecycle_controller.core import Decision, DecisionSettings, ObjectFacts, ObjectKey
from lifecycle_controller.core.catchup import LedgerView
from lifecycle_controller.core.decision import Action, Delete, DryRun, Patch, Wait
from lifecycle_controller.core.namespace_defaults import NamespaceDefaults
from lifecycle_controller.core.policy_contenders import PolicyHoldReason
from lifecycle_controller.core.policy_decide import decide_with_policies
from lifecycle_controller.core.policy_model import PolicyRef
from lifecycle_controller.core.policy_precedence import Resolution
from lifecycle_controller.core.timestamps import TimestampError, parse_rfc3339
from lifecycle_controller.kube import KubeError

__all__ = ["PolicyDecisions", "Tally"]

_log = structlog.get_logger(__name__)


@dataclass(frozen=True, slots=True)
class Tally:
    """What the last pass over one object said about policies."""

    decided_by: tuple[PolicyRef, ...]
    overlapped: tuple[PolicyRef, ...]
    action: Action | None = None
    due_ns: int | None = None
    #: The policies holding the object, and why.
    held_by: tuple[tuple[PolicyRef, PolicyHoldReason], ...] = ()
    #: The policies that would match it but for its protection.
    protected_from: tuple[PolicyRef, ...] = ()


def _instant(value: str | None) -> int | None:
    if not value:
        return None
    try:
        return parse_rfc3339(value)
    except TimestampError:
        return None


class PolicyDecisions:
    """See the module docstring; one per pipeline."""

    def __init__(self, store: PolicyStore, cache: MetadataCache, writer: ObjectWriter) -> None:
        self.store = store
        self._cache = cache
        self._writer = writer
        self.tallies: dict[ObjectKey, Tally] = {}
        #: The reference index ``referencedBy`` reads (None: unknown, such conditions hold).
        self.references: ReferenceWatch | None = None

    def applies(self, obj: CachedObject) -> bool:
        """The object is one a policy could match (else: annotations alone decide)."""
        return obj.view is not None and bool(self.store.current)

    def _inputs(self, obj: CachedObject, now_ns: int) -> Resolution:
        assert obj.view is not None
        view = obj.view
        if self.references is not None and self.store.current.reads_references():
            view = self.references.view_of(view)
        return self.store.current.resolve(
            obj.annotations,
            view,
            restart_marker=self._cache.restart_anchor(obj.uid),
            now_ns=now_ns,
            schedule_since_ns=self.store.schedule_since(),
        )

    async def prepare(self, key: ObjectKey, obj: CachedObject, now_ns: int) -> None:
        """Read the workload's restart marker once, if a policy restart may decide it."""
        if not key.resource.restartable or self._cache.restart_fact(obj.uid) is not None:
            return
        inputs = self._inputs(obj, now_ns)
        if not any(
            family.decided_by is not None and family.decided_by.action is Action.RESTART
            for family in inputs.families
        ):
            return
        try:
            await self._writer.read_restart_marker(key, obj)
        except KubeError as error:
            _log.warning("workload unreadable for its policy's restart anchor", error=str(error))

    def decide(
        self,
        key: ObjectKey,
        obj: CachedObject,
        *,
        facts: ObjectFacts,
        now_ns: int,
        settings: DecisionSettings,
        ledger: LedgerView,
        defaults: NamespaceDefaults | None,
    ) -> tuple[Decision, ...]:
        """The decisions for an object :meth:`applies` holds for; see the module docstring."""
        inputs = self._inputs(obj, now_ns)
        result = decide_with_policies(
            inputs=inputs,
            facts=facts,
            now_ns=now_ns,
            settings=settings,
            ledger=ledger,
            defaults=defaults,
        )
        acknowledged = _instant(result.acknowledged)
        if acknowledged is not None:
            self._writer.acknowledge(key, obj, acknowledged)
        decision = result.decision
        pending = isinstance(decision, Wait | Patch | Delete | DryRun)
        self.tallies[key] = Tally(
            decided_by=inputs.deciders,
            overlapped=inputs.overlapped,
            action=decision.action if pending else None,
            due_ns=decision.due_ns if pending else None,
            held_by=tuple((hold.ref, hold.reason) for hold in inputs.holds),
            protected_from=inputs.protected,
        )
        return result.decisions

    def gone(self, key: ObjectKey) -> None:
        """The object is gone or no policy can match it any more: forget its tally (what is
        known of its restarts goes with the object, from the cache)."""
        self.tallies.pop(key, None)
