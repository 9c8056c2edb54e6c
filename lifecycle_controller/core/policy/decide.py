"""Deciding for one object with policies: the merged inputs in, a decision that writes nothing
a policy may not write, and names the policy, out.

The controller's reconciler and the tools (``plan``, ``explain``, ``policies try``) call
:func:`decide_with_policies`, so they agree. For an object no policy decides it is exactly
:func:`~lifecycle_controller.core.decision.namespace_defaults.decide_in_namespace` on the object's
own
annotations. For a policy-driven decision (docs/policies.md#what-a-policy-writes):

* **No annotation writes.** A policy is declared in Git beside the objects it covers, so it
  never writes their annotations; its family is decided in that form from the start
  (``DecisionSettings.writes_annotations`` False), nothing is built and then taken out: a
  restart's patch keeps only the Pod template marker
  (``lifecycle.cezary.dev/restartedAt``), and the acknowledgement a skipped occurrence would
  write becomes a guarded no-op patch whose acknowledged instant the controller keeps in
  memory (:attr:`PolicyDecision.acknowledged`). A ``never`` observation record is not
  persisted on the object either (the in-memory ledger still has it).
* **Events name the policy.** Each Event's message ends with
  ``(based on ClusterLifecyclePolicy/preview-namespaces: delete-after 48h)``; the texts of
  annotation-driven Events are unchanged.

**One decision per action family** (:class:`~.precedence.Resolution`): a family won
by the object's own annotations is decided on them, one won by a policy on the merged
inputs, one an unjudged policy won decides nothing (:class:`Idle`, its log naming the
policy). A family an enforced policy won is decided without the Namespace's ``catch-up``,
``maintenance-window`` and ``max-delete-ttl``
(:mod:`~lifecycle_controller.core.policy.enforcement`). Under an enforced deletion the
sooner of the enforced deadline and the next contender's deletion goes (the next contender
still obeys the Namespace). :attr:`PolicyDecision.decisions` has every family's decision,
the one to carry out this pass first (:func:`first_to_act`).

**One reconcile pass, one pure call** (:func:`decide_pass`): the controller gathers a pass's
facts first (docs/architecture.md#decision-path): the object, its namespace's defaults, the
policies resolved for it (None: its annotations alone decide), whether the workload's Pod
template marker is known, what the policy fence said, the guardrails' state (none of it
depends on the decision). :func:`decide_pass` answers, reading nothing: the decision (above),
for a due deletion or restart the guardrails' verdict
(:func:`~lifecycle_controller.core.decision.guardrails.check`: the write, or the ``Hold`` that
stops it), or the one fact it still lacks (:class:`MissingFact`): the workload's template
marker (a policy restart counts from it, the restart guard measures from it), or, for a
policy's deletion, the policy fence's fact: the object's policies resolved on a fresh read of
the API server (:class:`PolicyConfirmation`). The controller reads it, once, and asks again;
the verdict then decides on that fresh view as well and compares the two (:mod:`.fence`):
the comparison is one more guardrail fact (``FenceFacts``), and :func:`check`, the only
place that holds, holds the deletion on it before any other guardrail; or, for an action its
policy's limit has a place for, that place recorded in the policy's status (:mod:`.places`),
which the controller writes before the action goes.
"""

from __future__ import annotations

import dataclasses
import enum
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from lifecycle_controller.core.decision.events import Event
from lifecycle_controller.core.decision.guardrails import (
    FenceFacts,
    GuardrailState,
    Hold,
    HoldReason,
    acting_operation,
    check,
)
from lifecycle_controller.core.decision.limit_line import LimitFacts
from lifecycle_controller.core.decision.namespace_defaults import (
    NamespaceDefaults,
    decide_in_namespace,
)
from lifecycle_controller.core.decision.outcomes import (
    Action,
    Decision,
    DecisionSettings,
    Delete,
    DryRun,
    Idle,
    Invalid,
    ObjectFacts,
    Operation,
    Patch,
    Wait,
)
from lifecycle_controller.core.objects import keys
from lifecycle_controller.core.policy.enforcement import defaults_for
from lifecycle_controller.core.policy.fence import unconfirmed, unreadable
from lifecycle_controller.core.policy.model import Policy
from lifecycle_controller.core.policy.precedence import Family, PolicyInputs, Resolution
from lifecycle_controller.core.schedule.catchup import LedgerView

__all__ = [
    "MissingFact",
    "PassInputs",
    "PolicyConfirmation",
    "PolicyDecision",
    "Verdict",
    "attribution",
    "decide_pass",
    "decide_with_policies",
    "first_to_act",
]


