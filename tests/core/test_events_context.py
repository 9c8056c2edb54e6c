"""What an Event is about (action, due time, dry-run), carried for notifications.

The constructors that know it set it; :func:`about` fills in only what is missing from the
decision the Event belongs to; equality ignores it (docs/notifications.md#document).
"""

from __future__ import annotations

import dataclasses

import pytest
from hypothesis import given
from hypothesis import strategies as st

from lifecycle_controller.core.decision import events as catalogue
from lifecycle_controller.core.decision.events import Event, about

NS = 1_000_000_000


@pytest.mark.parametrize(
    ("event", "action", "due_ns", "dry_run"),
    [
        (catalogue.action_skipped("restart", 3 * NS), "restart", 3 * NS, False),
        (catalogue.rollout_stalled(NS, "1 of 2 updated"), "restart", None, False),
        (
            catalogue.upcoming(
                delete=True, due_ns=9 * NS, policy="always", dry_run=True, lead_ns=NS, name="n"
            ),
            "delete",
            9 * NS,
            True,
        ),
        (
            catalogue.upcoming(
                delete=False, due_ns=9 * NS, policy="never", dry_run=False, lead_ns=NS, name="n"
            ),
            "restart",
            9 * NS,
            False,
        ),
        (catalogue.deleted("2026-10-05T03:00:00Z"), None, None, False),
        (catalogue.restart_triggered(), None, None, False),
    ],
)
def test_what_the_constructors_know(
    event: Event, action: str | None, due_ns: int | None, dry_run: bool
) -> None:
    assert (event.action, event.due_ns, event.dry_run) == (action, due_ns, dry_run)


def test_about_fills_only_what_is_missing() -> None:
    stalled = catalogue.rollout_stalled(NS, "1 of 2 updated")
    filled = about(stalled, action="delete", due_ns=7, dry_run=False)
    assert (filled.action, filled.due_ns, filled.dry_run) == ("restart", 7, False)
    deleted = about(catalogue.deleted("x"), action="delete", due_ns=5, dry_run=True)
    assert (deleted.action, deleted.due_ns, deleted.dry_run) == ("delete", 5, True)


@given(
    action=st.none() | st.sampled_from(["delete", "restart"]),
    due=st.none() | st.integers(min_value=0, max_value=2**62),
    dry_run=st.booleans(),
    first=st.none() | st.sampled_from(["delete", "restart"]),
    first_due=st.none() | st.integers(min_value=0, max_value=2**62),
    first_dry=st.booleans(),
)
def test_about_keeps_what_is_known_and_never_changes_identity(
    action: str | None,
    due: int | None,
    dry_run: bool,
    first: str | None,
    first_due: int | None,
    first_dry: bool,
) -> None:
    event = Event(
        catalogue.EventType.NORMAL,
        "Deleted",
        "m",
        action=first,
        due_ns=first_due,
        dry_run=first_dry,
    )
    filled = about(event, action=action, due_ns=due, dry_run=dry_run)
    assert filled == event
    assert filled.action == (first if first is not None else action)
    assert filled.due_ns == (first_due if first_due is not None else due)
    assert filled.dry_run is (first_dry or dry_run)


@given(
    dedupe=st.none() | st.text(max_size=5),
    name=st.none() | st.text(max_size=5),
    at_ns=st.none() | st.integers(min_value=0, max_value=2**62),
    action=st.none() | st.sampled_from(["delete", "restart"]),
)
def test_about_carries_every_other_field(
    dedupe: str | None, name: str | None, at_ns: int | None, action: str | None
) -> None:
    """``about`` builds the Event field by field: none of the fields it does not fill is lost
    (a field added to Event and forgotten there fails here)."""
    event = Event(catalogue.EventType.WARNING, "R", "m", dedupe, name, action, None, False, at_ns)
    filled = about(event, action="delete", due_ns=3, dry_run=True)
    expected = dataclasses.replace(event, action=action or "delete", due_ns=3, dry_run=True)
    assert [getattr(filled, f.name) for f in dataclasses.fields(Event)] == [
        getattr(expected, f.name) for f in dataclasses.fields(Event)
    ]
