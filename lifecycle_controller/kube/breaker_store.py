"""Where the circuit breaker is latched: a small ConfigMap beside the controller's Lease.

``<lease name>-breaker`` in the Lease's namespace (docs/behaviour.md#circuit-breaker), with
the keys of :class:`~lifecycle_controller.core.decision.breaker.BreakerState` in ``data``. Read and
written by the controller (:mod:`lifecycle_controller.controller.guardrails.breaker`) and by
``lifecycle-controller breaker status|reset``.
"""

from __future__ import annotations

from typing import Any

from lifecycle_controller.core.decision.breaker import BreakerState
from lifecycle_controller.core.text.timestamps import format_rfc3339_seconds
from lifecycle_controller.kube.api_ports import ConfigMapStore
from lifecycle_controller.kube.errors import NotFound
from lifecycle_controller.kube.resources import CONFIGMAPS

__all__ = [
    "BREAKER_SUFFIX",
    "breaker_name",
    "find_breaker",
    "read_breaker",
    "reset_breaker",
    "write_breaker",
    "write_breaker_keys",
]

BREAKER_SUFFIX = "-breaker"


def breaker_name(lease_name: str) -> str:
    """The ConfigMap that latches the breaker of the controller whose Lease is ``lease_name``."""
    return lease_name[: 253 - len(BREAKER_SUFFIX)] + BREAKER_SUFFIX


async def read_breaker(kube: ConfigMapStore, namespace: str, name: str) -> BreakerState:
    """The latched state (closed when the ConfigMap does not exist)."""
    try:
        configmap = await kube.get(CONFIGMAPS, namespace, name)
    except NotFound:
        return BreakerState()
    return BreakerState.from_data(configmap.get("data"))


async def find_breaker(kube: ConfigMapStore, namespace: str, name: str) -> BreakerState | None:
    """The latched state, or None when no ConfigMap of that name exists (a wrong Lease name?)."""
    try:
        configmap = await kube.get(CONFIGMAPS, namespace, name)
    except NotFound:
        return None
    return BreakerState.from_data(configmap.get("data"))


async def write_breaker(
    kube: ConfigMapStore, namespace: str, name: str, state: BreakerState
) -> dict[str, Any]:
    """Store ``state`` in the ConfigMap, creating it when it does not exist; the ConfigMap."""
    try:
        return await kube.merge_patch(CONFIGMAPS, namespace, name, {"data": state.to_data()})
    except NotFound:
        body = {
            "apiVersion": "v1",
            "kind": "ConfigMap",
            "metadata": {
                "name": name,
                "namespace": namespace,
                "labels": {"app.kubernetes.io/managed-by": "lifecycle-controller"},
            },
            "data": state.to_data(),
        }
        return await kube.create(CONFIGMAPS, namespace, body)


async def write_breaker_keys(
    kube: ConfigMapStore, namespace: str, name: str, data: dict[str, str]
) -> None:
    """Merge ``data`` into the existing ConfigMap's ``data`` (nothing when it is gone)."""
    try:
        await kube.merge_patch(CONFIGMAPS, namespace, name, {"data": data})
    except NotFound:
        return


async def reset_breaker(
    kube: ConfigMapStore, namespace: str, name: str, now_ns: int
) -> BreakerState:
    """Close the breaker (``lifecycle-controller breaker reset``); returns the new state."""
    state = (await read_breaker(kube, namespace, name)).reset(at=format_rfc3339_seconds(now_ns))
    await write_breaker(kube, namespace, name, state)
    return state
