"""The one decision whether a due deletion or restart goes now (core/decision/guardrails.py).

Tables over the facts each control gives, with injected time: which hold wins (the order of
docs/behaviour.md#blast-radius-controls, the policy fence's comparison first), what it waits
for, which Event it carries, and that writes which are not actions are never held. One
table has every guardrail, the fence and the limit's record among them: check is the only
place that holds. A hypothesis property checks that a hold never
lets go early: whatever the facts, a restart held by the guard or the jitter waits exactly
until the later of the two.
"""

from __future__ import annotations

from dataclasses import replace

import pytest
from hypothesis import given
from hypothesis import strategies as st

from lifecycle_controller.core import Action, Delete, DryRun, Operation, Patch, Wait
from lifecycle_controller.core.decision import events as catalogue
from lifecycle_controller.core.decision.guardrails import (
    BREAKER_SETTLE_NS,
    HELD_RECHECK_NS,
    BreakerFacts,
    FenceFacts,
    GuardrailFacts,
    GuardrailState,
    Hold,
    HoldReason,
    acting_operation,
    check,
)
from lifecycle_controller.core.decision.limit_line import LimitFacts
from lifecycle_controller.core.decision.pacing import restart_jitter_ns

S = 1_000_000_000
NOW = 1_767_225_600 * S  # 2026-01-01T00:00:00Z
DUE = NOW - 60 * S

DELETE = Delete(
    uid="u1",
    resource_version="7",
    action=Action.DELETE,
    due_ns=DUE,
    failure=catalogue.DELETION_FAILURE,
)
RESTART = Patch(operation=Operation.RESTART, action=Action.RESTART, due_ns=DUE)
CONVERT = Patch(operation=Operation.CONVERT, action=Action.DELETE, due_ns=DUE)
SKIP = Patch(operation=Operation.SKIP, action=Action.RESTART, due_ns=DUE)

POLICY = "LifecyclePolicy/team/capped"
DELETE = replace(DELETE, policy=POLICY)
RESTART = replace(RESTART, policy=POLICY)
DRY = DryRun(operation=Operation.DELETE, action=Action.DELETE, due_ns=DUE, policy=POLICY)

CLOSED = BreakerFacts(open=False, limit=3, window_ns=600 * S)
#: The policy's limit, 2 per 10 minutes: full, or with a place free.
FULL_LIMIT = LimitFacts(
    policy=POLICY,
    actions=2,
    window_ns=600 * S,
    text="2/10m",
    now_ns=NOW,
    key_id="k",
    stamps=(NOW - 300 * S, NOW - 60 * S),
)
FREE_LIMIT = replace(FULL_LIMIT, stamps=(NOW - 300 * S,))
#: A place is free, but an earlier-due object waits for it.
QUEUED_LIMIT = replace(FREE_LIMIT, line=((DUE - S, "a"),))
OPEN = replace(CLOSED, open=True, tripped_at="2025-12-31T23:50:00Z", tripped_actions=3)
FULL = replace(CLOSED, in_window=3)
FULL_IN_FLIGHT = replace(FULL, in_flight=1)
#: The policy fence's comparison: the fresh view decides the deletion too, or it does not,
#: or it could not be read.
CONFIRMED = FenceFacts(unconfirmed=None, retry_after_ns=S)
CHANGED = FenceFacts(unconfirmed=f"{POLICY} changed since the decision", retry_after_ns=S)
UNREAD = FenceFacts(unconfirmed="the policies in force could not be read: 500", retry_after_ns=S)
#: A place is free, but not recorded in the policy's status yet (or its record failed).
UNRECORDED_LIMIT = replace(FREE_LIMIT, recording=True)


def facts(**overrides: object) -> GuardrailFacts:
    return replace(GuardrailFacts(now_ns=NOW, uid="u1"), **overrides)  # type: ignore[arg-type]


