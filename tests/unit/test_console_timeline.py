"""The console's timeline and last actions: what the page is given to draw, from the rows."""

from __future__ import annotations

from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st

from lifecycle_controller.core.text.timestamps import format_rfc3339_nano, parse_rfc3339
from lifecycle_controller.core.text.units import NS_PER_SECOND
from lifecycle_controller.tools.console import timeline as tl
from lifecycle_controller.tools.console.actions import (
    SAME_ACTION_NS,
    DoneAction,
    from_events,
    from_statuses,
    merged,
)
from lifecycle_controller.tools.console.timeline import Query, QueryError
from lifecycle_controller.tools.report import Row

NOW = parse_rfc3339("2026-03-02T10:07:30Z")  # a Monday
MINUTE = 60 * NS_PER_SECOND


def at(offset_s: float) -> str:
    return format_rfc3339_nano(NOW + int(offset_s * NS_PER_SECOND))


def row(name: str, action: str = "delete", next_: str = "", **fields: Any) -> Row:
    values: dict[str, Any] = {
        "api_version": "v1",
        "kind": "ConfigMap",
        "namespace": "team-a",
        "name": name,
        "action": action,
        "next": next_,
        "summary": f"{action} {name}",
        "steps": [],
        "problems": [],
        "upcoming": [next_] if next_ else [],
        "dry_run": False,
    }
    return Row(**(values | fields))


