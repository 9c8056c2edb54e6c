"""Fixtures for tests against a real control plane (etcd + kube-apiserver + controller-manager).

One control plane serves the whole session. It is built on first use (cached per machine) and
its folder, with every component's log, is kept when a test failed.
"""

from __future__ import annotations

import uuid
from collections.abc import AsyncIterator, Iterator

import pytest
from kubernetes_asyncio import client

from lifecycle_controller.devcluster import ControlPlane
from tests.integration.controller import start_controller
from tests.integration.support import api_client_for

__all__ = ["admin_api", "control_plane", "namespace", "start_controller"]


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    for item in items:
        if "tests/integration/" in str(item.path).replace("\\", "/"):
            item.add_marker(pytest.mark.integration)


@pytest.fixture(scope="session")
def control_plane(request: pytest.FixtureRequest) -> Iterator[ControlPlane]:
    plane = ControlPlane(log=lambda line: print(f"[devcluster] {line}", flush=True))
    plane.start()
    yield plane
    plane.stop(keep_logs=request.session.testsfailed > 0)


@pytest.fixture
def namespace(control_plane: ControlPlane) -> Iterator[str]:
    """A fresh namespace for one test, deleted afterwards (deletion is not awaited)."""
    name = f"t-{uuid.uuid4().hex[:10]}"
    response = control_plane.request(
        "POST",
        "/api/v1/namespaces",
        {"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": name}},
    )
    assert response.status == 201, response.body
    yield name
    control_plane.request("DELETE", f"/api/v1/namespaces/{name}")


@pytest.fixture
async def admin_api(control_plane: ControlPlane) -> AsyncIterator[client.ApiClient]:
    api = await api_client_for(str(control_plane.admin_kubeconfig))
    async with api:
        yield api
