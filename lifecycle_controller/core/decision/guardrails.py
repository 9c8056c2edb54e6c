"""Whether a due action goes now: the guardrails, as one pure decision.

:func:`~lifecycle_controller.core.decision.decide` says what an object needs (a ``Delete``, a
restart ``Patch``, a dry-run report...). Before a deletion or a restart is sent, the
blast-radius controls (docs/behaviour.md#blast-radius-controls), the policy fence
(docs/reliability.md#policy-fence) and the deciding lifecycle policy's ``limit``
(docs/policies.md#limit) may hold it. :func:`check` is the one place that decides that, and
the only module that builds a :class:`Hold`: it takes the facts each control gives
(:class:`GuardrailFacts`: the controls' state, read by the controller without any API call,
and the fence's comparison, made on a read gathered before the verdict) and answers ``None``
(go now) or a :class:`Hold`, a decision the reconciler treats like a ``Wait``. The controls,
in the order they are checked:

1. the **policy fence** (:class:`FenceFacts`, given for a policy's deletion only): when the
   API server's view of the policies and the Namespace's labels does not decide the same
   deletion, or could not be read, it is held (``POLICY_UNCONFIRMED``, no Event: the
   fence's metric and log say it) and looked at again after the fence's retry, before any
   other control is asked;
2. the **open circuit breaker** holds every action until an operator resets it (Warning
   ``ActionsHalted``, once per object and trip); an action that was held when the breaker
   was reset goes, and is not counted in the window (docs/behaviour.md#circuit-breaker);
3. the deciding **policy's limit** (:class:`~.limit_line.LimitFacts`): past its ``actions``
   within its window, the action waits in the policy's line, due order, until the instant
   its place frees (no Event per object: the policy shows ``Limited`` and one Warning). A
   dry-run report is held by the limit alone, as a ``Wait`` (it writes nothing, so nothing
   else guards it); one reported already takes no place. A place free now goes only once
   it is recorded in the policy's status (``core/policy/places.py``): until then the
   action waits (``POLICY_LIMIT_UNRECORDED``; the pass asks for the record first, and a
   record that failed holds it until it is tried again);
4. for restarts, the **restart guard** (``--min-restart-interval``): not before the last
   restart plus the interval (Normal ``RestartDeferred``, once per occurrence);
5. for restarts, the **restart jitter** (``--restart-jitter``): not before the due time
   plus a delay drawn from the object's UID (no Event);
6. for restarts, a **rollout slot** (``--max-concurrent-rollouts``): wait for the turn, in
   due-time order (Normal ``RestartQueued``, once per occurrence);
7. the **per-minute budgets** (``--max-deletes-per-minute``, ``--max-restarts-per-minute``):
   wait for a token (Normal ``ActionThrottled``, once per occurrence);
8. the **breaker's window**: the (N+1)th action within the window trips the breaker and is
   held like the rest; a window full only with actions still in flight makes the action
   look again in a moment, since one of them may fail and give its place back.

Writes that are not actions (converting ``*-after`` to ``*-at``, acknowledging a skipped
occurrence) are never held. Time is injected (nanoseconds); nothing here reserves anything:
the controller takes the token, the slot, the breaker window's place and the limit's place
only for a write this module let go (``controller/guardrails/state.py``), and records the
line a limit's hold joins.
"""

from __future__ import annotations

import enum
from collections.abc import Mapping
from dataclasses import dataclass, field, replace
from typing import overload

from lifecycle_controller.core.decision import events as catalogue
from lifecycle_controller.core.decision.limit_line import LimitFacts
from lifecycle_controller.core.decision.outcomes import (
    Action,
    Decision,
    Delete,
    DryRun,
    Operation,
    Patch,
    Wait,
)
from lifecycle_controller.core.decision.pacing import restart_not_before_ns
from lifecycle_controller.core.text.durations import NS_PER_SECOND
from lifecycle_controller.core.text.timestamps import format_rfc3339_seconds

__all__ = [
    "BREAKER_SETTLE_NS",
    "HELD_RECHECK_NS",
    "RECORD_RETRY_NS",
    "BreakerFacts",
    "FenceFacts",
    "GuardrailFacts",
    "GuardrailState",
    "Hold",
    "HoldReason",
    "RolloutQueue",
    "acting_operation",
    "check",
]

#: How soon an action looks again when the breaker's window is full only with actions in flight.
BREAKER_SETTLE_NS = NS_PER_SECOND // 5
#: How soon an action held by the breaker or waiting for a rollout slot is looked at again
#: when nothing wakes it earlier (a reset and a freed slot both requeue it at once).
HELD_RECHECK_NS = 30 * NS_PER_SECOND
#: How soon an action whose limit place could not be recorded tries again.
RECORD_RETRY_NS = NS_PER_SECOND


