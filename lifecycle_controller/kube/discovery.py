"""Discovery documents: which resource types the API server serves, read and parsed.

Aggregated discovery (``GET /api`` and ``GET /apis`` with the ``apidiscovery.k8s.io/v2``
media type: two requests for the whole cluster), falling back to legacy discovery (``/api``,
``/api/v1``, ``/apis``, ``/apis/<g>/<v>``) for any document the server answers in the legacy
format, converted the way client-go does into the core's value types
(:class:`~lifecycle_controller.core.objects.scope.DiscoveredGroup`, ``DiscoveredVersion``,
``DiscoveredResource``). One version per group-resource is kept, as client-go's
``ServerPreferredResources`` does. A ``Stale`` version (an aggregated API whose backend is
down) or a group version whose list fails is reported in :attr:`DiscoverySnapshot.failed`
(docs/behaviour.md#discovery-modes). The controller's planning and rediscovery loop
(:mod:`lifecycle_controller.controller.watch.discovery`) and the ``status`` command both read
discovery through :func:`fetch_discovery`.
"""

from __future__ import annotations

import asyncio
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any

from lifecycle_controller.core.objects.scope import (
    DiscoveredGroup,
    DiscoveredResource,
    DiscoveredVersion,
    preferred_resources,
)
from lifecycle_controller.kube.api_ports import RawRequests
from lifecycle_controller.kube.client import ACCEPT_AGGREGATED_DISCOVERY
from lifecycle_controller.kube.errors import KubeError

__all__ = ["DiscoverySnapshot", "failures_text", "fetch_discovery", "group_of"]

_AGGREGATED_LIST = "APIGroupDiscoveryList"
_LEGACY_FETCH_CONCURRENCY = 8


@dataclass(frozen=True)
class DiscoverySnapshot:
    """One discovery read: healthy groups, and the group versions that failed (gv -> error)."""

    groups: tuple[DiscoveredGroup, ...]
    failed: Mapping[str, str] = field(default_factory=dict)
    aggregated: bool = True

    @property
    def resources(self) -> tuple[DiscoveredResource, ...]:
        """One entry per group-resource, in its preferred version (no subresources)."""
        return preferred_resources(self.groups)

    @property
    def failed_groups(self) -> frozenset[str]:
        return frozenset(group_of(gv) for gv in self.failed)


def group_of(group_version: str) -> str:
    """The group of ``group/version`` (``""`` for the core group's ``v1``)."""
    return group_version.rpartition("/")[0]


def _group_version(group: str, version: str) -> str:
    return f"{group}/{version}" if group else version


def failures_text(failed: Mapping[str, str]) -> str:
    """client-go's ``ErrGroupDiscoveryFailed`` text."""
    parts = ", ".join(f"{gv}: {failed[gv]}" for gv in sorted(failed))
    return f"unable to retrieve the complete list of server APIs: {parts}"


async def fetch_discovery(client: RawRequests, *, aggregated: bool = True) -> DiscoverySnapshot:
    """Read the cluster's API resources; raises :class:`KubeError` on a total failure.

    With ``aggregated`` (the default) the server is asked for aggregated discovery and any
    document it answers in the legacy format is completed the legacy way; without it, only
    legacy discovery is used.
    """
    accept = ACCEPT_AGGREGATED_DISCOVERY if aggregated else "application/json"
    core_doc = await client.request("GET", "/api", accept=accept)
    groups_doc = await client.request("GET", "/apis", accept=accept)
    groups: list[DiscoveredGroup] = []
    failed: dict[str, str] = {}
    used_aggregated = True
    for doc, legacy in ((core_doc, _legacy_core), (groups_doc, _legacy_groups)):
        if doc.get("kind") == _AGGREGATED_LIST:
            _parse_aggregated(doc, groups, failed)
        else:
            used_aggregated = False
            await legacy(client, doc, groups, failed)
    return DiscoverySnapshot(tuple(groups), failed, aggregated=used_aggregated)


