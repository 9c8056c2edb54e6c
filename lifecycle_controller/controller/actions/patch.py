"""Guarded JSON merge patches: conversions, initialization, restarts and skip acknowledgements.

The patch carries the ``metadata.resourceVersion`` the decision was made on, so the API server
applies it only to exactly that state of the object (409 Conflict otherwise).
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from lifecycle_controller.kube import KubeClient, ResourceType


def guarded(patch: Mapping[str, Any], resource_version: str) -> dict[str, Any]:
    """A copy of ``patch`` with ``metadata.resourceVersion`` set (other metadata kept)."""
    body = dict(patch)
    metadata = dict(body.get("metadata") or {})
    metadata["resourceVersion"] = resource_version
    body["metadata"] = metadata
    return body


async def patch_object(
    kube: KubeClient,
    resource: ResourceType,
    namespace: str | None,
    name: str,
    patch: Mapping[str, Any],
    *,
    resource_version: str,
) -> dict[str, Any]:
    """Apply ``patch`` to exactly ``resource_version``; returns the patched object.

    Raises kube.Conflict when the object changed since, kube.NotFound when it is gone.
    """
    return await kube.merge_patch(resource, namespace, name, guarded(patch, resource_version))