@dataclass(frozen=True, slots=True)
class PolicyDecision:
    """The decisions (the one to carry out first), the inputs they were made on, and for a
    policy's skipped occurrence the ``last-restart-timestamp`` it acknowledged (kept in
    memory, never written). ``deadline``: under an enforced deletion that the next
    contender's sooner one won, the enforced policy's own decision (what stands when the
    sooner one is held by its policy's limit: :func:`decide_pass`)."""

    decisions: tuple[Decision, ...]
    inputs: Resolution
    acknowledged: str | None = None
    deadline: Decision | None = None

    @property
    def decision(self) -> Decision:
        """The decision this pass carries out (the tools show it)."""
        return self.decisions[0]


def _urgency(decision: Decision) -> tuple[int, int]:
    if isinstance(decision, Delete):
        return (0, 0)
    if isinstance(decision, Patch):
        return (1, 0)
    if isinstance(decision, DryRun):
        return (2, 0)
    if isinstance(decision, Wait):
        return (3, decision.due_ns or 0)
    return (4 if isinstance(decision, Invalid) else 5, 0)


def first_to_act(decisions: tuple[Decision, ...]) -> tuple[Decision, ...]:
    """The decisions, the one to carry out first in front: a deletion, a patch, a dry run,
    the earliest wait, a misconfiguration, then nothing to do."""
    return tuple(sorted(decisions, key=_urgency))


def _sooner(enforced: Decision, other: Decision) -> Decision:
    """Under an enforced deletion (a deadline): the other contender's deletion if it goes
    first, else the enforced one."""
    if isinstance(other, Delete):
        return other
    if isinstance(enforced, (Delete, DryRun)):
        return enforced
    if (
        isinstance(other, Wait)
        and isinstance(enforced, Wait)
        and other.action is Action.DELETE
        and other.due_ns is not None
        and enforced.due_ns is not None
        and other.due_ns < enforced.due_ns
    ):
        return other
    return enforced


def _action(policy: Policy) -> str:
    """``delete-after 48h``: the policy's action key and value ("" none)."""
    actions = [
        f"{key} {value}"
        for key, value in policy.lifecycle.items()
        if keys.PREFIX + key in keys.ACTION_KEYS
    ]
    return actions[0] if actions else ""


def attribution(policy: Policy) -> str:
    """``based on ClusterLifecyclePolicy/name: delete-after 48h`` (the action key and value),
    with ``, enforced`` for an enforced policy."""
    action = _action(policy)
    said = f"based on {policy.ref}: {action}" if action else f"based on {policy.ref}"
    return f"{said}, enforced" if policy.enforce else said


def _named(events: tuple[Event, ...], suffix: str) -> tuple[Event, ...]:
    return tuple(dataclasses.replace(e, message=f"{e.message} ({suffix})") for e in events)


def _attributed(decision: Decision, policy: Policy) -> tuple[Decision, str | None]:
    suffix = attribution(policy)
    changes: dict[str, Any] = {"events": _named(decision.events, suffix), "policy": str(policy.ref)}
    acknowledged: str | None = None
    if isinstance(decision, (Patch, Delete)):
        changes["on_success"] = dataclasses.replace(
            decision.on_success, events=_named(decision.on_success.events, suffix)
        )
        failure = decision.failure
        if failure is not None:
            prefix = failure.message_prefix.removesuffix(": ")
            changes["failure"] = dataclasses.replace(
                failure, message_prefix=f"{prefix} ({suffix}): "
            )
    if isinstance(decision, Delete) and policy.deletion_propagation is not None:
        changes["propagation"] = policy.deletion_propagation
    if isinstance(decision, Patch):
        acknowledged = decision.acknowledges
    if isinstance(decision, Invalid) and decision.refusal is not None and _action(policy):
        # What the cap refused is the policy's value, not the deadline merged from it.
        changes["refusal"] = dataclasses.replace(decision.refusal, what=_action(policy))
    if decision.log:
        changes["log"] = f"{decision.log} ({suffix})"
        if "propagation" in changes:
            changes["log"] += f"; propagation {changes['propagation']}"
    return dataclasses.replace(decision, **changes), acknowledged


@dataclass(frozen=True, slots=True)
class _Family:
    """One family's decision; what a policy's skipped restart acknowledged; under an
    enforced deletion the sooner contender won, the enforced decision."""

    decision: Decision
    acknowledged: str | None = None
    deadline: Decision | None = None


def _policy_settings(
    settings: DecisionSettings, policy: Policy, limits: Mapping[str, LimitFacts]
) -> DecisionSettings:
    """A policy's writes come in its form (no annotation changes), and its catch-up does not
    count as lateness the time its limit has held (docs/policies.md#limit)."""
    limit = limits.get(str(policy.ref))
    held_since = None if limit is None else limit.held_since_ns
    return dataclasses.replace(settings, writes_annotations=False, limit_held_since_ns=held_since)


