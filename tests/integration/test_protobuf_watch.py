"""Protobuf watches against the real API server: the same events as JSON, field by field.

The objects carry everything the decoder reads (labels, annotations outside ASCII, owner
references with ``controller`` and ``blockOwnerDeletion``, finalizers, ``generateName``, a
generation, a deletion timestamp and grace period); each type's streaming list is read once
as JSON and once as protobuf, and the two must agree except for ``managedFields``, which the
protobuf reader skips (docs/architecture.md#protobuf-watches).
"""

from __future__ import annotations

import contextlib
from collections.abc import AsyncIterator
from typing import Any

import aiohttp
import pytest

from lifecycle_controller.devcluster import ControlPlane
from lifecycle_controller.kube import CRDS, KubeClient, NotFound, ResourceType, load_configuration
from lifecycle_controller.kube.client import ACCEPT_METADATA, ACCEPT_METADATA_WATCH
from lifecycle_controller.kube.exchanges import watch_events
from lifecycle_controller.kube.resources import DEPLOYMENTS, NAMESPACES
from lifecycle_controller.kube.watch_protobuf import PROTOBUF
from tests.integration.support import CONFIGMAPS, configmap, crd_manifest, deployment, eventually

WIDGETS = ResourceType("protobuf.example.test", "v1", "widgets", "Widget", namespaced=True)
STREAMING_LIST = (
    ("watch", "true"),
    ("sendInitialEvents", "true"),
    ("resourceVersionMatch", "NotOlderThan"),
    ("allowWatchBookmarks", "true"),
    ("timeoutSeconds", "30"),
)


async def initial_events(
    control_plane: ControlPlane, path: str, accept: str, query: tuple[tuple[str, str], ...] = ()
) -> tuple[str, list[dict[str, Any]]]:
    """The answer's media type and its events up to the initial-events-end bookmark."""
    config, _ = await load_configuration(str(control_plane.admin_kubeconfig))
    headers = {"Accept": accept}
    authorization = await config.authorization_header()
    if authorization:
        headers["Authorization"] = authorization
    connector = aiohttp.TCPConnector(ssl=config.ssl_context())
    events: list[dict[str, Any]] = []
    async with (
        aiohttp.ClientSession(connector=connector) as session,
        session.get(
            config.host + path, params=[*STREAMING_LIST, *query], headers=headers
        ) as response,
    ):
        assert response.status == 200, await response.text()
        async for event in watch_events(response, what=path):
            if event["type"] == "BOOKMARK":
                return response.content_type, events
            metadata = event["object"]["metadata"]
            metadata.pop("managedFields", None)
            events.append(event)
    raise AssertionError(f"{path}: no initial-events-end bookmark")


@pytest.fixture
async def widgets(kube: KubeClient, namespace: str) -> AsyncIterator[None]:
    name = f"{WIDGETS.resource}.{WIDGETS.group}"
    with contextlib.suppress(Exception):
        await kube.create(CRDS, None, crd_manifest(WIDGETS.group, WIDGETS.resource, "Widget"))

    async def served() -> bool:
        try:
            await kube.list_metadata(WIDGETS, namespace=namespace, limit=1)
        except NotFound:
            return False
        return True

    await eventually(served, within=30, what="the Widget CRD served")
    yield
    with contextlib.suppress(NotFound):
        await kube.delete(CRDS, None, name)


async def populate(kube: KubeClient, namespace: str) -> None:
    owner = await kube.create(DEPLOYMENTS, namespace, deployment("owner"))
    reference = {
        "apiVersion": "apps/v1",
        "kind": "Deployment",
        "name": "owner",
        "uid": owner["metadata"]["uid"],
        "controller": True,
        "blockOwnerDeletion": False,
    }
    rich = configmap("rich", **{"lifecycle.cezary.dev/delete-after": "1h", "note": "ünï ✓"})
    rich["metadata"].update(
        labels={"app": "web", "tier": ""},
        ownerReferences=[reference],
        finalizers=["example.test/hold"],
    )
    await kube.create(CONFIGMAPS, namespace, rich)
    generated = configmap("")
    del generated["metadata"]["name"]
    generated["metadata"]["generateName"] = "gen-"
    await kube.create(CONFIGMAPS, namespace, generated)
    await kube.delete(CONFIGMAPS, namespace, "rich")  # kept by its finalizer, now deleting
    widget: dict[str, Any] = {"apiVersion": "protobuf.example.test/v1", "kind": "Widget"}
    widget["metadata"] = {"name": "w", "annotations": {"lifecycle.cezary.dev/delete-at": "x"}}
    await kube.create(WIDGETS, namespace, widget)


async def test_every_type_reads_the_same_in_protobuf_and_in_json(
    control_plane: ControlPlane, kube: KubeClient, namespace: str, widgets: None
) -> None:
    await populate(kube, namespace)
    served: dict[str, str] = {}
    selector = (("fieldSelector", f"metadata.name={namespace}"),)
    for resource, query in (
        (CONFIGMAPS, ()),
        (DEPLOYMENTS, ()),
        (WIDGETS, ()),
        (NAMESPACES, selector),
    ):
        path = resource.collection_path(namespace if resource.namespaced else None)
        _, as_json = await initial_events(control_plane, path, ACCEPT_METADATA, query)
        media, as_protobuf = await initial_events(control_plane, path, ACCEPT_METADATA_WATCH, query)
        served[resource.resource] = media
        assert as_protobuf == as_json, resource
        assert as_json, resource
    # The built-in types come as protobuf; what the server does for a custom resource is its
    # choice, and either way the client reads it.
    assert served["configmaps"] == served["deployments"] == served["namespaces"] == PROTOBUF
    _, events = await initial_events(
        control_plane, CONFIGMAPS.collection_path(namespace), ACCEPT_METADATA_WATCH
    )
    (rich,) = (e["object"]["metadata"] for e in events if e["object"]["metadata"]["name"] == "rich")
    assert rich["deletionTimestamp"].endswith("Z")
    assert rich["deletionGracePeriodSeconds"] == 0
    assert rich["ownerReferences"][0]["controller"] is True
    assert rich["annotations"]["note"] == "ünï ✓"
    await kube.merge_patch(
        CONFIGMAPS, namespace, "rich", {"metadata": {"finalizers": None}}
    )  # let it go


async def test_the_clients_streaming_list_yields_what_json_gives(
    control_plane: ControlPlane, kube: KubeClient, namespace: str
) -> None:
    await kube.create(CONFIGMAPS, namespace, configmap("a", x="1"))
    _, as_json = await initial_events(
        control_plane, CONFIGMAPS.collection_path(namespace), ACCEPT_METADATA
    )
    seen: list[dict[str, Any]] = []
    async for event in kube.watch_list_metadata(
        CONFIGMAPS, namespace=namespace, timeout_seconds=30
    ):
        if event["type"] == "BOOKMARK":
            break
        event["object"]["metadata"].pop("managedFields", None)
        seen.append(event)
    assert seen == as_json
