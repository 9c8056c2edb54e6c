"""Rollout blockers read from the object a restart patch returned (SPEC §2.8)."""

from __future__ import annotations

from typing import Any

import pytest

from lifecycle_controller.controller.actions.restart import blocker_message, rollout_blockers


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
    message = blocker_message(["a", "b"])
    assert message.endswith("may not be replaced: a; b.")
