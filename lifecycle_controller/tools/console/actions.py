"""The console's last actions: what the controller did and reported, newest first.

Two sources say it, and neither alone is enough: a policy's ``status.lastActions`` (the
newest 50 of its actions, kept across controller restarts: docs/policies.md#status) knows
nothing of the actions of annotations, and the controller's Events (``Deleted``,
``RestartTriggered``, ``DryRunDelete``, ``DryRunRestart``) expire after an hour. So both are
read, and an Event and a status entry of the same object, action and dry run within
:data:`SAME_ACTION_NS` of each other are one action: the Event's note with the policy of
the status entry. An Event alone names its policy in its note (``based on
LifecyclePolicy/team-a/tmp: delete-after 10s``), as the controller writes it. Pure: the
caller lists the Events and the policies.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, replace
from typing import Any, Final

from lifecycle_controller.core.decision import events
from lifecycle_controller.core.text.timestamps import (
    TimestampError,
    format_rfc3339_seconds,
    parse_rfc3339,
)
from lifecycle_controller.core.text.units import NS_PER_SECOND

__all__ = [
    "EVENT_ACTIONS",
    "SAME_ACTION_NS",
    "DoneAction",
    "from_events",
    "from_statuses",
    "merged",
]

#: The controller's Events that report an action: reason → (action, dry run).
EVENT_ACTIONS: Final[Mapping[str, tuple[str, bool]]] = {
    events.DELETED: ("delete", False),
    events.DRY_RUN_DELETE: ("delete", True),
    events.RESTART_TRIGGERED: ("restart", False),
    events.DRY_RUN_RESTART: ("restart", True),
}
#: An Event and a status entry this close are the same action (the Event is recorded after
#: the write; the status entry carries the write's second).
SAME_ACTION_NS: Final = 120 * NS_PER_SECOND
_REPORTING_CONTROLLER: Final = "lifecycle-controller"
#: How a policy's action names it in its Event's note (core/policy/decide.py).
_BASED_ON: Final = re.compile(r"\(based on ((?:Cluster)?LifecyclePolicy/[^:)]+)")


@dataclass(frozen=True, slots=True)
class DoneAction:
    """One action taken (or, ``dry_run``, only reported)."""

    at_ns: int
    action: str  # "delete" or "restart"
    dry_run: bool
    kind: str
    namespace: str
    name: str
    uid: str
    #: The policy that decided it (``Kind/[namespace/]name``); "" its own annotations or
    #: not known (an Event of an action whose policy keeps no entry of it).
    policy: str = ""
    reason: str = ""
    note: str = ""

    def document(self) -> dict[str, Any]:
        return {
            "at": format_rfc3339_seconds(self.at_ns),
            "atMs": self.at_ns // 1_000_000,
            "action": self.action,
            "dryRun": self.dry_run,
            "kind": self.kind,
            "namespace": self.namespace,
            "name": self.name,
            "policy": self.policy,
            "reason": self.reason,
            "note": self.note,
        }


def _instant(value: object) -> int | None:
    try:
        return parse_rfc3339(value) if isinstance(value, str) and value else None
    except TimestampError:
        return None


def from_statuses(statuses: Mapping[str, Mapping[str, Any]]) -> list[DoneAction]:
    """Every ``status.lastActions`` entry, by policy (``Kind/[namespace/]name``)."""
    found: list[DoneAction] = []
    for policy, status in statuses.items():
        for entry in status.get("lastActions") or ():
            if not isinstance(entry, Mapping):
                continue
            at = _instant(entry.get("at"))
            if at is None or entry.get("action") not in ("delete", "restart"):
                continue
            found.append(
                DoneAction(
                    at_ns=at,
                    action=str(entry["action"]),
                    dry_run=entry.get("dryRun") is True,
                    kind=str(entry.get("kind", "")),
                    namespace=str(entry.get("namespace", "")),
                    name=str(entry.get("name", "")),
                    uid=str(entry.get("uid", "")),
                    policy=policy,
                )
            )
    return found


def from_events(items: Iterable[Mapping[str, Any]]) -> list[DoneAction]:
    """The controller's Events (``events.k8s.io/v1``) that report an action."""
    found: list[DoneAction] = []
    for item in items:
        reason = str(item.get("reason", ""))
        if reason not in EVENT_ACTIONS or item.get("reportingController") != _REPORTING_CONTROLLER:
            continue
        series = item.get("series") or {}
        at = _instant(series.get("lastObservedTime")) or _instant(item.get("eventTime"))
        at = at or _instant((item.get("metadata") or {}).get("creationTimestamp"))
        if at is None:
            continue
        regarding = item.get("regarding") or {}
        action, dry_run = EVENT_ACTIONS[reason]
        note = str(item.get("note", ""))
        said = _BASED_ON.search(note)
        found.append(
            DoneAction(
                at_ns=at,
                action=action,
                dry_run=dry_run,
                kind=str(regarding.get("kind", "")),
                namespace=str(regarding.get("namespace", "")),
                name=str(regarding.get("name", "")),
                uid=str(regarding.get("uid", "")),
                policy=said[1] if said else "",
                reason=reason,
                note=note,
            )
        )
    return found


def merged(from_status: Iterable[DoneAction], from_event: Iterable[DoneAction]) -> list[DoneAction]:
    """Both sources as one list, newest first, each action once (see the module docstring)."""
    entries = list(from_status)
    waiting: dict[tuple[str, str, bool], list[int]] = {}
    for index, entry in enumerate(entries):
        waiting.setdefault((entry.uid, entry.action, entry.dry_run), []).append(index)
    used: set[int] = set()
    found: list[DoneAction] = []
    for event in from_event:
        candidates = waiting.get((event.uid, event.action, event.dry_run), [])
        twin = next(
            (
                i
                for i in candidates
                if i not in used and abs(event.at_ns - entries[i].at_ns) <= SAME_ACTION_NS
            ),
            None,
        )
        if twin is not None:
            used.add(twin)
            event = replace(event, policy=entries[twin].policy or event.policy)
        found.append(event)
    found.extend(entry for i, entry in enumerate(entries) if i not in used)
    found.sort(key=lambda done: (-done.at_ns, done.namespace, done.name))
    return found
