"""The parts of the API client its users depend on, as protocols (ports).

Collaborators take the slice of :class:`~lifecycle_controller.kube.client.KubeClient` they use,
so each one says what it needs of the API, and a test can hand it anything that answers those
calls. ``KubeClient`` satisfies every one of them.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import Any, Protocol

from lifecycle_controller.core.objects.resources import ResourceType

__all__ = ["ConfigMapStore", "ObjectReads", "ObjectWrites", "RawRequests"]


class ObjectReads(Protocol):
    """Reading whole objects (Pod templates and rollout status, ConfigMaps)."""

    async def get(
        self, resource: ResourceType, namespace: str | None, name: str
    ) -> dict[str, Any]: ...

    async def list_objects(
        self, resource: ResourceType, *, namespace: str | None = None, limit: int = 500
    ) -> dict[str, Any]: ...


class ObjectWrites(Protocol):
    """Creating and patching objects (Events, the breaker's ConfigMap)."""

    async def create(
        self,
        resource: ResourceType,
        namespace: str | None,
        body: Mapping[str, Any],
        *,
        answer: bool = True,
    ) -> dict[str, Any]: ...

    async def merge_patch(
        self, resource: ResourceType, namespace: str | None, name: str, patch: Mapping[str, Any]
    ) -> dict[str, Any]: ...


class RawRequests(Protocol):
    """One request by path (discovery documents)."""

    async def request(
        self,
        method: str,
        path: str,
        *,
        query: Iterable[tuple[str, str]] = (),
        body: Any = None,
        content_type: str = ...,
        accept: str = ...,
        timeout: float | None = None,
    ) -> Any: ...


class ConfigMapStore(ObjectReads, ObjectWrites, Protocol):
    """Reading and writing one ConfigMap (the breaker's latched state)."""