class HoldReason(enum.StrEnum):
    """Which control holds the action."""

    BREAKER_OPEN = "breaker_open"
    BREAKER_TRIPPED = "breaker_tripped"  # this action would exceed the window: trip, then hold
    BREAKER_SETTLING = "breaker_settling"
    RESTART_GUARD = "restart_guard"
    RESTART_JITTER = "restart_jitter"
    ROLLOUT_SLOT = "rollout_slot"
    BUDGET = "budget"
    #: A policy deletion the API server's view of the policies (and of the Namespace's
    #: labels) does not decide, or that view could not be read (the policy fence,
    #: core/policy/fence.py).
    POLICY_UNCONFIRMED = "policy_unconfirmed"
    #: The deciding policy's ``limit`` is reached: the action waits in its line.
    POLICY_LIMIT = "policy_limit"
    #: The limit has a place, but it is not recorded in the policy's status yet (or its
    #: record failed): the action waits for it (core/policy/places.py).
    POLICY_LIMIT_UNRECORDED = "policy_limit_unrecorded"


@dataclass(frozen=True, slots=True, kw_only=True)
class BreakerFacts:
    """The circuit breaker as the leader sees it now (present only when it is configured).

    ``in_window`` counts the actions admitted within the window ending now, those still in
    flight (``in_flight``) included. ``released`` says this object's action was held when the
    breaker was last reset: the operator reviewed it, so it goes outside the window.
    """

    open: bool
    limit: int
    window_ns: int
    in_window: int = 0
    in_flight: int = 0
    tripped_at: str = ""
    tripped_actions: int = 0
    released: bool = False


@dataclass(frozen=True, slots=True, kw_only=True)
class FenceFacts:
    """The policy fence's comparison for one policy deletion (core/policy/fence.py), made
    before the verdict on the view read again from the API server: ``unconfirmed`` is why
    that view does not decide the deletion, or why it could not be read (None: it decides
    it too); ``retry_after_ns`` is when a deletion it stops is tried again."""

    unconfirmed: str | None
    retry_after_ns: int


@dataclass(frozen=True, slots=True, kw_only=True)
class GuardrailFacts:
    """Everything :func:`check` needs, read from the controls' state at ``now_ns``.

    ``last_restart_ns`` is the latest restart of the workload known to this controller (its
    annotations, the Pod template's marker, this process's own restarts); ``rollout_turn``
    says a rollout slot is free for this object in due-time order (always True without a
    limit); ``budget_wait_ns`` is how long until the action's budget has a token (0: now).
    ``fence``: the policy fence's comparison, for a policy deletion the fence confirms.
    """

    now_ns: int
    uid: str = ""
    breaker: BreakerFacts | None = None
    last_restart_ns: int | None = None
    min_restart_interval_ns: int = 0
    restart_jitter_ns: int = 0
    rollout_limit: int = 0
    rollout_turn: bool = True
    budget_wait_ns: int = 0
    limit: LimitFacts | None = None
    fence: FenceFacts | None = None


@dataclass(frozen=True, slots=True, kw_only=True)
class RolloutQueue:
    """The ``--max-concurrent-rollouts`` queue as one workload sees it now.

    ``rolling``: its own previous rollout is still followed; ``holds_slot``: it holds a slot
    kept across a conflict; ``free``: slots nobody holds; ``others``: the other live waiters
    as ``(due instant, key id)``; ``waited_since_ns``: the due instant it already waits with.
    :meth:`turn` is whether a restart due at an instant may take a slot now: the earliest due
    waiters that fit into the free slots go first, ties by key.
    """

    limit: int = 0
    rolling: bool = False
    holds_slot: bool = False
    free: int = 0
    key_id: str = ""
    waited_since_ns: int | None = None
    others: tuple[tuple[int, str], ...] = ()

    def turn(self, due_ns: int | None) -> bool:
        if self.limit <= 0:
            return True
        if self.rolling:
            return False
        if self.holds_slot:
            return True
        if self.free <= 0:
            return False
        due = due_ns if due_ns is not None else 0
        if self.waited_since_ns is not None:
            due = min(due, self.waited_since_ns)
        mine = (due, self.key_id)
        return sum(1 for other in self.others if other < mine) < self.free


