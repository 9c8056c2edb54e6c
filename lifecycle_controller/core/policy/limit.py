"""A policy's ``limit``: at most N actions per sliding window, the rest held in due order.

``spec.limit: {actions: N, window: "1h"}`` caps how many actions (deletions, restarts and
dry-run reports, so that a rehearsal shows when the cap would bite) one policy takes within
any window of that length. Past the cap an action is not dropped: it is held, and goes when
the window frees a place, earliest due first (ties by object key), whichever object happens
to be looked at first.

This module is the pure part: parsing the field and the flag's default
(``--policy-default-limit 100/1h``), and :class:`LimitWindow`, the memory of one policy's
window (the instants of its admitted actions, and the line of objects waiting) with time
injected as nanoseconds. The controller keeps one window per policy and seeds it, after a
restart or a leader change, from the places the policy's status records (``status.limit``,
:mod:`.places`: every place used or reserved, recorded before it was used), or, for a status
written before that record existed, from the instants ``status.lastActions`` shows.
Whether an action goes is not decided here: the window hands its facts to
:func:`~lifecycle_controller.core.decision.guardrails.check`, like every guardrail.
"""

from __future__ import annotations

import bisect
from collections.abc import Hashable, Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Final

from lifecycle_controller.core.decision.limit_line import LimitFacts
from lifecycle_controller.core.text.durations import parse_duration
from lifecycle_controller.core.text.gotext import go_quote
from lifecycle_controller.core.text.timestamps import parse_rfc3339_or_none

__all__ = [
    "LimitWindow",
    "PolicyLimit",
    "parse_limit",
    "parse_limit_flag",
]

#: The condition a limited policy shows, and its reason.
LIMITED: Final = "Limited"


@dataclass(frozen=True, slots=True)
class PolicyLimit:
    """At most ``actions`` actions per window of ``window_ns`` (the source text kept)."""

    actions: int
    window_ns: int
    window: str

    def __str__(self) -> str:
        return f"{self.actions}/{self.window}"


def _window(value: object, where: str, problems: list[str]) -> tuple[int, str] | None:
    if not isinstance(value, str):
        problems.append(f'{where}: must be a duration string such as "1h"')
        return None
    try:
        window_ns = parse_duration(value)
    except ValueError as error:
        problems.append(f"{where}: {error}")
        return None
    if window_ns <= 0:
        problems.append(f"{where}: must be positive, got {go_quote(value)}")
        return None
    return window_ns, value


def parse_limit(raw: object, problems: list[str]) -> PolicyLimit | None:
    """``spec.limit`` as a :class:`PolicyLimit`; every problem appended to ``problems``."""
    if raw is None:
        return None
    if not isinstance(raw, Mapping):
        problems.append('spec.limit: must be an object such as {actions: 50, window: "1h"}')
        return None
    found = len(problems)
    problems.extend(
        f"spec.limit.{key}: unknown field"
        for key in sorted(set(raw) - {"actions", "window"}, key=str)
    )
    actions = raw.get("actions")
    if isinstance(actions, bool) or not isinstance(actions, int) or actions < 1:
        problems.append("spec.limit.actions: must be an integer of at least 1")
    window = _window(raw.get("window"), "spec.limit.window", problems)
    if len(problems) > found or window is None or not isinstance(actions, int):
        return None
    return PolicyLimit(actions, window[0], window[1])


def parse_limit_flag(text: str) -> PolicyLimit | None:
    """``N/DURATION`` (``100/1h``); ``""`` or ``"0"`` is no default. Raises ValueError."""
    text = text.strip()
    if text in ("", "0"):
        return None
    count, sep, window = text.partition("/")
    if not sep:
        raise ValueError(f'expected ACTIONS/WINDOW such as "100/1h", got {go_quote(text)}')
    try:
        actions = int(count)
    except ValueError:
        raise ValueError(f"actions must be an integer, got {go_quote(count)}") from None
    if actions == 0:
        return None
    problems: list[str] = []
    limit = parse_limit({"actions": actions, "window": window}, problems)
    if limit is None:
        raise ValueError("; ".join(p.removeprefix("spec.limit.") for p in problems))
    return limit


