"""The console's timeline: the rows' due actions as marks on a time axis, counted server-side.

A row of ``status`` (:class:`~lifecycle_controller.tools.report.Row`) already says what the
controller will do and when: its next due instant, the following occurrences of a recurring
schedule, and the instant of its Upcoming warning. :func:`marks_of` turns each of those
instants into a :class:`Mark` once per snapshot (sorted by time), and :func:`timeline`
counts the marks of one view (an hour, a day or a week from now; grouped by namespace or by
policy; optionally one policy or namespace) per group, time bucket and category, so a page
over 100,000 scheduled objects receives a few hundred numbers, never the objects.
:func:`cell_rows` gives the rows behind one cell, for the detail panel.

Nothing here decides anything: every instant is the one the decision code gave the row.
An action already due (held by the circuit breaker, or about to run) is counted in the first
bucket and as ``overdue``. Pure: instants are nanoseconds, ``now`` is a parameter.
"""

from __future__ import annotations

import bisect
import datetime
from collections import Counter
from collections.abc import Collection, Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Final

from lifecycle_controller.core.schedule.windows import WindowError, parse_windows
from lifecycle_controller.core.text.timestamps import TimestampError, parse_rfc3339
from lifecycle_controller.core.text.units import NS_PER_SECOND
from lifecycle_controller.tools.report import Row

__all__ = [
    "BY",
    "CATEGORIES",
    "CLUSTER_SCOPED",
    "OWN_ANNOTATIONS",
    "SPANS",
    "Instants",
    "Mark",
    "Query",
    "QueryError",
    "axis_start",
    "cell_rows",
    "marks_of",
    "timeline",
    "window_spans",
]

#: How an action is drawn: its colour and its legend entry.
CATEGORIES: Final = ("delete", "restart", "dry-run", "warning")
#: The views: how far ahead, and how many buckets (a minute, 15 minutes, an hour).
SPANS: Final[Mapping[str, tuple[int, int]]] = {
    "hour": (3600 * NS_PER_SECOND, 60),
    "day": (86400 * NS_PER_SECOND, 96),
    "week": (7 * 86400 * NS_PER_SECOND, 168),
}
BY: Final = ("namespace", "policy")
#: The group of a cluster-scoped object (grouped by namespace).
CLUSTER_SCOPED: Final = "(cluster-scoped)"
#: The group of an object its own annotations decide (grouped by policy).
OWN_ANNOTATIONS: Final = "(own annotations)"
#: Groups drawn one per line; the smaller ones share the last line.
MAX_GROUPS: Final = 40
_NS_PER_MS: Final = 1_000_000


class QueryError(ValueError):
    """A view the console does not have (the text names the parameter)."""


@dataclass(frozen=True, slots=True)
class Mark:
    """One instant of one row: ``category`` one of :data:`CATEGORIES`, ``row`` its index."""

    at_ns: int
    category: str
    row: int


@dataclass(frozen=True, slots=True)
class Query:
    """One view of the timeline."""

    span: str = "day"
    by: str = "namespace"
    policy: str = ""
    namespace: str = ""

    @classmethod
    def parse(cls, params: Mapping[str, str]) -> Query:
        """The view a page asks for (absent parameters take the defaults)."""
        query = cls(
            span=params.get("span", "day"),
            by=params.get("by", "namespace"),
            policy=params.get("policy", ""),
            namespace=params.get("namespace", ""),
        )
        if query.span not in SPANS:
            raise QueryError(f"span: expected one of {', '.join(SPANS)}, got {query.span!r}")
        if query.by not in BY:
            raise QueryError(f"by: expected one of {', '.join(BY)}, got {query.by!r}")
        return query

    def selects(self, row: Row) -> bool:
        """Whether the row belongs to this view (its policy filter, its namespace filter)."""
        if self.namespace and row.namespace != self.namespace:
            return False
        return not self.policy or self.policy == row.policy or self.policy in row.also_decided_by

    def group(self, row: Row) -> str:
        if self.by == "policy":
            return row.policy or OWN_ANNOTATIONS
        return row.namespace or CLUSTER_SCOPED


def _instant(text: str) -> int | None:
    try:
        return parse_rfc3339(text) if text else None
    except TimestampError:
        return None


def category_of(row: Row) -> str | None:
    """``delete``, ``restart``, ``dry-run`` (either action, only reported) or None."""
    if not row.action:
        return None
    return "dry-run" if row.dry_run else row.action


#: A row's instants and their categories, by the row's identity (the row kept with them, so
#: that the identity stays its own): :func:`marks_of` reads an unchanged row once.
Instants = dict[int, tuple[Row, tuple[tuple[int, str], ...]]]


def _instants_of(row: Row) -> tuple[tuple[int, str], ...]:
    found: list[tuple[int, str]] = []
    category = category_of(row)
    if category is not None:
        instants = {_instant(text) for text in (row.next, *row.upcoming)}
        found.extend((at, category) for at in instants if at is not None)
    warn = _instant(row.warn_at)
    if warn is not None:
        found.append((warn, "warning"))
    return tuple(found)


def marks_of(rows: Sequence[Row], known: Instants | None = None) -> list[Mark]:
    """Every instant the rows name, earliest first: the next action and the following
    occurrences (each once), and the Upcoming warning. ``known``: the instants of the rows
    of the previous call (the live console keeps its unchanged rows, the same objects);
    it is left holding those of these rows."""
    before = known.copy() if known is not None else {}
    if known is not None:
        known.clear()
    marks: list[Mark] = []
    for index, row in enumerate(rows):
        seen = before.get(id(row))
        instants = seen[1] if seen is not None and seen[0] is row else _instants_of(row)
        if known is not None:
            known[id(row)] = (row, instants)
        marks.extend(Mark(at, category, index) for at, category in instants)
    marks.sort(key=lambda mark: (mark.at_ns, mark.row))
    return marks


