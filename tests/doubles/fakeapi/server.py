"""The fake API server: a handler speaking the Kubernetes REST API, in process or over HTTP.

The controller's own :class:`~lifecycle_controller.kube.KubeClient` talks to it through
:meth:`FakeApiServer.client`: by default over the in-process transport of :mod:`.inprocess`
(each request handed to :meth:`FakeApiServer.answer`, no socket), or, with
``over_http=True``, over loopback HTTP (:mod:`.http`; a kubeconfig from
:meth:`FakeApiServer.write_kubeconfig` then works too). Either way the unit tests exercise
the real request building, media types, error mapping and watch streaming, only without a
cluster. Served: discovery (see :mod:`~tests.doubles.fakeapi.discovery`), list
(``limit``/``continue``, metadata-only with the ``PartialObjectMetadataList`` media type),
watch (from a resourceVersion, bookmarks when asked, ``timeoutSeconds``, ERROR 410 for a compacted
resourceVersion; a streaming list with ``sendInitialEvents`` unless ``streaming_lists`` is
off), get, create, merge patch, PUT and delete with the store's preconditions,
and ``TokenReview``/``SubjectAccessReview`` answered from :attr:`FakeApiServer.tokens` and
:attr:`FakeApiServer.grants`.
"""

from __future__ import annotations

import asyncio
import json
from collections.abc import Callable, Iterable, Mapping
from pathlib import Path
from typing import Any

from multidict import CIMultiDict, CIMultiDictProxy

from lifecycle_controller.kube import KubeClient, ResourceType, Timeouts
from lifecycle_controller.kube.connection import ClusterConfig
from lifecycle_controller.kube.watch_protobuf import PROTOBUF
from tests.doubles.fakeapi.answers import JSON, Answer, WatchStream, json_answer
from tests.doubles.fakeapi.discovery import Catalogue, ServedResource
from tests.doubles.fakeapi.faults import Fault, RecordedRequest
from tests.doubles.fakeapi.http import LoopbackSite
from tests.doubles.fakeapi.inprocess import InProcessTransport
from tests.doubles.fakeapi.store import ApiStatus, Store, WatchEvent

__all__ = ["IN_PROCESS_URL", "FakeApiServer"]

TOKEN = "fake-api-token"
#: Where an in-process fake says it is: no name under ``.invalid`` resolves, so a client
#: that bypassed the in-process transport fails at once.
IN_PROCESS_URL = "http://fake-api.invalid"


def _metadata_only(obj: dict[str, Any]) -> dict[str, Any]:
    return {
        "kind": "PartialObjectMetadata",
        "apiVersion": "meta.k8s.io/v1",
        "metadata": obj.get("metadata", {}),
    }


def _selected_name(selector: str | None) -> str | None:
    """The name of a ``metadata.name=<name>`` field selector (other selectors are ignored)."""
    field, _, value = (selector or "").partition("=")
    return value if field == "metadata.name" else None


def _status_answer(error: ApiStatus) -> Answer:
    return json_answer(error.status(), status=error.code)