class LimitWindow:
    """One policy's sliding window: the instants of its actions, and its line.

    The line holds the objects whose due action the limit holds, sorted by ``(due, key
    id)``: :meth:`facts` hands it to the decision (``core/decision/limit_line.py``), which
    finds an object's place in it in O(log n). ``held_since`` is the instant the limit began
    holding (the line's first waiter since it was last empty), which a catch-up measures
    lateness against: time spent held is not lateness (docs/policies.md#limit).
    """

    def __init__(self, limit: PolicyLimit, *, generation: int = 0) -> None:
        self.limit = limit
        #: The policy's generation the line is for: an edit empties it.
        self.generation = generation
        self.held_since: int | None = None
        self._stamps: list[int] = []  # sorted instants of admitted actions
        self._line: list[tuple[int, str]] = []  # sorted (due, key id) of the waiters
        self._waiting: dict[Hashable, tuple[int, str]] = {}  # object -> its place in line
        self._keys: dict[str, Hashable] = {}  # key id -> object

    def seed(self, instants: Iterable[int]) -> None:
        """Instants of actions taken before this process knew (``status.lastActions``)."""
        for instant in instants:
            bisect.insort(self._stamps, instant)

    def stamps(self, now_ns: int) -> list[int]:
        """The instants of the actions within the window ending at ``now_ns`` (sorted)."""
        start = now_ns - self.limit.window_ns
        cut = bisect.bisect_right(self._stamps, start)
        if cut:
            del self._stamps[:cut]
        return self._stamps

    def used(self, now_ns: int) -> int:
        """Actions within the window ending at ``now_ns``."""
        return len(self.stamps(now_ns))

    @property
    def held(self) -> int:
        """How many objects wait for a place."""
        return len(self._line)

    def held_until(self) -> int | None:
        """The instant the next place frees (None: nothing recorded)."""
        return self._stamps[0] + self.limit.window_ns if self._stamps else None

    def facts(
        self,
        key: Hashable,
        key_id: str,
        now_ns: int,
        *,
        policy: str,
        admitted_due: int | None = None,
        reported_due: int | None = None,
        reported_through: int | None = None,
        held_since: int | None = None,
        recording: bool = False,
        recorded: frozenset[int] = frozenset(),
        record_problem: str | None = None,
    ) -> LimitFacts:
        """The window as the decision over ``key`` reads it at ``now_ns``."""
        waiting = self._waiting.get(key)
        return LimitFacts(
            policy=policy,
            actions=self.limit.actions,
            window_ns=self.limit.window_ns,
            text=str(self.limit),
            now_ns=now_ns,
            key_id=key_id,
            stamps=self.stamps(now_ns),
            line=self._line,
            waiting_due=None if waiting is None else waiting[0],
            admitted_due=admitted_due,
            reported_due=reported_due,
            reported_through=reported_through,
            held_since_ns=held_since,
            recording=recording,
            recorded=recorded,
            record_problem=record_problem,
        )

    def join(self, key: Hashable, key_id: str, due_ns: int, now_ns: int) -> bool:
        """``key`` waits in the line with its action due at ``due_ns``; True if it was not
        waiting before (its place moves when its due time changed)."""
        entry = (due_ns, key_id)
        old = self._waiting.get(key)
        if old == entry:
            return False
        if old is not None:
            self._line.pop(bisect.bisect_left(self._line, old))
        elif not self._line and self.held_since is None:
            self.held_since = now_ns  # the limit begins holding
        bisect.insort(self._line, entry)
        self._waiting[key] = entry
        self._keys[key_id] = key
        return old is None

    def leave(self, key: Hashable) -> bool:
        """``key`` waits no more (let go, gone, decided otherwise); True if it did."""
        entry = self._waiting.pop(key, None)
        if entry is None:
            return False
        self._line.pop(bisect.bisect_left(self._line, entry))
        del self._keys[entry[1]]
        if not self._line:
            self.held_since = None  # the hold is over
        return True

    def empty_line(self) -> list[Hashable]:
        """Every waiter leaves (the policy was edited: its objects are decided again and
        rejoin); returns who waited. ``held_since`` stays: an edit does not end the hold."""
        waiting = list(self._waiting)
        self._line.clear()
        self._waiting.clear()
        self._keys.clear()
        return waiting

    def admit(self, key: Hashable, now_ns: int) -> None:
        """The action of ``key`` goes at ``now_ns``: it takes its place in the window."""
        self.leave(key)
        bisect.insort(self._stamps, now_ns)

    def give_back(self, instant_ns: int) -> bool:
        """An action admitted at ``instant_ns`` was not carried out (its write failed): its
        place is free again. True if the window still held it."""
        index = bisect.bisect_left(self._stamps, instant_ns)
        if index < len(self._stamps) and self._stamps[index] == instant_ns:
            del self._stamps[index]
            return True
        return False

    def first_waiting(self) -> Hashable | None:
        """The object waiting that goes first when a place frees: the earliest due (ties by
        key id)."""
        return self._keys[self._line[0][1]] if self._line else None

    def room(self, now_ns: int) -> bool:
        """A place is free now and someone waits for one."""
        return bool(self._line) and self.used(now_ns) < self.limit.actions


def limited_since(status: Mapping[str, object]) -> int | None:
    """When the policy's ``Limited`` condition became ``True`` (None: it is not, or the
    status does not say): a new controller's window holds since then (docs/policies.md#limit)."""
    conditions = status.get("conditions")
    for condition in conditions if isinstance(conditions, Sequence) else ():
        if not isinstance(condition, Mapping) or condition.get("type") != LIMITED:
            continue
        if condition.get("status") != "True":
            return None
        stamp = condition.get("lastTransitionTime")
        return parse_rfc3339_or_none(stamp) if isinstance(stamp, str) else None
    return None
