"""What may keep a restarted workload's Pods from being replaced (SPEC §2.8).

The restart patch returns the whole object; these checks read it and name the settings that
block or limit the rollout, so the controller can warn instead of silently "succeeding".
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any


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


def blocker_message(reasons: list[str]) -> str:
    """The Warning Event text for ``reasons`` (non-empty)."""
    return (
        "Pod template updated for a restart, but Pods may not be replaced: "
        + "; ".join(reasons)
        + "."
    )
