"""The per-policy aggregates of the tallies (controller/policy/tallies.py): kept as tallies
change, they say what walking every tally for every policy said, and only the policies a
change concerns become dirty."""

from __future__ import annotations

from collections import Counter

from hypothesis import given, settings
from hypothesis import strategies as st

from lifecycle_controller.controller.policy.decisions import Tally
from lifecycle_controller.controller.policy.tallies import PolicyAggregates
from lifecycle_controller.core.decision.outcomes import Action
from lifecycle_controller.core.objects.resources import ObjectKey, ResourceType
from lifecycle_controller.core.policy.model import PolicyKind, PolicyRef
from lifecycle_controller.core.policy.precedence import UnjudgedReason

CONFIGMAPS = ResourceType("", "v1", "configmaps", "ConfigMap", namespaced=True)
REFS = [PolicyRef(PolicyKind.NAMESPACED, "a", f"p{i}") for i in range(4)]
KEYS = [ObjectKey(CONFIGMAPS, "a", f"o{i}") for i in range(6)]


def _walk(
    tallies: dict[ObjectKey, Tally], ref: PolicyRef
) -> tuple[int, int, int, int, int, int, int | None, Counter[UnjudgedReason], Counter[str]]:
    """What the status writer used to compute, walking every tally (and the holds by
    reason: the first the policy gave for each object; the refusals by cause, the first the
    policy got for each object)."""
    matched = overlapped = held = protected = exempt = left_alone = 0
    best: int | None = None
    reasons: Counter[UnjudgedReason] = Counter()
    causes: Counter[str] = Counter()
    for tally in tallies.values():
        cause = next((cause for refuser, cause in tally.refused if refuser == ref), None)
        if cause is not None:
            causes[cause] += 1
        if ref in tally.decided_by:
            matched += 1
            if tally.due_ns is not None and tally.action is not None:
                best = tally.due_ns if best is None else min(best, tally.due_ns)
        elif any(holder == ref for holder, _ in tally.held_by):
            held += 1
            reasons[next(reason for holder, reason in tally.held_by if holder == ref)] += 1
        elif ref in tally.overlapped:
            overlapped += 1
        elif ref in tally.left_alone_by:
            left_alone += 1
        if ref in tally.protected_from:
            protected += 1
        if ref in tally.exempt_from:
            exempt += 1
    return matched, overlapped, held, protected, exempt, left_alone, best, reasons, causes


refs = st.lists(st.sampled_from(REFS), max_size=2, unique=True).map(tuple)
tallies = st.builds(
    Tally,
    decided_by=refs,
    overlapped=refs,
    action=st.sampled_from([None, Action.DELETE]),
    due_ns=st.one_of(st.none(), st.integers(0, 100)),
    held_by=st.lists(
        st.tuples(st.sampled_from(REFS), st.sampled_from(list(UnjudgedReason))),
        max_size=2,
    ).map(tuple),
    protected_from=refs,
    exempt_from=refs,
    refused=st.lists(
        st.tuples(st.sampled_from(REFS), st.sampled_from(["over 168h", "over 24h"])),
        max_size=2,
    ).map(tuple),
    left_alone_by=refs,
)


@settings(max_examples=200, deadline=None)
@given(steps=st.lists(st.tuples(st.sampled_from(KEYS), st.one_of(st.none(), tallies))))
def test_the_aggregates_say_what_the_walk_said(steps: list[tuple[ObjectKey, Tally | None]]) -> None:
    aggregates = PolicyAggregates()
    current: dict[ObjectKey, Tally] = {}
    for key, tally in steps:
        old = current.pop(key, None)
        if tally is not None:
            current[key] = tally
        aggregates.update(key, old, tally)
    for ref in REFS:
        aggregate = aggregates.of(ref)
        best = aggregate.next_action()
        assert _walk(current, ref) == (
            len(aggregate.matched),
            len(aggregate.overlapped),
            len(aggregate.held),
            len(aggregate.protected),
            len(aggregate.exempt),
            len(aggregate.left_alone),
            None if best is None else best[1],
            aggregate.held_by_reason,
            aggregate.refused_by_cause,
        )
        assert sum(aggregate.refused_by_cause.values()) == len(aggregate.refused)


def test_only_the_policies_a_change_concerns_become_dirty() -> None:
    aggregates = PolicyAggregates()
    first = Tally(decided_by=(REFS[0],), overlapped=(REFS[1],), action=Action.DELETE, due_ns=5)
    aggregates.update(KEYS[0], None, first)
    assert aggregates.take_dirty() == {REFS[0], REFS[1]}
    assert aggregates.take_dirty() == set()  # nothing changed since: nothing to look at
    held = Tally(
        decided_by=(),
        overlapped=(),
        held_by=((REFS[2], UnjudgedReason.CONDITION_ERROR),),
    )
    aggregates.update(KEYS[0], first, held)
    assert aggregates.take_dirty() == {REFS[0], REFS[1], REFS[2]}
    assert list(aggregates.of(REFS[2]).condition_failed) == [KEYS[0]]
    assert aggregates.of(REFS[0]).matched == {}


def test_a_hold_for_unknown_references_counts_under_its_own_reason_and_warns() -> None:
    """Held because what uses the object is not known: its own reason, and the condition's
    Warning names the object (the condition could not be judged)."""
    aggregates = PolicyAggregates()
    unknown = Tally(
        decided_by=(), overlapped=(), held_by=((REFS[0], UnjudgedReason.REFERENCES_UNKNOWN),)
    )
    namespace = Tally(
        decided_by=(), overlapped=(), held_by=((REFS[0], UnjudgedReason.NAMESPACE_UNKNOWN),)
    )
    aggregates.update(KEYS[0], None, unknown)
    aggregates.update(KEYS[1], None, namespace)
    aggregate = aggregates.of(REFS[0])
    assert aggregate.held_by_reason == {
        UnjudgedReason.REFERENCES_UNKNOWN: 1,
        UnjudgedReason.NAMESPACE_UNKNOWN: 1,
    }
    assert list(aggregate.condition_failed) == [KEYS[0]]
    aggregates.update(KEYS[0], unknown, None)
    assert aggregate.held_by_reason == {UnjudgedReason.NAMESPACE_UNKNOWN: 1}


def test_a_policy_that_leaves_an_object_alone_is_dirty_and_counts_it() -> None:
    aggregates = PolicyAggregates()
    spent = Tally(decided_by=(REFS[1],), overlapped=(), left_alone_by=(REFS[0],))
    aggregates.update(KEYS[0], None, spent)
    assert aggregates.take_dirty() == {REFS[0], REFS[1]}
    assert aggregates.of(REFS[0]).left_alone == {KEYS[0]}
    assert aggregates.of(REFS[0]).matched == {}
    aggregates.update(KEYS[0], spent, None)
    assert aggregates.of(REFS[0]).left_alone == set()
