"""One reconcile pass decided by one pure call: facts in, the final decision out.

The controller gathers the facts of a pass first (docs/architecture.md#decision-path): the
cached object, its namespace's defaults, the policies resolved for it, whether the workload's
Pod template marker is known, what the policy fence said, and the guardrails' state (none of
it depends on the decision). :func:`decide_pass` then answers, without reading anything:

* the decision of the object's own annotations
  (:func:`~lifecycle_controller.core.decision.namespace_defaults.decide_in_namespace`), or of
  its policies (:func:`~lifecycle_controller.core.policy.decide.decide_with_policies`: one
  decision per action family, the one to carry out first in front, the writes already in a
  policy's form);
* for a deletion or a restart that is due, the guardrails' verdict
  (:func:`~lifecycle_controller.core.decision.guardrails.check`): the write, or the
  :class:`~lifecycle_controller.core.decision.guardrails.Hold` that stops it;
* or the one fact it still lacks (:class:`MissingFact`): the workload's template marker (a
  policy restart counts from it, and the restart guard measures from it), or the fence's
  confirmation of the policy that decided a deletion. The controller reads that fact, once,
  and asks again with it.
"""

from __future__ import annotations

import enum
from collections.abc import Mapping
from dataclasses import dataclass

from lifecycle_controller.core.decision.guardrails import (
    GuardrailState,
    Hold,
    acting_operation,
    check,
)
from lifecycle_controller.core.decision.namespace_defaults import (
    NamespaceDefaults,
    decide_in_namespace,
)
from lifecycle_controller.core.decision.outcomes import (
    Action,
    Decision,
    DecisionSettings,
    Delete,
    Idle,
    ObjectFacts,
    Operation,
    Patch,
)
from lifecycle_controller.core.policy.decide import decide_with_policies
from lifecycle_controller.core.policy.precedence import Resolution
from lifecycle_controller.core.schedule.catchup import LedgerView

__all__ = [
    "MissingFact",
    "PassInputs",
    "PolicyConfirmation",
    "Verdict",
    "decide_pass",
]


class MissingFact(enum.Enum):
    """A fact the verdict needs and the pass has not read yet."""

    #: The workload's Pod template restart marker (never in the metadata-only cache).
    TEMPLATE_MARKER = "template_marker"
    #: The policy that decided a deletion, confirmed on the API server (the policy fence).
    POLICY_CONFIRMATION = "policy_confirmation"


@dataclass(frozen=True, slots=True)
class PolicyConfirmation:
    """What the fence said of ``policy``: None, the deletion may go; else the hold."""

    policy: str
    hold: Hold | None


@dataclass(frozen=True, slots=True, kw_only=True)
class PassInputs:
    """Every fact one pass decides on (see the module)."""

    annotations: Mapping[str, str]
    facts: ObjectFacts
    now_ns: int
    settings: DecisionSettings
    ledger: LedgerView
    defaults: NamespaceDefaults | None = None
    #: The policies resolved for the object; None: its annotations alone decide.
    resolution: Resolution | None = None
    #: The workload's template marker was read or written by this process (or a read was
    #: tried in this reconcile), so a restart need not wait for it.
    marker_known: bool = True
    #: A policy's deletion is confirmed by the fence before it goes.
    fenced: bool = False
    confirmation: PolicyConfirmation | None = None
    #: The guardrails' state for the object (the breaker, pacing, rollout slots, budgets).
    guardrails: GuardrailState


@dataclass(frozen=True, slots=True)
class Verdict:
    """The decision, the one that stands after the guardrails, the other action family's
    decision (policies decide the families apart), a policy restart's acknowledged
    occurrence, or the fact still ``missing`` (then nothing else is meaningful)."""

    decision: Decision
    final: Decision
    others: tuple[Decision, ...] = ()
    acknowledged: str | None = None
    missing: MissingFact | None = None


_ASK = Idle()


def _policy_restarts(resolution: Resolution) -> bool:
    return any(
        family.decided_by is not None and family.decided_by.action is Action.RESTART
        for family in resolution.families
    )


def decide_pass(inputs: PassInputs) -> Verdict:
    """The final decision of one pass over ``inputs``; see the module."""
    resolution = inputs.resolution
    acknowledged: str | None = None
    if resolution is None:
        decision = decide_in_namespace(
            annotations=inputs.annotations,
            facts=inputs.facts,
            now_ns=inputs.now_ns,
            settings=inputs.settings,
            ledger=inputs.ledger,
            defaults=inputs.defaults,
        )
        others: tuple[Decision, ...] = ()
    else:
        restartable = inputs.facts.key.resource.restartable
        if restartable and not inputs.marker_known and _policy_restarts(resolution):
            return Verdict(_ASK, _ASK, missing=MissingFact.TEMPLATE_MARKER)
        result = decide_with_policies(
            inputs=resolution,
            facts=inputs.facts,
            now_ns=inputs.now_ns,
            settings=inputs.settings,
            ledger=inputs.ledger,
            defaults=inputs.defaults,
        )
        decision, *rest = result.decisions
        others = tuple(rest)
        acknowledged = result.acknowledged
    if isinstance(decision, Delete):
        others = ()  # the object goes: the other family has nothing left to do
    if not isinstance(decision, (Patch, Delete)):
        return Verdict(decision, decision, others, acknowledged)
    if inputs.fenced and isinstance(decision, Delete) and decision.policy:
        confirmation = inputs.confirmation
        if confirmation is None or confirmation.policy != decision.policy:
            return Verdict(
                decision, decision, others, acknowledged, MissingFact.POLICY_CONFIRMATION
            )
        if confirmation.hold is not None:
            return Verdict(decision, confirmation.hold, others, acknowledged)
    if (
        not inputs.marker_known
        and inputs.guardrails.min_restart_interval_ns > 0
        and acting_operation(decision) is Operation.RESTART
    ):
        return Verdict(decision, decision, others, acknowledged, MissingFact.TEMPLATE_MARKER)
    hold = check(decision, inputs.guardrails.facts(decision))
    return Verdict(decision, decision if hold is None else hold, others, acknowledged)
