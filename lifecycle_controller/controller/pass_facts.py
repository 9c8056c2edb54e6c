"""The facts of one reconcile pass, gathered before the one pure decision.

A pass (docs/architecture.md#decision-path) reads first, decides once, then writes. What the
decision needs is mostly in memory: the cached object, its namespace's defaults, the policies
in force (resolved for the object here, once per pass), the ledger, what is known of the
workload's restarts. :meth:`PassFacts.inputs` puts those together without a request.

Two facts are not in memory, and the pure verdict
(:func:`~lifecycle_controller.core.verdict.pass_verdict.decide_pass`) says when it needs one:
the workload's Pod template marker (:meth:`PassFacts.read_marker`, once per workload and
process: a policy restart counts from it, the restart guard measures from it), and the
fence's confirmation of the policy that decided a deletion (:meth:`PassFacts.confirm`, a
quorum read shared by concurrent passes). Those are the only reads a pass makes before its
write.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

import structlog

from lifecycle_controller.controller.cache import CachedObject, MetadataCache, object_facts
from lifecycle_controller.controller.policy_decisions import PolicyDecisions
from lifecycle_controller.controller.policy_fence import PolicyFence
from lifecycle_controller.controller.writes import ObjectWriter
from lifecycle_controller.core import DecisionSettings, Delete, Ledger, ObjectKey
from lifecycle_controller.core.decision.namespace_defaults import NamespaceDefaults
from lifecycle_controller.core.policy.precedence import Resolution
from lifecycle_controller.core.verdict.pass_verdict import PassInputs, PolicyConfirmation
from lifecycle_controller.kube import KubeError

__all__ = ["PassFacts"]

_log = structlog.get_logger(__name__)


@dataclass
class PassFacts:
    """Gathers what one pass decides on (see the module docstring)."""

    cache: MetadataCache
    writer: ObjectWriter
    settings: DecisionSettings
    ledger: Ledger
    #: The defaults of a namespace (docs/annotations.md#namespace-defaults); None: none.
    namespace_defaults: Callable[[str | None], NamespaceDefaults | None] | None = None
    #: Lifecycle policies (docs/policies.md); None: annotations alone decide.
    policies: PolicyDecisions | None = None
    #: Confirms the deciding policy before a policy deletion (None: not confirmed).
    fence: PolicyFence | None = None

    def inputs(
        self,
        key: ObjectKey,
        obj: CachedObject,
        now_ns: int,
        *,
        marker_tried: bool = False,
        confirmation: PolicyConfirmation | None = None,
    ) -> PassInputs:
        """Every fact in memory, the policies resolved once; no request."""
        lookup = self.namespace_defaults
        fact = self.cache.restart_fact(obj.uid)
        marker = None if fact is None else fact.marker
        return PassInputs(
            annotations=obj.annotations,
            facts=object_facts(key.resource, obj, restart_marker=marker),
            now_ns=now_ns,
            settings=self.settings,
            ledger=self.ledger,
            defaults=None if lookup is None else lookup(key.namespace),
            resolution=None if self.policies is None else self.policies.resolve(obj, now_ns),
            marker_known=marker_tried or fact is not None,
            fenced=self.fence is not None,
            confirmation=confirmation,
        )

    async def read_marker(self, key: ObjectKey, obj: CachedObject) -> None:
        """Read the workload's Pod template marker into the cache's restart facts. A failed
        read is logged and the pass goes on without it (as a controller that never knew it)."""
        try:
            await self.writer.read_restart_marker(key, obj)
        except KubeError as error:
            _log.warning("workload unreadable for its restart marker", error=str(error))

    async def confirm(self, decision: Delete, resolution: Resolution | None) -> PolicyConfirmation:
        """What the fence says of the policy that decided ``decision`` (docs/reliability.md)."""
        assert self.fence is not None
        deciders = () if resolution is None else resolution.deciders
        ref = next((r for r in deciders if str(r) == decision.policy), None)
        basis = self.fence.basis(ref)  # the store's view, with no await since the decision
        return PolicyConfirmation(decision.policy or "", await self.fence.check(basis, decision))