@dataclass(frozen=True, slots=True, kw_only=True)
class GuardrailState:
    """The controls' state for one object, read before its decision (nothing in it depends on
    the decision); :meth:`facts` is what :func:`check` takes for one write."""

    now_ns: int
    uid: str = ""
    breaker: BreakerFacts | None = None
    last_restart_ns: int | None = None
    min_restart_interval_ns: int = 0
    restart_jitter_ns: int = 0
    rollouts: RolloutQueue = field(default_factory=RolloutQueue)
    #: How long until each action's budget has a token (absent or 0: now).
    budget_wait_ns: Mapping[Action, int] = field(default_factory=dict)
    #: The limits of the policies that may decide the object, by ``Kind/namespace/name``.
    limits: Mapping[str, LimitFacts] = field(default_factory=dict)

    def facts(
        self, decision: Patch | Delete | DryRun, *, fence: FenceFacts | None = None
    ) -> GuardrailFacts:
        """The facts for ``decision``; ``fence``: the fence's comparison for it (the one
        fact that depends on the decision, so the pass hands it in)."""
        limit = None if decision.policy is None else self.limits.get(decision.policy)
        if isinstance(decision, DryRun):
            return GuardrailFacts(now_ns=self.now_ns, uid=self.uid, limit=limit)
        restart = acting_operation(decision) is Operation.RESTART
        action = decision.action
        return GuardrailFacts(
            now_ns=self.now_ns,
            uid=self.uid,
            breaker=self.breaker,
            last_restart_ns=self.last_restart_ns if restart else None,
            min_restart_interval_ns=self.min_restart_interval_ns,
            restart_jitter_ns=self.restart_jitter_ns,
            rollout_limit=self.rollouts.limit,
            rollout_turn=not restart or self.rollouts.turn(decision.due_ns),
            budget_wait_ns=0 if action is None else self.budget_wait_ns.get(action, 0),
            limit=limit,
            fence=fence,
        )


@dataclass(frozen=True, slots=True, kw_only=True)
class Hold(Decision):
    """A due action held by a guardrail: requeue after ``requeue_after_ns``, like a ``Wait``.

    ``events`` holds the control's Event (if any); ``held`` is the write that waits;
    ``until_ns`` is when it may go, when that is known (the guard, the jitter, the budget),
    None when something else must happen first (a reset, a freed rollout slot).
    ``tripped_at`` is the instant a ``BREAKER_TRIPPED`` hold trips the breaker at.
    """

    reason: HoldReason
    held: Patch | Delete = field(repr=False)
    requeue_after_ns: int
    until_ns: int | None = None
    tripped_at: str = ""


def acting_operation(decision: Patch | Delete) -> Operation | None:
    """The deletion or restart ``decision`` carries out, None for any other write."""
    if decision.action is None:
        return None
    if isinstance(decision, Delete):
        return Operation.DELETE
    return Operation.RESTART if decision.operation is Operation.RESTART else None


@overload
def check(decision: Patch | Delete, facts: GuardrailFacts) -> Hold | None: ...
@overload
def check(decision: DryRun, facts: GuardrailFacts) -> Wait | None: ...
@overload
def check(decision: Patch | Delete | DryRun, facts: GuardrailFacts) -> Hold | Wait | None: ...
def check(decision: Patch | Delete | DryRun, facts: GuardrailFacts) -> Hold | Wait | None:
    """None when ``decision``'s action may go now, else the :class:`Hold` that stops it (a
    ``Wait`` for a dry-run report its policy's limit holds)."""
    if isinstance(decision, DryRun):
        return _limited(decision, facts.limit) if decision.action is not None else None
    fence = facts.fence
    if fence is not None and fence.unconfirmed is not None:
        hold = _hold(
            decision, HoldReason.POLICY_UNCONFIRMED, fence.retry_after_ns, log=fence.unconfirmed
        )
        return replace(hold, policy=decision.policy)
    operation = acting_operation(decision)
    if operation is None:
        return None
    breaker = facts.breaker
    if breaker is not None and breaker.open and not breaker.released:
        return _breaker_hold(decision, HoldReason.BREAKER_OPEN, breaker, breaker.tripped_at)
    limited = _limited(decision, facts.limit)
    if limited is not None:
        return limited
    if operation is Operation.RESTART:
        paced = _paced(decision, facts)
        if paced is not None:
            return paced
        if facts.rollout_limit > 0 and not facts.rollout_turn:
            return _hold(
                decision,
                HoldReason.ROLLOUT_SLOT,
                HELD_RECHECK_NS,
                event=catalogue.restart_queued(facts.rollout_limit, decision.due_ns),
                log=f"restart queued for a rollout slot (limit {facts.rollout_limit})",
            )
    if facts.budget_wait_ns > 0:
        action = _action(decision)
        return _hold(
            decision,
            HoldReason.BUDGET,
            facts.budget_wait_ns,
            until_ns=facts.now_ns + facts.budget_wait_ns,
            event=catalogue.action_throttled(action.value, decision.due_ns),
            log="action throttled by budget",
        )
    if breaker is not None and not breaker.released and breaker.in_window >= breaker.limit:
        if breaker.in_flight > 0:
            return _hold(
                decision,
                HoldReason.BREAKER_SETTLING,
                BREAKER_SETTLE_NS,
                log="breaker window full with actions in flight; looking again shortly",
            )
        tripped_at = format_rfc3339_seconds(facts.now_ns)
        return _breaker_hold(
            decision,
            HoldReason.BREAKER_TRIPPED,
            BreakerFacts(
                open=True,
                limit=breaker.limit,
                window_ns=breaker.window_ns,
                tripped_at=tripped_at,
                tripped_actions=breaker.limit,
            ),
            tripped_at,
        )
    return None