@pytest.mark.parametrize(
    ("decision", "given_facts", "reason"),
    [
        # Nothing configured: every action goes.
        (DELETE, facts(), None),
        (RESTART, facts(), None),
        # Writes that are not actions are never held, whatever the controls say.
        (CONVERT, facts(breaker=OPEN, budget_wait_ns=5 * S), None),
        (SKIP, facts(breaker=OPEN, rollout_limit=1, rollout_turn=False), None),
        # The policy fence: a deletion the fresh view does not decide (or could not read)
        # is held before every other control; a confirmed one is asked of the rest.
        (DELETE, facts(fence=CONFIRMED), None),
        (DELETE, facts(fence=CHANGED), HoldReason.POLICY_UNCONFIRMED),
        (DELETE, facts(fence=UNREAD), HoldReason.POLICY_UNCONFIRMED),
        (
            DELETE,
            facts(fence=CHANGED, breaker=OPEN, limit=FULL_LIMIT, budget_wait_ns=5 * S),
            HoldReason.POLICY_UNCONFIRMED,
        ),
        (DELETE, facts(fence=CONFIRMED, breaker=OPEN), HoldReason.BREAKER_OPEN),
        (DELETE, facts(fence=CONFIRMED, limit=FULL_LIMIT), HoldReason.POLICY_LIMIT),
        (DELETE, facts(fence=CONFIRMED, breaker=FULL), HoldReason.BREAKER_TRIPPED),
        # The open breaker holds both actions, before every control but the fence.
        (DELETE, facts(breaker=OPEN, budget_wait_ns=5 * S), HoldReason.BREAKER_OPEN),
        (
            RESTART,
            facts(breaker=OPEN, min_restart_interval_ns=3600 * S, last_restart_ns=NOW),
            HoldReason.BREAKER_OPEN,
        ),
        # ... unless the action was held when the breaker was reset: it goes, uncounted.
        (DELETE, facts(breaker=replace(OPEN, released=True)), None),
        (DELETE, facts(breaker=replace(FULL, released=True)), None),
        # The guard, then the jitter, then the rollout slot (restarts only).
        (
            RESTART,
            facts(min_restart_interval_ns=3600 * S, last_restart_ns=NOW - 60 * S),
            HoldReason.RESTART_GUARD,
        ),
        (DELETE, facts(min_restart_interval_ns=3600 * S, last_restart_ns=NOW), None),
        (
            RESTART,
            facts(min_restart_interval_ns=3600 * S, last_restart_ns=NOW - 7200 * S),
            None,
        ),
        (RESTART, facts(min_restart_interval_ns=3600 * S), None),  # never restarted
        (RESTART, facts(rollout_limit=2, rollout_turn=False), HoldReason.ROLLOUT_SLOT),
        (RESTART, facts(rollout_limit=2, rollout_turn=True), None),
        (
            RESTART,
            facts(
                min_restart_interval_ns=3600 * S,
                last_restart_ns=NOW,
                rollout_limit=1,
                rollout_turn=False,
            ),
            HoldReason.RESTART_GUARD,
        ),
        # The budget, for both actions, after the restart controls.
        (DELETE, facts(budget_wait_ns=2 * S), HoldReason.BUDGET),
        (
            RESTART,
            facts(budget_wait_ns=2 * S, rollout_limit=1, rollout_turn=False),
            HoldReason.ROLLOUT_SLOT,
        ),
        (RESTART, facts(budget_wait_ns=2 * S, breaker=FULL), HoldReason.BUDGET),
        # The policy's limit, after the open breaker and before every other control.
        (DELETE, facts(limit=FULL_LIMIT), HoldReason.POLICY_LIMIT),
        (RESTART, facts(limit=FULL_LIMIT), HoldReason.POLICY_LIMIT),
        (DELETE, facts(limit=FREE_LIMIT), None),
        (DELETE, facts(limit=QUEUED_LIMIT), HoldReason.POLICY_LIMIT),
        (DELETE, facts(limit=FULL_LIMIT, breaker=OPEN), HoldReason.BREAKER_OPEN),
        (DELETE, facts(limit=FULL_LIMIT, budget_wait_ns=2 * S), HoldReason.POLICY_LIMIT),
        (
            RESTART,
            facts(limit=FULL_LIMIT, min_restart_interval_ns=3600 * S, last_restart_ns=NOW),
            HoldReason.POLICY_LIMIT,
        ),
        (DELETE, facts(limit=FREE_LIMIT, budget_wait_ns=2 * S), HoldReason.BUDGET),
        # ... a free place not recorded yet holds until it is, ahead of the later controls.
        (DELETE, facts(limit=UNRECORDED_LIMIT), HoldReason.POLICY_LIMIT_UNRECORDED),
        (
            DELETE,
            facts(limit=UNRECORDED_LIMIT, budget_wait_ns=2 * S),
            HoldReason.POLICY_LIMIT_UNRECORDED,
        ),
        (
            DELETE,
            facts(limit=replace(UNRECORDED_LIMIT, recorded=frozenset({DUE}))),
            None,
        ),
        (DELETE, facts(limit=UNRECORDED_LIMIT, breaker=OPEN), HoldReason.BREAKER_OPEN),
        # ... an occurrence the limit let go already takes no second place.
        (DELETE, facts(limit=replace(FULL_LIMIT, admitted_due=DUE)), None),
        (DELETE, facts(limit=replace(FULL_LIMIT, admitted_due=DUE - S)), HoldReason.POLICY_LIMIT),
        # Writes that are not actions are never held by it either.
        (replace(CONVERT, policy=POLICY), facts(limit=FULL_LIMIT), None),
        # The window last: full trips, full only with writes in flight waits a moment.
        (DELETE, facts(breaker=FULL), HoldReason.BREAKER_TRIPPED),
        (RESTART, facts(breaker=FULL), HoldReason.BREAKER_TRIPPED),
        (DELETE, facts(breaker=FULL_IN_FLIGHT), HoldReason.BREAKER_SETTLING),
        (DELETE, facts(breaker=replace(CLOSED, in_window=2)), None),
    ],
)
def test_which_control_holds_a_due_write(
    decision: Patch | Delete, given_facts: GuardrailFacts, reason: HoldReason | None
) -> None:
    hold = check(decision, given_facts)
    assert (None if hold is None else hold.reason) is reason
    if hold is not None:
        assert hold.held is decision
        assert hold.action is decision.action
        assert hold.due_ns == decision.due_ns
        assert hold.requeue_after_ns >= 1


