"""Fixtures shared by every test layer that needs the real control plane.

One control plane (etcd + kube-apiserver + kube-controller-manager) serves the whole session,
whichever folders run: it is built on first use (cached per machine) and its folder, with
every component's log, is kept when a test failed. A second one, ``kwok_plane``, adds
kube-scheduler, kwok and three fake Nodes, so that Pods become Running and Ready and rollouts
complete for real; it starts only in a session that has a test asking for it (its own ports
and folder), and the first keeps Pods Pending, as the tests written for it expect.

Under pytest-xdist (``tox -e integration`` runs ``-n 3 --dist loadgroup``) every worker is
its own session, so each has control planes of its own and nothing on one cluster is seen by
another worker. :func:`pytest_collection_modifyitems` keeps the tests of one file on one
worker (a module-scoped fixture, such as an installed chart, is set up once) and every test
on the kwok plane on one worker (one kwok plane for the run, not one per worker), and hands
the groups with a test marked ``long`` out first (:func:`long_groups_first`).
"""

from __future__ import annotations

import os
import uuid
from collections.abc import AsyncIterator, Iterator
from contextlib import contextmanager

import pytest
from hypothesis import settings
from kubernetes_asyncio import client

from lifecycle_controller.devcluster import ControlPlane
from tests.integration.support import api_client_for

# Property tests are deterministic by default (the same examples on every run, so CI is never
# flaky); HYPOTHESIS_PROFILE=explore draws fresh random examples to hunt for new bugs. No
# per-example deadline: on a loaded two-core machine one slow example is not a failure.
settings.register_profile("repeatable", derandomize=True, print_blob=True, deadline=None)
settings.register_profile("explore", derandomize=False, print_blob=True, deadline=None)
settings.load_profile(os.environ.get("HYPOTHESIS_PROFILE", "repeatable"))


#: The pytest-xdist group of every test on ``kwok_plane``.
KWOK_GROUP = "kwok-plane"


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    """An ``xdist_group`` for each test without one: :data:`KWOK_GROUP` for the tests on the
    kwok plane, else the test's file (without ``--dist loadgroup`` the marks do nothing).
    Under ``--dist loadgroup``, the groups are also put in the order they should be handed
    out (:func:`long_groups_first`)."""
    for item in items:
        if item.get_closest_marker("xdist_group") is not None:
            continue
        fixtures = getattr(item, "fixturenames", ())
        group = KWOK_GROUP if "kwok_plane" in fixtures else item.nodeid.partition("::")[0]
        item.add_marker(pytest.mark.xdist_group(group))
    if config.getoption("dist", "no") == "loadgroup":
        items[:] = long_groups_first(items)


def _group_of(item: pytest.Item) -> str:
    mark = item.get_closest_marker("xdist_group")
    if mark is None:
        return ""
    return str(mark.args[0] if mark.args else mark.kwargs.get("name", ""))


def long_groups_first(items: list[pytest.Item]) -> list[pytest.Item]:
    """The items grouped by ``xdist_group``: first the groups with a test marked ``long``,
    then the others, the larger first (as pytest-xdist orders them itself unless run with
    ``--no-loadscope-reorder``, as tox does); each group's tests in their order.

    A worker takes the next group whenever it has two tests or fewer left, so the last
    groups handed out decide how long one worker runs on alone at the end: a minute-long
    test taken last is a minute of one worker idle. Taken first, the long tests overlap
    the short ones, which then even the workers out."""
    groups: dict[str, list[pytest.Item]] = {}
    for item in items:
        groups.setdefault(_group_of(item), []).append(item)
    long = {
        name
        for name, members in groups.items()
        if any(member.get_closest_marker("long") is not None for member in members)
    }
    ordered = sorted(groups.items(), key=lambda group: (group[0] not in long, -len(group[1])))
    return [item for _, members in ordered for item in members]


@pytest.fixture(scope="session")
def control_plane(request: pytest.FixtureRequest) -> Iterator[ControlPlane]:
    plane = ControlPlane(log=lambda line: print(f"[devcluster] {line}", flush=True))
    plane.start()
    yield plane
    plane.stop(keep_logs=request.session.testsfailed > 0)


#: The fake Nodes of ``kwok_plane`` (a DaemonSet gets one Pod on each).
KWOK_NODES = 3


@pytest.fixture(scope="session")
def kwok_plane(request: pytest.FixtureRequest) -> Iterator[ControlPlane]:
    """A control plane with kube-scheduler, kwok and :data:`KWOK_NODES` fake Nodes."""
    plane = ControlPlane(
        nodes=KWOK_NODES, log=lambda line: print(f"[devcluster+kwok] {line}", flush=True)
    )
    plane.start()
    yield plane
    plane.stop(keep_logs=request.session.testsfailed > 0)


@contextmanager
def fresh_namespace(plane: ControlPlane) -> Iterator[str]:
    """A fresh namespace, deleted afterwards (deletion is not awaited)."""
    name = f"t-{uuid.uuid4().hex[:10]}"
    response = plane.request(
        "POST",
        "/api/v1/namespaces",
        {"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": name}},
    )
    assert response.status == 201, response.body
    yield name
    plane.request("DELETE", f"/api/v1/namespaces/{name}")


@pytest.fixture
def namespace(control_plane: ControlPlane) -> Iterator[str]:
    """A fresh namespace for one test, deleted afterwards (deletion is not awaited)."""
    with fresh_namespace(control_plane) as name:
        yield name


@pytest.fixture
def kwok_namespace(kwok_plane: ControlPlane) -> Iterator[str]:
    """A fresh namespace on ``kwok_plane``, deleted afterwards."""
    with fresh_namespace(kwok_plane) as name:
        yield name


@pytest.fixture
async def admin_api(control_plane: ControlPlane) -> AsyncIterator[client.ApiClient]:
    api = await api_client_for(str(control_plane.admin_kubeconfig))
    async with api:
        yield api