@overload
def _limited(decision: Patch | Delete, limit: LimitFacts | None) -> Hold | None: ...
@overload
def _limited(decision: DryRun, limit: LimitFacts | None) -> Wait | None: ...
def _limited(decision: Patch | Delete | DryRun, limit: LimitFacts | None) -> Hold | Wait | None:
    """The deciding policy's limit: None when the action takes a place now (or needs none),
    else it waits in the line until its place frees (:meth:`LimitFacts.turn`)."""
    if limit is None or not limit.takes_place(decision):
        return None
    until = limit.turn(decision.due_ns)
    reason = HoldReason.POLICY_LIMIT
    log = f"held by {limit.policy}'s limit {limit.text}"
    if until is None:
        if not limit.unrecorded(decision):
            return None
        reason = HoldReason.POLICY_LIMIT_UNRECORDED
        why = limit.record_problem or "not recorded yet"
        log = f"waiting for {limit.policy}'s limit place to be recorded ({why})"
        until = limit.now_ns + RECORD_RETRY_NS
    after = until - limit.now_ns
    if isinstance(decision, DryRun):
        return Wait(
            action=decision.action,
            due_ns=decision.due_ns,
            policy=decision.policy,
            requeue_after_ns=after,
            log=log,
        )
    hold = _hold(decision, reason, after, until_ns=until, log=log)
    return replace(hold, policy=decision.policy)


def _paced(decision: Patch | Delete, facts: GuardrailFacts) -> Hold | None:
    """The restart guard and the jitter (docs/behaviour.md#restart-guard, #restart-jitter)."""
    if facts.min_restart_interval_ns <= 0 and facts.restart_jitter_ns <= 0:
        return None
    last = facts.last_restart_ns if facts.min_restart_interval_ns > 0 else None
    jittered, guarded = restart_not_before_ns(
        due_ns=decision.due_ns,
        uid=facts.uid,
        last_restart=last,
        min_interval_ns=facts.min_restart_interval_ns,
        jitter_max_ns=facts.restart_jitter_ns,
    )
    now = facts.now_ns
    run_at = max(t for t in (jittered, guarded, now) if t is not None)
    if run_at <= now:
        return None
    if guarded is not None and last is not None and guarded > now:
        return _hold(
            decision,
            HoldReason.RESTART_GUARD,
            run_at - now,
            until_ns=run_at,
            event=catalogue.restart_deferred(
                last_ns=last, run_at_ns=run_at, due_ns=decision.due_ns
            ),
            log="restart deferred by the minimum restart interval",
        )
    return _hold(
        decision,
        HoldReason.RESTART_JITTER,
        run_at - now,
        until_ns=run_at,
        log="restart delayed by its jitter",
    )


def _breaker_hold(
    decision: Patch | Delete, reason: HoldReason, breaker: BreakerFacts, tripped_at: str
) -> Hold:
    halted = catalogue.about(
        catalogue.actions_halted(breaker.tripped_actions, breaker.window_ns, tripped_at),
        action=_action(decision).value,
        due_ns=decision.due_ns,
        dry_run=False,
    )
    hold = _hold(
        decision,
        reason,
        HELD_RECHECK_NS,
        event=halted,
        log=f"action held by the open circuit breaker (tripped at {tripped_at})",
    )
    return replace(hold, tripped_at=tripped_at)


def _hold(
    decision: Patch | Delete,
    reason: HoldReason,
    requeue_after_ns: int,
    *,
    until_ns: int | None = None,
    event: catalogue.Event | None = None,
    log: str,
) -> Hold:
    return Hold(
        reason=reason,
        held=decision,
        requeue_after_ns=max(requeue_after_ns, 1),
        until_ns=until_ns,
        events=() if event is None else (event,),
        action=decision.action,
        due_ns=decision.due_ns,
        log=log,
    )


def _action(decision: Patch | Delete) -> Action:
    assert decision.action is not None  # acting_operation() said it acts
    return decision.action
