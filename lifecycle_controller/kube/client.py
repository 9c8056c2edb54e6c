"""The one door to the Kubernetes API: generic requests for any resource type, as plain dicts.

Raw requests, not kubernetes-asyncio's typed API (its typed models are slow, its
``ApiClient`` imports every one of them, and typed methods rewrite ``Accept`` headers; see
docs/architecture.md#raw-requests). Every call has a timeout, every non-2xx answer raises
from :mod:`.errors`. The requests are carried by a :mod:`.transport`: in production the
aiohttp one of :mod:`.transport_aiohttp`, whose three separate connection pools keep
long-running watches from starving ordinary requests or the leader-election renewals
(docs/architecture.md#connection-pools). Credentials come from :mod:`.connection`.
"""

from __future__ import annotations

import json
from collections.abc import AsyncGenerator, AsyncIterator, Callable, Iterable, Mapping
from contextlib import AsyncExitStack, aclosing, asynccontextmanager
from dataclasses import dataclass
from typing import Any
from urllib.parse import urlencode

from lifecycle_controller import __version__
from lifecycle_controller.kube.connection import (
    SERVICE_ACCOUNT_NAMESPACE_FILE,
    ClusterConfig,
    ConnectionConfigError,
    load_configuration,
)
from lifecycle_controller.kube.errors import TransportError, error_of_answer
from lifecycle_controller.kube.resources import ResourceType
from lifecycle_controller.kube.transport import (
    ConnectionFailed,
    Deadlines,
    HttpRequest,
    HttpResponse,
    Pool,
    Transport,
)
from lifecycle_controller.kube.transport_aiohttp import AiohttpTransport
from lifecycle_controller.kube.watch_events import EventFilter, watch_events
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

JSON = "application/json"
MERGE_PATCH = "application/merge-patch+json"
ACCEPT_METADATA_LIST = (
    "application/json;as=PartialObjectMetadataList;g=meta.k8s.io;v=v1,application/json"
)
ACCEPT_METADATA = "application/json;as=PartialObjectMetadata;g=meta.k8s.io;v=v1,application/json"
ACCEPT_METADATA_WATCH = f"{PROTOBUF};as=PartialObjectMetadata;g=meta.k8s.io;v=v1,{ACCEPT_METADATA}"
ACCEPT_AGGREGATED_DISCOVERY = (
    "application/json;g=apidiscovery.k8s.io;v=v2;as=APIGroupDiscoveryList,application/json"
)
USER_AGENT = f"lifecycle-controller/{__version__}"

RequestObserver = Callable[[str, str], None]
"""Called with (HTTP method, status code or "<error>") after every request, for metrics."""


@dataclass(frozen=True)
class Timeouts:
    """Seconds. ``watch_idle`` is the longest silence tolerated on an open watch stream."""

    connect: float = 5.0
    request: float = 30.0
    watch_idle: float = 90.0


def _dumps(body: Any) -> bytes:
    return json.dumps(body, separators=(",", ":")).encode()


