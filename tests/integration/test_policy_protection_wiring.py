"""The protected namespaces as the running controller gets them (docs/policies.md#safety-rules).

The rule itself (which namespaces a policy reaches) is the core's, tested at the unit tier;
these tests cover its wiring into the controller that runs: ``--policy-protected-namespace``
and the controller's own namespace (its Lease's, ``--leader-election-namespace``) reach the
decisions, not only the tools. A cluster policy without ``namespaces`` whose name glob
matches a ConfigMap in each of two watched namespaces deletes the one in the test's namespace
(so it acts) and leaves the other, protected, alone, counting it in ``status.protected``.

Caught (each a mutation of the composition root that passed every other test): the flag's
namespaces left out of the controller's protection, and the own namespace taken from the
kubeconfig's default instead of the Lease's.
"""

from __future__ import annotations

import contextlib
from collections.abc import Iterator
from typing import Any

import pytest

from lifecycle_controller.devcluster import ControlPlane
from lifecycle_controller.kube import KubeClient, NotFound
from lifecycle_controller.kube.resources import CLUSTER_POLICIES
from tests.conftest import fresh_namespace
from tests.integration.controller import StartController
from tests.integration.policy_tools import cluster_policy, labelled
from tests.integration.scenario_support import create, gone, wait_gone
from tests.integration.support import CONFIGMAPS, eventually


@pytest.fixture
def other_namespace(control_plane: ControlPlane) -> Iterator[str]:
    with fresh_namespace(control_plane) as name:
        yield name


async def protected_alone(
    kube: KubeClient,
    start_controller: StartController,
    namespace: str,
    protected: str,
    **flags: Any,
) -> None:
    """A catch-all cluster policy over ``<namespace>-*`` ConfigMaps in both namespaces: the
    one in ``namespace`` deleted, the one in ``protected`` kept and counted protected."""
    name = f"catch-all-{namespace}"
    policy = cluster_policy(
        name, resources=["configmaps"], names=[f"{namespace}-*"], lifecycle={"delete-after": "1s"}
    )
    await create(kube, CLUSTER_POLICIES, None, policy)
    try:
        await start_controller(
            watch_resource=["configmaps"], watch_namespace=[namespace, protected], **flags
        )
        kept, acted = f"{namespace}-kept", f"{namespace}-acted"
        await create(kube, CONFIGMAPS, protected, labelled(kept, {}))
        await create(kube, CONFIGMAPS, namespace, labelled(acted, {}))
        await wait_gone(kube, CONFIGMAPS, namespace, acted, within=30)

        async def counted() -> bool:
            found = await kube.get(CLUSTER_POLICIES, None, name)
            return (found.get("status") or {}).get("protected") == 1 or await gone(
                kube, CONFIGMAPS, protected, kept
            )

        # The protected one, created first, was decided before the other was deleted; its
        # count in the status (or its deletion, without the protection) ends the wait.
        await eventually(counted, within=30, what="status.protected of the catch-all policy")
        assert not await gone(kube, CONFIGMAPS, protected, kept), f"deleted in {protected}"
    finally:
        with contextlib.suppress(NotFound):
            await kube.request("DELETE", CLUSTER_POLICIES.object_path(None, name))


async def test_a_namespace_given_with_the_flag_is_protected_from_the_running_controller(
    policy_crds: None,
    start_controller: StartController,
    namespace: str,
    other_namespace: str,
    kube: KubeClient,
) -> None:
    await protected_alone(
        kube,
        start_controller,
        namespace,
        other_namespace,
        policy_protected_namespace=[other_namespace],
    )


async def test_the_controllers_own_namespace_is_protected_from_the_running_controller(
    policy_crds: None,
    start_controller: StartController,
    namespace: str,
    other_namespace: str,
    kube: KubeClient,
) -> None:
    # Its Lease (and breaker ConfigMap) live there, so it is its own namespace, although the
    # kubeconfig's default namespace is another.
    await protected_alone(
        kube,
        start_controller,
        namespace,
        other_namespace,
        leader_election_namespace=other_namespace,
    )
