"""What the controller writes: merge-patch bodies and the Pod-template restart marker.

Every write is one JSON merge patch (RFC 7386): ``null`` removes an annotation. Each one
also sets the top-level ``managed-by`` annotation. A restart adds the template marker and
the template ``managed-by`` in the same patch as its acknowledgement, so a committed
restart can never be replayed (docs/behaviour.md#guarded-writes).

The marker must change on every restart (docs/behaviour.md#restart-marker), even for two
restarts within one second (the reference writes the current second, so the second
restart would not roll Pods). Our rule: write the current second, unless the previous
marker (as the caller last saw it) is at or after it; then write the previous marker plus
one second. The marker therefore always differs from the previous one and never goes
backwards.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from lifecycle_controller.core import keys
from lifecycle_controller.core.durations import NS_PER_SECOND
from lifecycle_controller.core.timestamps import (
    TimestampError,
    format_rfc3339_seconds,
    parse_rfc3339,
)

__all__ = ["annotation_patch", "next_restart_marker", "restart_patch"]

AnnotationChanges = Mapping[str, str | None]


def annotation_patch(changes: AnnotationChanges) -> dict[str, Any]:
    """A patch of top-level annotations (None removes), plus ``managed-by``."""
    annotations: dict[str, str | None] = dict(changes)
    annotations[keys.MANAGED_BY] = keys.MANAGED_BY_VALUE
    return {"metadata": {"annotations": annotations}}


def restart_patch(acknowledgement: AnnotationChanges, marker: str) -> dict[str, Any]:
    """The restart: acknowledgement and markers, top level and Pod template, in one patch."""
    patch = annotation_patch(acknowledgement)
    patch["spec"] = {
        "template": {
            "metadata": {
                "annotations": {
                    keys.RESTARTED_AT: marker,
                    keys.MANAGED_BY: keys.MANAGED_BY_VALUE,
                }
            }
        }
    }
    return patch


def next_restart_marker(now_ns: int, previous: str | None) -> str:
    """RFC 3339 seconds in UTC, always different from (and not before) ``previous``."""
    seconds = now_ns // NS_PER_SECOND
    if previous:
        try:
            previous_seconds = parse_rfc3339(previous) // NS_PER_SECOND
        except TimestampError:
            previous_seconds = None  # not ours to interpret; any valid marker differs
        if previous_seconds is not None and previous_seconds >= seconds:
            seconds = previous_seconds + 1
    return format_rfc3339_seconds(seconds * NS_PER_SECOND)
