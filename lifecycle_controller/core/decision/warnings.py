"""Warnings with lead time (docs/annotations.md#warnings-before-acting), as pure functions.

``warn-before`` (or the ``--warn-before`` default) asks for one Normal ``UpcomingDeletion`` /
``UpcomingRestart`` Event that long before an occurrence's effective due time (after the
maintenance windows). "Once per occurrence" is kept by the Event's name, derived from the
object's UID, the action and the occurrence's scheduled time: the recorder creates it under
that name, so a second create (another pass, another leader) is answered AlreadyExists.

An invalid ``warn-before`` is a Warning that turns the warning off and blocks nothing else.
"""

from __future__ import annotations

import hashlib
import re
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Final

from lifecycle_controller.core.decision import events
from lifecycle_controller.core.decision.events import Event
from lifecycle_controller.core.objects import keys
from lifecycle_controller.core.schedule.catchup import CatchUpMode, CatchUpRule
from lifecycle_controller.core.text.durations import DurationError, parse_duration
from lifecycle_controller.core.text.gotext import format_go_duration

__all__ = [
    "NO_LEAD",
    "LeadTime",
    "catch_up_text",
    "occurrence_name",
    "parse_lead_time",
    "parse_warn_before",
]

#: ``0s``, ``00m`` ...: the annotation's way to turn a ``--warn-before`` default off.
_ZERO = re.compile(r"0+[smhd]")


@dataclass(frozen=True, slots=True)
class LeadTime:
    """The lead time in nanoseconds (0: no warning) and the Warning for a bad annotation."""

    lead_ns: int
    problem: Event | None = None

    def warn_at(self, effective_due_ns: int) -> int | None:
        """When to warn about an occurrence effectively due then; None without a lead time."""
        return None if self.lead_ns <= 0 else effective_due_ns - self.lead_ns


#: No lead time: no warning.
NO_LEAD: Final = LeadTime(0)


def parse_warn_before(value: str) -> int:
    """A ``warn-before`` value in nanoseconds: the strict duration grammar, or a zero such as
    ``0s`` (no warning). Raises DurationError."""
    return 0 if _ZERO.fullmatch(value) else parse_duration(value)


def parse_lead_time(annotations: Mapping[str, str], default_ns: int, uid: str) -> LeadTime:
    """The object's ``warn-before`` (strict duration grammar, or zero), else the default."""
    if keys.WARN_BEFORE not in annotations:
        return LeadTime(default_ns)
    value = annotations[keys.WARN_BEFORE]
    try:
        return LeadTime(parse_warn_before(value))
    except DurationError as error:
        return LeadTime(0, events.invalid_warn_before(uid=uid, value=value, error=str(error)))


def occurrence_name(uid: str, action: str, scheduled_ns: int) -> str:
    """The Event name suffix of the warning for one occurrence of one object."""
    digest = hashlib.sha256(f"{uid}\0{action}\0{scheduled_ns}".encode()).hexdigest()
    return f"upcoming-{digest[:16]}"


def catch_up_text(rule: CatchUpRule) -> str:
    """The catch-up policy as the warning names it: ``always``, ``never`` or a duration."""
    if rule.mode is CatchUpMode.WINDOW:
        return format_go_duration(rule.window_ns)
    return str(rule.mode.value)
