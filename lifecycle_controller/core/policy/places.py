"""A limited policy's places, recorded before they are used: ``status.limit`` (pure).

A policy's ``limit`` (docs/policies.md#limit) would be only as durable as its last status
write if the window lived in the leader's memory alone: a leader killed between its actions
and its next status write takes them with it, and the next leader, seeding its window from
what the status shows, lets the limit go again. So a place is **recorded before it is used**.
The leader writes, in one guarded status write, a **batch** of places (:class:`Batch`): who
holds it, when it was reserved, until when its places may be used, how many places it takes
and, for each, the occurrence it is for (:class:`Place`: the object, its uid, the action and
its due time). Only then do those occurrences go; a pass whose occurrence has no place in
the open batch asks for one first (the verdict's missing fact), and waits if the write fails.

What the record says of the window is therefore always **at least** what was done:

* ``groups``: places settled, as ``(instant, count)``: each the latest instant of a batch's
  used places (a place used earlier in the batch counts from that later instant: it frees a
  little later than it could, never sooner);
* ``batches``: the batches not settled yet: the holder's open one and those of a leader that
  stopped before it settled its own. A batch counts all its ``count`` places at ``until``,
  the last instant any of them may be used, so a successor frees them no sooner than the
  holder could have used them (a place reserved and not used is lost till the window turns:
  late, never exceeded).

:meth:`PlaceRecord.instants` is the window's seed. The holder settles its own batch in the
write that reserves the next one (its used places become one group, the unused are given
back); a successor settles a stopped leader's batch once its ``until`` has passed, counting
in the policy's audit each named occurrence it finds done (:func:`settled_entries`), so that
``status.actions`` counts what was done, not what was written before the kill
(docs/reliability.md#policy-sigkill).

The record stays small: ``groups`` older than the window are dropped and the rest merged
(each into the later instant) beyond :data:`MAX_PLACE_GROUPS`; a batch names at most
:data:`MAX_BATCH` places.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field, replace
from typing import Any, Final

from lifecycle_controller.core.policy.audit import AuditEntry
from lifecycle_controller.core.text.durations import NS_PER_SECOND
from lifecycle_controller.core.text.timestamps import format_rfc3339_nano, parse_rfc3339_or_none

__all__ = [
    "BATCH_LIFETIME_NS",
    "MAX_BATCH",
    "MAX_PLACE_GROUPS",
    "RECORD",
    "USE_MARGIN_NS",
    "Batch",
    "Place",
    "PlaceRecord",
    "batch_lifetime",
    "parse_record",
    "settled_entries",
]

#: The status field the record lives in.
RECORD: Final = "limit"
#: The most places one batch names (one status write reserves at most this many).
MAX_BATCH: Final = 50
#: The most settled groups kept (older ones merged into the later instant beyond it).
MAX_PLACE_GROUPS: Final = 64
#: How long a batch's places may be used after it is written (at most a window).
BATCH_LIFETIME_NS: Final = 10 * NS_PER_SECOND
#: A place is not used in the last second of its batch: the request it lets go reaches the
#: API server before ``until``, the instant a successor counts it at.
USE_MARGIN_NS: Final = NS_PER_SECOND


def batch_lifetime(window_ns: int) -> int:
    """How long a batch's places may be used: :data:`BATCH_LIFETIME_NS`, at most the window,
    and always past the margin."""
    return max(min(BATCH_LIFETIME_NS, window_ns), 2 * USE_MARGIN_NS)


@dataclass(frozen=True, slots=True, kw_only=True)
class Place:
    """One place of a batch, named for the occurrence it is for."""

    resource: str  # the resource key: ``configmaps``, ``deployments.apps``
    kind: str
    namespace: str
    name: str
    uid: str
    action: str  # ``delete`` or ``restart``
    due_ns: int

    @property
    def occurrence(self) -> str:
        """The audit's key (:class:`~.audit.AuditEntry`)."""
        return f"{self.uid}/{self.action}/{self.due_ns}"

    def document(self) -> dict[str, Any]:
        return {
            "resource": self.resource,
            "kind": self.kind,
            "namespace": self.namespace,
            "name": self.name,
            "uid": self.uid,
            "action": self.action,
            "due": format_rfc3339_nano(self.due_ns),
        }

    def entry(self, at_ns: int) -> AuditEntry:
        """Its audit entry, done at ``at_ns``."""
        return AuditEntry(
            at_ns=at_ns,
            action=self.action,
            kind=self.kind,
            namespace=self.namespace,
            name=self.name,
            uid=self.uid,
            dry_run=False,
            due_ns=self.due_ns,
        )