@dataclass(frozen=True, slots=True)
class _Axis:
    start_ns: int
    end_ns: int
    step_ns: int
    buckets: int

    @classmethod
    def of(cls, span: str, now_ns: int) -> _Axis:
        length, buckets = SPANS[span]
        step = length // buckets
        start = now_ns - now_ns % step  # whole buckets: the axis moves a bucket at a time
        return cls(start, start + length, step, buckets)

    def bucket(self, at_ns: int) -> int:
        return max(0, (at_ns - self.start_ns) // self.step_ns)


def axis_start(span: str, now_ns: int) -> int:
    """Where the axis of ``span`` starts at ``now``: two instants with the same start see the
    same view of the same marks (the console keeps its answer until the start moves)."""
    return _Axis.of(span, now_ns).start_ns


def _visible(marks: Sequence[Mark], axis: _Axis) -> Sequence[Mark]:
    """The marks before the axis ends: due actions already past count in the first bucket,
    past warnings were posted already."""
    end = bisect.bisect_left(marks, axis.end_ns, key=lambda mark: mark.at_ns)
    first = bisect.bisect_left(marks, axis.start_ns, key=lambda mark: mark.at_ns)
    return [m for m in marks[:first] if m.category != "warning"] + list(marks[first:end])


def timeline(
    rows: Sequence[Row], marks: Sequence[Mark], query: Query, now_ns: int
) -> dict[str, Any]:
    """The counts of one view: per group, ``[bucket, category, count]`` cells; instants in
    milliseconds (what a browser's clock reads)."""
    axis = _Axis.of(query.span, now_ns)
    cells: Counter[tuple[str, int, str]] = Counter()
    totals: Counter[str] = Counter()
    overdue = 0
    for mark in _visible(marks, axis):
        row = rows[mark.row]
        if not query.selects(row):
            continue
        cells[(query.group(row), axis.bucket(mark.at_ns), mark.category)] += 1
        totals[mark.category] += 1
        overdue += mark.at_ns < axis.start_ns
    by_group: dict[str, list[list[Any]]] = {}
    for (group, bucket, category), count in sorted(cells.items()):
        by_group.setdefault(group, []).append([bucket, category, count])
    groups = [
        {"name": name, "total": sum(cell[2] for cell in found), "cells": found}
        for name, found in sorted(by_group.items())
    ]
    return {
        "startMs": axis.start_ns // _NS_PER_MS,
        "endMs": axis.end_ns // _NS_PER_MS,
        "stepMs": axis.step_ns // _NS_PER_MS,
        "buckets": axis.buckets,
        "groups": _fold(groups),
        "totals": {category: totals[category] for category in CATEGORIES},
        "overdue": overdue,
    }


def _fold(groups: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """At most :data:`MAX_GROUPS` lines: the largest groups keep theirs (in name order), the
    others are summed on one last line."""
    if len(groups) <= MAX_GROUPS:
        return groups
    ranked = sorted(groups, key=lambda group: (-group["total"], group["name"]))
    kept = {group["name"] for group in ranked[: MAX_GROUPS - 1]}
    rest = [group for group in groups if group["name"] not in kept]
    summed: Counter[tuple[int, str]] = Counter()
    for group in rest:
        for bucket, category, count in group["cells"]:
            summed[(bucket, category)] += count
    other = {
        "name": f"({len(rest)} more groups)",
        "total": sum(summed.values()),
        "cells": [[bucket, kind, count] for (bucket, kind), count in sorted(summed.items())],
        "folded": [group["name"] for group in rest],
    }
    return [group for group in groups if group["name"] in kept] + [other]


def cell_rows(
    rows: Sequence[Row],
    marks: Sequence[Mark],
    query: Query,
    now_ns: int,
    *,
    groups: Collection[str],
    bucket: int,
    limit: int = 100,
) -> tuple[list[tuple[Row, int, str]], int]:
    """The rows behind one cell (``groups``: the name of one of :func:`timeline`'s lines,
    or the names a folded line holds), each with its instant and category, at most
    ``limit``; and how many there are in all."""
    axis = _Axis.of(query.span, now_ns)
    found: list[tuple[Row, int, str]] = []
    total = 0
    for mark in _visible(marks, axis):
        row = rows[mark.row]
        if axis.bucket(mark.at_ns) != bucket or not query.selects(row):
            continue
        if query.group(row) not in groups:
            continue
        total += 1
        if len(found) < limit:
            found.append((row, mark.at_ns, mark.category))
    return found, total


def window_spans(text: str, start_ns: int, end_ns: int) -> list[tuple[int, int]]:
    """The openings of a ``maintenance-window`` value that overlap ``[start, end)``, clipped
    to it and merged (empty for an invalid value: the rows it concerns show the problem)."""
    try:
        windows = parse_windows(text)
    except WindowError:
        return []
    spans: list[tuple[int, int]] = []
    for window in windows.windows:
        seconds = start_ns // NS_PER_SECOND
        day = datetime.datetime.fromtimestamp(seconds, tz=window.zone).date()
        for opens, closes in window.intervals(day):
            if opens < end_ns and closes > start_ns:
                spans.append((max(opens, start_ns), min(closes, end_ns)))
    merged: list[tuple[int, int]] = []
    for opens, closes in sorted(spans):
        if merged and opens <= merged[-1][1]:
            merged[-1] = (merged[-1][0], max(merged[-1][1], closes))
        else:
            merged.append((opens, closes))
    return merged
