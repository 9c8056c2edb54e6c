"""Whether a restarted workload's rollout has completed, read from its status (pure).

docs/behaviour.md#rollout-verification. The rules per kind:

* Deployment: ``status.observedGeneration >= metadata.generation`` and
  ``updatedReplicas == replicas == availableReplicas == spec.replicas``;
* StatefulSet: observed generation, ``updateRevision == currentRevision`` and
  ``readyReplicas == spec.replicas``;
* DaemonSet: observed generation and
  ``updatedNumberScheduled == numberAvailable == desiredNumberScheduled``.

:func:`rollout_progress` also names the status fields, for the ``RolloutStalled`` Warning.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

__all__ = ["RolloutProgress", "rollout_progress"]


@dataclass(frozen=True, slots=True)
class RolloutProgress:
    """``complete`` and the status fields that decided it (``name=value, ...``)."""

    complete: bool
    detail: str


def _int(mapping: Mapping[str, Any], key: str, default: int = 0) -> int:
    value = mapping.get(key, default)
    return value if isinstance(value, int) else default


def _detail(fields: Mapping[str, object]) -> str:
    return ", ".join(f"{name}={value}" for name, value in fields.items())


def rollout_progress(obj: Mapping[str, Any]) -> RolloutProgress:
    """The rollout state of a Deployment, StatefulSet or DaemonSet given as a plain dict."""
    kind = obj.get("kind")
    metadata = obj.get("metadata") or {}
    spec = obj.get("spec") or {}
    status = obj.get("status") or {}
    generation = _int(metadata, "generation")
    observed = _int(status, "observedGeneration")
    fields: dict[str, object] = {"generation": generation, "observedGeneration": observed}
    caught_up = observed >= generation
    if kind == "DaemonSet":
        desired = _int(status, "desiredNumberScheduled")
        updated = _int(status, "updatedNumberScheduled")
        available = _int(status, "numberAvailable")
        fields |= {
            "desiredNumberScheduled": desired,
            "updatedNumberScheduled": updated,
            "numberAvailable": available,
        }
        done = caught_up and updated == desired and available == desired
        return RolloutProgress(done, _detail(fields))
    wanted = _int(spec, "replicas", 1)
    if kind == "StatefulSet":
        update_revision = status.get("updateRevision") or ""
        current_revision = status.get("currentRevision") or ""
        ready = _int(status, "readyReplicas")
        fields |= {
            "replicas": wanted,
            "readyReplicas": ready,
            "currentRevision": current_revision or "-",
            "updateRevision": update_revision or "-",
        }
        done = caught_up and update_revision == current_revision and ready == wanted
        return RolloutProgress(done, _detail(fields))
    replicas = _int(status, "replicas")
    updated = _int(status, "updatedReplicas")
    available = _int(status, "availableReplicas")
    fields |= {
        "replicas": wanted,
        "statusReplicas": replicas,
        "updatedReplicas": updated,
        "availableReplicas": available,
        "unavailableReplicas": _int(status, "unavailableReplicas"),
    }
    done = caught_up and updated == replicas == available == wanted
    return RolloutProgress(done, _detail(fields))
