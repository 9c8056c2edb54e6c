"""The one door to the Kubernetes API: generic requests for any resource type, as plain dicts.

Raw requests, not kubernetes-asyncio's typed API (its typed models are slow, its
``ApiClient`` imports every one of them, and typed methods rewrite ``Accept`` headers; see
docs/architecture.md#raw-requests). The requests themselves are :mod:`.exchanges`': every
call has a timeout, every non-2xx answer raises from :mod:`.errors`. They are carried by a
:mod:`.transport`: in production the
aiohttp one of :mod:`.transport_aiohttp`, whose three separate connection pools keep
long-running watches from starving ordinary requests or the leader-election renewals
(docs/architecture.md#connection-pools). Credentials come from :mod:`.connection`.
"""

from __future__ import annotations

from collections.abc import AsyncIterator, Awaitable, Callable, Mapping
from contextlib import aclosing
from typing import Any

from lifecycle_controller.kube.connection import (
    SERVICE_ACCOUNT_NAMESPACE_FILE,
    ClusterConfig,
    ConnectionConfigError,
    load_configuration,
)
from lifecycle_controller.kube.exchanges import (
    JSON,
    USER_AGENT,
    ApiExchanges,
    EventFilter,
    RequestObserver,
    Timeouts,
)
from lifecycle_controller.kube.resources import ResourceType
from lifecycle_controller.kube.transport import Pool, Transport
from lifecycle_controller.kube.watch_protobuf import PROTOBUF, ProtobufError

__all__ = [
    "ACCEPT_AGGREGATED_DISCOVERY",
    "ACCEPT_METADATA",
    "ACCEPT_METADATA_LIST",
    "JSON",
    "MERGE_PATCH",
    "SERVICE_ACCOUNT_NAMESPACE_FILE",
    "ClusterConfig",
    "ConnectionConfigError",
    "KubeClient",
    "Pool",
    "RequestObserver",
    "Timeouts",
    "load_configuration",
]

MERGE_PATCH = "application/merge-patch+json"
ACCEPT_METADATA_LIST = (
    "application/json;as=PartialObjectMetadataList;g=meta.k8s.io;v=v1,application/json"
)
ACCEPT_METADATA = "application/json;as=PartialObjectMetadata;g=meta.k8s.io;v=v1,application/json"
ACCEPT_METADATA_WATCH = f"{PROTOBUF};as=PartialObjectMetadata;g=meta.k8s.io;v=v1,{ACCEPT_METADATA}"
ACCEPT_AGGREGATED_DISCOVERY = (
    "application/json;g=apidiscovery.k8s.io;v=v2;as=APIGroupDiscoveryList,application/json"
)


