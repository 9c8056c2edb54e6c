"""How far a policy's dry-run reports go (core/policy/audit.py: ``actions.dryRunThrough``).

docs/reliability.md#policy-audit. The instant moves to the newest due time reported, never
past an occurrence due and not reported yet, and never back; an absent or unreadable one
says nothing is known.
"""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st

from lifecycle_controller.core.policy.audit import THROUGH, next_through, reported_through

S = 1_000_000_000
T0 = 1_800_000_000 * S


@pytest.mark.parametrize(
    ("status", "expected"),
    [
        ({}, None),
        ({"actions": None}, None),
        ({"actions": {"dryRun": 3}}, None),
        ({"actions": {THROUGH: 7}}, None),
        ({"actions": {THROUGH: "not a time"}}, None),
        ({"actions": {THROUGH: "2027-01-15T08:00:00.5Z"}}, T0 + S // 2),
    ],
)
def test_reported_through_reads_the_status(status: dict[str, object], expected: int | None) -> None:
    assert reported_through(status) == expected


@pytest.mark.parametrize(
    ("written", "newest", "unreported", "expected"),
    [
        (None, None, [], None),  # nothing reported: nothing to say
        (None, T0, [], T0),  # the first reports
        (T0 - S, T0, [], T0),
        (T0, T0, [], None),  # said already
        (T0 + S, T0, [], None),  # never back
        (None, T0 + 5 * S, [T0 + 2 * S], T0 + 2 * S - 1),  # one held: stays before it
        (None, T0 + 5 * S, [T0 + 2 * S, T0 + S], T0 + S - 1),  # the earliest held
        (None, T0, [T0 + 3 * S], T0),  # held ones due after the newest report: no bound
        (T0 + S, T0 + 5 * S, [T0 + S], None),  # the bound is behind what is shown
    ],
)
def test_next_through(
    written: int | None, newest: int | None, unreported: list[int], expected: int | None
) -> None:
    assert next_through(written=written, newest=newest, unreported=unreported) == expected


@given(
    written=st.one_of(st.none(), st.integers(0, 100)),
    newest=st.one_of(st.none(), st.integers(0, 100)),
    unreported=st.lists(st.integers(0, 100), max_size=5),
)
def test_the_instant_covers_no_unreported_occurrence_and_only_moves_forward(
    written: int | None, newest: int | None, unreported: list[int]
) -> None:
    through = next_through(written=written, newest=newest, unreported=unreported)
    if through is None:
        return
    assert newest is not None
    assert through <= newest
    assert all(through < due for due in unreported)
    assert written is None or through > written
