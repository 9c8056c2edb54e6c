"""A ClusterLifecyclePolicy carried out for real: the running controller deletes a ConfigMap
and restarts a Deployment because cluster-wide policies say so (real API server).

Both policies are ``ClusterLifecyclePolicy`` objects limited to the test's namespace by
``spec.namespaces`` (other tests' controllers watch other namespaces only), removed after
the test. The Events name the cluster policy, the restart writes only the Pod template
marker, what neither policy selects is left alone, and the status of the ``restart-at``
policy, done with the workload it restarted, says so (``Spent``).

Caught: only namespaced LifecyclePolicies were ever carried out by a running controller in
the tests, so a cluster policy's path (no namespace in its reference, its status written
without one) was never proven end to end.
"""

from __future__ import annotations

import contextlib
import time
from collections.abc import AsyncIterator
from typing import Any

import pytest

from lifecycle_controller.kube import KubeClient, NotFound
from lifecycle_controller.kube.resources import CLUSTER_POLICIES
from tests.integration.controller import StartController
from tests.integration.events import wait_event
from tests.integration.keys import P
from tests.integration.policy_tools import cluster_policy, labelled
from tests.integration.scenario_support import create, gone, start_for, wait_gone, workload
from tests.integration.support import CONFIGMAPS, DEPLOYMENTS, eventually
from tests.integration.timestamps import stamp


@pytest.fixture
async def cluster_policies(policy_crds: None, kube: KubeClient) -> AsyncIterator[list[str]]:
    """The names of the cluster policies a test creates; each removed afterwards."""
    names: list[str] = []
    yield names
    for name in names:
        with contextlib.suppress(NotFound):
            await kube.request("DELETE", CLUSTER_POLICIES.object_path(None, name))


def restart_marker(deployment: dict[str, Any]) -> str | None:
    annotations = deployment["spec"]["template"]["metadata"].get("annotations") or {}
    marker = annotations.get(P + "restartedAt")
    return str(marker) if marker else None


async def test_a_cluster_policy_deletes_and_restarts_through_the_running_controller(
    cluster_policies: list[str],
    start_controller: StartController,
    namespace: str,
    kube: KubeClient,
) -> None:
    await create(kube, CONFIGMAPS, namespace, labelled("tmp-report", {}))
    await create(kube, CONFIGMAPS, namespace, labelled("settings", {}))
    web = workload("Deployment", "web", replicas=0)
    web["metadata"]["labels"] = {"restart": "yes"}
    await create(kube, DEPLOYMENTS, namespace, web)
    await create(kube, DEPLOYMENTS, namespace, workload("Deployment", "api", replicas=0))
    await start_for(start_controller, namespace, "configmaps", "deployments.apps")

    sweep, restart = f"{namespace}-sweep", f"{namespace}-restart"
    cluster_policies.extend((sweep, restart))
    await create(
        kube,
        CLUSTER_POLICIES,
        None,
        cluster_policy(
            sweep,
            namespaces=[namespace],
            resources=["configmaps"],
            names=["tmp-*"],
            lifecycle={"delete-after": "2s"},
        ),
    )
    await create(
        kube,
        CLUSTER_POLICIES,
        None,
        cluster_policy(
            restart,
            namespaces=[namespace],
            resources=["deployments.apps"],
            selector={"matchLabels": {"restart": "yes"}},
            lifecycle={"restart-at": stamp(time.time() + 2)},
        ),
    )

    await wait_gone(kube, CONFIGMAPS, namespace, "tmp-report", within=60)
    deleted = await wait_event(kube, namespace, "tmp-report", "Deleted", within=30)
    assert f"(based on ClusterLifecyclePolicy/{sweep}: delete-after 2s)" in deleted[-1][2]
    restarted = await wait_event(kube, namespace, "web", "RestartTriggered", within=60)
    assert f"ClusterLifecyclePolicy/{restart}: restart-at" in restarted[-1][2]

    marker = restart_marker(await kube.get(DEPLOYMENTS, namespace, "web"))
    assert marker is not None
    web_now = await kube.get(DEPLOYMENTS, namespace, "web")
    assert not any(key.startswith(P) for key in web_now["metadata"].get("annotations") or {})
    assert restart_marker(await kube.get(DEPLOYMENTS, namespace, "api")) is None
    assert not await gone(kube, CONFIGMAPS, namespace, "settings")

    async def counted() -> bool:
        for name in (sweep, restart):
            status = (await kube.get(CLUSTER_POLICIES, None, name)).get("status") or {}
            ready = [c for c in status.get("conditions") or () if c.get("type") == "Ready"]
            if not ready or ready[0].get("status") != "True":
                return False
        # Done with web once it restarted it: web is left alone, neither matched nor
        # overlapped, and the Spent condition says so.
        restart_status = (await kube.get(CLUSTER_POLICIES, None, restart)).get("status") or {}
        spent = [c for c in restart_status.get("conditions") or () if c.get("type") == "Spent"]
        return (
            restart_status.get("matched") == 0
            and restart_status.get("overlapped") == 0
            and bool(spent)
            and spent[0].get("reason") == "RestartAtDone"
        )

    await eventually(counted, within=30, what="both cluster policies Ready, web left alone")
