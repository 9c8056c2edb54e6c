"""A policy's ``limit`` (core/policy/limit.py) and its audit merge (core/policy/audit.py).

docs/policies.md#limit and #audit; docs/reliability.md#policy-audit. Time is injected.
"""

from __future__ import annotations

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from lifecycle_controller.core.policy.audit import KEEP, AuditEntry, merge, seed_instants
from lifecycle_controller.core.policy.limit import (
    LimitWindow,
    PolicyLimit,
    parse_limit,
    parse_limit_flag,
)
from lifecycle_controller.core.policy.model import Policy, PolicyInvalid, PolicyKind, parse_policy
from lifecycle_controller.core.text.timestamps import format_rfc3339_seconds

S = 1_000_000_000
T0 = 1_800_000_000 * S


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


def test_two_per_window_over_five_due_lets_two_go_and_holds_three_in_due_order() -> None:
    window = LimitWindow(_limit(2, 20))
    due = {f"o{i}": T0 - (5 - i) * S for i in range(5)}  # o0 is the earliest due
    now = T0
    verdicts = {}
    for key in ["o4", "o2", "o0", "o3", "o1"]:  # looked at in any order
        verdict = window.check(key, due[key], now)
        verdicts[key] = verdict
        if verdict.go:
            window.admit(key, now)
    # o4 and o2 came first while nothing waited ahead of them; o0 was next in due order.
    assert [k for k, v in verdicts.items() if v.go] == ["o4", "o2"]
    assert window.held == 3
    assert window.used(now) == 2
    assert window.held_until() == now + 20 * S
    # When the window frees its places, the earliest due go first, whoever asks first.
    later = now + 20 * S + 1
    first = window.check("o0", due["o0"], later)
    second = window.check("o1", due["o1"], later)
    third = window.check("o3", due["o3"], later)
    assert first.go
    assert second.go
    assert not third.go
    window.admit("o0", later)
    window.admit("o1", later)
    held = window.check("o3", due["o3"], later)
    assert not held.go
    assert held.until_ns == later + 20 * S


def test_a_held_action_is_requeued_at_the_instant_its_place_frees() -> None:
    window = LimitWindow(_limit(3, 60))
    for second in (0, 10, 20):
        window.admit(f"a{second}", T0 + second * S)
    now = T0 + 30 * S
    assert window.check("b", T0, now).until_ns == T0 + 60 * S  # the first place frees
    assert window.check("c", T0 + 1, now).until_ns == T0 + 70 * S  # the second
    assert window.check("d", T0 + 2, now).until_ns == T0 + 80 * S  # the third
    assert window.check("e", T0 + 3, now).until_ns == T0 + 80 * S  # beyond: looks again then


def test_the_window_is_seeded_and_a_forgotten_object_waits_no_more() -> None:
    window = LimitWindow(_limit(2, 60))
    window.seed([T0 - 100 * S, T0 - 30 * S, T0 - 10 * S])  # the oldest is out of the window
    assert window.used(T0) == 2
    assert not window.check("x", T0, T0).go
    assert window.forget("x")
    assert not window.forget("x")
    assert window.held == 0


def test_a_place_given_back_frees_it_for_the_first_waiting() -> None:
    """An action let go whose write failed gives its place back: the earliest due of those
    waiting may go in its stead."""
    window = LimitWindow(_limit(1, 3600))
    assert window.check("failed", T0, T0).go
    window.admit("failed", T0)
    assert not window.check("late", T0 + 2 * S, T0 + S).go
    assert not window.check("early", T0 + S, T0 + S).go
    assert window.first_waiting() == "early"
    assert window.give_back(T0)
    assert not window.give_back(T0)  # given back once
    assert window.used(T0 + S) == 0
    assert window.check("early", T0 + S, T0 + S).go
    assert not window.check("late", T0 + 2 * S, T0 + S).go  # one place: the earliest due


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
        verdict = window.check(key, T0 + due * S, now)
        if verdict.go:
            window.admit(key, now)
            admitted.append(now)
        else:
            assert verdict.until_ns is not None
            assert verdict.until_ns > now
        inside = [t for t in admitted if now - window_s * S < t <= now]
        assert len(inside) <= actions


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