def test_the_open_breaker_holds_with_actions_halted_once_per_trip() -> None:
    hold = check(DELETE, facts(breaker=OPEN))
    assert isinstance(hold, Hold)
    assert hold.requeue_after_ns == HELD_RECHECK_NS
    assert hold.until_ns is None  # until a reset
    (event,) = hold.events
    assert event.reason == catalogue.ACTIONS_HALTED
    assert event.dedupe_key == "breaker@2025-12-31T23:50:00Z"
    assert event.message.startswith("Circuit breaker open: 3 actions within 10m0s")
    assert (event.action, event.due_ns, event.dry_run) == ("delete", DUE, False)


def test_the_n_plus_first_action_trips_at_now_and_names_that_trip() -> None:
    hold = check(DELETE, facts(breaker=FULL))
    assert isinstance(hold, Hold)
    assert hold.tripped_at == "2026-01-01T00:00:00Z"
    (event,) = hold.events
    assert event.dedupe_key == "breaker@2026-01-01T00:00:00Z"
    assert "3 actions within 10m0s" in event.message


def test_a_window_full_only_with_writes_in_flight_looks_again_shortly_without_an_event() -> None:
    hold = check(DELETE, facts(breaker=FULL_IN_FLIGHT))
    assert isinstance(hold, Hold)
    assert hold.requeue_after_ns == BREAKER_SETTLE_NS
    assert hold.events == ()


def test_the_restart_guard_waits_until_last_restart_plus_interval_with_restart_deferred() -> None:
    last = NOW - 600 * S
    hold = check(RESTART, facts(min_restart_interval_ns=3600 * S, last_restart_ns=last))
    assert isinstance(hold, Hold)
    assert hold.until_ns == last + 3600 * S
    assert hold.requeue_after_ns == 3000 * S
    (event,) = hold.events
    assert event.reason == catalogue.RESTART_DEFERRED
    assert event.dedupe_key == f"deferred@{DUE}"


def test_the_jitter_delays_a_restart_by_the_uids_draw_without_an_event() -> None:
    jitter = restart_jitter_ns("u1", DUE, 3600 * S)
    assert DUE + jitter > NOW  # this draw lands after now (fixed by the UID)
    hold = check(RESTART, facts(restart_jitter_ns=3600 * S))
    assert isinstance(hold, Hold)
    assert hold.reason is HoldReason.RESTART_JITTER
    assert hold.until_ns == DUE + jitter
    assert hold.events == ()


def test_a_rollout_slot_hold_says_restart_queued_with_the_limit() -> None:
    hold = check(RESTART, facts(rollout_limit=4, rollout_turn=False))
    assert isinstance(hold, Hold)
    assert hold.until_ns is None
    (event,) = hold.events
    assert event.reason == catalogue.RESTART_QUEUED
    assert "4 restarted workloads" in event.message


def test_the_budget_hold_waits_for_the_token_with_action_throttled() -> None:
    hold = check(DELETE, facts(budget_wait_ns=1_500_000_000))
    assert isinstance(hold, Hold)
    assert hold.until_ns == NOW + 1_500_000_000
    (event,) = hold.events
    assert event.reason == catalogue.ACTION_THROTTLED
    assert "--max-deletes-per-minute" in event.message


