"""A policy's ``limit`` (core/policy/limit.py) and its audit merge (core/policy/audit.py).

docs/policies.md#limit and #audit; docs/reliability.md#policy-audit. Time is injected.
"""

from __future__ import annotations

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from lifecycle_controller.core.decision.events import DELETION_FAILURE
from lifecycle_controller.core.decision.guardrails import GuardrailFacts, HoldReason, check
from lifecycle_controller.core.decision.outcomes import Action, Delete
from lifecycle_controller.core.policy.audit import KEEP, AuditEntry, merge, seed_instants
from lifecycle_controller.core.policy.limit import (
    LimitWindow,
    PolicyLimit,
    limited_since,
    parse_limit,
    parse_limit_flag,
)
from lifecycle_controller.core.policy.model import Policy, PolicyInvalid, PolicyKind, parse_policy
from lifecycle_controller.core.text.timestamps import format_rfc3339_seconds

S = 1_000_000_000
T0 = 1_800_000_000 * S
POLICY = "LifecyclePolicy/team/capped"


def _limit(actions: int, seconds: int) -> PolicyLimit:
    return PolicyLimit(actions, seconds * S, f"{seconds}s")


# ------------------------------------------------------------------ parsing


@pytest.mark.parametrize(
    ("raw", "expected", "problem"),
    [
        (None, None, None),
        ({"actions": 50, "window": "1h"}, PolicyLimit(50, 3600 * S, "1h"), None),
        ({"actions": 1, "window": "20s"}, PolicyLimit(1, 20 * S, "20s"), None),
        ({"actions": 0, "window": "1h"}, None, "spec.limit.actions: must be an integer"),
        ({"actions": True, "window": "1h"}, None, "spec.limit.actions: must be an integer"),
        ({"actions": "5", "window": "1h"}, None, "spec.limit.actions: must be an integer"),
        ({"actions": 5}, None, "spec.limit.window: must be a duration string"),
        ({"actions": 5, "window": "0s"}, None, "spec.limit.window: duration must be positive"),
        ({"actions": 5, "window": "1.5h"}, None, "spec.limit.window: invalid duration"),
        ({"actions": 5, "window": "1h", "burst": 2}, None, "spec.limit.burst: unknown field"),
        ("50/1h", None, "spec.limit: must be an object"),
    ],
)
def test_parse_limit(raw: object, expected: PolicyLimit | None, problem: str | None) -> None:
    problems: list[str] = []
    assert parse_limit(raw, problems) == expected
    if problem is None:
        assert problems == []
    else:
        assert any(p.startswith(problem) for p in problems), problems


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("", None),
        ("0", None),
        ("0/1h", None),
        ("100/1h", PolicyLimit(100, 3600 * S, "1h")),
        (" 5/30m ", PolicyLimit(5, 1800 * S, "30m")),
    ],
)
def test_parse_limit_flag(text: str, expected: PolicyLimit | None) -> None:
    assert parse_limit_flag(text) == expected


@pytest.mark.parametrize(
    ("text", "why"),
    [
        ("100", "expected ACTIONS/WINDOW"),
        ("x/1h", "actions must be an integer"),
        ("100/1x", "invalid duration"),
        ("-1/1h", "must be an integer of at least 1"),
        ("100/0s", "must be positive"),
    ],
)
def test_parse_limit_flag_refuses(text: str, why: str) -> None:
    with pytest.raises(ValueError, match=why):
        parse_limit_flag(text)


def test_a_policy_with_a_bad_limit_is_invalid_and_a_good_one_carries_it() -> None:
    spec = {"resources": ["configmaps"], "lifecycle": {"delete-after": "1h"}}
    good = parse_policy(
        PolicyKind.NAMESPACED, "a", "p", 1, {**spec, "limit": {"actions": 2, "window": "20s"}}
    )
    assert isinstance(good, Policy)
    assert good.limit == PolicyLimit(2, 20 * S, "20s")
    bad = parse_policy(PolicyKind.NAMESPACED, "a", "p", 1, {**spec, "limit": {"actions": 0}})
    assert isinstance(bad, PolicyInvalid)
    assert any(p.startswith("spec.limit.actions") for p in bad.problems)


# ------------------------------------------------------------------ the window


def _delete(key: str, due_ns: int) -> Delete:
    return Delete(
        uid=key,
        resource_version="1",
        failure=DELETION_FAILURE,
        action=Action.DELETE,
        policy=POLICY,
        due_ns=due_ns,
    )


def _ask(window: LimitWindow, key: str, due_ns: int, now_ns: int) -> int | None:
    """One pass as the controller makes it: the window's facts, the pure check, then the
    place taken (None: it went) or the line joined (the instant its place frees)."""
    facts = window.facts(key, key, now_ns, policy=POLICY)
    hold = check(_delete(key, due_ns), GuardrailFacts(now_ns=now_ns, limit=facts))
    if hold is None:
        window.admit(key, now_ns)
        return None
    assert hold.reason is HoldReason.POLICY_LIMIT
    window.join(key, key, due_ns, now_ns)
    assert hold.until_ns is not None
    assert hold.requeue_after_ns == hold.until_ns - now_ns
    return hold.until_ns


