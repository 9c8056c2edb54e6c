"""Guarded deletion: UID and resourceVersion preconditions, server-default propagation.

The UID precondition keeps a re-created object of the same name safe; the resourceVersion
precondition keeps any concurrent change (a postponed deadline, dry-run switched on) safe.
"""

from __future__ import annotations

from lifecycle_controller.kube import KubeClient, NotFound, ResourceType


async def delete_object(
    kube: KubeClient,
    resource: ResourceType,
    namespace: str | None,
    name: str,
    *,
    uid: str,
    resource_version: str,
) -> bool:
    """Delete exactly this object; True if deleted now, False if it was already gone.

    Raises kube.Conflict when a precondition failed (the object changed or was re-created).
    """
    try:
        await kube.delete(resource, namespace, name, uid=uid, resource_version=resource_version)
    except NotFound:
        return False
    return True
