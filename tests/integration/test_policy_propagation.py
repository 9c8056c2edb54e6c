"""A policy's ``deletionPropagation`` on the real control plane (docs/policies.md#the-spec).

The Deployments' ReplicaSets are made by the real kube-controller-manager, and its garbage
collector removes the dependents of a Background deletion: with ``Orphan`` the ReplicaSet
stays, with its owner reference to the deleted Deployment removed by the API server.
"""

from __future__ import annotations

from typing import Any

from lifecycle_controller.kube import KubeClient
from lifecycle_controller.kube.resources import POLICIES
from tests.integration.controller import StartController
from tests.integration.policy_tools import namespaced_policy
from tests.integration.scenario_support import create, owned_by, start_for, wait_gone
from tests.integration.support import DEPLOYMENTS, REPLICASETS, deployment, eventually


async def _replica_sets(kube: KubeClient, namespace: str) -> list[dict[str, Any]]:
    listing = await kube.request("GET", REPLICASETS.collection_path(namespace))
    items: list[dict[str, Any]] = listing["items"]
    return items


async def test_an_orphan_policy_deletes_the_deployment_and_leaves_its_replicasets(
    policy_crds: None, start_controller: StartController, namespace: str, kube: KubeClient
) -> None:
    """The ReplicaSet outlives its Deployment only because the DELETE carried
    ``propagationPolicy: Orphan``; the policy's Background twin is shown by the garbage
    collector removing the other Deployment's ReplicaSet."""
    for name, propagation in (("keep-children", "Orphan"), ("with-children", "Background")):
        await create(
            kube,
            POLICIES,
            namespace,
            namespaced_policy(
                name,
                namespace,
                resources=["deployments.apps"],
                names=[name],
                deletionPropagation=propagation,
                lifecycle={"delete-after": "6s"},
            ),
        )
    owners = {}
    for name in ("keep-children", "with-children"):
        created = await create(kube, DEPLOYMENTS, namespace, deployment(name))
        owners[name] = created["metadata"]["uid"]

    async def both_have_a_replicaset() -> bool:
        return all([await owned_by(kube, REPLICASETS, namespace, uid) for uid in owners.values()])

    await eventually(both_have_a_replicaset, within=30, what="the Deployments' ReplicaSets")
    await start_for(start_controller, namespace, "deployments.apps")
    for name in owners:
        await wait_gone(kube, DEPLOYMENTS, namespace, name, within=40)

    async def settled() -> bool:
        names = [rs["metadata"]["name"] for rs in await _replica_sets(kube, namespace)]
        kept = [n for n in names if n.startswith("keep-children-")]
        collected = not [n for n in names if n.startswith("with-children-")]
        return len(kept) == 1 and collected

    await eventually(settled, within=60, what="the orphaned ReplicaSet alone left")
    (orphan,) = await _replica_sets(kube, namespace)
    assert owners["keep-children"] not in [
        ref.get("uid") for ref in orphan["metadata"].get("ownerReferences", [])
    ]