def test_two_per_window_over_five_due_lets_two_go_and_holds_three_in_due_order() -> None:
    window = LimitWindow(_limit(2, 20))
    due = {f"o{i}": T0 - (5 - i) * S for i in range(5)}  # o0 is the earliest due
    now = T0
    went = [
        key for key in ["o4", "o2", "o0", "o3", "o1"] if _ask(window, key, due[key], now) is None
    ]
    # o4 and o2 came first while nothing waited ahead of them; the rest wait in due order.
    assert went == ["o4", "o2"]
    assert window.held == 3
    assert window.used(now) == 2
    assert window.held_since == now  # the limit began holding
    assert window.held_until() == now + 20 * S
    # When the window frees its places, the earliest due go first, whoever asks first.
    later = now + 20 * S + 1
    assert _ask(window, "o3", due["o3"], later) == later + 20 * S  # two ahead of it
    assert _ask(window, "o1", due["o1"], later) is None
    assert _ask(window, "o0", due["o0"], later) is None
    assert _ask(window, "o3", due["o3"], later) == later + 20 * S
    assert window.first_waiting() == "o3"
    assert window.leave("o3")
    assert window.held_since is None  # nobody waits: the hold is over


def test_a_held_action_is_requeued_for_the_instant_its_own_place_frees() -> None:
    """A window turn wakes the waiters it can serve: the first waiter is woken when the
    first place frees, the second when the second does, and one further back when its own
    place frees, a window after the place it waits behind is taken (not all at once)."""
    window = LimitWindow(_limit(3, 60))
    for second in (0, 10, 20):
        window.admit(f"a{second}", T0 + second * S)
    now = T0 + 30 * S
    turns = [_ask(window, key, T0 + i, now) for i, key in enumerate("bcdefgh")]
    assert turns == [
        T0 + 60 * S,  # b: the first place frees
        T0 + 70 * S,  # c: the second
        T0 + 80 * S,  # d: the third
        T0 + 120 * S,  # e: b's place, a window after b takes it
        T0 + 130 * S,
        T0 + 140 * S,
        T0 + 180 * S,
    ]


def test_the_window_is_seeded_and_an_object_leaving_the_line_waits_no_more() -> None:
    window = LimitWindow(_limit(2, 60))
    window.seed([T0 - 100 * S, T0 - 30 * S, T0 - 10 * S])  # the oldest is out of the window
    assert window.used(T0) == 2
    assert _ask(window, "x", T0, T0) == T0 + 30 * S
    assert window.leave("x")
    assert not window.leave("x")
    assert window.held == 0
    assert window.first_waiting() is None


def test_a_lowered_limit_waits_for_the_window_to_drop_below_it() -> None:
    """Seeded with more actions than the limit allows (it was lowered): the first place
    frees when enough of them have left the window."""
    window = LimitWindow(_limit(1, 60))
    window.seed([T0 - 30 * S, T0 - 20 * S, T0 - 10 * S])
    assert _ask(window, "x", T0, T0) == T0 + 50 * S  # the newest leaves the window then


def test_a_place_given_back_frees_it_for_the_first_waiting() -> None:
    """An action let go whose write failed gives its place back: the earliest due of those
    waiting may go in its stead."""
    window = LimitWindow(_limit(1, 3600))
    assert _ask(window, "failed", T0, T0) is None
    assert _ask(window, "late", T0 + 2 * S, T0 + S) is not None
    assert _ask(window, "early", T0 + S, T0 + S) is not None
    assert window.first_waiting() == "early"
    assert window.room(T0 + S) is False
    assert window.give_back(T0)
    assert not window.give_back(T0)  # given back once
    assert window.used(T0 + S) == 0
    assert window.room(T0 + S)
    assert _ask(window, "late", T0 + 2 * S, T0 + S) is not None  # one place: the earliest due
    assert _ask(window, "early", T0 + S, T0 + S) is None


def test_an_edit_empties_the_line() -> None:
    window = LimitWindow(_limit(1, 60), generation=1)
    _ask(window, "a", T0, T0)
    _ask(window, "b", T0, T0)
    assert window.empty_line() == ["b"]
    assert (window.held, window.held_since, window.used(T0)) == (0, T0, 1)  # still holding


@settings(max_examples=200, deadline=None)
@given(
    actions=st.integers(1, 5),
    window_s=st.integers(1, 100),
    steps=st.lists(
        st.tuples(st.integers(0, 9), st.integers(0, 30), st.integers(0, 50)), max_size=60
    ),
)
def test_never_more_than_the_limit_in_any_window(
    actions: int, window_s: int, steps: list[tuple[int, int, int]]
) -> None:
    """Whatever asks when, no window of the limit's length holds more admitted actions than
    the limit, and a held action is told to look again at a later instant."""
    window = LimitWindow(_limit(actions, window_s))
    now = T0
    admitted: list[int] = []
    for key, advance, due in steps:
        now += advance * S
        until = _ask(window, f"k{key}", T0 + due * S, now)
        if until is None:
            admitted.append(now)
        else:
            assert until > now
        inside = [t for t in admitted if now - window_s * S < t <= now]
        assert len(inside) <= actions


