"""Rollout blockers read from the object a restart patch returned.

See docs/behaviour.md#rollout-blockers.
"""

from __future__ import annotations

from typing import Any

import pytest

from lifecycle_controller.core.decision.events import EventType, rollout_blocked
from lifecycle_controller.core.objects.rollout import restart_marker_of, rollout_blockers


@pytest.mark.parametrize(
    ("obj", "expected"),
    [
        ({"kind": "Deployment", "spec": {}}, []),
        ({"kind": "Deployment", "spec": {"paused": True}}, ["the Deployment is paused"]),
        ({"kind": "Deployment", "spec": {"paused": False}}, []),
        (
            {"kind": "DaemonSet", "spec": {"updateStrategy": {"type": "OnDelete"}}},
            ["the DaemonSet uses the OnDelete update strategy"],
        ),
        ({"kind": "DaemonSet", "spec": {"updateStrategy": {"type": "RollingUpdate"}}}, []),
        (
            {
                "kind": "StatefulSet",
                "spec": {
                    "updateStrategy": {"type": "RollingUpdate", "rollingUpdate": {"partition": 2}}
                },
            },
            ["the StatefulSet has a rolling-update partition of 2"],
        ),
        (
            {
                "kind": "StatefulSet",
                "spec": {
                    "updateStrategy": {"type": "RollingUpdate", "rollingUpdate": {"partition": 0}}
                },
            },
            [],
        ),
        (
            {"kind": "StatefulSet", "spec": {"updateStrategy": {"type": "OnDelete"}}},
            ["the StatefulSet uses the OnDelete update strategy"],
        ),
        ({"kind": "Deployment", "spec": "not-a-map"}, []),
    ],
)
def test_rollout_blockers(obj: dict[str, Any], expected: list[str]) -> None:
    assert rollout_blockers(obj) == expected


def test_blocker_message_lists_every_reason() -> None:
    event = rollout_blocked(["a", "b"])
    assert event.type is EventType.WARNING
    assert event.reason == "RolloutBlocked"
    assert event.message.endswith("may not be replaced: a; b.")


def test_restart_marker_is_read_from_the_pod_template() -> None:
    marker = "lifecycle.cezary.dev/restartedAt"
    obj = {"spec": {"template": {"metadata": {"annotations": {marker: "2026-01-01T00:00:00Z"}}}}}
    assert restart_marker_of(obj, marker) == "2026-01-01T00:00:00Z"
    assert restart_marker_of({"spec": {"template": {}}}, marker) is None
    assert restart_marker_of({"spec": "not a mapping"}, marker) is None