def test_a_limit_hold_waits_for_the_instant_its_place_frees_and_names_the_limit() -> None:
    hold = check(DELETE, facts(limit=FULL_LIMIT))
    assert isinstance(hold, Hold)
    assert hold.until_ns == NOW - 300 * S + 600 * S  # the first place frees
    assert hold.requeue_after_ns == 300 * S
    assert hold.events == ()  # the policy says Limited, once; no Event per object
    assert hold.policy == POLICY
    assert hold.log == f"held by {POLICY}'s limit 2/10m"


@pytest.mark.parametrize("fence", [CHANGED, UNREAD])
def test_the_fence_holds_for_its_retry_and_says_why_without_an_event(fence: FenceFacts) -> None:
    hold = check(DELETE, facts(fence=fence))
    assert isinstance(hold, Hold)
    assert hold.requeue_after_ns == fence.retry_after_ns
    assert hold.until_ns is None  # until the views agree
    assert hold.events == ()  # the fence's metric and log say it
    assert hold.policy == POLICY
    assert hold.log == fence.unconfirmed


def test_the_state_hands_the_fence_to_the_deletion_it_was_made_for() -> None:
    state = GuardrailState(now_ns=NOW)
    assert state.facts(DELETE).fence is None
    assert state.facts(DELETE, fence=CHANGED).fence is CHANGED


@pytest.mark.parametrize(
    ("limit", "waits"),
    [
        (None, False),
        (FREE_LIMIT, False),
        (FULL_LIMIT, True),
        # A report made already, by this process or an earlier one, takes no place.
        (replace(FULL_LIMIT, reported_due=DUE), False),
        (replace(FULL_LIMIT, reported_due=DUE - S), True),
        (replace(FULL_LIMIT, reported_through=DUE), False),
        (replace(FULL_LIMIT, reported_through=DUE - S), True),
    ],
)
def test_a_dry_run_report_is_held_by_its_limit_alone_as_a_wait(
    limit: LimitFacts | None, waits: bool
) -> None:
    """A report writes nothing: the breaker, the budgets and the rollout slots do not hold
    it, only its policy's limit does, as a Wait until its place frees."""
    held = check(DRY, facts(limit=limit, breaker=OPEN, budget_wait_ns=S))
    assert (held is not None) is waits
    if held is not None:
        assert isinstance(held, Wait)
        assert (held.policy, held.due_ns, held.action) == (POLICY, DUE, Action.DELETE)
        assert held.requeue_after_ns == 300 * S
    assert check(replace(DRY, action=None), facts(limit=FULL_LIMIT)) is None


def test_the_state_hands_each_decision_its_own_policys_limit() -> None:
    state = GuardrailState(now_ns=NOW, limits={POLICY: FULL_LIMIT})
    assert state.facts(DELETE).limit is FULL_LIMIT
    assert state.facts(DRY).limit is FULL_LIMIT
    assert state.facts(replace(DELETE, policy="ClusterLifecyclePolicy/other")).limit is None
    assert state.facts(replace(DELETE, policy=None)).limit is None


def test_only_deletions_and_restarts_are_actions() -> None:
    assert acting_operation(DELETE) is Operation.DELETE
    assert acting_operation(RESTART) is Operation.RESTART
    assert acting_operation(CONVERT) is None
    assert acting_operation(SKIP) is None
    assert acting_operation(replace(RESTART, action=None)) is None


@given(
    last_ago_s=st.integers(min_value=0, max_value=7200),
    interval_s=st.integers(min_value=0, max_value=7200),
    jitter_s=st.integers(min_value=0, max_value=7200),
    uid=st.text(min_size=1, max_size=8),
)
def test_a_paced_restart_waits_exactly_for_the_later_of_guard_and_jitter(
    last_ago_s: int, interval_s: int, jitter_s: int, uid: str
) -> None:
    last = NOW - last_ago_s * S
    hold = check(
        RESTART,
        facts(
            uid=uid,
            last_restart_ns=last,
            min_restart_interval_ns=interval_s * S,
            restart_jitter_ns=jitter_s * S,
        ),
    )
    guard = last + interval_s * S if interval_s else NOW
    jittered = DUE + restart_jitter_ns(uid, DUE, jitter_s * S) if jitter_s else NOW
    run_at = max(guard, jittered, NOW)
    if run_at <= NOW:
        assert hold is None
    else:
        assert hold is not None
        assert hold.until_ns == run_at
        assert hold.requeue_after_ns == run_at - NOW
        assert hold.reason in (HoldReason.RESTART_GUARD, HoldReason.RESTART_JITTER)
        assert (hold.reason is HoldReason.RESTART_GUARD) == (guard > NOW)