@settings(max_examples=200, deadline=None)
@given(
    actions=st.integers(1, 4),
    stamps=st.lists(st.integers(0, 59), max_size=6),
    line=st.lists(st.tuples(st.integers(0, 5), st.integers(0, 20)), max_size=12),
    mine=st.tuples(st.integers(0, 5), st.integers(0, 20)),
)
def test_the_rank_is_the_number_of_waiters_ahead(
    actions: int,
    stamps: list[int],
    line: list[tuple[int, int]],
    mine: tuple[int, int],
) -> None:
    """The O(log n) place in the line is what a walk of the whole line counts, and the
    object goes exactly when fewer wait ahead of it than places are free."""
    window = LimitWindow(_limit(actions, 60))
    window.seed(T0 + s * S for s in stamps)
    for due, number in line:
        window.join(f"k{number:02}", f"k{number:02}", T0 + due * S, T0)
    key = f"k{mine[1]:02}"
    due = T0 + mine[0] * S
    now = T0 + 59 * S
    facts = window.facts(key, key, now, policy=POLICY)
    others = [
        entry
        for entry in facts.line
        if entry[1] != key  # its own old place does not count
    ]
    ahead = sum(1 for entry in others if entry < (due, key))
    assert facts.rank(due) == ahead
    free = actions - len(facts.stamps)
    assert (facts.turn(due) is None) == (ahead < free)


# ------------------------------------------------------------------ the audit


def _entry(uid: str, at: int, *, action: str = "delete", dry_run: bool = False) -> AuditEntry:
    return AuditEntry(
        at_ns=T0 + at * S,
        action=action,
        kind="ConfigMap",
        namespace="a",
        name=uid,
        uid=uid,
        dry_run=dry_run,
        due_ns=T0 + at * S - S,
    )


def test_merge_adds_counts_and_keeps_the_newest_first() -> None:
    status = {"actions": {"deleted": 3, "restarted": 1, "dryRun": 0, "held": 4}}
    actions, last, added = merge(
        status, [_entry("u1", 1), _entry("u2", 2, dry_run=True), _entry("u3", 3, action="restart")]
    )
    assert actions == {"deleted": 4, "restarted": 2, "dryRun": 1}
    assert [e["uid"] for e in last] == ["u3", "u2", "u1"]
    assert added == 3
    assert last[0]["at"] == format_rfc3339_seconds(T0 + 3 * S)


def test_merging_the_same_entries_again_counts_nothing_twice() -> None:
    pending = [_entry("u1", 1), _entry("u2", 2)]
    actions, last, _ = merge({}, pending)
    again, last_again, added = merge({"actions": actions, "lastActions": last}, pending)
    assert added == 0
    assert again == actions
    assert last_again == last


@settings(max_examples=100, deadline=None)
@given(
    batches=st.lists(
        st.lists(st.tuples(st.integers(0, 20), st.integers(0, 1000)), max_size=10), max_size=8
    ),
    replays=st.lists(st.integers(0, 7), max_size=8),
)
def test_replayed_batches_count_each_occurrence_once(
    batches: list[list[tuple[int, int]]], replays: list[int]
) -> None:
    """However often a batch is merged again (a retried patch, a new leader reporting what
    its predecessor did), the counts are the distinct occurrences merged, while they fit."""
    status: dict[str, object] = {}
    seen: set[str] = set()
    order = list(range(len(batches))) + [r for r in replays if r < len(batches)]
    for index in order:
        entries = [_entry(f"u{uid}", at) for uid, at in batches[index]]
        actions, last, _ = merge(status, entries)
        status = {"actions": actions, "lastActions": last}
        seen |= {e.occurrence for e in entries}
        assert len(last) <= KEEP
    if len(seen) <= KEEP:
        assert status.get("actions", {"deleted": 0})["deleted"] == len(seen)  # type: ignore[index]


def test_seed_instants_reads_the_entries_times() -> None:
    _, last, _ = merge({}, [_entry("u1", 1), _entry("u2", 2)])
    assert sorted(seed_instants({"lastActions": [*last, {"at": "garbage"}, 7]})) == [
        T0 + S,
        T0 + 2 * S,
    ]


@pytest.mark.parametrize(
    ("status", "since"),
    [
        ({}, None),
        ({"conditions": "garbage"}, None),
        ({"conditions": [7, {"type": "Ready", "status": "True"}]}, None),
        (
            {"conditions": [{"type": "Limited", "status": "True", "lastTransitionTime": "x"}]},
            None,
        ),
        (
            {
                "conditions": [
                    {
                        "type": "Limited",
                        "status": "False",
                        "lastTransitionTime": format_rfc3339_seconds(T0),
                    }
                ]
            },
            None,
        ),
        (
            {
                "conditions": [
                    {
                        "type": "Limited",
                        "status": "True",
                        "lastTransitionTime": format_rfc3339_seconds(T0),
                    }
                ]
            },
            T0,
        ),
    ],
)
def test_limited_since_reads_the_condition(status: dict[str, object], since: int | None) -> None:
    assert limited_since(status) == since
