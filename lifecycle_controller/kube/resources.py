"""Resource types (group, version, plural) and the REST paths built from them."""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True, order=True)
class ResourceType:
    """One watched API resource: a GroupVersionResource plus what discovery said of it."""

    group: str
    version: str
    resource: str
    kind: str
    namespaced: bool

    @property
    def key(self) -> str:
        """The scope-pattern key: ``plural`` for the core group, ``plural.group`` otherwise."""
        return f"{self.resource}.{self.group}" if self.group else self.resource

    @property
    def api_version(self) -> str:
        return f"{self.group}/{self.version}" if self.group else self.version

    @property
    def group_version_path(self) -> str:
        return f"/apis/{self.group}/{self.version}" if self.group else f"/api/{self.version}"

    def collection_path(self, namespace: str | None = None) -> str:
        """The list/watch path; all namespaces when ``namespace`` is None."""
        if self.namespaced and namespace is not None:
            return f"{self.group_version_path}/namespaces/{namespace}/{self.resource}"
        return f"{self.group_version_path}/{self.resource}"

    def object_path(self, namespace: str | None, name: str) -> str:
        """The path of one object; ``namespace`` is ignored for cluster-scoped types."""
        if self.namespaced:
            if not namespace:
                raise ValueError(f"{self.key} is namespaced: a namespace is required")
            return f"{self.group_version_path}/namespaces/{namespace}/{self.resource}/{name}"
        return f"{self.group_version_path}/{self.resource}/{name}"

    def __str__(self) -> str:
        return f"{self.key}/{self.version}"


NAMESPACES = ResourceType("", "v1", "namespaces", "Namespace", namespaced=False)
LEASES = ResourceType("coordination.k8s.io", "v1", "leases", "Lease", namespaced=True)
EVENTS = ResourceType("events.k8s.io", "v1", "events", "Event", namespaced=True)
CRDS = ResourceType(
    "apiextensions.k8s.io",
    "v1",
    "customresourcedefinitions",
    "CustomResourceDefinition",
    namespaced=False,
)
