"""What the controller writes: merge-patch bodies and the Pod-template restart marker.

Every write is one JSON merge patch (RFC 7386): ``null`` removes an annotation. Each one
also sets the top-level ``managed-by`` annotation. A restart adds the template marker and
the template ``managed-by`` in the same patch as its acknowledgement, so a committed
restart can never be replayed (docs/behaviour.md#guarded-writes).

The marker must change on every restart (docs/behaviour.md#restart-marker), even for two
restarts within one second (the reference writes the current second, so the second
restart would not roll Pods) and across a leader failover (a new leader does not know the
marker the previous one wrote: the cache never holds Pod templates, and the ordinary path
never GETs). Our rule: write the current instant in RFC 3339 with nanoseconds (Go's
``RFC3339Nano``, UTC), unless the previous marker (as this process last saw it) is at or after
it; then write the previous marker plus one nanosecond. The marker therefore always differs
from the previous one this process saw and never goes backwards; two processes only write
the same marker if they restart the same object in the same nanosecond.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from lifecycle_controller.core.objects import keys
from lifecycle_controller.core.text.timestamps import (
    TimestampError,
    format_rfc3339_nano,
    parse_rfc3339,
)

__all__ = ["annotation_patch", "next_restart_marker", "restart_patch", "write_body"]

AnnotationChanges = Mapping[str, str | None]


def annotation_patch(changes: AnnotationChanges) -> dict[str, Any]:
    """A patch of top-level annotations (None removes), plus ``managed-by``."""
    annotations: dict[str, str | None] = dict(changes)
    annotations[keys.MANAGED_BY] = keys.MANAGED_BY_VALUE
    return {"metadata": {"annotations": annotations}}


def _template_marker(marker: str) -> dict[str, Any]:
    return {
        "template": {
            "metadata": {
                "annotations": {
                    keys.RESTARTED_AT: marker,
                    keys.MANAGED_BY: keys.MANAGED_BY_VALUE,
                }
            }
        }
    }


def restart_patch(acknowledgement: AnnotationChanges, marker: str) -> dict[str, Any]:
    """The restart: acknowledgement and markers, top level and Pod template, in one patch."""
    patch = annotation_patch(acknowledgement)
    patch["spec"] = _template_marker(marker)
    return patch


def write_body(
    changes: AnnotationChanges, marker: str | None, *, annotations: bool
) -> dict[str, Any]:
    """The body of one write in its form: with ``annotations`` the annotation changes (and
    ``managed-by``) plus, for a restart, the template marker; without (a lifecycle policy's
    form) only the template marker, or nothing: an empty patch, still guarded by the
    resourceVersion."""
    if annotations:
        return annotation_patch(changes) if marker is None else restart_patch(changes, marker)
    return {} if marker is None else {"spec": _template_marker(marker)}


def next_restart_marker(now_ns: int, previous: str | None) -> str:
    """RFC 3339 with nanoseconds in UTC, always different from (and not before) ``previous``."""
    instant = now_ns
    if previous:
        try:
            previous_ns = parse_rfc3339(previous)
        except TimestampError:
            previous_ns = None  # not ours to interpret; any valid marker differs
        if previous_ns is not None and previous_ns >= instant:
            instant = previous_ns + 1
    return format_rfc3339_nano(instant)