def _parse_aggregated(
    doc: Mapping[str, Any], groups: list[DiscoveredGroup], failed: dict[str, str]
) -> None:
    """An ``APIGroupDiscoveryList``, converted the way client-go does."""
    for item in doc.get("items") or ():
        name = str((item.get("metadata") or {}).get("name") or "")
        versions: list[DiscoveredVersion] = []
        for entry in item.get("versions") or ():
            version = str(entry.get("version") or "")
            gv = _group_version(name, version)
            if entry.get("freshness") == "Stale":
                failed[gv] = f"stale GroupVersion discovery: {gv}"
                continue
            resources = tuple(_aggregated_resources(name, version, entry.get("resources") or ()))
            versions.append(DiscoveredVersion(version, resources))
        if versions:  # the preferred version is the first one that is not stale
            groups.append(DiscoveredGroup(name, versions[0].version, tuple(versions)))


def _aggregated_resources(
    group: str, version: str, entries: Iterable[Mapping[str, Any]]
) -> Iterable[DiscoveredResource]:
    for entry in entries:
        plural = str(entry.get("resource") or "")
        scope = entry.get("scope")
        kind = str((entry.get("responseKind") or {}).get("kind") or "")
        if not plural or scope not in ("Namespaced", "Cluster"):
            continue
        namespaced = scope == "Namespaced"
        if kind:  # client-go drops a resource without a response kind, not its subresources
            verbs = frozenset(entry.get("verbs") or ())
            shorts = frozenset(entry.get("shortNames") or ())
            yield DiscoveredResource(group, version, plural, kind, namespaced, verbs, shorts)
        for sub in entry.get("subresources") or ():
            sub_kind = str((sub.get("responseKind") or {}).get("kind") or "")
            yield DiscoveredResource(
                group,
                version,
                f"{plural}/{sub.get('subresource', '')}",
                sub_kind,
                namespaced,
                frozenset(sub.get("verbs") or ()),
            )


async def _legacy_core(
    client: RawRequests,
    doc: Mapping[str, Any],
    groups: list[DiscoveredGroup],
    failed: dict[str, str],
) -> None:
    """``APIVersions`` from ``/api``: the core group, its lists read from ``/api/<v>``."""
    if doc.get("kind") not in (None, "APIVersions"):
        raise KubeError(f"GET /api: unexpected discovery document kind {doc.get('kind')!r}")
    versions = [str(v) for v in doc.get("versions") or ()]
    if versions:
        await _legacy_group(client, "", versions, versions[0], groups, failed)


async def _legacy_groups(
    client: RawRequests,
    doc: Mapping[str, Any],
    groups: list[DiscoveredGroup],
    failed: dict[str, str],
) -> None:
    """``APIGroupList`` from ``/apis``: every group's lists read from ``/apis/<g>/<v>``."""
    if doc.get("kind") not in (None, "APIGroupList"):
        raise KubeError(f"GET /apis: unexpected discovery document kind {doc.get('kind')!r}")
    semaphore = asyncio.Semaphore(_LEGACY_FETCH_CONCURRENCY)
    entries = list(doc.get("groups") or ())
    results: list[list[DiscoveredGroup]] = [[] for _ in entries]

    async def one(index: int, entry: Mapping[str, Any]) -> None:
        name = str(entry.get("name") or "")
        versions = [str(v.get("version") or "") for v in entry.get("versions") or ()]
        preferred = str((entry.get("preferredVersion") or {}).get("version") or "")
        async with semaphore:
            await _legacy_group(client, name, versions, preferred, results[index], failed)

    async with asyncio.TaskGroup() as tasks:
        for index, entry in enumerate(entries):
            tasks.create_task(one(index, entry))
    for found in results:  # keep the server's group order
        groups.extend(found)


async def _legacy_group(
    client: RawRequests,
    name: str,
    versions: list[str],
    preferred: str,
    groups: list[DiscoveredGroup],
    failed: dict[str, str],
) -> None:
    healthy: list[DiscoveredVersion] = []
    for version in versions:
        gv = _group_version(name, version)
        path = f"/apis/{gv}" if name else f"/api/{version}"
        try:
            doc = await client.request("GET", path)
        except KubeError as error:
            failed[gv] = str(error)
            continue
        resources = tuple(
            DiscoveredResource(
                name,
                version,
                str(entry.get("name") or ""),
                str(entry.get("kind") or ""),
                bool(entry.get("namespaced")),
                frozenset(entry.get("verbs") or ()),
                frozenset(entry.get("shortNames") or ()),
            )
            for entry in doc.get("resources") or ()
            if entry.get("name")
        )
        healthy.append(DiscoveredVersion(version, resources))
    if healthy:
        groups.append(DiscoveredGroup(name, preferred or healthy[0].version, tuple(healthy)))