@dataclass(frozen=True, slots=True, kw_only=True)
class Batch:
    """Places reserved in one write: ``count`` of them, usable from ``at_ns`` to ``until_ns``
    by ``holder`` (one controller process); ``places`` names the occurrences not settled
    yet (a place handed to a successor's batch keeps its count here, not its name)."""

    holder: str
    at_ns: int
    until_ns: int
    count: int
    places: tuple[Place, ...] = ()

    @property
    def ident(self) -> tuple[str, int]:
        return (self.holder, self.at_ns)

    def document(self) -> dict[str, Any]:
        return {
            "holder": self.holder,
            "at": format_rfc3339_nano(self.at_ns),
            "until": format_rfc3339_nano(self.until_ns),
            "count": self.count,
            "places": [place.document() for place in self.places],
        }

    def without(self, occurrences: Iterable[str]) -> Batch:
        """The batch with those occurrences unnamed (their places still counted)."""
        gone = set(occurrences)
        return replace(self, places=tuple(p for p in self.places if p.occurrence not in gone))


@dataclass(frozen=True, slots=True)
class PlaceRecord:
    """``status.limit``: the settled groups and the batches not settled (see the module)."""

    groups: tuple[tuple[int, int], ...] = ()
    batches: tuple[Batch, ...] = field(default=())

    def instants(self) -> list[int]:
        """The window's seed: each group's count at its instant, each batch's at ``until``."""
        out = [at for at, count in self.groups for _ in range(count)]
        out += [batch.until_ns for batch in self.batches for _ in range(batch.count)]
        return sorted(out)

    def foreign(self, holder: str) -> tuple[Batch, ...]:
        """The batches another holder left (a stopped leader's, or a live one's)."""
        return tuple(batch for batch in self.batches if batch.holder != holder)

    def with_groups(
        self, added: Iterable[tuple[int, int]], *, now_ns: int, window_ns: int
    ) -> tuple[tuple[int, int], ...]:
        """The groups with ``added``, those out of the window ending now dropped, the
        earliest merged into the next (its later instant) beyond :data:`MAX_PLACE_GROUPS`."""
        start = now_ns - window_ns
        groups = sorted(g for g in (*self.groups, *added) if g[0] > start and g[1] > 0)
        while len(groups) > MAX_PLACE_GROUPS:
            (_, first), (at, second) = groups[0], groups[1]
            groups[:2] = [(at, first + second)]
        return tuple(groups)

    def document(self) -> dict[str, Any]:
        return {
            "groups": [{"at": format_rfc3339_nano(at), "count": n} for at, n in self.groups],
            "batches": [batch.document() for batch in self.batches],
        }


def _count(value: object) -> int | None:
    ok = isinstance(value, int) and not isinstance(value, bool) and value >= 0
    return value if ok else None  # type: ignore[return-value]


def _instant(value: object) -> int | None:
    return parse_rfc3339_or_none(value) if isinstance(value, str) else None


def _place(raw: object) -> Place | None:
    if not isinstance(raw, Mapping):
        return None
    texts = {k: raw.get(k) for k in ("resource", "kind", "namespace", "name", "uid", "action")}
    due = _instant(raw.get("due"))
    if due is None or not all(isinstance(v, str) for v in texts.values()):
        return None
    return Place(due_ns=due, **{k: str(v) for k, v in texts.items()})


def _batch(raw: object) -> Batch | None:
    if not isinstance(raw, Mapping):
        return None
    at, until = _instant(raw.get("at")), _instant(raw.get("until"))
    count, holder = _count(raw.get("count")), raw.get("holder")
    if at is None or until is None or count is None or not isinstance(holder, str):
        return None
    raw_places = raw.get("places")
    found = (_place(p) for p in (raw_places if isinstance(raw_places, Sequence) else ()))
    places = tuple(p for p in found if p is not None)
    return Batch(holder=holder, at_ns=at, until_ns=until, count=count, places=places)


def parse_record(status: Mapping[str, Any]) -> PlaceRecord | None:
    """``status.limit`` as a :class:`PlaceRecord` (None: the status has none). A garbled
    entry is left out, never a crash: the record only ever adds to the window."""
    raw = status.get(RECORD)
    if not isinstance(raw, Mapping):
        return None
    groups: list[tuple[int, int]] = []
    raw_groups = raw.get("groups")
    for group in raw_groups if isinstance(raw_groups, Sequence) else ():
        if isinstance(group, Mapping):
            at, count = _instant(group.get("at")), _count(group.get("count"))
            if at is not None and count:
                groups.append((at, count))
    raw_batches = raw.get("batches")
    batches = (_batch(b) for b in (raw_batches if isinstance(raw_batches, Sequence) else ()))
    return PlaceRecord(tuple(sorted(groups)), tuple(b for b in batches if b is not None))


def settled_entries(
    batch: Batch, done: Callable[[Place], bool], *, skip: Iterable[str] = ()
) -> list[AuditEntry]:
    """The audit entries of a stopped leader's batch: each named place ``done`` finds done
    (a deletion whose object is gone, a restart the workload's marker shows), at the
    batch's ``until`` (when it was done is not known, only that it was by then), but those
    in ``skip`` (done by the successor itself, which counts them)."""
    skipped = set(skip)
    return [
        place.entry(batch.until_ns)
        for place in batch.places
        if place.occurrence not in skipped and done(place)
    ]
