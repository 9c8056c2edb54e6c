"""A status that already shows the writer's report is not written again (a restarted
controller or a new leader writes nothing while nothing changed)."""

from __future__ import annotations

from typing import Any

from lifecycle_controller.controller.policy.status import _shown

REPORT: dict[str, Any] = {
    "observedGeneration": 2,
    "matched": 3,
    "nextAction": None,
    "conditions": [{"type": "Ready", "status": "True", "reason": "Active", "message": "m"}],
    "actions": {"held": 0},
}


def test_the_same_status_with_its_transition_times_and_audit_counts_is_shown() -> None:
    status = {
        **REPORT,
        "conditions": [{**REPORT["conditions"][0], "lastTransitionTime": "2026-01-01T00:00:00Z"}],
        "actions": {"held": 0, "deleted": 7},
        "lastActions": [{"name": "x"}],
    }
    assert _shown(status, REPORT)


def test_a_difference_is_not_shown() -> None:
    assert not _shown({**REPORT, "matched": 4}, REPORT)
    assert not _shown({**REPORT, "actions": {"held": 1}}, REPORT)
    assert not _shown({k: v for k, v in REPORT.items() if k != "conditions"}, REPORT)
    moved = [{**REPORT["conditions"][0], "status": "False"}]
    assert not _shown({**REPORT, "conditions": moved}, REPORT)
