"""The ``reason`` label of ``lifecycle_misconfigurations_total`` for each problem Event."""

from __future__ import annotations

from typing import Final

from lifecycle_controller.core.events import (
    CONFLICTING_ANNOTATIONS,
    DELETE_TTL_EXCEEDED,
    INVALID_ANNOTATION,
    INVALID_ANNOTATION_VALUE,
    INVALID_STATE,
    INVALID_TIMEZONE,
    NOT_POD_SPAWNER,
    UNSUPPORTED_RESTART_KIND,
)

__all__ = ["MISCONFIGURATION_LABELS", "misconfiguration_label"]

#: The ``reason`` label of ``lifecycle_misconfigurations_total`` for each problem Event.
MISCONFIGURATION_LABELS: Final = {
    INVALID_ANNOTATION: "invalid_annotation",
    INVALID_ANNOTATION_VALUE: "invalid_annotation",
    INVALID_TIMEZONE: "invalid_timezone",
    INVALID_STATE: "invalid_state",
    NOT_POD_SPAWNER: "not_pod_spawner",
    UNSUPPORTED_RESTART_KIND: "unsupported_restart_kind",
    CONFLICTING_ANNOTATIONS: "conflicting_annotations",
    DELETE_TTL_EXCEEDED: "delete_ttl_exceeded",
}


def misconfiguration_label(event_reason: str) -> str:
    """The metric label for a problem Event's reason (``invalid_annotation`` if unknown)."""
    return MISCONFIGURATION_LABELS.get(event_reason, "invalid_annotation")
