"""What one namespace's policy costs a whole ``Controller`` (fake API server, fake clock).

A ``LifecyclePolicy`` is a tenant's: it must not take the controller out of its Service nor
make it re-evaluate the cluster. A policy reading ``referencedBy`` while the controller may
not list Pods and workloads (the chart's default) holds its objects and leaves ``/readyz``
ready, with a note; one applied after the replica has been ready opens its reference scope
without making the replica unready; and editing an invalid LifecyclePolicy re-queues the
objects of its namespace, not every policy-kept object of every type.

Caught: /readyz answered 503 for as long as a tenant's policy read ``referencedBy`` without
the RBAC for it, and for every new namespace such a policy opened; an invalid policy's edit
re-queued every kept object of every watched type.
"""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator, Callable
from typing import Any

import pytest

from lifecycle_controller.app import Controller
from lifecycle_controller.kube import KubeClient
from lifecycle_controller.kube.resources import CLUSTER_POLICIES, POLICIES
from tests.doubles.fakeapi import CONFIGMAPS, FakeApiServer
from tests.doubles.fakeclock import FakeClock
from tests.unit.support import eventually
from tests.unit.test_app import settings

#: The lists of the reference index's referring types (core Pods and the workloads).
REFERRING = r"/(pods|deployments|statefulsets|daemonsets|replicasets|jobs|cronjobs)(\?|$)"


def lifecycle_policy(namespace: str, name: str, **spec: Any) -> dict[str, Any]:
    return {
        "apiVersion": "lifecycle.cezary.dev/v1alpha1",
        "kind": "LifecyclePolicy",
        "metadata": {"name": name, "namespace": namespace},
        "spec": {"resources": ["configmaps"], "lifecycle": {"delete-after": "1000h"}, **spec},
    }


def unused(namespace: str) -> dict[str, Any]:
    return lifecycle_policy(namespace, "unused", condition="size(referencedBy) == 0")


def adds(controller: Controller) -> float:
    """``workqueue_adds_total{name="lifecycle"}``: the keys queued so far."""
    value = controller.metrics.registry.get_sample_value(
        "workqueue_adds_total", {"name": "lifecycle"}
    )
    return value or 0.0


def queued(controller: Controller, count: float) -> Callable[[], bool]:
    """Whether ``count`` keys have been queued in all."""
    return lambda: adds(controller) >= count


async def idle(controller: Controller) -> None:
    """Every key queued has been reconciled."""
    await eventually(lambda: controller.pipeline is not None and controller.pipeline.idle())


@pytest.fixture
async def start(
    api: FakeApiServer, kube: KubeClient, clock: FakeClock
) -> AsyncIterator[Controller]:
    api.serve(CLUSTER_POLICIES)
    api.serve(POLICIES)
    controller = Controller(settings(), kube, clock=clock, identity="replica-a")
    task = asyncio.create_task(controller.run())
    yield controller
    task.cancel()
    await asyncio.gather(task, return_exceptions=True)


@pytest.fixture
def forbidden(api: FakeApiServer) -> None:
    """The controller may not list the referring types (``rbac.readReferences: false``)."""
    api.fail(403, method="GET", path=REFERRING, times=1_000_000)


@pytest.fixture
def policy_first(api: FakeApiServer) -> None:
    api.serve(POLICIES)
    api.store.create(POLICIES, "team", unused("team"))
    api.store.create(CONFIGMAPS, "team", {"metadata": {"name": "orphan"}})


async def test_a_policy_reading_references_without_the_rbac_leaves_the_replica_ready(
    api: FakeApiServer, forbidden: None, policy_first: None, start: Controller
) -> None:
    controller = start
    await eventually(lambda: controller.pipeline is not None)
    pipeline = controller.pipeline
    assert pipeline is not None
    assert pipeline.references is not None
    references = pipeline.references
    await eventually(lambda: references.refused() is not None)
    await eventually(lambda: controller.not_ready_reason() is None)
    assert not references.synced  # never synced: ready all the same
    (note,) = controller.readiness_notes()
    assert note.startswith("policies reading referencedBy hold: references unknown"), note
    assert "rbac.readReferences" in note
    assert api.store.find(CONFIGMAPS, "team", "orphan") is not None


async def test_a_reference_policy_applied_once_ready_does_not_make_the_replica_unready(
    api: FakeApiServer, start: Controller
) -> None:
    """The index it opens lists slowly (its lists hang): the replica stays ready."""
    controller = start
    await eventually(lambda: controller.not_ready_reason() is None and controller.pipeline)
    api.fail(200, method="GET", path=REFERRING, hang=True, times=1_000_000)
    api.store.create(POLICIES, "team", unused("team"))
    pipeline = controller.pipeline
    assert pipeline is not None
    assert pipeline.references is not None
    references = pipeline.references
    await eventually(lambda: references.running)
    await eventually(lambda: pipeline.references_pending() is not None)
    assert controller.not_ready_reason() is None


async def test_editing_an_invalid_lifecycle_policy_re_queues_its_namespace_only(
    api: FakeApiServer, start: Controller
) -> None:
    """Two namespaces with a valid policy and three kept ConfigMaps each, and an invalid
    policy in ``a``: each edit of it re-queues a's three ConfigMaps, never b's."""
    for namespace in ("a", "b"):
        api.store.create(POLICIES, namespace, lifecycle_policy(namespace, "keep"))
        for index in range(3):
            api.store.create(CONFIGMAPS, namespace, {"metadata": {"name": f"cm-{index}"}})
    broken = lifecycle_policy("a", "broken", lifecycle={"delete-after": "soon"})
    api.store.create(POLICIES, "a", broken)
    controller = start
    await eventually(lambda: controller.not_ready_reason() is None and controller.pipeline)
    await idle(controller)
    for edit in range(1, 4):
        before = adds(controller)
        patch = {"spec": {"names": [f"edit-{edit}-*", "cm-*"]}}
        api.store.patch(POLICIES, "a", "broken", patch)
        await eventually(queued(controller, before + 3))
        await idle(controller)
        assert adds(controller) - before == 3