def _decide_family(
    inputs: PolicyInputs,
    *,
    facts: ObjectFacts,
    now_ns: int,
    settings: DecisionSettings,
    ledger: LedgerView,
    defaults: NamespaceDefaults | None,
    limits: Mapping[str, LimitFacts],
) -> _Family:
    """One family's decision (see :class:`_Family`)."""
    if inputs.held is not None:
        return _Family(Idle(log=inputs.held.describe(), policy=str(inputs.held.ref)))
    policy = inputs.decided_by
    measured = facts  # a deletion counted from since is measured from it (the cap's TTL)
    if inputs.since_ns is not None:
        measured = dataclasses.replace(facts, creation_ns=inputs.since_ns)
    decision = decide_in_namespace(
        annotations=inputs.annotations,
        facts=measured,
        now_ns=now_ns,
        settings=settings if policy is None else _policy_settings(settings, policy, limits),
        ledger=ledger,
        # An enforced policy is not weakened by the Namespace's catch-up, window or cap.
        defaults=defaults_for(inputs, defaults),
    )
    if policy is None:
        return _Family(decision)
    attributed, acknowledged = _attributed(decision, policy)
    if inputs.sooner is None:
        return _Family(attributed, acknowledged)
    other = _decide_family(
        inputs.sooner,
        facts=facts,
        now_ns=now_ns,
        settings=settings,
        ledger=ledger,
        defaults=defaults,
        limits=limits,
    ).decision
    sooner = _sooner(attributed, other)
    return _Family(sooner, acknowledged, None if sooner is attributed else attributed)


def decide_with_policies(
    *,
    inputs: Resolution,
    facts: ObjectFacts,
    now_ns: int,
    settings: DecisionSettings,
    ledger: LedgerView,
    defaults: NamespaceDefaults | None,
    limits: Mapping[str, LimitFacts] | None = None,
) -> PolicyDecision:
    """Decide on ``inputs`` (from :meth:`~.in_force.PolicySet.resolve`); see the module.
    ``limits``: the limits of the deciding policies (by ``Kind/namespace/name``), whose
    holds a catch-up does not count as lateness."""
    decisions: list[Decision] = []
    acknowledged: str | None = None
    deadline: Decision | None = None
    for family_inputs in inputs.families:
        family = _decide_family(
            family_inputs,
            facts=facts,
            now_ns=now_ns,
            settings=settings,
            ledger=ledger,
            defaults=defaults,
            limits=limits or {},
        )
        decisions.append(family.decision)
        deadline = deadline or family.deadline
        if family_inputs.family is Family.RESTART and family.acknowledged is not None:
            acknowledged = family.acknowledged
    return PolicyDecision(first_to_act(tuple(decisions)), inputs, acknowledged, deadline)


class MissingFact(enum.Enum):
    """A fact the verdict needs and the pass has not read yet."""

    #: The workload's Pod template restart marker (never in the metadata-only cache).
    TEMPLATE_MARKER = "template_marker"
    #: For a policy's deletion: the object's policies as the API server has them now (the
    #: policy fence).
    POLICY_CONFIRMATION = "policy_confirmation"
    #: The deciding policy's limit has a place for the action, not recorded in the policy's
    #: status yet: it is recorded before the action goes (core/policy/places.py).
    LIMIT_PLACE = "limit_place"


@dataclass(frozen=True, slots=True)
class PolicyConfirmation:
    """The policy fence's fact: the object resolved on a fresh read of the API server (the
    policies that may concern it, its Namespace's labels), or ``problem``, why that read
    failed (then ``resolution`` is None and no policy deletion goes).

    ``retry_after_ns``: when a deletion it holds is tried again. ``recent``: the read was
    made for an earlier check, within the fence's freshness (the fence's metric says so).
    """

    resolution: Resolution | None
    retry_after_ns: int
    problem: str | None = None
    recent: bool = False


@dataclass(slots=True, kw_only=True)
class PassInputs:
    """Every fact one pass decides on (see the module). Built once per pass; a fact the
    verdict asks for is filled in by the pass and the verdict asked again (not frozen, also
    because a frozen dataclass's construction costs a few microseconds per pass)."""

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
    #: The pass asked for its limit place to be recorded (the guardrails' limit facts say
    #: how that went): a place still not recorded holds the action, it is not asked again.
    place_asked: bool = False
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


def _decide_on(resolution: Resolution, inputs: PassInputs) -> PolicyDecision:
    """Decide the pass's object on ``resolution`` (the pass's, or the fresh view's that
    confirms it): the one place the pass's facts reach :func:`decide_with_policies`."""
    return decide_with_policies(
        inputs=resolution,
        facts=inputs.facts,
        now_ns=inputs.now_ns,
        settings=inputs.settings,
        ledger=inputs.ledger,
        defaults=inputs.defaults,
        limits=inputs.guardrails.limits,
    )


