"""The conditions' ``lastTransitionTime`` in a policy's status: a valid metav1.Time, kept
while the condition's status holds, moved when it changes."""

from __future__ import annotations

import pytest

from lifecycle_controller.controller.policy_status import _with_transitions
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
