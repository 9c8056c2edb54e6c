"""The conditions' ``lastTransitionTime`` in a policy's status: a valid metav1.Time, kept
while the condition's status holds, moved when it changes; the ``Spent`` condition of a
one-off policy that leaves objects alone past its time."""

from __future__ import annotations

import pytest

from lifecycle_controller.controller.policy.status import _spent, _with_transitions
from lifecycle_controller.core.policy.model import Policy, PolicyInvalid, PolicyKind, parse_policy
from lifecycle_controller.core.text.timestamps import parse_rfc3339

READY = {"type": "Ready", "status": "True", "reason": "Matching", "message": ""}


@pytest.mark.parametrize(
    ("now", "stamp"),
    [
        ("2026-12-02T10:00:00Z", "2026-12-02T10:00:00Z"),  # whole second: no "ZZ"
        ("2026-12-02T10:00:00.5Z", "2026-12-02T10:00:00Z"),
        ("2026-12-02T10:00:07.999999999Z", "2026-12-02T10:00:07Z"),
    ],
)
def test_a_new_condition_is_stamped_now_in_whole_seconds(now: str, stamp: str) -> None:
    status = _with_transitions({"conditions": [READY]}, {}, parse_rfc3339(now))
    assert status["conditions"][0]["lastTransitionTime"] == stamp


def test_the_stamp_holds_while_the_status_holds_and_moves_when_it_changes() -> None:
    earlier = {"conditions": [{**READY, "lastTransitionTime": "2026-12-01T00:00:00Z"}]}
    now = parse_rfc3339("2026-12-02T10:00:00Z")
    kept = _with_transitions({"conditions": [READY]}, earlier, now)
    assert kept["conditions"][0]["lastTransitionTime"] == "2026-12-01T00:00:00Z"
    changed = _with_transitions({"conditions": [{**READY, "status": "False"}]}, earlier, now)
    assert changed["conditions"][0]["lastTransitionTime"] == "2026-12-02T10:00:00Z"


def _policy(lifecycle: dict[str, str], resources: str = "configmaps") -> Policy | PolicyInvalid:
    spec = {"resources": [resources], "lifecycle": lifecycle}
    return parse_policy(PolicyKind.NAMESPACED, "team-a", "sprint", 3, spec)


SPRINT = {"delete-at": "2026-10-04T00:00:00Z"}
ONCE = {"restart-at": "2026-10-04T00:00:00Z"}


@pytest.mark.parametrize(
    ("lifecycle", "left_alone", "matched", "reason", "message"),
    [
        (SPRINT, 2, 1, "DeleteAtPassed",
         "it leaves alone 2 objects it matches, created at or after its delete-at "
         "2026-10-04T00:00:00Z: the next policy (or their own annotations) decides for them"),
        (SPRINT, 1, 0, "DeleteAtPassed",
         "it leaves alone 1 object it matches, created at or after its delete-at "
         "2026-10-04T00:00:00Z: the next policy (or its own annotations) decides for it; "
         "nothing is left for it to do: delete it, or move its delete-at to cover it"),
        (ONCE, 3, 0, "RestartAtDone",
         "it leaves alone 3 objects it matches, created or restarted at or after its "
         "restart-at 2026-10-04T00:00:00Z: the next policy (or their own annotations) decides "
         "for them; nothing is left for it to do: delete it, or move its restart-at to cover "
         "them"),
    ],
)  # fmt: skip
def test_a_spent_one_off_policy_says_so_in_its_conditions(
    lifecycle: dict[str, str], left_alone: int, matched: int, reason: str, message: str
) -> None:
    resources = "deployments.apps" if "restart-at" in lifecycle else "configmaps"
    (condition,) = _spent(_policy(lifecycle, resources), left_alone, matched)
    assert condition == {
        "type": "Spent",
        "status": "True",
        "reason": reason,
        "message": message,
        "observedGeneration": 3,
    }


def test_no_spent_condition_while_it_leaves_nothing_alone() -> None:
    assert _spent(_policy(SPRINT), 0, 4) == []
    broken = _policy({"delete-at": "soon"})
    assert isinstance(broken, PolicyInvalid)
    assert _spent(broken, 1, 0) == []