class KubeClient(ApiExchanges):
    """Generic, dict-based access to the API server for any resource type.

    ``configuration`` is a :class:`ClusterConfig` (what :func:`load_configuration` returns)
    or a ``kubernetes_asyncio.client.Configuration``, adopted attribute by attribute.
    ``transport`` carries the requests (default: aiohttp, three connection pools); the
    client closes it.
    """

    def __init__(
        self,
        configuration: ClusterConfig | Any,
        *,
        default_namespace: str = "default",
        timeouts: Timeouts | None = None,
        observe: RequestObserver | None = None,
        watch_pool_size: int = 512,
        user_agent: str = USER_AGENT,
        transport: Transport | None = None,
    ) -> None:
        super().__init__(
            configuration,
            timeouts=timeouts,
            observe=observe,
            watch_pool_size=watch_pool_size,
            user_agent=user_agent,
            transport=transport,
        )
        self.default_namespace = default_namespace
        self._json_watches: set[ResourceType] = set()  # protobuf failed for these types

    @classmethod
    async def connect(
        cls,
        kubeconfig: str | None = None,
        *,
        context: str | None = None,
        timeouts: Timeouts | None = None,
        observe: RequestObserver | None = None,
        user_agent: str = USER_AGENT,
        in_cluster_first: bool = False,
    ) -> KubeClient:
        """Load credentials (see :func:`load_configuration`) and build a client."""
        configuration, namespace = await load_configuration(
            kubeconfig, context=context, in_cluster_first=in_cluster_first
        )
        return cls(
            configuration,
            default_namespace=namespace,
            timeouts=timeouts,
            observe=observe,
            user_agent=user_agent,
        )

    async def __aenter__(self) -> KubeClient:
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.close()

    # ------------------------------------------------------------------ typed helpers

    async def list_metadata(
        self,
        resource: ResourceType,
        *,
        namespace: str | None = None,
        limit: int = 500,
        continue_token: str | None = None,
        resource_version: str | None = None,
        field_selector: str | None = None,
        label_selector: str | None = None,
        resource_version_match: str | None = None,
    ) -> dict[str, Any]:
        """One page of a metadata-only list (``PartialObjectMetadataList``).

        ``resource_version="0"`` with a ``limit`` is sent as a consistent paginated list (no
        resourceVersion): the API server ignores ``limit`` for ``resourceVersion=0`` and
        answers with every object in one response, so a large first list would be held,
        raw and decoded, all at once (docs/architecture.md#informer-loop).
        ``resource_version_match`` (``Exact``: the objects as at ``resource_version``) is
        sent with the first page only: a continue token carries the snapshot.
        """
        query = [("limit", str(limit))]
        if field_selector:
            query.append(("fieldSelector", field_selector))
        if label_selector:
            query.append(("labelSelector", label_selector))
        if continue_token:
            query.append(("continue", continue_token))
        elif resource_version is not None and not (resource_version == "0" and limit > 0):
            query.append(("resourceVersion", resource_version))
            if resource_version_match:
                query.append(("resourceVersionMatch", resource_version_match))
        return await self.request(
            "GET",
            resource.collection_path(namespace),
            query=query,
            accept=ACCEPT_METADATA_LIST,
        )

    def watch_metadata(
        self,
        resource: ResourceType,
        *,
        namespace: str | None = None,
        resource_version: str,
        timeout_seconds: int,
        field_selector: str | None = None,
        decode_if: EventFilter | None = None,
    ) -> AsyncIterator[dict[str, Any]]:
        """A metadata-only watch with bookmarks, from ``resource_version``; events
        ``decode_if`` refuses are dropped undecoded."""
        query = [
            ("watch", "true"),
            ("allowWatchBookmarks", "true"),
            ("resourceVersion", resource_version),
            ("timeoutSeconds", str(timeout_seconds)),
        ]
        return self._watch(resource, namespace, query, field_selector, decode_if)

    def watch_list_metadata(
        self,
        resource: ResourceType,
        *,
        namespace: str | None = None,
        timeout_seconds: int,
        field_selector: str | None = None,
        decode_if: EventFilter | None = None,
        before_reading: Callable[[], Awaitable[None]] | None = None,
    ) -> AsyncIterator[dict[str, Any]]:
        """A streaming list: a metadata-only watch that starts with every current object.

        ``sendInitialEvents=true`` with ``resourceVersionMatch=NotOlderThan`` and no
        resourceVersion: an ADDED event per object as of a consistent read, then a BOOKMARK
        annotated ``k8s.io/initial-events-end``, then ordinary watch events
        (docs/architecture.md#informer-loop). A server without the feature refuses the
        request (400 or 422). ``before_reading``: awaited once the server has answered,
        before the first event is read (:meth:`stream`).
        """
        query = [
            ("watch", "true"),
            ("sendInitialEvents", "true"),
            ("resourceVersionMatch", "NotOlderThan"),
            ("allowWatchBookmarks", "true"),
            ("timeoutSeconds", str(timeout_seconds)),
        ]
        return self._watch(resource, namespace, query, field_selector, decode_if, before_reading)

    async def _watch(
        self,
        resource: ResourceType,
        namespace: str | None,
        query: list[tuple[str, str]],
        field_selector: str | None,
        decode_if: EventFilter | None = None,
        before_reading: Callable[[], Awaitable[None]] | None = None,
    ) -> AsyncIterator[dict[str, Any]]:
        """Protobuf first (docs/architecture.md#protobuf-watches), JSON once it failed."""
        if field_selector:
            query.append(("fieldSelector", field_selector))
        accept = ACCEPT_METADATA if resource in self._json_watches else ACCEPT_METADATA_WATCH
        events = self.stream(
            resource.collection_path(namespace),
            query=query,
            accept=accept,
            decode_if=decode_if,
            before_reading=before_reading,
        )
        try:
            async with aclosing(events):
                async for event in events:
                    yield event
        except ProtobufError:
            self._json_watches.add(resource)  # the next watch of this type asks for JSON only
            raise

    async def get_metadata(
        self, resource: ResourceType, namespace: str | None, name: str
    ) -> dict[str, Any]:
        return await self.request(
            "GET", resource.object_path(namespace, name), accept=ACCEPT_METADATA
        )

    async def merge_patch(
        self,
        resource: ResourceType,
        namespace: str | None,
        name: str,
        patch: Mapping[str, Any],
        *,
        field_manager: str = "lifecycle-controller",
        subresource: str = "",
    ) -> dict[str, Any]:
        """A JSON merge patch (RFC 7386); put ``metadata.resourceVersion`` in it to guard it.
        ``subresource="status"`` patches a policy's status."""
        path = resource.object_path(namespace, name) + (f"/{subresource}" if subresource else "")
        return await self.request(
            "PATCH",
            path,
            query=[("fieldManager", field_manager)],
            body=dict(patch),
            content_type=MERGE_PATCH,
        )

    async def delete(
        self,
        resource: ResourceType,
        namespace: str | None,
        name: str,
        *,
        uid: str | None = None,
        resource_version: str | None = None,
        answer: bool = True,
        propagation: str | None = None,
    ) -> dict[str, Any]:
        """DELETE with UID and resourceVersion preconditions; ``propagation``
        (``Background``, ``Foreground``, ``Orphan``) is the DeleteOptions' propagationPolicy,
        None the server's default for the kind.

        ``answer=False``: nobody reads the answer (the deleted object), so it is not decoded
        and ``{}`` is returned."""
        preconditions: dict[str, str] = {}
        if uid:
            preconditions["uid"] = uid
        if resource_version:
            preconditions["resourceVersion"] = resource_version
        body = {"apiVersion": "v1", "kind": "DeleteOptions"}
        if preconditions:
            body["preconditions"] = preconditions  # type: ignore[assignment]
        if propagation:
            body["propagationPolicy"] = propagation
        path = resource.object_path(namespace, name)
        if not answer:
            await self.send("DELETE", path, body=body)
            return {}
        return await self.request("DELETE", path, body=body)

    async def create(
        self,
        resource: ResourceType,
        namespace: str | None,
        body: Mapping[str, Any],
        *,
        pool: Pool = "requests",
        timeout: float | None = None,
        answer: bool = True,
    ) -> dict[str, Any]:
        """POST; ``answer=False`` when nobody reads the created object (an Event): it is
        not decoded and ``{}`` is returned."""
        path = resource.collection_path(namespace)
        if not answer:
            await self.send("POST", path, body=dict(body), pool=pool, timeout=timeout)
            return {}
        return await self.request("POST", path, body=dict(body), pool=pool, timeout=timeout)

    async def get(
        self,
        resource: ResourceType,
        namespace: str | None,
        name: str,
        *,
        pool: Pool = "requests",
        timeout: float | None = None,
    ) -> dict[str, Any]:
        return await self.request(
            "GET", resource.object_path(namespace, name), pool=pool, timeout=timeout
        )

    async def list_objects(
        self,
        resource: ResourceType,
        *,
        namespace: str | None = None,
        limit: int = 500,
        continue_token: str | None = None,
        resource_version: str | None = None,
        resource_version_match: str | None = None,
    ) -> dict[str, Any]:
        """One page (at most ``limit``) of a list of whole objects: the first, or the one
        ``continue_token`` names (:mod:`.paging` walks them all); the first as at
        ``resource_version`` when given (``resource_version_match``: how)."""
        query = [("limit", str(limit))]
        if continue_token:
            query.append(("continue", continue_token))
        elif resource_version is not None:
            query.append(("resourceVersion", resource_version))
            if resource_version_match:
                query.append(("resourceVersionMatch", resource_version_match))
        return await self.request("GET", resource.collection_path(namespace), query=query)

    def watch_objects(
        self,
        resource: ResourceType,
        *,
        namespace: str | None = None,
        resource_version: str,
        timeout_seconds: int,
        decode_if: EventFilter | None = None,
    ) -> AsyncIterator[dict[str, Any]]:
        """A watch of whole objects (JSON) in ``namespace`` (None: all), for lifecycle
        policies and followed rollouts; lines ``decode_if`` refuses are dropped undecoded."""
        query = [("watch", "true"), ("allowWatchBookmarks", "true")]
        query += [("resourceVersion", resource_version), ("timeoutSeconds", str(timeout_seconds))]
        return self.stream(resource.collection_path(namespace), query=query, decode_if=decode_if)

    async def replace(
        self,
        resource: ResourceType,
        namespace: str | None,
        name: str,
        body: Mapping[str, Any],
        *,
        pool: Pool = "requests",
        timeout: float | None = None,
    ) -> dict[str, Any]:
        """PUT (used only for the Lease, whose protocol is defined with updates)."""
        return await self.request(
            "PUT",
            resource.object_path(namespace, name),
            body=dict(body),
            pool=pool,
            timeout=timeout,
        )
