"""Whether a restarted workload's rollout has completed, read from its status (pure).

docs/behaviour.md#rollout-verification. The rules per kind:

* Deployment: ``status.observedGeneration >= metadata.generation`` and
  ``updatedReplicas == replicas == availableReplicas == spec.replicas``;
* StatefulSet: observed generation, ``readyReplicas == spec.replicas`` and
  ``updateRevision == currentRevision``; with a rolling-update ``partition`` P > 0 (a staged
  rollout: only the Pods with an ordinal >= P take the new template, the others keep the old
  revision on purpose) ``updatedReplicas >= spec.replicas - P`` instead, as
  ``kubectl rollout status`` judges a partitioned rollout;
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


def _partition(spec: Mapping[str, Any]) -> int:
    """The rolling-update partition of a StatefulSet's spec (0 when none)."""
    strategy = spec.get("updateStrategy") or {}
    if strategy.get("type", "RollingUpdate") != "RollingUpdate":
        return 0
    partition = (strategy.get("rollingUpdate") or {}).get("partition")
    return partition if isinstance(partition, int) and partition > 0 else 0


def _statefulset_progress(
    spec: Mapping[str, Any],
    status: Mapping[str, Any],
    wanted: int,
    caught_up: bool,
    fields: dict[str, object],
) -> RolloutProgress:
    ready = _int(status, "readyReplicas")
    fields |= {"replicas": wanted, "readyReplicas": ready}
    partition = _partition(spec)
    if partition:
        # A staged rollout: the Pods below the partition keep the old revision on purpose.
        updated = _int(status, "updatedReplicas")
        fields |= {"partition": partition, "updatedReplicas": updated}
        done = caught_up and ready == wanted and updated >= wanted - partition
        return RolloutProgress(done, _detail(fields))
    update_revision = status.get("updateRevision") or ""
    current_revision = status.get("currentRevision") or ""
    fields |= {
        "currentRevision": current_revision or "-",
        "updateRevision": update_revision or "-",
    }
    done = caught_up and update_revision == current_revision and ready == wanted
    return RolloutProgress(done, _detail(fields))


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
        return _statefulset_progress(spec, status, wanted, caught_up, fields)
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
