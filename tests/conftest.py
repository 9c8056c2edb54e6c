"""Fixtures shared by every test layer that needs the real control plane.

One control plane (etcd + kube-apiserver + kube-controller-manager) serves the whole session,
whichever folders run: it is built on first use (cached per machine) and its folder, with
every component's log, is kept when a test failed.
"""

from __future__ import annotations

import os
import uuid
from collections.abc import AsyncIterator, Iterator

import pytest
from hypothesis import settings
from kubernetes_asyncio import client

from lifecycle_controller.devcluster import ControlPlane
from tests.integration.support import api_client_for

# Property tests are deterministic by default (the same examples on every run, so CI is never
# flaky); HYPOTHESIS_PROFILE=explore draws fresh random examples to hunt for new bugs.
settings.register_profile("repeatable", derandomize=True, print_blob=True)
settings.register_profile("explore", derandomize=False, print_blob=True)
settings.load_profile(os.environ.get("HYPOTHESIS_PROFILE", "repeatable"))


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