@pytest.mark.parametrize(
    ("fields", "expected"),
    [
        ({"action": "delete", "next_": at(60)}, [("delete", 60)]),
        ({"action": "restart", "next_": at(60)}, [("restart", 60)]),
        ({"action": "delete", "next_": at(60), "dry_run": True}, [("dry-run", 60)]),
        ({"action": "", "next_": "", "problems": ["InvalidAnnotation: x"]}, []),
        (  # the next occurrence and the following ones, each once
            {"action": "restart", "next_": at(60), "upcoming": [at(60), at(120), at(180)]},
            [("restart", 60), ("restart", 120), ("restart", 180)],
        ),
        (  # the Upcoming warning is a mark of its own
            {"action": "delete", "next_": at(600), "warn_at": at(300)},
            [("warning", 300), ("delete", 600)],
        ),
        ({"action": "delete", "next_": "not a time"}, []),
    ],
)
def test_marks_of_a_row(fields: dict[str, Any], expected: list[tuple[str, int]]) -> None:
    marks = tl.marks_of([row("a", **fields)])
    assert [(m.category, (m.at_ns - NOW) // NS_PER_SECOND) for m in marks] == expected


def test_marks_are_sorted_across_rows() -> None:
    marks = tl.marks_of([row("late", next_=at(900)), row("soon", next_=at(60))])
    assert [m.row for m in marks] == [1, 0]


def test_the_instants_of_unchanged_rows_are_read_once() -> None:
    late, soon = row("late", action="delete", next_=at(900)), row("soon", next_=at(60))
    known: tl.Instants = {}
    first = tl.marks_of([late, soon], known)
    assert first == tl.marks_of([late, soon])
    assert set(known) == {id(late), id(soon)}
    moved = row("soon", action="delete", next_=at(1200), warn_at=at(30))
    again = tl.marks_of([moved, late], known)  # re-sorted, one row new
    assert again == tl.marks_of([moved, late])
    assert set(known) == {id(moved), id(late)}  # the old row's instants are dropped


@pytest.mark.parametrize(
    ("params", "error"),
    [
        ({"span": "month"}, "span: expected one of hour, day, week, got 'month'"),
        ({"by": "kind"}, "by: expected one of namespace, policy, got 'kind'"),
    ],
)
def test_a_view_the_console_does_not_have_is_refused(params: dict[str, str], error: str) -> None:
    with pytest.raises(QueryError, match=error):
        Query.parse(params)


def test_a_view_defaults_to_the_next_day_by_namespace() -> None:
    assert Query.parse({}) == Query(span="day", by="namespace")


def test_the_hour_counts_per_namespace_minute_and_category() -> None:
    rows = [
        row("a", next_=at(90)),
        row("b", next_=at(95)),
        row("c", action="restart", next_=at(90), namespace="team-b"),
        row("d", next_=at(90), dry_run=True, namespace="team-b"),
        row("far", next_=at(7200)),  # after the hour
    ]
    view = tl.timeline(rows, tl.marks_of(rows), Query(span="hour"), NOW)
    assert view["stepMs"] == 60_000
    assert view["buckets"] == 60
    assert view["startMs"] == (NOW - 30 * NS_PER_SECOND) // 1_000_000  # whole minutes
    # 10:07:30 + 90 s = 10:09:00, the bucket of 10:09, two after the axis's 10:07
    assert view["groups"] == [
        {"name": "team-a", "total": 2, "cells": [[2, "delete", 2]]},
        {"name": "team-b", "total": 2, "cells": [[2, "dry-run", 1], [2, "restart", 1]]},
    ]
    assert view["totals"] == {"delete": 2, "restart": 1, "dry-run": 1, "warning": 0}


def test_grouped_by_policy_and_filtered_to_one() -> None:
    rows = [
        row("a", next_=at(60), policy="ClusterLifecyclePolicy/tmp"),
        row("b", next_=at(60)),
        row("c", next_=at(60), policy="LifecyclePolicy/team-a/x"),
        row("d", next_=at(60), policy="LifecyclePolicy/team-a/x", namespace="team-b"),
        # decided by another policy for its other family: shown with both
        row("e", next_=at(60), policy="LifecyclePolicy/team-a/x", also_decided_by=["Cl/tmp"]),
    ]
    marks = tl.marks_of(rows)
    by_policy = tl.timeline(rows, marks, Query(by="policy"), NOW)
    assert [(g["name"], g["total"]) for g in by_policy["groups"]] == [
        ("(own annotations)", 1),
        ("ClusterLifecyclePolicy/tmp", 1),
        ("LifecyclePolicy/team-a/x", 3),
    ]
    one = tl.timeline(rows, marks, Query(by="policy", policy="Cl/tmp"), NOW)
    assert [g["name"] for g in one["groups"]] == ["LifecyclePolicy/team-a/x"]
    there = tl.timeline(rows, marks, Query(namespace="team-b"), NOW)
    assert [g["name"] for g in there["groups"]] == ["team-b"]


def test_a_due_action_is_drawn_at_now_and_a_past_warning_is_not() -> None:
    rows = [
        row("held", next_=at(-3600)),  # due an hour ago: held by the breaker, say
        row("warned", next_=at(600), warn_at=at(-3600)),
        row("cluster", next_=at(60), namespace=""),
    ]
    view = tl.timeline(rows, tl.marks_of(rows), Query(span="day"), NOW)
    assert view["overdue"] == 1
    assert view["totals"]["warning"] == 0
    assert view["groups"][0] == {
        "name": "(cluster-scoped)",
        "total": 1,
        "cells": [[0, "delete", 1]],
    }
    assert view["groups"][1]["cells"] == [[0, "delete", 1], [1, "delete", 1]]


def test_many_groups_fold_into_one_last_line() -> None:
    rows = [row(f"o{i}", next_=at(60), namespace=f"ns-{i:03d}") for i in range(tl.MAX_GROUPS + 5)]
    rows += [row("big", next_=at(120), namespace="ns-044")]  # ns-044 is among the largest
    view = tl.timeline(rows, tl.marks_of(rows), Query(), NOW)
    groups = view["groups"]
    assert len(groups) == tl.MAX_GROUPS
    assert "ns-044" in [g["name"] for g in groups]
    other = groups[-1]
    assert other["name"] == "(6 more groups)"
    assert other["total"] == 6
    assert other["cells"] == [[0, "delete", 6]]
    found, total = tl.cell_rows(
        rows, tl.marks_of(rows), Query(), NOW, groups=other["folded"], bucket=0
    )
    assert total == 6
    assert {r.namespace for r, _, _ in found} == set(other["folded"])


def test_the_rows_behind_a_cell_with_their_instant_and_a_limit() -> None:
    rows = [row(f"o{i}", next_=at(60 + i)) for i in range(5)] + [row("later", next_=at(7200))]
    marks = tl.marks_of(rows)
    found, total = tl.cell_rows(
        rows, marks, Query(span="hour"), NOW, groups=["team-a"], bucket=1, limit=3
    )
    assert total == 5
    assert [(r.name, category) for r, _, category in found] == [
        ("o0", "delete"),
        ("o1", "delete"),
        ("o2", "delete"),
    ]
    assert found[0][1] == NOW + 60 * NS_PER_SECOND
    none, zero = tl.cell_rows(rows, marks, Query(span="hour"), NOW, groups=["team-b"], bucket=1)
    assert (none, zero) == ([], 0)


@given(
    offsets=st.lists(st.integers(min_value=-7200, max_value=8 * 86400), max_size=40),
    span=st.sampled_from(list(tl.SPANS)),
)
def test_every_action_inside_the_span_is_counted_once(offsets: list[int], span: str) -> None:
    rows = [row(f"o{i}", next_=at(offset)) for i, offset in enumerate(offsets)]
    view = tl.timeline(rows, tl.marks_of(rows), Query(span=span), NOW)
    inside = sum(1 for offset in offsets if NOW + offset * NS_PER_SECOND < view["endMs"] * 10**6)
    assert view["totals"]["delete"] == inside
    assert all(0 <= c[0] < view["buckets"] for g in view["groups"] for c in g["cells"])


@pytest.mark.parametrize(
    ("text", "start", "hours", "expected"),
    [
        # 01:00-05:00 UTC on weekdays, seen from Monday 00:00 for a day
        ("Mon-Fri 01:00-05:00 UTC", "2026-03-02T00:00:00Z", 24, [("01:00", "05:00")]),
        # a window already open is clipped to the axis (and the next morning's too)
        (
            "Mon-Fri 01:00-05:00 UTC",
            "2026-03-02T03:00:00Z",
            24,
            [("03:00", "05:00"), ("01:00", "03:00")],
        ),
        # two windows that touch are one band
        (
            "Mon-Mon 01:00-03:00 UTC, Mon-Mon 03:00-04:00 UTC",
            "2026-03-02T00:00:00Z",
            24,
            [("01:00", "04:00")],
        ),
        # none on a Saturday
        ("Mon-Fri 01:00-05:00 UTC", "2026-03-07T00:00:00Z", 24, []),
        # a zone: 02:00-03:00 Warsaw is 01:00-02:00 UTC in winter
        ("Mon-Mon 02:00-03:00 Europe/Warsaw", "2026-03-02T00:00:00Z", 24, [("01:00", "02:00")]),
        ("not a window", "2026-03-02T00:00:00Z", 24, []),
    ],
)
def test_window_openings_on_the_axis(
    text: str, start: str, hours: int, expected: list[tuple[str, str]]
) -> None:
    begin = parse_rfc3339(start)
    spans = tl.window_spans(text, begin, begin + hours * 3600 * NS_PER_SECOND)
    assert [
        (format_rfc3339_nano(a)[11:16], format_rfc3339_nano(b)[11:16]) for a, b in spans
    ] == expected


# --- last actions -------------------------------------------------------------------------


def event(reason: str, when: str, uid: str = "u1", **extra: Any) -> dict[str, Any]:
    return {
        "reason": reason,
        "eventTime": when,
        "reportingController": "lifecycle-controller",
        "note": f"{reason} note",
        "regarding": {"kind": "ConfigMap", "namespace": "team-a", "name": "tmp", "uid": uid},
        **extra,
    }


def test_the_controllers_action_events_only() -> None:
    items = [
        event("Deleted", "2026-03-02T10:00:00.000000Z"),
        event("DryRunRestart", "2026-03-02T10:01:00.000000Z"),
        event("UpcomingDeletion", "2026-03-02T10:02:00.000000Z"),  # not an action
        event("Deleted", "2026-03-02T10:03:00.000000Z", reportingController="someone-else"),
        event("Deleted", ""),  # no time at all
        event(  # a series: its last occurrence
            "RestartTriggered",
            "2026-03-02T09:00:00.000000Z",
            series={"lastObservedTime": "2026-03-02T10:05:00.000000Z", "count": 3},
        ),
    ]
    found = from_events(items)
    assert [(d.action, d.dry_run, d.reason) for d in found] == [
        ("delete", False, "Deleted"),
        ("restart", True, "DryRunRestart"),
        ("restart", False, "RestartTriggered"),
    ]
    assert found[2].at_ns == parse_rfc3339("2026-03-02T10:05:00Z")


def test_status_entries_by_policy_skip_what_is_not_an_entry() -> None:
    statuses = {
        "ClusterLifecyclePolicy/tmp": {
            "lastActions": [
                {"at": "2026-03-02T10:00:00Z", "action": "delete", "kind": "ConfigMap",
                 "namespace": "team-a", "name": "tmp", "uid": "u1", "dryRun": True},
                {"at": "garbage", "action": "delete"},
                {"at": "2026-03-02T10:00:00Z", "action": "explode"},
                "not a mapping",
            ]
        },
        "LifecyclePolicy/team-a/none": {},
    }  # fmt: skip
    found = from_statuses(statuses)
    assert [(d.policy, d.name, d.dry_run) for d in found] == [
        ("ClusterLifecyclePolicy/tmp", "tmp", True)
    ]


def done(at_s: int, uid: str = "u1", *, policy: str = "", reason: str = "") -> DoneAction:
    return DoneAction(
        at_ns=NOW + at_s * NS_PER_SECOND,
        action="delete",
        dry_run=False,
        kind="ConfigMap",
        namespace="team-a",
        name=uid,
        uid=uid,
        policy=policy,
        reason=reason,
    )


def test_an_event_and_its_status_entry_are_one_action_newest_first() -> None:
    window = SAME_ACTION_NS // NS_PER_SECOND
    status = [done(0, policy="P"), done(-3600, policy="P"), done(10, "u2", policy="P")]
    events = [done(1, reason="Deleted"), done(window + 100, reason="Deleted")]
    found = merged(status, events)
    assert [(d.at_ns - NOW) // NS_PER_SECOND for d in found] == [window + 100, 10, 1, -3600]
    assert [(d.reason, d.policy) for d in found] == [
        ("Deleted", ""),  # too far from any entry: its own
        ("", "P"),
        ("Deleted", "P"),  # the Event, with the entry's policy
        ("", "P"),
    ]
    assert found[0].document()["at"] == format_rfc3339_nano(NOW + (window + 100) * NS_PER_SECOND)


@pytest.mark.parametrize(
    ("note", "policy"),
    [
        (
            "Resource deleted based on delete-at annotation: 2026-03-02T10:00:00Z "
            "(based on LifecyclePolicy/team-a/tmp: delete-after 10s)",
            "LifecyclePolicy/team-a/tmp",
        ),
        (
            "Dry-run: would restart (based on ClusterLifecyclePolicy/nightly)",
            "ClusterLifecyclePolicy/nightly",
        ),
        ("Resource deleted based on delete-at annotation: 2026-03-02T10:00:00Z", ""),
    ],
)
def test_an_event_alone_names_its_policy_from_its_note(note: str, policy: str) -> None:
    (found,) = from_events([event("Deleted", "2026-03-02T10:00:00.000000Z", note=note)])
    assert found.policy == policy
