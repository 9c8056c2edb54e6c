"""What the tools' texts say of the safety rules: a hold, a protection, both families'
deciders, a deletion's propagation and a policy that leaves an object alone past its time, in
``explain``'s lines, ``plan``'s DETAIL and ``policies try``'s totals."""

from __future__ import annotations

import pytest

from lifecycle_controller.core.policy.limit import PolicyLimit
from lifecycle_controller.tools.explain_policies import PolicyReport, policy_lines, why_no_policy
from lifecycle_controller.tools.policies import Totals, _count, limit_spread, totals_line
from lifecycle_controller.tools.report import Row, _policy_words

HELD = "held: LifecyclePolicy/team-a/keep is invalid"


def report(**fields: object) -> PolicyReport:
    base: dict[str, object] = {
        "decided_by": None,
        "based_on": None,
        "overlapped": [],
        "exempt": False,
        "own_action": False,
    }
    return PolicyReport(**{**base, **fields})  # type: ignore[arg-type]


def test_explain_names_the_hold_and_the_protection() -> None:
    lines = policy_lines(report(held=HELD, protected=["ClusterLifecyclePolicy/all"]))
    assert lines[0].endswith(f"none acts: {HELD}")
    assert lines[-1].endswith("ClusterLifecyclePolicy/all would match, but the object is protected")
    assert why_no_policy(report(held=HELD)) == f"; {HELD}"


def test_explain_names_both_families_and_the_propagation() -> None:
    lines = policy_lines(
        report(
            decided_by="ClusterLifecyclePolicy/previews",
            based_on="based on ClusterLifecyclePolicy/previews: delete-after 48h",
            also_decided_by=["LifecyclePolicy/team-a/nightly"],
            propagation="Orphan",
        )
    )
    assert "ClusterLifecyclePolicy/previews decides" in lines[0]
    assert any("Orphan (its deletionPropagation)" in line for line in lines)
    assert any(
        "LifecyclePolicy/team-a/nightly decides its other action family" in line for line in lines
    )


def test_plan_detail_says_held_protected_and_propagation() -> None:
    row = Row(
        api_version="v1",
        kind="ConfigMap",
        namespace="team-a",
        name="kept",
        action="",
        next="",
        summary="",
        steps=[],
        problems=[],
        upcoming=[],
        dry_run=False,
        held=HELD,
        protected=["ClusterLifecyclePolicy/all"],
        propagation="Foreground",
    )
    words = _policy_words(row)
    assert words.startswith("deletes with propagation Foreground; " + HELD)
    assert words.endswith("protected from ClusterLifecyclePolicy/all")


SPENT = {
    "policy": "LifecyclePolicy/team-a/sprint",
    "why": "created 2026-10-04T01:00:00Z, at or after its delete-at 2026-10-04T00:00:00Z",
}
SPENT_WORDS = f"left alone by {SPENT['policy']}: {SPENT['why']}"


def test_explain_says_which_policy_left_it_alone_and_who_decides() -> None:
    decided = policy_lines(
        report(
            decided_by="ClusterLifecyclePolicy/previews",
            based_on="based on ClusterLifecyclePolicy/previews: delete-after 72h",
            left_alone=[SPENT],
        )
    )
    assert "ClusterLifecyclePolicy/previews decides" in decided[0]
    assert decided[-1] == (
        f"Left alone:   by {SPENT['policy']}: {SPENT['why']} (the next one decides)"
    )
    alone = report(left_alone=[SPENT])
    lines = policy_lines(alone)
    assert lines[0].endswith("none decides: the policies that match leave it alone")
    assert why_no_policy(alone) == f"; {SPENT_WORDS}"


def _new_row() -> Row:
    return Row(
        api_version="v1",
        kind="ConfigMap",
        namespace="team-a",
        name="new",
        action="delete",
        next="2026-10-07T01:00:00Z",
        summary="",
        steps=[],
        problems=[],
        upcoming=[],
        dry_run=False,
        policy="ClusterLifecyclePolicy/previews",
        left_alone=[SPENT],
    )


def test_plan_detail_says_which_policy_left_it_alone() -> None:
    assert _policy_words(_new_row()) == SPENT_WORDS


def test_try_counts_the_objects_a_tried_policy_leaves_alone() -> None:
    totals = Totals(one_off="delete-at 2026-10-04T00:00:00Z")
    _count(totals, _new_row(), SPENT["policy"], 0)
    assert (totals.matched, totals.spent, totals.decides, totals.other_policy) == (1, 1, 0, 0)
    assert totals_line(SPENT["policy"], totals).endswith(
        "; left alone: 1 created at or after its delete-at 2026-10-04T00:00:00Z"
    )
    restarts = Totals(matched=2, spent=2, one_off="restart-at 2026-10-04T00:00:00Z")
    assert totals_line("LifecyclePolicy/team-a/once", restarts).endswith(
        "; left alone: 2 created or restarted at or after its restart-at 2026-10-04T00:00:00Z"
    )


@pytest.mark.parametrize(
    ("restarts", "spread"),
    [(0, ""), (100, ""), (101, "1h0m0s"), (400, "3h0m0s"), (401, "4h0m0s")],
)
def test_a_fleet_restart_past_its_limit_says_how_long_it_is_spread(
    restarts: int, spread: str
) -> None:
    """A nightly restart-cron over 400 Deployments under 100/1h restarts them over three
    hours after each occurrence: ``policies try`` says so before it is applied."""
    limit = PolicyLimit(100, 3600 * 10**9, "1h")
    assert limit_spread(restarts, limit) == spread
    totals = Totals(restarts=restarts, limit="100/1h", limit_spread=spread)
    line = totals_line("LifecyclePolicy/team-a/nightly", totals)
    said = f"each occurrence restarts {restarts} workloads; limit 100/1h spreads them over"
    assert (said in line) is bool(spread)
