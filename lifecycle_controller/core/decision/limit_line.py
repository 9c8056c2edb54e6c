"""A policy's ``limit`` as one object's decision sees it: the facts of its window and line.

A lifecycle policy's ``limit`` (docs/policies.md#limit) lets it act at most ``actions`` times
within any sliding window of ``window_ns``; past that its due actions wait in a **line**, in
due order (ties by the object's key), and go as places free. The controller keeps that memory
(``core/policy/limit.py``, one window per policy); :class:`LimitFacts` is what one pass reads
of it, before its decision, like the breaker's and the budgets' facts, and
:func:`~lifecycle_controller.core.decision.guardrails.check` decides on it.

Every question here is answered in O(log n) of the line's length: the instants of the window
(sorted) and the line (sorted by ``(due, key id)``) are read with :mod:`bisect`, never walked.

* :meth:`LimitFacts.takes_place`: whether an action needs a place at all: a dry-run report
  reported already, or an occurrence let go already (a write that comes back on the same
  occurrence), takes none;
* :meth:`LimitFacts.turn`: None when the action may go now, else the instant its place is
  expected to free. Only the earliest waiters fit into the free places; a waiter further
  back is given the instant its own place frees if every one ahead goes in turn (the
  ``k``-th place to free after the window's ``A`` places is the ``k mod A``-th of them, ``k
  div A`` windows later), so a turn of the window wakes the waiters it can serve, not the
  whole line;
* :meth:`LimitFacts.unrecorded`: the action may take a place now, but its place is not
  recorded yet in the policy's status (``recording``: places are written before they are
  used, ``core/policy/places.py``): the pass asks for the record, and a failed record holds.
"""

from __future__ import annotations

import bisect
from collections.abc import Sequence
from dataclasses import dataclass

from lifecycle_controller.core.decision.outcomes import Decision, DryRun

__all__ = ["LimitFacts", "occurrence_due"]


def occurrence_due(decision: Decision) -> int:
    """The due time a place is recorded for (0 for an action with none)."""
    return decision.due_ns if decision.due_ns is not None else 0


@dataclass(frozen=True, slots=True, kw_only=True)
class LimitFacts:
    """One policy's limit as the object ``key_id`` sees it at ``now_ns``.

    ``stamps``: the instants of the actions within the window ending now (sorted);
    ``line``: the objects waiting, as ``(due, key id)`` (sorted); ``waiting_due``: the due
    time this object waits with (None: not in the line); ``admitted_due``: the occurrence
    of this object the window let go already; ``reported_due`` and ``reported_through``:
    its dry-run occurrence reported already by this process, and the instant through which
    an earlier process reported every one (docs/reliability.md#rehearsal-once).
    ``line`` and ``stamps`` are the window's own sorted lists, read (never changed) with no
    ``await`` between the read and the decision, as every guardrail's facts are.
    """

    policy: str
    actions: int
    window_ns: int
    #: The limit as the policy says it (``2/20s``), for the hold's log.
    text: str
    now_ns: int
    key_id: str
    stamps: Sequence[int] = ()
    line: Sequence[tuple[int, str]] = ()
    waiting_due: int | None = None
    admitted_due: int | None = None
    reported_due: int | None = None
    reported_through: int | None = None
    #: The instant the limit began holding (None: it holds nothing): a catch-up does not
    #: count the time since as lateness (docs/policies.md#limit).
    held_since_ns: int | None = None
    #: Places are recorded in the policy's status before they are used (the controller's
    #: leader; False for the tools, which write nothing).
    recording: bool = False
    #: The due times of this object's occurrences holding a recorded place, usable now
    #: (``occurrence_due``).
    recorded: frozenset[int] = frozenset()
    #: Why the last record of the policy's places failed (None: it did not).
    record_problem: str | None = None

    def takes_place(self, decision: Decision) -> bool:
        """Whether ``decision``'s action takes a place in the window (see the module)."""
        due = decision.due_ns
        if isinstance(decision, DryRun) and due is not None:
            if due == self.reported_due:
                return False
            if self.reported_through is not None and due <= self.reported_through:
                return False
        return due is None or due != self.admitted_due

    def unrecorded(self, decision: Decision) -> bool:
        """``decision``'s action may take a place now, and its place is not recorded yet."""
        return (
            self.recording
            and self.takes_place(decision)
            and self.turn(decision.due_ns) is None
            and occurrence_due(decision) not in self.recorded
        )

    def rank(self, due_ns: int) -> int:
        """How many other objects wait ahead of an action due at ``due_ns``."""
        ahead = bisect.bisect_left(self.line, (due_ns, self.key_id))
        if self.waiting_due is not None and self.waiting_due < due_ns:
            ahead -= 1  # its own place in the line, taken with an earlier due time
        return ahead

    def turn(self, due_ns: int | None) -> int | None:
        """None when an action due at ``due_ns`` may take a place now, else the instant its
        place is expected to free (always after now)."""
        used = len(self.stamps)
        free = self.actions - used
        rank = self.rank(self.now_ns if due_ns is None else due_ns)
        if rank < free:
            return None
        later = rank - max(free, 0)  # the places that go first: the free ones, then in turn
        index, rounds = later % self.actions, later // self.actions
        index += max(0, -free)  # more actions in the window than the limit (it was lowered)
        if index < used:
            frees = self.stamps[index] + self.window_ns
        else:  # a place free now, taken by one ahead: it frees a window after that
            frees = self.now_ns + self.window_ns
        return max(frees + rounds * self.window_ns, self.now_ns + 1)
