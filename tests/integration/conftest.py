"""Integration tests: everything here runs against the real control plane (tests/conftest.py).

Every test in this folder is marked ``integration``. Fixtures for the tests here:
``start_controller`` runs the real controller in-process (tests/integration/controller.py;
``start_kwok_controller`` on the control plane with fake nodes, ``kwok_kube`` its client),
``launcher`` runs it as real processes (tests/integration/processes.py), ``kube`` (also named
``api``) is the test's own admin client, ``http`` a plain HTTP session, ``receiver`` a
webhook receiver (tests/integration/webhook_receiver.py) and ``policy_crds`` installs the
chart's lifecycle policy CRDs (tests/integration/policy_crds.py; ``kwok_policy_crds`` on the
control plane with fake nodes).
"""

from __future__ import annotations

from collections.abc import AsyncIterator

import aiohttp
import pytest

from lifecycle_controller.devcluster import ControlPlane
from lifecycle_controller.kube import KubeClient
from tests.integration.controller import start_controller, start_kwok_controller
from tests.integration.policy_crds import install_policy_crds
from tests.integration.policy_tools import cluster_policies
from tests.integration.processes import launcher
from tests.integration.webhook_receiver import receiver

__all__ = [
    "cluster_policies",
    "launcher",
    "receiver",
    "start_controller",
    "start_kwok_controller",
]


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    for item in items:
        if "tests/integration/" in str(item.path).replace("\\", "/"):
            item.add_marker(pytest.mark.integration)


@pytest.fixture
async def kube(control_plane: ControlPlane) -> AsyncIterator[KubeClient]:
    """The test's own admin client (so its requests never pass through the controller's)."""
    async with await KubeClient.connect(str(control_plane.admin_kubeconfig)) as client:
        yield client


@pytest.fixture
async def kwok_kube(kwok_plane: ControlPlane) -> AsyncIterator[KubeClient]:
    """The test's own admin client on the control plane with fake nodes."""
    async with await KubeClient.connect(str(kwok_plane.admin_kubeconfig)) as client:
        yield client


@pytest.fixture
async def http() -> AsyncIterator[aiohttp.ClientSession]:
    async with aiohttp.ClientSession() as session:
        yield session


@pytest.fixture
def policy_crds(control_plane: ControlPlane) -> None:
    """The chart's lifecycle policy CRDs, installed and served (they stay for the session)."""
    install_policy_crds(control_plane)


@pytest.fixture
def kwok_policy_crds(kwok_plane: ControlPlane) -> None:
    """The same CRDs on the control plane with fake nodes."""
    install_policy_crds(kwok_plane)
