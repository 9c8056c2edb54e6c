"""The one door to the Kubernetes API: generic requests for any resource type, as plain dicts.

Built on kubernetes-asyncio's low-level ``ApiClient.call_api`` (typed models are slow and
rewrite ``Accept`` headers; see docs/architecture.md#raw-requests). Every call has a timeout,
every non-2xx answer raises from :mod:`.errors`, and three separate connection pools keep
long-running watches from starving ordinary requests or the leader-election renewals
(docs/architecture.md#connection-pools).
"""

from __future__ import annotations

import json
import os
from collections.abc import AsyncIterator, Callable, Iterable, Mapping
from contextlib import asynccontextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Literal

import aiohttp
from kubernetes_asyncio import client as k8s_client
from kubernetes_asyncio import config as k8s_config
from kubernetes_asyncio.config.config_exception import ConfigException

from lifecycle_controller import __version__
from lifecycle_controller.kube.errors import KubeError, TransportError, error_for_status
from lifecycle_controller.kube.resources import ResourceType

JSON = "application/json"
MERGE_PATCH = "application/merge-patch+json"
ACCEPT_METADATA_LIST = (
    "application/json;as=PartialObjectMetadataList;g=meta.k8s.io;v=v1,application/json"
)
ACCEPT_METADATA = "application/json;as=PartialObjectMetadata;g=meta.k8s.io;v=v1,application/json"
ACCEPT_AGGREGATED_DISCOVERY = (
    "application/json;g=apidiscovery.k8s.io;v=v2;as=APIGroupDiscoveryList,application/json"
)
SERVICE_ACCOUNT_NAMESPACE_FILE = Path("/var/run/secrets/kubernetes.io/serviceaccount/namespace")

Pool = Literal["requests", "watches", "leases"]
RequestObserver = Callable[[str, str], None]
"""Called with (HTTP method, status code or "<error>") after every request, for metrics."""


class ConnectionConfigError(KubeError):
    """No usable cluster credentials: the flag, KUBECONFIG and in-cluster all failed."""


@dataclass(frozen=True)
class Timeouts:
    """Seconds. ``watch_idle`` is the longest silence tolerated on an open watch stream."""

    connect: float = 5.0
    request: float = 30.0
    watch_idle: float = 90.0


def _pod_namespace() -> str:
    """The namespace the controller's Pod runs in (for its Lease and its own Events)."""
    namespace = os.environ.get("POD_NAMESPACE", "")
    if not namespace and SERVICE_ACCOUNT_NAMESPACE_FILE.is_file():
        namespace = SERVICE_ACCOUNT_NAMESPACE_FILE.read_text().strip()
    return namespace or "default"


def _kubeconfig_path(explicit: str | None) -> str | None:
    """The kubeconfig to load (``--kubeconfig``, ``$KUBECONFIG``, ~/.kube/config), or None
    for in-cluster credentials; raises when nothing usable is configured."""
    chosen = explicit or os.environ.get("KUBECONFIG", "")
    if not chosen:
        if os.environ.get("KUBERNETES_SERVICE_HOST"):
            return None
        default = Path.home() / ".kube" / "config"
        if not default.is_file():
            raise ConnectionConfigError(
                "no cluster configured: pass --kubeconfig, set KUBECONFIG, or run in a Pod"
            )
        return str(default)
    if not any(Path(part).is_file() for part in chosen.split(os.pathsep) if part):
        raise ConnectionConfigError(f"kubeconfig {chosen} not found")
    return chosen


async def load_configuration(
    kubeconfig: str | None = None, *, context: str | None = None
) -> tuple[k8s_client.Configuration, str]:
    """Credentials from ``--kubeconfig``, else ``$KUBECONFIG``, else in-cluster, else ~/.kube.

    Returns the configuration and the default namespace (the Pod's namespace in-cluster, the
    context's namespace or ``default`` otherwise).
    """
    configuration = k8s_client.Configuration()
    path = _kubeconfig_path(kubeconfig)
    if path is None:
        try:
            k8s_config.load_incluster_config(  # type: ignore[no-untyped-call]
                client_configuration=configuration
            )
        except ConfigException as error:
            raise ConnectionConfigError(f"in-cluster configuration failed: {error}") from error
        return configuration, _pod_namespace()
    try:
        loader = await k8s_config.load_kube_config(
            config_file=path,
            context=context,
            client_configuration=configuration,
            persist_config=False,
        )
    except (ConfigException, OSError) as error:
        raise ConnectionConfigError(f"cannot load kubeconfig {path}: {error}") from error
    namespace = "default"
    with_context = getattr(loader, "current_context", None)
    if isinstance(with_context, Mapping):
        namespace = str(with_context.get("context", {}).get("namespace") or "default")
    return configuration, namespace


def _timeout(total: float | None, connect: float, idle: float | None) -> aiohttp.ClientTimeout:
    return aiohttp.ClientTimeout(total=total, sock_connect=connect, sock_read=idle)


