"""A policy's ``limit``: at most N actions per sliding window, the rest held in due order.

``spec.limit: {actions: N, window: "1h"}`` caps how many actions (deletions, restarts and
dry-run reports, so that a rehearsal shows when the cap would bite) one policy takes within
any window of that length. Past the cap an action is not dropped: it is held, and goes when
the window frees a place, earliest due first (ties by object key), whichever object happens
to be looked at first.

This module is the pure part: parsing the field and the flag's default
(``--policy-default-limit 100/1h``), and :class:`LimitWindow`, the memory of one policy's
window (the instants of its admitted actions, and the objects waiting) with time injected
as nanoseconds. The controller keeps one window per policy and seeds it, after a restart or
a leader change, from the instants the policy's ``status.lastActions`` shows.
"""

from __future__ import annotations

import bisect
from collections.abc import Hashable, Iterable, Mapping
from dataclasses import dataclass
from typing import Final

from lifecycle_controller.core.text.durations import parse_duration
from lifecycle_controller.core.text.gotext import go_quote

__all__ = [
    "LimitVerdict",
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


@dataclass(frozen=True, slots=True)
class LimitVerdict:
    """``go``: the action may go now (the caller then calls :meth:`LimitWindow.admit`);
    else it is held until ``until_ns``, the instant the window frees the place it waits for
    (then it looks again). ``used`` counts the actions within the window ending now."""

    go: bool
    used: int
    until_ns: int | None = None


class LimitWindow:
    """One policy's sliding window: the instants of its actions and who waits, by due time."""

    def __init__(self, limit: PolicyLimit) -> None:
        self.limit = limit
        self._stamps: list[int] = []  # sorted instants of admitted actions
        self._waiting: dict[Hashable, int] = {}  # object -> its action's due time

    def seed(self, instants: Iterable[int]) -> None:
        """Instants of actions taken before this process knew (``status.lastActions``)."""
        for instant in instants:
            bisect.insort(self._stamps, instant)

    def _trim(self, now_ns: int) -> None:
        start = now_ns - self.limit.window_ns
        cut = bisect.bisect_right(self._stamps, start)
        if cut:
            del self._stamps[:cut]

    def used(self, now_ns: int) -> int:
        """Actions within the window ending at ``now_ns``."""
        self._trim(now_ns)
        return len(self._stamps)

    @property
    def held(self) -> int:
        """How many objects wait for a place."""
        return len(self._waiting)

    def held_until(self) -> int | None:
        """The instant the next place frees (None: nothing recorded)."""
        return self._stamps[0] + self.limit.window_ns if self._stamps else None

    def check(self, key: Hashable, due_ns: int, now_ns: int) -> LimitVerdict:
        """Whether the action of ``key`` (due at ``due_ns``) may go at ``now_ns``."""
        used = self.used(now_ns)
        free = self.limit.actions - used
        self._waiting[key] = due_ns
        ahead = sum(
            1
            for other, due in self._waiting.items()
            if other != key and (due, repr(other)) < (due_ns, repr(key))
        )
        if ahead < free:
            return LimitVerdict(True, used)
        # The place it waits for is the (ahead - free + 1)th to free up.
        index = min(ahead - free, len(self._stamps) - 1)
        until = self._stamps[index] + self.limit.window_ns if index >= 0 else now_ns + 1
        return LimitVerdict(False, used, max(until, now_ns + 1))

    def admit(self, key: Hashable, now_ns: int) -> None:
        """The action of ``key`` goes at ``now_ns``: it takes its place in the window."""
        self._waiting.pop(key, None)
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
        key, as :meth:`check` orders them)."""
        if not self._waiting:
            return None
        return min(self._waiting, key=lambda key: (self._waiting[key], repr(key)))

    def forget(self, key: Hashable) -> bool:
        """``key`` waits no more (gone, or no action of this policy is due); True if it did."""
        return self._waiting.pop(key, None) is not None
