"""Whether a matching policy covers an object by its own terms (docs/policies.md#precedence).

A policy's selection says which objects it matches; a one-off action also says *when* it
applies, and so which of them it is about. A ``delete-at`` or ``restart-at`` is about the
objects that existed before that time: one created at or after it is none of the policy's
business, and a ``restart-at`` is done for a workload whose Pod template marker is at or
after it. Such a policy leaves the object alone for its own reasons, whatever else applies,
so precedence (:mod:`.precedence`) passes it over: it is no contender for that object, and
the next one decides. Without this, a spent one-off policy would still win its family and
keep every lower policy (a cluster-wide ``delete-after``, a nightly restart) away from the
new objects for good.

A policy whose ``since`` has no value for the object (the field it reads is absent, ``null``
or not a time: :mod:`.since`) leaves it alone too (:func:`no_since`): there is nothing to
count its ``delete-after`` from.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Final

from lifecycle_controller.core.policy.model import Policy, PolicyRef
from lifecycle_controller.core.text.timestamps import (
    format_rfc3339_nano,
    parse_rfc3339,
    parse_rfc3339_or_none,
)

__all__ = ["NO_SINCE", "LeftAlone", "leaves_alone", "no_since"]

#: How a policy whose ``since`` has no value for the object says why it leaves it alone.
NO_SINCE = "its since has no value"

#: The one-off actions: each covers only what existed before its time.
_ONE_OFF: Final = ("delete-at", "restart-at")


@dataclass(frozen=True, slots=True)
class LeftAlone:
    """A matching policy that leaves the object alone for its own reasons (no contender)."""

    ref: PolicyRef
    #: ``created 2026-12-01T10:00:00Z, at or after its delete-at 2026-12-01T00:00:00Z``
    reason: str
    #: Its ``since`` has no value for the object (not a spent one-off: :mod:`.since`).
    unanchored: bool = False

    def describe(self) -> str:
        """``left alone by LifecyclePolicy/team-a/sprint: created …, at or after its …``"""
        return f"left alone by {self.ref}: {self.reason}"


def leaves_alone(policy: Policy, creation_ns: int | None, restart_marker: str | None) -> str | None:
    """Why ``policy`` leaves the object alone (None: it covers it, so it contends).

    ``creation_ns``: the object's creation; ``restart_marker``: its Pod template's
    ``restartedAt`` (or an occurrence a policy skipped). An unknown instant (no creation, an
    unreadable marker) counts as before the policy's time, so the policy contends.
    """
    for key in _ONE_OFF:
        at = policy.lifecycle.get(key)
        if at is None:
            continue
        when = parse_rfc3339(at)  # validated by parse_policy
        marker = parse_rfc3339_or_none(restart_marker) if key == "restart-at" else None
        if marker is not None and marker >= when:
            return f"restarted {restart_marker}, at or after its restart-at {at}: done"
        if creation_ns is not None and creation_ns >= when:
            return f"created {format_rfc3339_nano(creation_ns)}, at or after its {key} {at}"
    return None


def no_since(ref: PolicyRef, missing: str) -> LeftAlone:
    """A policy whose ``since`` has no value for the object leaves it alone: nothing to count
    its ``delete-after`` from (``missing``: why, :class:`~.since.SinceValue`)."""
    return LeftAlone(ref, f"{NO_SINCE}: {missing}", unanchored=True)