class KubeClient:
    """Generic, dict-based access to the API server for any resource type."""

    def __init__(
        self,
        configuration: k8s_client.Configuration,
        *,
        default_namespace: str = "default",
        timeouts: Timeouts | None = None,
        observe: RequestObserver | None = None,
        watch_pool_size: int = 512,
    ) -> None:
        self.default_namespace = default_namespace
        self.timeouts = timeouts or Timeouts()
        self._observe = observe
        self._pools: dict[str, k8s_client.ApiClient] = {}
        sizes = {"requests": 64, "watches": watch_pool_size, "leases": 4}
        for pool, size in sizes.items():
            pool_config = k8s_client.Configuration()
            pool_config.__dict__.update(configuration.__dict__)
            pool_config.connection_pool_maxsize = size
            api = k8s_client.ApiClient(configuration=pool_config)
            api.user_agent = f"lifecycle-controller/{__version__}"
            self._pools[pool] = api

    @classmethod
    async def connect(
        cls,
        kubeconfig: str | None = None,
        *,
        context: str | None = None,
        timeouts: Timeouts | None = None,
        observe: RequestObserver | None = None,
    ) -> KubeClient:
        """Load credentials (see :func:`load_configuration`) and build a client."""
        configuration, namespace = await load_configuration(kubeconfig, context=context)
        return cls(configuration, default_namespace=namespace, timeouts=timeouts, observe=observe)

    async def close(self) -> None:
        for api in self._pools.values():
            await api.close()

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
        timeout: aiohttp.ClientTimeout,
        pool: Pool,
    ) -> AsyncIterator[aiohttp.ClientResponse]:
        api = self._pools[pool]
        try:
            response = await api.call_api(
                path,
                method,
                query_params=list(query),
                header_params={"Accept": accept, "Content-Type": content_type},
                body=body,
                auth_settings=["BearerToken"],
                _return_http_data_only=True,
                _preload_content=False,
                _request_timeout=timeout,
            )
        except (aiohttp.ClientError, TimeoutError, OSError) as error:
            self._record(method, "<error>")
            raise TransportError(f"{method} {path}: {error or type(error).__name__}") from error
        self._record(method, str(response.status))
        try:
            if response.status >= 300:
                raw = await response.read()
                try:
                    decoded = json.loads(raw) if raw else {}
                except json.JSONDecodeError:
                    decoded = {"message": raw.decode(errors="replace")[:500]}
                retry_after = response.headers.get("Retry-After")
                raise error_for_status(
                    response.status,
                    decoded if isinstance(decoded, dict) else {},
                    method=method,
                    path=path,
                    retry_after=float(retry_after)
                    if retry_after and retry_after.isdigit()
                    else None,
                )
            yield response
        except (aiohttp.ClientError, TimeoutError) as error:
            raise TransportError(f"{method} {path}: {error or type(error).__name__}") from error
        finally:
            response.release()

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
        client_timeout = _timeout(timeout or self.timeouts.request, self.timeouts.connect, None)
        async with self._open(
            method,
            path,
            query=query,
            body=body,
            content_type=content_type,
            accept=accept,
            timeout=client_timeout,
            pool=pool,
        ) as response:
            try:
                raw = await response.read()
            except (aiohttp.ClientError, TimeoutError) as error:
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
    ) -> AsyncIterator[dict[str, Any]]:
        """Open a watch and yield each JSON line; a silence over ``idle_timeout`` ends it.

        Ends normally when the server closes the stream; raises TransportError when the
        connection breaks or stays silent too long, and KubeError for a non-2xx answer.
        """
        idle = idle_timeout or self.timeouts.watch_idle
        async with self._open(
            "GET",
            path,
            query=query,
            accept=accept,
            timeout=_timeout(None, self.timeouts.connect, idle),
            pool="watches",
        ) as response:
            while True:
                try:
                    line = await response.content.readline()
                except (aiohttp.ClientError, TimeoutError, ValueError) as error:
                    raise TransportError(
                        f"watch {path}: {error or type(error).__name__}"
                    ) from error
                if not line:
                    return
                line = line.strip()
                if not line:
                    continue
                try:
                    event = json.loads(line)
                except json.JSONDecodeError as error:
                    raise TransportError(f"watch {path}: a line is not JSON") from error
                if isinstance(event, dict):
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
    ) -> dict[str, Any]:
        """One page of a metadata-only list (``PartialObjectMetadataList``)."""
        query = [("limit", str(limit))]
        if continue_token:
            query.append(("continue", continue_token))
        elif resource_version is not None:
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
    ) -> AsyncIterator[dict[str, Any]]:
        """A metadata-only watch with bookmarks, from ``resource_version``."""
        query = [
            ("watch", "true"),
            ("allowWatchBookmarks", "true"),
            ("resourceVersion", resource_version),
            ("timeoutSeconds", str(timeout_seconds)),
        ]
        return self.stream(resource.collection_path(namespace), query=query, accept=ACCEPT_METADATA)

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
    ) -> dict[str, Any]:
        """A JSON merge patch (RFC 7386); put ``metadata.resourceVersion`` in it to guard it."""
        return await self.request(
            "PATCH",
            resource.object_path(namespace, name),
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
