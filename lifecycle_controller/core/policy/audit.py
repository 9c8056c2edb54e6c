"""A policy's audit, ``status.actions`` and ``status.lastActions``, merged so each counts once.

What a policy did lives in its own ``status``, so that it survives controller restarts and
leader changes: counts since the policy's creation (``deleted``, ``restarted``, ``dryRun``)
and the newest actions first, at most :data:`KEEP` of them. Every entry carries its
``occurrence`` key: the object's uid, the action and the occurrence's due time (the
instant it was due, not the instant it ran). :func:`merge` adds the entries a controller
has not written yet to the status as it reads it fresh from the API server: an entry whose
key the status already shows is skipped, and only an entry added raises a count. So a
retried patch, or a new leader reporting an action its predecessor reported, counts
nothing twice; the write that follows carries the read's resourceVersion, so two writers
cannot both add to one status either (one of them gets a Conflict, reads again, merges
again).

**A rehearsal is counted once.** A dry-run report writes nothing on the object, so the object
is decided again on every pass with the same occurrence, and after a restart, a leader change
or a policy edit that re-queues everything it would be reported again; past the :data:`KEEP`
entries of ``lastActions`` the merge cannot tell. So the policy's status also keeps
``actions.dryRunThrough`` (:data:`THROUGH`): every dry-run occurrence due at or before that
instant has been reported. A controller that starts treats such an occurrence as reported
already (it counts nothing and takes no place in the limit's window) and remembers, per
object, what it reported itself. It moves the instant forward (:func:`next_through`) only
once it has decided every object it knows of, to the newest due time it reported, but never
past an occurrence due and not reported yet (one its limit holds): one bounded field, whatever
the number of objects (docs/reliability.md#policy-audit).
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Final

from lifecycle_controller.core.text.timestamps import (
    TimestampError,
    format_rfc3339_seconds,
    parse_rfc3339,
    parse_rfc3339_or_none,
)

__all__ = [
    "COUNTS",
    "KEEP",
    "THROUGH",
    "AuditEntry",
    "merge",
    "next_through",
    "reported_through",
    "seed_instants",
]

#: ``status.lastActions`` keeps this many entries, newest first.
KEEP: Final = 50
#: The counters of ``status.actions`` an entry raises (``held`` is a gauge, set apart).
COUNTS: Final = ("deleted", "restarted", "dryRun")
#: ``status.actions``'s instant through which every dry-run occurrence has been reported.
THROUGH: Final = "dryRunThrough"


@dataclass(frozen=True, slots=True, kw_only=True)
class AuditEntry:
    """One action of a policy, as ``status.lastActions`` shows it."""

    at_ns: int
    action: str  # "delete" or "restart"
    kind: str
    namespace: str
    name: str
    uid: str
    dry_run: bool
    due_ns: int

    @property
    def occurrence(self) -> str:
        return f"{self.uid}/{self.action}/{self.due_ns}"

    @property
    def counter(self) -> str:
        if self.dry_run:
            return "dryRun"
        return "deleted" if self.action == "delete" else "restarted"

    def document(self) -> dict[str, Any]:
        return {
            "at": format_rfc3339_seconds(self.at_ns),
            "action": self.action,
            "kind": self.kind,
            "namespace": self.namespace,
            "name": self.name,
            "uid": self.uid,
            "dryRun": self.dry_run,
            "occurrence": self.occurrence,
        }


def _count(value: object) -> int:
    return value if isinstance(value, int) and not isinstance(value, bool) and value > 0 else 0


def merge(
    status: Mapping[str, Any], pending: Iterable[AuditEntry]
) -> tuple[dict[str, int], list[dict[str, Any]], int]:
    """``(actions, lastActions, added)``: ``status``'s audit with the ``pending`` entries it
    does not show yet (``held`` left out: the caller sets it)."""
    raw_actions = status.get("actions")
    actions_in: Mapping[str, Any] = raw_actions if isinstance(raw_actions, Mapping) else {}
    actions = {name: _count(actions_in.get(name)) for name in COUNTS}
    raw_last = status.get("lastActions")
    last: list[dict[str, Any]] = [
        dict(entry)
        for entry in (raw_last if isinstance(raw_last, Sequence) else ())
        if isinstance(entry, Mapping)
    ]
    seen = {entry.get("occurrence") for entry in last}
    added = 0
    fresh: list[dict[str, Any]] = []
    for entry in sorted(pending, key=lambda e: e.at_ns):
        if entry.occurrence in seen:
            continue
        seen.add(entry.occurrence)
        actions[entry.counter] += 1
        fresh.append(entry.document())
        added += 1
    merged = sorted([*fresh, *last], key=lambda e: str(e.get("at", "")), reverse=True)
    return actions, merged[:KEEP], added


def seed_instants(status: Mapping[str, Any]) -> list[int]:
    """The instants of the actions ``status.lastActions`` shows (a limit's window seed)."""
    raw = status.get("lastActions")
    out: list[int] = []
    for entry in raw if isinstance(raw, Sequence) else ():
        if isinstance(entry, Mapping) and isinstance(entry.get("at"), str):
            try:
                out.append(parse_rfc3339(entry["at"]))
            except TimestampError:
                continue
    return out


def reported_through(status: Mapping[str, Any]) -> int | None:
    """``status.actions.dryRunThrough`` (None: absent or unreadable: nothing is known)."""
    actions = status.get("actions")
    raw = actions.get(THROUGH) if isinstance(actions, Mapping) else None
    return parse_rfc3339_or_none(raw) if isinstance(raw, str) else None


def next_through(
    *, written: int | None, newest: int | None, unreported: Iterable[int]
) -> int | None:
    """The ``dryRunThrough`` to write (None: nothing new to say).

    ``written``: the instant the status shows; ``newest``: the latest due time of the dry-run
    occurrences this controller reported; ``unreported``: the due times of the occurrences
    due and not reported yet (held by the limit, or not decided again since they fell due).
    Only called once the controller has decided every object it knows of: the instant goes
    to ``newest``, but stays before every occurrence not reported, and never goes back.
    """
    if newest is None or (written is not None and written >= newest):
        return None
    first = min(unreported, default=None)
    target = newest if first is None else min(newest, first - 1)
    if written is not None and target <= written:
        return None
    return target