def decide_pass(inputs: PassInputs) -> Verdict:
    """The final decision of one pass over ``inputs``; see the module."""
    resolution = inputs.resolution
    acknowledged: str | None = None
    deadline: Decision | None = None
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
        result = _decide_on(resolution, inputs)
        decision, *rest = result.decisions
        others = tuple(rest)
        acknowledged = result.acknowledged
        if decision.action is Action.DELETE:
            deadline = result.deadline
    if isinstance(decision, Delete):
        others = ()  # the object goes: the other family has nothing left to do
    if not isinstance(decision, (Patch, Delete, DryRun)):
        return Verdict(decision, decision, others, acknowledged)
    final, missing = _guarded(decision, inputs, deadline=False)
    if missing is None and deadline is not None and _limit_held(final):
        return _at_deadline(decision, deadline, final, others, acknowledged, inputs)
    return Verdict(decision, final, others, acknowledged, missing)


def _limit_held(final: Decision) -> bool:
    """``final`` is the deciding policy's limit holding the action."""
    return (isinstance(final, Hold) and final.reason is HoldReason.POLICY_LIMIT) or (
        isinstance(final, Wait) and final.policy is not None
    )


def _at_deadline(
    decision: Decision,
    deadline: Decision,
    held: Decision,
    others: tuple[Decision, ...],
    acknowledged: str | None,
    inputs: PassInputs,
) -> Verdict:
    """The next contender's sooner deletion is held by its policy's limit: that limit never
    delays the enforced deadline. Past the deadline the enforced policy acts, under its own
    limit and the other guardrails; before it, the hold looks again by the deadline."""
    if isinstance(deadline, (Delete, DryRun)):
        final, missing = _guarded(deadline, inputs, deadline=True)
        return Verdict(deadline, final, others, acknowledged, missing)
    due = deadline.due_ns
    if (
        not isinstance(held, (Hold, Wait))
        or due is None
        or due - inputs.now_ns >= held.requeue_after_ns
    ):
        return Verdict(decision, held, others, acknowledged)
    by = max(1, due - inputs.now_ns)
    return Verdict(decision, dataclasses.replace(held, requeue_after_ns=by), others, acknowledged)


def _guarded(
    decision: Patch | Delete | DryRun, inputs: PassInputs, *, deadline: bool
) -> tuple[Decision, MissingFact | None]:
    """What stands of ``decision``: itself or the guardrails' hold (the policy fence's among
    them, its comparison made here as a fact for :func:`check`); or the fact still missing
    to tell. ``deadline``: it is the enforced deadline behind the sooner deletion (the fence
    finds it there on the fresh view too)."""
    fence: FenceFacts | None = None
    if inputs.fenced and isinstance(decision, Delete) and decision.policy:
        confirmation = inputs.confirmation
        if confirmation is None:
            return decision, MissingFact.POLICY_CONFIRMATION
        resolution = inputs.resolution
        assert resolution is not None  # a policy decided it
        fence = _fence(decision, resolution, confirmation, inputs, deadline=deadline)
    if (
        isinstance(decision, Patch)
        and not inputs.marker_known
        and inputs.guardrails.min_restart_interval_ns > 0
        and acting_operation(decision) is Operation.RESTART
    ):
        return decision, MissingFact.TEMPLATE_MARKER
    facts = inputs.guardrails.facts(decision, fence=fence)
    hold = check(decision, facts)
    if hold is not None and not inputs.place_asked and _unrecorded(hold, facts.limit, decision):
        return decision, MissingFact.LIMIT_PLACE
    return (decision if hold is None else hold), None


def _unrecorded(
    hold: Decision, limit: LimitFacts | None, decision: Patch | Delete | DryRun
) -> bool:
    """The guardrails hold ``decision`` only until its limit place is recorded."""
    if limit is None or not limit.unrecorded(decision):
        return False
    return isinstance(decision, DryRun) or (
        isinstance(hold, Hold) and hold.reason is HoldReason.POLICY_LIMIT_UNRECORDED
    )


def _fence(
    decision: Delete,
    resolution: Resolution,
    confirmation: PolicyConfirmation,
    inputs: PassInputs,
    *,
    deadline: bool,
) -> FenceFacts:
    """The fence's fact for ``decision``: why the fresh view does not decide it too, or could
    not be read (None: it decides it); :func:`check` holds on it."""
    fresh_on = confirmation.resolution
    why: str | None
    if fresh_on is None:
        why = unreadable(confirmation.problem)
    else:
        result = _decide_on(fresh_on, inputs)
        fresh = result.deadline if deadline and result.deadline is not None else result.decision
        why = unconfirmed(decision, resolution, fresh, fresh_on)
    return FenceFacts(unconfirmed=why, retry_after_ns=confirmation.retry_after_ns)
