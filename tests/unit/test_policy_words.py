"""What the tools' texts say of the safety rules: a hold, a protection, both families'
deciders and a deletion's propagation, in ``explain``'s lines and ``plan``'s DETAIL."""

from __future__ import annotations

from lifecycle_controller.tools.explain_policies import PolicyReport, policy_lines, why_no_policy
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