class FakeApiServer:
    """An in-memory Kubernetes API server, in process or on a loopback port; ``async with``.

    ``now_ns`` (for example ``FakeClock.now_ns``) stamps creation and deletion timestamps.
    ``aggregated_discovery=False`` makes it an old server that answers discovery only in the
    legacy format. ``token`` is the bearer token every request must carry (401 otherwise).
    ``over_http=True`` also serves it on a loopback port (for tests of the HTTP layer, and
    for kubeconfigs); otherwise it is reached only through :meth:`transport`.
    """

    def __init__(
        self,
        *,
        now_ns: Callable[[], int] | None = None,
        aggregated_discovery: bool = True,
        token: str = TOKEN,
        streaming_lists: bool = True,
        over_http: bool = False,
    ) -> None:
        self.store = Store(now_ns=now_ns)
        self.catalogue = Catalogue()
        self.aggregated_discovery = aggregated_discovery
        #: False: refuse ``sendInitialEvents`` (422), as a server without WatchList does.
        self.streaming_lists = streaming_lists
        #: Watches asking for protobuf first get a frame that does not parse, this many times.
        self.broken_protobuf_watches = 0
        self.token = token
        self.requests: list[RecordedRequest] = []
        self.faults: list[Fault] = []
        #: TokenReview answers: bearer token -> ``status.user`` (absent = not authenticated).
        self.tokens: dict[str, dict[str, Any]] = {}
        #: SubjectAccessReview grants: (username, non-resource path, verb).
        self.grants: set[tuple[str, str, str]] = set()
        self._site = LoopbackSite(self.answer) if over_http else None
        self._url: str | None = None
        self._activity = asyncio.Event()

    # ------------------------------------------------------------------ lifecycle

    async def start(self) -> None:
        self._url = IN_PROCESS_URL if self._site is None else await self._site.start()

    async def stop(self) -> None:
        """End every watch, release hung requests, stop serving. Idempotent."""
        self.close_watches()
        for fault in self.faults:
            fault.release()
        self._url = None
        if self._site is not None:
            await self._site.stop()

    @property
    def serving(self) -> bool:
        return self._url is not None

    async def __aenter__(self) -> FakeApiServer:
        await self.start()
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.stop()

    @property
    def url(self) -> str:
        if self._url is None:
            raise RuntimeError("the fake API server is not started")
        return self._url

    def transport(self) -> InProcessTransport:
        """A transport that hands each request straight to this server (no socket)."""
        return InProcessTransport(self)

    def configuration(self) -> ClusterConfig:
        """Where this server is, with its bearer token, as the API door takes it."""
        return ClusterConfig(host=self.url, token=self.token)

    def client(self, *, timeouts: Timeouts | None = None, **kwargs: Any) -> KubeClient:
        """A real :class:`KubeClient` connected to this server (close it after use): over
        loopback HTTP when the server has a port, else over the in-process transport."""
        return KubeClient(
            self.configuration(),
            default_namespace=kwargs.pop("default_namespace", "default"),
            timeouts=timeouts or Timeouts(connect=2.0, request=10.0, watch_idle=30.0),
            transport=None if self._site is not None else self.transport(),
            **kwargs,
        )

    def write_kubeconfig(self, path: Path, *, namespace: str = "default") -> Path:
        """Write a kubeconfig for this server (JSON is valid YAML) and return its path.

        Only a server ``over_http`` can be reached through one."""
        if self._site is None:
            raise RuntimeError("a kubeconfig needs a fake API server started with over_http=True")
        config = {
            "apiVersion": "v1",
            "kind": "Config",
            "clusters": [{"name": "fake", "cluster": {"server": self.url}}],
            "users": [{"name": "fake", "user": {"token": self.token}}],
            "contexts": [
                {
                    "name": "fake",
                    "context": {"cluster": "fake", "user": "fake", "namespace": namespace},
                }
            ],
            "current-context": "fake",
        }
        path.write_text(json.dumps(config))
        return path

    # ------------------------------------------------------------------ test controls

    def fail(
        self,
        status: int,
        *,
        method: str | None = None,
        path: str | None = None,
        times: int = 1,
        retry_after: int | None = None,
        reason: str | None = None,
        message: str | None = None,
        hang: bool = False,
        when: Callable[[RecordedRequest], bool] | None = None,
    ) -> Fault:
        """Arm a :class:`Fault` for the next ``times`` matching requests; return it."""
        fault = Fault(
            status,
            method=method,
            path=path,
            times=times,
            retry_after=retry_after,
            reason=reason,
            message=message,
            hang=hang,
            when=when,
        )
        self.faults.append(fault)
        return fault

    def serve(self, resource: ResourceType | ServedResource) -> None:
        """Start serving a resource type (a CRD installed); discovery lists it at once."""
        self.catalogue.add(resource)

    def unserve(self, resource: ResourceType) -> None:
        """Stop serving a resource type: discovery drops it, its paths answer 404."""
        self.catalogue.remove(resource)
        self.close_watches(resource)

    def close_watches(self, resource: ResourceType | None = None) -> None:
        """End open watch streams normally (as ``timeoutSeconds`` does)."""
        for watcher in self.store.watchers(resource):
            watcher.queue.put_nowait(None)

    def bookmark(self, resource: ResourceType | None = None) -> None:
        """Send a BOOKMARK at the current resourceVersion to watches that asked for them."""
        for watcher in self.store.watchers(resource):
            if watcher.bookmarks:
                obj = {
                    "kind": watcher.resource.kind,
                    "apiVersion": watcher.resource.api_version,
                    "metadata": {"resourceVersion": str(self.store.revision)},
                }
                watcher.queue.put_nowait({"type": "BOOKMARK", "object": obj})

    def watch_error(
        self, code: int, resource: ResourceType | None = None, message: str = ""
    ) -> None:
        """Send an ERROR event (``code`` 410 also compacts the history) and end the streams."""
        if code == 410:
            self.store.compact()
        error = ApiStatus(code, "Expired" if code == 410 else "InternalError", message or "")
        for watcher in self.store.watchers(resource):
            watcher.queue.put_nowait({"type": "ERROR", "object": error.status()})
            watcher.queue.put_nowait(None)

    async def until(self, predicate: Callable[[], bool], *, timeout: float = 5.0) -> None:
        """Wait until ``predicate()`` holds, re-checking whenever the server sees activity
        (a request arrives or is answered, a watch opens). ``timeout`` (seconds of real
        time) only guards against a test that would otherwise hang."""
        async with asyncio.timeout(timeout):
            while not predicate():
                self._activity.clear()
                await self._activity.wait()

    def _active(self) -> None:
        self._activity.set()

    def requests_to(self, method: str, path: str | None = None) -> list[RecordedRequest]:
        """Recorded requests with ``method`` whose path contains ``path``."""
        return [
            r
            for r in self.requests
            if r.method == method.upper() and (path is None or path in r.path)
        ]

    # ------------------------------------------------------------------ dispatch

    async def answer(
        self,
        method: str,
        path: str,
        query: Iterable[tuple[str, str]],
        headers: Mapping[str, str],
        raw: bytes,
    ) -> Answer:
        """Record one request and answer it (what every carrier calls)."""
        try:
            body = json.loads(raw) if raw else None
        except json.JSONDecodeError:
            body = raw.decode(errors="replace")
        recorded = RecordedRequest(
            method=method,
            path=path,
            query=tuple(query),
            headers=CIMultiDictProxy(CIMultiDict(headers)),
            body=body,
        )
        self.requests.append(recorded)
        self._active()
        try:
            answer = await self._answer(recorded)
            recorded.status = answer.status
        finally:
            self._active()
        return answer

    async def _answer(self, recorded: RecordedRequest) -> Answer:
        if recorded.headers.get("Authorization") != f"Bearer {self.token}":
            return _status_answer(ApiStatus(401, "Unauthorized", "Unauthorized"))
        for fault in self.faults:
            if fault.matches(recorded):
                fault.hits += 1
                self._active()
                if fault.hang:
                    await fault.held()
                headers = {"Retry-After": str(fault.retry_after)} if fault.retry_after else None
                return json_answer(fault.status_body(), status=fault.status, headers=headers)
        try:
            return await self._route(recorded)
        except ApiStatus as error:
            return _status_answer(error)

    async def _route(self, recorded: RecordedRequest) -> Answer:
        parts = [p for p in recorded.path.split("/") if p]
        accept = recorded.headers.get("Accept", "")
        aggregated = self.aggregated_discovery and "as=APIGroupDiscoveryList" in accept
        if parts == ["api"]:
            return json_answer(
                self.catalogue.aggregated(core=True) if aggregated else self.catalogue.legacy_core()
            )
        if parts == ["apis"]:
            return json_answer(
                self.catalogue.aggregated(core=False)
                if aggregated
                else self.catalogue.legacy_groups()
            )
        if parts[:1] == ["api"] and len(parts) >= 2:
            group, version, rest = "", parts[1], parts[2:]
        elif parts[:1] == ["apis"] and len(parts) >= 3:
            group, version, rest = parts[1], parts[2], parts[3:]
        else:
            raise ApiStatus(404, "NotFound", "the server could not find the requested resource")
        if not rest:
            return self._group_version(group, version)
        namespace: str | None = None
        if len(rest) >= 3 and rest[0] == "namespaces":
            namespace, rest = rest[1], rest[2:]
        resource = self.catalogue.lookup(group, version, rest[0])
        if resource is None or len(rest) > 2:
            raise ApiStatus(404, "NotFound", "the server could not find the requested resource")
        if resource.group == "authentication.k8s.io" and recorded.method == "POST":
            return json_answer(self._token_review(recorded.body), status=201)
        if resource.group == "authorization.k8s.io" and recorded.method == "POST":
            return json_answer(self._access_review(recorded.body), status=201)
        if len(rest) == 1:
            return self._collection(recorded, resource, namespace)
        return self._object(recorded, resource, namespace, rest[1])

    def _group_version(self, group: str, version: str) -> Answer:
        gv = f"{group}/{version}" if group else version
        if gv in self.catalogue.unavailable:
            raise ApiStatus(503, "ServiceUnavailable", "the server is currently unable to handle")
        document = self.catalogue.legacy_resources(group, version)
        if document is None:
            raise ApiStatus(404, "NotFound", "the server could not find the requested resource")
        return json_answer(document)

    def _collection(
        self, recorded: RecordedRequest, resource: ResourceType, namespace: str | None
    ) -> Answer:
        metadata_only = "as=PartialObjectMetadata" in recorded.headers.get("Accept", "")
        if recorded.method == "POST":
            created = self.store.create(resource, namespace, recorded.body or {})
            return json_answer(created, status=201)
        if recorded.method != "GET":
            raise ApiStatus(405, "MethodNotAllowed", f"{recorded.method} is not allowed here")
        if recorded.is_watch:
            return self._watch(recorded, resource, namespace, metadata_only)
        limit = recorded.param("limit")
        items, version, token, remaining = self.store.list_page(
            resource,
            namespace,
            limit=int(limit) if limit else None,
            continue_token=recorded.param("continue"),
            resource_version=recorded.param("resourceVersion"),
        )
        name = _selected_name(recorded.param("fieldSelector"))
        if name is not None:
            items = [item for item in items if item.get("metadata", {}).get("name") == name]
        list_meta: dict[str, Any] = {"resourceVersion": version}
        if token:
            list_meta["continue"] = token
            if name is None:  # as the API server: no count for a list with a selector
                list_meta["remainingItemCount"] = remaining
        if metadata_only:
            document = {
                "kind": "PartialObjectMetadataList",
                "apiVersion": "meta.k8s.io/v1",
                "metadata": list_meta,
                "items": [_metadata_only(item) for item in items],
            }
        else:
            document = {
                "kind": f"{resource.kind}List",
                "apiVersion": resource.api_version,
                "metadata": list_meta,
                "items": items,
            }
        return json_answer(document)

    def _object(
        self, recorded: RecordedRequest, resource: ResourceType, namespace: str | None, name: str
    ) -> Answer:
        store = self.store
        body = recorded.body if isinstance(recorded.body, dict) else {}
        if recorded.method == "GET":
            obj = store.get(resource, namespace, name)
            if "as=PartialObjectMetadata" in recorded.headers.get("Accept", ""):
                obj = _metadata_only(obj)
            return json_answer(obj)
        if recorded.method == "PATCH":
            if recorded.headers.get("Content-Type") != "application/merge-patch+json":
                raise ApiStatus(415, "UnsupportedMediaType", "only merge patches are served")
            return json_answer(store.patch(resource, namespace, name, body))
        if recorded.method == "PUT":
            return json_answer(store.replace(resource, namespace, name, body))
        if recorded.method == "DELETE":
            preconditions = body.get("preconditions") or {}
            deleted = store.delete(
                resource,
                namespace,
                name,
                uid=preconditions.get("uid"),
                resource_version=preconditions.get("resourceVersion"),
            )
            return json_answer(deleted)
        raise ApiStatus(405, "MethodNotAllowed", f"{recorded.method} is not allowed here")

    def _watch(
        self,
        recorded: RecordedRequest,
        resource: ResourceType,
        namespace: str | None,
        metadata_only: bool,
    ) -> Answer:
        if self.broken_protobuf_watches and recorded.headers.get("Accept", "").startswith(PROTOBUF):
            self.broken_protobuf_watches -= 1
            garbage = b"\x0b"
            return Answer(
                200, {"Content-Type": PROTOBUF}, len(garbage).to_bytes(4, "big") + garbage
            )
        bookmarks = recorded.param("allowWatchBookmarks") == "true"
        initial_events = recorded.param("sendInitialEvents") == "true"
        if initial_events:
            self._check_streaming_list(recorded, bookmarks)
        watcher = self.store.watch(
            resource,
            namespace,
            "" if initial_events else recorded.param("resourceVersion"),
            bookmarks=bookmarks,
            initial_events_end=initial_events,
        )
        selected = _selected_name(recorded.param("fieldSelector"))

        def render(item: WatchEvent | dict[str, Any]) -> dict[str, Any] | None:
            if not isinstance(item, WatchEvent):
                return item  # an ERROR or a BOOKMARK, sent as it is
            if selected is not None and item.object["metadata"].get("name") != selected:
                return None
            obj = _metadata_only(item.object) if metadata_only else item.object
            return {"type": item.type, "object": obj}

        timeout = recorded.param("timeoutSeconds")
        deadline = asyncio.get_running_loop().time() + float(timeout) if timeout else None
        stream = WatchStream(self.store, watcher, render, deadline)
        return Answer(200, {"Content-Type": JSON}, stream=stream)

    def _check_streaming_list(self, recorded: RecordedRequest, bookmarks: bool) -> None:
        """Refuse a streaming list as kube-apiserver does: feature off, or options wrong."""
        if not self.streaming_lists:
            raise ApiStatus(
                422,
                "Invalid",
                "sendInitialEvents is forbidden for watch unless the WatchList feature "
                "gate is enabled",
            )
        if recorded.param("resourceVersionMatch") != "NotOlderThan" or not bookmarks:
            raise ApiStatus(
                422,
                "Invalid",
                "sendInitialEvents needs resourceVersionMatch=NotOlderThan and "
                "allowWatchBookmarks=true",
            )

    # ------------------------------------------------------------------ reviews

    def _token_review(self, body: Any) -> dict[str, Any]:
        token = ((body or {}).get("spec") or {}).get("token", "")
        user = self.tokens.get(token)
        status: dict[str, Any] = {"authenticated": user is not None}
        if user is not None:
            status["user"] = user
        return {**(body or {}), "status": status}

    def _access_review(self, body: Any) -> dict[str, Any]:
        spec = (body or {}).get("spec") or {}
        attributes = spec.get("nonResourceAttributes") or {}
        wanted = (spec.get("user", ""), attributes.get("path", ""), attributes.get("verb", ""))
        allowed = wanted in self.grants
        return {**(body or {}), "status": {"allowed": allowed}}
