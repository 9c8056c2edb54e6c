"""The fake API server's catalogue of resource types and its discovery documents.

Discovery is where the controller learns what it may watch, so the fake answers both ways a
real server does: aggregated discovery (``apidiscovery.k8s.io/v2`` ``APIGroupDiscoveryList``
for ``/api`` and ``/apis``, when the client asks for it and the fake is not told to be an old
server) and legacy discovery (``APIVersions``, ``APIGroupList``, one ``APIResourceList`` per
group version). A group version can be marked unavailable: aggregated discovery then reports
it ``Stale`` and its legacy list answers 503, like an aggregated API whose backend is down.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass, field
from typing import Any

from lifecycle_controller.kube import CRDS, EVENTS, LEASES, NAMESPACES, ResourceType
from lifecycle_controller.kube.resources import CONFIGMAPS, DEPLOYMENTS

__all__ = ["ALL_VERBS", "DEFAULT_RESOURCES", "Catalogue", "ServedResource", "resource_of"]

ALL_VERBS = frozenset(
    ("create", "delete", "deletecollection", "get", "list", "patch", "update", "watch")
)


@dataclass(frozen=True)
class ServedResource:
    """One served resource type: its verbs and subresources (discovery shows both)."""

    type: ResourceType
    verbs: frozenset[str] = ALL_VERBS
    subresources: tuple[str, ...] = ()


def resource_of(
    group: str, version: str, plural: str, kind: str, *, namespaced: bool = True
) -> ResourceType:
    return ResourceType(group, version, plural, kind, namespaced=namespaced)


SECRETS = resource_of("", "v1", "secrets", "Secret")
PODS = resource_of("", "v1", "pods", "Pod")
STATEFULSETS = resource_of("apps", "v1", "statefulsets", "StatefulSet")
DAEMONSETS = resource_of("apps", "v1", "daemonsets", "DaemonSet")

DEFAULT_RESOURCES: tuple[ServedResource, ...] = (
    ServedResource(NAMESPACES, subresources=("status", "finalize")),
    ServedResource(CONFIGMAPS),
    ServedResource(SECRETS),
    ServedResource(PODS, subresources=("status", "log")),
    ServedResource(DEPLOYMENTS, subresources=("status", "scale")),
    ServedResource(STATEFULSETS, subresources=("status", "scale")),
    ServedResource(DAEMONSETS, subresources=("status",)),
    ServedResource(LEASES),
    ServedResource(EVENTS),
    ServedResource(CRDS, subresources=("status",)),
    ServedResource(
        resource_of("authentication.k8s.io", "v1", "tokenreviews", "TokenReview", namespaced=False),
        verbs=frozenset({"create"}),
    ),
    ServedResource(
        resource_of(
            "authorization.k8s.io",
            "v1",
            "subjectaccessreviews",
            "SubjectAccessReview",
            namespaced=False,
        ),
        verbs=frozenset({"create"}),
    ),
)


@dataclass
class Catalogue:
    """The served types, in the order discovery lists them, and the unavailable versions."""

    served: list[ServedResource] = field(default_factory=lambda: list(DEFAULT_RESOURCES))
    #: Group versions (``group/version``, or ``v1`` for the core group) reported unavailable.
    unavailable: set[str] = field(default_factory=set)

    def add(self, resource: ResourceType | ServedResource) -> None:
        served = resource if isinstance(resource, ServedResource) else ServedResource(resource)
        self.remove(served.type)
        self.served.append(served)

    def remove(self, resource: ResourceType) -> None:
        self.served = [s for s in self.served if s.type != resource]

    def lookup(self, group: str, version: str, plural: str) -> ResourceType | None:
        for served in self.served:
            t = served.type
            if (t.group, t.version, t.resource) == (group, version, plural):
                return t
        return None

    # ------------------------------------------------------------------ documents

    def _groups(self) -> dict[str, dict[str, list[ServedResource]]]:
        """group -> version -> resources, in first-seen order."""
        groups: dict[str, dict[str, list[ServedResource]]] = {}
        for served in self.served:
            versions = groups.setdefault(served.type.group, {})
            versions.setdefault(served.type.version, []).append(served)
        return groups

    def aggregated(self, *, core: bool) -> dict[str, Any]:
        """The ``APIGroupDiscoveryList`` of ``/api`` (core) or ``/apis`` (every other group)."""
        items = []
        for group, versions in self._groups().items():
            if (group == "") != core:
                continue
            entries = []
            for version, resources in versions.items():
                gv = f"{group}/{version}" if group else version
                entry: dict[str, Any] = {
                    "version": version,
                    "resources": [_aggregated_resource(s) for s in resources],
                    "freshness": "Stale" if gv in self.unavailable else "Current",
                }
                entries.append(entry)
            items.append({"metadata": {"name": group}, "versions": entries})
        return {
            "kind": "APIGroupDiscoveryList",
            "apiVersion": "apidiscovery.k8s.io/v2",
            "metadata": {},
            "items": items,
        }

    def legacy_core(self) -> dict[str, Any]:
        versions = list(self._groups().get("", {}))
        return {"kind": "APIVersions", "versions": versions, "serverAddressByClientCIDRs": []}

    def legacy_groups(self) -> dict[str, Any]:
        groups = []
        for group, versions in self._groups().items():
            if not group:
                continue
            listed = [{"groupVersion": f"{group}/{v}", "version": v} for v in versions]
            groups.append({"name": group, "versions": listed, "preferredVersion": listed[0]})
        return {"kind": "APIGroupList", "apiVersion": "v1", "groups": groups}

    def legacy_resources(self, group: str, version: str) -> dict[str, Any] | None:
        """The ``APIResourceList`` of one group version, or None when it is not served."""
        resources = self._groups().get(group, {}).get(version)
        if resources is None:
            return None
        gv = f"{group}/{version}" if group else version
        return {
            "kind": "APIResourceList",
            "apiVersion": "v1",
            "groupVersion": gv,
            "resources": list(_legacy_entries(resources)),
        }


def _aggregated_resource(served: ServedResource) -> dict[str, Any]:
    t = served.type
    kind = {"group": t.group, "version": t.version, "kind": t.kind}
    return {
        "resource": t.resource,
        "responseKind": kind,
        "scope": "Namespaced" if t.namespaced else "Cluster",
        "singularResource": t.kind.lower(),
        "verbs": sorted(served.verbs),
        "subresources": [
            {
                "subresource": sub,
                "responseKind": kind,
                "verbs": ["get", "patch", "update"],
            }
            for sub in served.subresources
        ],
    }


def _legacy_entries(resources: Iterable[ServedResource]) -> Iterable[dict[str, Any]]:
    for served in resources:
        t = served.type
        yield {
            "name": t.resource,
            "singularName": t.kind.lower(),
            "namespaced": t.namespaced,
            "kind": t.kind,
            "verbs": sorted(served.verbs),
        }
        for sub in served.subresources:
            yield {
                "name": f"{t.resource}/{sub}",
                "singularName": "",
                "namespaced": t.namespaced,
                "kind": t.kind,
                "verbs": ["get", "patch", "update"],
            }