class KubeClient:
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
        self.user_agent = user_agent
        self.default_namespace = default_namespace
        self.timeouts = timeouts or Timeouts()
        self._observe = observe
        self._config = (
            configuration
            if isinstance(configuration, ClusterConfig)
            else ClusterConfig.from_kubernetes_asyncio(configuration)
        )
        self._base = self._config.host.rstrip("/")
        self._transport = transport or AiohttpTransport(
            ssl_context=self._config.ssl_context(),
            pool_sizes={"requests": 64, "watches": watch_pool_size, "leases": 4},
            proxy=self._config.request_proxy(),  # credentials in it go as Proxy-Authorization
            server_hostname=self._config.tls_server_name,
        )
        self._closed = False
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
    ) -> KubeClient:
        """Load credentials (see :func:`load_configuration`) and build a client."""
        configuration, namespace = await load_configuration(kubeconfig, context=context)
        return cls(
            configuration,
            default_namespace=namespace,
            timeouts=timeouts,
            observe=observe,
            user_agent=user_agent,
        )

    async def close(self) -> None:
        self._closed = True
        await self._transport.close()

    async def __aenter__(self) -> KubeClient:
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.close()

    # ------------------------------------------------------------------ raw requests

    @asynccontextmanager
    async def _open(
        self,
        method: str,
        path: str,
        *,
        query: Iterable[tuple[str, str]] = (),
        body: Any = None,
        content_type: str = JSON,
        accept: str = JSON,
        deadlines: Deadlines,
        pool: Pool,
    ) -> AsyncIterator[HttpResponse]:
        if self._closed:
            # A request after close() (a straggling background task) must not open a new
            # connection pool that nobody would close.
            raise TransportError("the API client is closed")
        url = self._base + path
        params = list(query)
        if params:
            url += "?" + urlencode(params)
        headers = {"Accept": accept, "Content-Type": content_type, "User-Agent": self.user_agent}
        async with AsyncExitStack() as exchange:
            try:
                authorization = await self._config.authorization_header()
                if authorization:
                    headers["Authorization"] = authorization
                request = HttpRequest(
                    method, url, headers, None if body is None else _dumps(body), deadlines, pool
                )
                response = await exchange.enter_async_context(self._transport.send(request))
            except (ConnectionFailed, TimeoutError, OSError) as error:
                self._record(method, "<error>")
                raise TransportError(f"{method} {path}: {error or type(error).__name__}") from error
            self._record(method, str(response.status))
            try:
                if response.status >= 300:
                    raise await error_of_answer(response, method, path)
                yield response
            except ConnectionFailed as error:
                raise TransportError(f"{method} {path}: {error}") from error

    def _record(self, method: str, code: str) -> None:
        if self._observe is not None:
            self._observe(method, code)

    async def request(
        self,
        method: str,
        path: str,
        *,
        query: Iterable[tuple[str, str]] = (),
        body: Any = None,
        content_type: str = JSON,
        accept: str = JSON,
        timeout: float | None = None,
        pool: Pool = "requests",
    ) -> dict[str, Any]:
        """One request; returns the decoded JSON body ({} when empty). Raises KubeError."""
        deadlines = Deadlines(timeout or self.timeouts.request, self.timeouts.connect)
        async with self._open(
            method,
            path,
            query=query,
            body=body,
            content_type=content_type,
            accept=accept,
            deadlines=deadlines,
            pool=pool,
        ) as response:
            try:
                raw = await response.read()
            except ConnectionFailed as error:
                raise TransportError(f"{method} {path}: reading the body failed") from error
        if not raw:
            return {}
        try:
            decoded = json.loads(raw)
        except json.JSONDecodeError as error:
            raise TransportError(f"{method} {path}: answer is not JSON") from error
        return decoded if isinstance(decoded, dict) else {"items": decoded}

    async def stream(
        self,
        path: str,
        *,
        query: Iterable[tuple[str, str]] = (),
        accept: str = JSON,
        idle_timeout: float | None = None,
        decode_if: EventFilter | None = None,
    ) -> AsyncGenerator[dict[str, Any], None]:
        """Open a watch and yield each event; a silence over ``idle_timeout`` ends it.

        The events are read as the server sent them, JSON lines or protobuf frames; those
        refused by ``decode_if`` are dropped undecoded (:mod:`.watch_events`). Ends
        normally when the server closes the stream; raises TransportError when the
        connection breaks or stays silent too long, and KubeError for a non-2xx answer.
        """
        idle = idle_timeout or self.timeouts.watch_idle
        async with self._open(
            "GET",
            path,
            query=query,
            accept=accept,
            deadlines=Deadlines(None, self.timeouts.connect, idle),
            pool="watches",
        ) as response:
            async for event in watch_events(response, what=f"watch {path}", decode_if=decode_if):
                yield event

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
    ) -> dict[str, Any]:
        """One page of a metadata-only list (``PartialObjectMetadataList``).

        ``resource_version="0"`` with a ``limit`` is sent as a consistent paginated list (no
        resourceVersion): the API server ignores ``limit`` for ``resourceVersion=0`` and
        answers with every object in one response, so a large first list would be held,
        raw and decoded, all at once (docs/architecture.md#informer-loop).
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
    ) -> AsyncIterator[dict[str, Any]]:
        """A metadata-only watch with bookmarks, from ``resource_version``."""
        query = [
            ("watch", "true"),
            ("allowWatchBookmarks", "true"),
            ("resourceVersion", resource_version),
            ("timeoutSeconds", str(timeout_seconds)),
        ]
        return self._watch(resource, namespace, query, field_selector)

    def watch_list_metadata(
        self,
        resource: ResourceType,
        *,
        namespace: str | None = None,
        timeout_seconds: int,
        field_selector: str | None = None,
        decode_if: EventFilter | None = None,
    ) -> AsyncIterator[dict[str, Any]]:
        """A streaming list: a metadata-only watch that starts with every current object.

        ``sendInitialEvents=true`` with ``resourceVersionMatch=NotOlderThan`` and no
        resourceVersion: an ADDED event per object as of a consistent read, then a BOOKMARK
        annotated ``k8s.io/initial-events-end``, then ordinary watch events
        (docs/architecture.md#informer-loop). A server without the feature refuses the
        request (400 or 422).
        """
        query = [
            ("watch", "true"),
            ("sendInitialEvents", "true"),
            ("resourceVersionMatch", "NotOlderThan"),
            ("allowWatchBookmarks", "true"),
            ("timeoutSeconds", str(timeout_seconds)),
        ]
        return self._watch(resource, namespace, query, field_selector, decode_if)

    async def _watch(
        self,
        resource: ResourceType,
        namespace: str | None,
        query: list[tuple[str, str]],
        field_selector: str | None,
        decode_if: EventFilter | None = None,
    ) -> AsyncIterator[dict[str, Any]]:
        """Protobuf first (docs/architecture.md#protobuf-watches), JSON once it failed."""
        if field_selector:
            query.append(("fieldSelector", field_selector))
        accept = ACCEPT_METADATA if resource in self._json_watches else ACCEPT_METADATA_WATCH
        events = self.stream(
            resource.collection_path(namespace), query=query, accept=accept, decode_if=decode_if
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
    ) -> dict[str, Any]:
        """DELETE with UID and resourceVersion preconditions (server-default propagation)."""
        preconditions: dict[str, str] = {}
        if uid:
            preconditions["uid"] = uid
        if resource_version:
            preconditions["resourceVersion"] = resource_version
        body = {"apiVersion": "v1", "kind": "DeleteOptions"}
        if preconditions:
            body["preconditions"] = preconditions  # type: ignore[assignment]
        return await self.request("DELETE", resource.object_path(namespace, name), body=body)

    async def create(
        self,
        resource: ResourceType,
        namespace: str | None,
        body: Mapping[str, Any],
        *,
        pool: Pool = "requests",
        timeout: float | None = None,
    ) -> dict[str, Any]:
        return await self.request(
            "POST",
            resource.collection_path(namespace),
            body=dict(body),
            pool=pool,
            timeout=timeout,
        )

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
        self, resource: ResourceType, *, namespace: str | None = None, limit: int = 500
    ) -> dict[str, Any]:
        """The first page (at most ``limit``) of a list of whole objects."""
        return await self.request(
            "GET", resource.collection_path(namespace), query=[("limit", str(limit))]
        )

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
