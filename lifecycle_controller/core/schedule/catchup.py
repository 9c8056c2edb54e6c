"""Catch-up rules and the in-memory "observed before due" ledger.

The contract: docs/behaviour.md#occurrence-check and
docs/annotations.md#missed-actions-catch-up-policies. The user docs and the annotation say
"catch-up policy", the reference's word; in code it is a :class:`CatchUpRule`, so that
"policy" means one thing there: a lifecycle policy.

A catch-up rule says whether an occurrence may still run after its scheduled time: ``always``, a
window (``15m``: at most that late, inclusive), or ``never`` (only if this process saw it
coming). ``never`` needs memory: the Ledger maps each work item to the one occurrence it
has "armed", identified by the object UID, the action, the catch-up rule and the configuration
that produced it, plus the due instant. It lives in process memory only, so a restart or a
leader failover forgets every arm, and an overdue occurrence first seen afterwards is
skipped.

The Ledger does no locking: the caller serializes access (one reconcile per key at a time).
"""

from __future__ import annotations

import enum
from collections.abc import Hashable, Iterable
from dataclasses import dataclass
from typing import Protocol

from lifecycle_controller.core.text.durations import DurationError, parse_duration
from lifecycle_controller.core.text.gotext import go_quote

__all__ = [
    "ALWAYS",
    "NEVER",
    "Arm",
    "CatchUpError",
    "CatchUpMode",
    "CatchUpRule",
    "Forget",
    "Identity",
    "Ledger",
    "LedgerOp",
    "LedgerView",
    "Observe",
    "observe_outcome",
    "parse_catch_up_rule",
]


class CatchUpMode(enum.Enum):
    ALWAYS = "always"
    NEVER = "never"
    WINDOW = "window"


@dataclass(frozen=True, slots=True)
class CatchUpRule:
    """A parsed catch-up rule; ``window_ns`` is set for WINDOW only."""

    mode: CatchUpMode
    window_ns: int = 0

    def within_window(self, due_ns: int, now_ns: int) -> bool:
        """WINDOW rule: late by at most the window, measured from the scheduled time."""
        return now_ns <= due_ns + self.window_ns


ALWAYS = CatchUpRule(CatchUpMode.ALWAYS)
NEVER = CatchUpRule(CatchUpMode.NEVER)


class CatchUpError(ValueError):
    """An invalid policy; ``str()`` is the reference's message."""


def parse_catch_up_rule(value: str) -> CatchUpRule:
    """``always``, ``never`` or a strict positive duration (case-sensitive).

    Used for the ``catch-up`` annotation and the ``--delete-catch-up`` /
    ``--restart-catch-up`` flags. Raises CatchUpError.
    """
    if value == "always":
        return ALWAYS
    if value == "never":
        return NEVER
    try:
        window = parse_duration(value)
    except DurationError as error:
        raise CatchUpError(
            f"invalid catch-up policy {go_quote(value)}: "
            f"expected always, never, or a positive duration: {error}"
        ) from None
    return CatchUpRule(CatchUpMode.WINDOW, window)


@dataclass(frozen=True, slots=True)
class Identity:
    """What an armed occurrence belongs to (docs/behaviour.md#occurrence-check).

    ``config`` is the selected action's configuration: (``delete-at``, value),
    (``restart-at``, value), (``restart-cron``, expression, zone value, anchor) or
    (``restart-every``, value, anchor). Other annotations are deliberately not part of it.
    """

    uid: str
    action: str
    catch_up: CatchUpRule
    config: tuple[str, ...]


@dataclass(frozen=True, slots=True)
class Arm:
    """An occurrence this process observed before it was due."""

    identity: Identity
    due_ns: int


@dataclass(frozen=True, slots=True)
class Forget:
    """Ledger operation: drop the item's arm."""


@dataclass(frozen=True, slots=True)
class Observe:
    """Ledger operation: the ``never`` occurrence check (see :func:`observe_outcome`)."""

    identity: Identity
    due_ns: int
    now_ns: int


LedgerOp = Forget | Observe


def observe_outcome(
    stored: Arm | None, identity: Identity, due_ns: int, now_ns: int
) -> tuple[bool, Arm | None]:
    """The ``never`` check, purely: (allowed, the arm to keep afterwards).

    An arm whose identity or due instant differs is dropped. A future occurrence is armed
    (or refreshed) and allowed. A due one is allowed only if a matching arm existed.
    """
    if stored is not None and (stored.identity != identity or stored.due_ns != due_ns):
        stored = None
    if due_ns > now_ns:
        return True, Arm(identity, due_ns)
    return stored is not None, stored


class LedgerView(Protocol):
    """Read access, which is all that decide() needs."""

    def peek(self, key: Hashable) -> Arm | None:
        """The arm stored for a work item, if any."""
        ...  # pragma: no cover


class Ledger:
    """Armed occurrences by work-item key. Plain dict; the caller serializes access."""

    def __init__(self) -> None:
        self._arms: dict[Hashable, Arm] = {}

    def __len__(self) -> int:
        return len(self._arms)

    def peek(self, key: Hashable) -> Arm | None:
        return self._arms.get(key)

    def disarm(self, key: Hashable) -> None:
        self._arms.pop(key, None)

    def observe(self, key: Hashable, identity: Identity, due_ns: int, now_ns: int) -> bool:
        """Run the ``never`` check for an item, updating its arm; returns "allowed"."""
        allowed, arm = observe_outcome(self._arms.get(key), identity, due_ns, now_ns)
        if arm is None:
            self._arms.pop(key, None)
        else:
            self._arms[key] = arm
        return allowed

    def apply(self, key: Hashable, ops: Iterable[LedgerOp]) -> None:
        """Apply a decision's ledger operations for one item, in order."""
        for op in ops:
            if isinstance(op, Forget):
                self.disarm(key)
            else:
                self.observe(key, op.identity, op.due_ns, op.now_ns)
