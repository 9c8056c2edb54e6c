"""What may keep a restarted workload's Pods from being replaced (rollout blockers).

The restart patch returns the whole object; these checks read it and name the settings that
block or limit the rollout, so the controller can warn instead of silently "succeeding"
(docs/behaviour.md#rollout-blockers). Pure: the object is a plain dict.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

__all__ = ["restart_marker_of", "rollout_blockers"]


def _dig(obj: Mapping[str, Any], *path: str) -> Any:
    current: Any = obj
    for part in path:
        if not isinstance(current, Mapping):
            return None
        current = current.get(part)
    return current


def rollout_blockers(obj: Mapping[str, Any]) -> list[str]:
    """Human-readable reasons why Pods may not be replaced after a template change."""
    kind = obj.get("kind")
    reasons: list[str] = []
    if kind == "Deployment" and _dig(obj, "spec", "paused") is True:
        reasons.append("the Deployment is paused")
    if kind in ("StatefulSet", "DaemonSet"):
        strategy = _dig(obj, "spec", "updateStrategy", "type")
        if strategy == "OnDelete":
            reasons.append(f"the {kind} uses the OnDelete update strategy")
    if kind == "StatefulSet":
        partition = _dig(obj, "spec", "updateStrategy", "rollingUpdate", "partition")
        if isinstance(partition, int) and partition > 0:
            reasons.append(f"the StatefulSet has a rolling-update partition of {partition}")
    return reasons


def restart_marker_of(obj: Mapping[str, Any], marker_key: str) -> str | None:
    """The Pod template's restart marker annotation in a workload, if it has one."""
    value = _dig(obj, "spec", "template", "metadata", "annotations", marker_key)
    return value if isinstance(value, str) else None
