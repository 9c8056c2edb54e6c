"""Counting actions from the API server's audit log and from Events; the figures' record.

An action is *executed* when the audit log holds a successful (2xx) request of the
controller's own user for it; *duplicated* when one object has more than one for one
occurrence; *missed* when a due action has none and the object is still there at the end.
A delete whose request was in flight when the API server was SIGKILLed can be committed
without an audit line: such an object is gone without a logged delete and counts as
executed (``unaudited``), never as missed.
"""

from __future__ import annotations

import json
import os
import time
from collections import Counter
from collections.abc import Iterable
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

from lifecycle_controller.devcluster import ControlPlane
from lifecycle_controller.kube import EVENTS, KubeClient
from tests.integration.keys import CONTROLLER

#: The controller's own identity in the fault tests (cluster-admin through system:masters),
#: so its requests are told apart from the test's in the audit log.
CONTROLLER_USER = "lifecycle-controller-faults"


def controller_kubeconfig(control_plane: ControlPlane, user: str = CONTROLLER_USER) -> str:
    return str(control_plane.user_kubeconfig(user, groups=("system:masters",)))


def audited(
    control_plane: ControlPlane,
    *,
    user: str = CONTROLLER_USER,
    verb: str,
    resource: str,
    namespace: str,
    subresource: str | None = None,
) -> Counter[str]:
    """Successful requests of ``user`` per object name (``verb`` on ``resource``)."""
    counts: Counter[str] = Counter()
    for event in control_plane.audit_events():
        ref = event.get("objectRef") or {}
        code = (event.get("responseStatus") or {}).get("code", 0)
        if (
            event.get("stage") == "ResponseComplete"
            and (event.get("user") or {}).get("username") == user
            and event.get("verb") == verb
            and ref.get("resource") == resource
            and ref.get("namespace") == namespace
            and ref.get("subresource") == subresource
            and ref.get("name")
            and 200 <= int(code) < 300
        ):
            counts[str(ref["name"])] += 1
    return counts


def requests_of(control_plane: ControlPlane, user: str = CONTROLLER_USER) -> list[dict[str, Any]]:
    """Every audited request of ``user`` (any verb, any outcome)."""
    return [
        event
        for event in control_plane.audit_events()
        if event.get("stage") == "ResponseComplete"
        and (event.get("user") or {}).get("username") == user
    ]


async def event_reasons(kube: KubeClient, namespace: str) -> dict[str, Counter[str]]:
    """reason -> (object name -> how many occurrences) of the controller's Events."""
    listing = await kube.request("GET", EVENTS.collection_path(namespace))
    by_reason: dict[str, Counter[str]] = {}
    for item in listing["items"]:
        if item.get("reportingController") != CONTROLLER:
            continue
        name = str((item.get("regarding") or {}).get("name", ""))
        count = int((item.get("series") or {}).get("count", 1))
        by_reason.setdefault(str(item.get("reason")), Counter())[name] += count
    return by_reason


@dataclass
class Tally:
    """One scenario's figures: expected, executed, duplicated, missed (docs/reliability.md)."""

    scenario: str
    expected: int
    executed: int = 0
    duplicated: int = 0
    missed: int = 0
    events: int = 0
    unaudited: int = 0
    extra: dict[str, Any] = field(default_factory=dict)

    @classmethod
    def of(
        cls,
        scenario: str,
        expected: Iterable[str],
        audited: Counter[str],
        *,
        gone: Iterable[str] = (),
        events: Counter[str] | None = None,
    ) -> Tally:
        """``audited``: 2xx writes per name; ``gone``: names whose action the cluster's state
        shows done (deleted, or restarted exactly once), counted executed without a 2xx audit
        line (a write committed while its client was killed is audited as 504)."""
        names = set(expected)
        gone_names = set(gone)
        executed = {name for name in names if audited[name] >= 1}
        unaudited = {name for name in names - executed if name in gone_names}
        return cls(
            scenario=scenario,
            expected=len(names),
            executed=len(executed) + len(unaudited),
            duplicated=sum(1 for name in names if audited[name] > 1),
            missed=len(names - executed - unaudited),
            events=sum(1 for name in names if (events or Counter())[name] >= 1),
            unaudited=len(unaudited),
        )

    def record(self) -> None:
        """Print the figures and append them to ``$LIFECYCLE_FAULTS_REPORT`` (JSON lines)."""
        line = json.dumps({"at": time.time(), **asdict(self)}, sort_keys=True)
        print(f"[faults] {line}")
        target = os.environ.get("LIFECYCLE_FAULTS_REPORT")
        if target:
            with Path(target).open("a") as out:
                out.write(line + "\n")

    def assert_exactly_once(self) -> None:
        assert (self.duplicated, self.missed) == (0, 0), self
        assert self.executed == self.expected, self
