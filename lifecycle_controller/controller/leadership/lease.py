"""The Lease object as the leader elector reads and writes it.

:class:`LeaseRecord` is client-go's ``LeaderElectionRecord`` (the election fields of a Lease
spec), :class:`LeaseApi` the three calls the elector makes, :func:`default_identity` a holder
identity as controller-runtime builds it. ``renewTime``/``acquireTime`` are MicroTime: UTC
with exactly six fractional digits (:func:`~lifecycle_controller.kube.microtime.micro_time`).
"""

from __future__ import annotations

import socket
import uuid
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any, Protocol

from lifecycle_controller.kube import LEASES, ResourceType
from lifecycle_controller.kube.client import Pool

__all__ = ["LeaseApi", "LeaseRecord", "default_identity", "new_lease"]


def default_identity() -> str:
    """A unique holder identity: ``<hostname>_<uuid4>``, as controller-runtime builds it."""
    return f"{socket.gethostname()}_{uuid.uuid4()}"


@dataclass(frozen=True, slots=True)
class LeaseRecord:
    """The election fields of a Lease spec (client-go ``LeaderElectionRecord``).

    Times are kept as the raw MicroTime strings: they are compared for change detection and
    shown to humans, never compared with the local clock.
    """

    holder: str
    duration_seconds: int
    acquire_time: str | None
    renew_time: str | None
    transitions: int

    @classmethod
    def from_lease(cls, lease: Mapping[str, Any]) -> LeaseRecord:
        spec = lease.get("spec") or {}
        return cls(
            holder=str(spec.get("holderIdentity") or ""),
            duration_seconds=int(spec.get("leaseDurationSeconds") or 0),
            acquire_time=spec.get("acquireTime"),
            renew_time=spec.get("renewTime"),
            transitions=int(spec.get("leaseTransitions") or 0),
        )

    def to_spec(self) -> dict[str, Any]:
        return {
            "holderIdentity": self.holder,
            "leaseDurationSeconds": self.duration_seconds,
            "acquireTime": self.acquire_time,
            "renewTime": self.renew_time,
            "leaseTransitions": self.transitions,
        }


def new_lease(namespace: str, name: str, record: LeaseRecord) -> dict[str, Any]:
    """The body that creates the Lease ``namespace/name`` holding ``record``."""
    return {
        "apiVersion": LEASES.api_version,
        "kind": LEASES.kind,
        "metadata": {"name": name, "namespace": namespace},
        "spec": record.to_spec(),
    }


class LeaseApi(Protocol):
    """The three Lease calls the elector makes (satisfied by
    :class:`~lifecycle_controller.kube.KubeClient`)."""

    async def get(
        self,
        resource: ResourceType,
        namespace: str | None,
        name: str,
        *,
        pool: Pool = ...,
        timeout: float | None = ...,
    ) -> dict[str, Any]: ...

    async def create(
        self,
        resource: ResourceType,
        namespace: str | None,
        body: Mapping[str, Any],
        *,
        pool: Pool = ...,
        timeout: float | None = ...,
    ) -> dict[str, Any]: ...

    async def replace(
        self,
        resource: ResourceType,
        namespace: str | None,
        name: str,
        body: Mapping[str, Any],
        *,
        pool: Pool = ...,
        timeout: float | None = ...,
    ) -> dict[str, Any]: ...
