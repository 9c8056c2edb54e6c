"""Annotation copies on the real control plane: the owner's request is carried out once.

kube-controller-manager copies a Deployment's annotations onto its ReplicaSets and a
StatefulSet's onto its ControllerRevisions (docs/annotations.md#annotation-copies). With those
types watched, the controller must act on the owner only: no action, no Event on a copy,
unless ``--act-on-annotation-copies`` asks for the old behaviour.
"""

from __future__ import annotations

from typing import Any

import pytest

from lifecycle_controller.kube import KubeClient
from tests.integration.controller import StartController
from tests.integration.events import events_of, wait_event, wait_for_event
from tests.integration.keys import DELETE_AT, LAST_RESTART, RESTART_CRON
from tests.integration.scenario_support import (
    annotations_of,
    get,
    owned_by,
    settle,
    start_for,
    wait_gone,
    workload,
)
from tests.integration.support import (
    DEPLOYMENTS,
    REPLICASETS,
    REVISIONS,
    STATEFULSETS,
    eventually,
)
from tests.integration.timestamps import from_now, rfc3339

WATCHED = ("deployments.apps", "replicasets.apps", "statefulsets.apps", "controllerrevisions.apps")
CRON = {RESTART_CRON: "0 3 * * *"}


async def _copies(kube: KubeClient, namespace: str) -> list[dict[str, Any]]:
    """The ReplicaSet of ``web`` and the ControllerRevision of ``db``, once both carry the cron."""
    web = await get(kube, DEPLOYMENTS, namespace, "web")
    db = await get(kube, STATEFULSETS, namespace, "db")
    assert web is not None
    assert db is not None
    found: list[dict[str, Any]] = []

    async def copied() -> bool:
        replicasets = await owned_by(kube, REPLICASETS, namespace, web["metadata"]["uid"])
        revisions = await owned_by(kube, REVISIONS, namespace, db["metadata"]["uid"])
        found[:] = [*replicasets, *revisions]
        return all(
            any(RESTART_CRON in annotations_of(item) for item in items)
            for items in (replicasets, revisions)
        )

    await eventually(copied, within=30, what="kube-controller-manager to copy the annotations")
    return found


async def _create_owners(kube: KubeClient, namespace: str) -> None:
    await kube.create(DEPLOYMENTS, namespace, workload("Deployment", "web", CRON, replicas=0))
    await kube.create(STATEFULSETS, namespace, workload("StatefulSet", "db", CRON, replicas=0))


async def test_copies_get_no_action_and_no_event(
    start_controller: StartController, kube: KubeClient, namespace: str
) -> None:
    await start_for(start_controller, namespace, *WATCHED)
    await _create_owners(kube, namespace)
    for resource, name in ((DEPLOYMENTS, "web"), (STATEFULSETS, "db")):

        async def anchored(resource: Any = resource, name: str = name) -> bool:
            return LAST_RESTART in annotations_of(await get(kube, resource, namespace, name))

        await eventually(anchored, within=20, what=f"{name}'s recurring schedule to start")
    copies = await _copies(kube, namespace)
    await settle()
    for copy in copies:
        assert await events_of(kube, namespace, copy["metadata"]["name"]) == []


async def test_the_flag_restores_acting_on_copies(
    start_controller: StartController, kube: KubeClient, namespace: str
) -> None:
    await start_for(start_controller, namespace, *WATCHED, act_on_annotation_copies=True)
    await _create_owners(kube, namespace)
    for copy in await _copies(kube, namespace):
        event = await wait_for_event(
            kube, namespace, copy["metadata"]["name"], "UnsupportedRestartKind", within=20
        )
        assert event.type == "Warning"


@pytest.mark.parametrize("act_on_copies", [False, True])
async def test_a_deleted_deployment_is_deleted_once_not_its_replicaset(
    start_controller: StartController, kube: KubeClient, namespace: str, act_on_copies: bool
) -> None:
    await start_for(
        start_controller,
        namespace,
        "deployments.apps",
        "replicasets.apps",
        act_on_annotation_copies=act_on_copies,
    )
    due = {DELETE_AT: rfc3339(from_now(4))}
    created = await kube.create(
        DEPLOYMENTS, namespace, workload("Deployment", "web", due, replicas=0)
    )

    async def replicaset() -> list[dict[str, Any]]:
        return await owned_by(kube, REPLICASETS, namespace, created["metadata"]["uid"])

    async def has_replicaset() -> bool:
        return bool(await replicaset())

    await eventually(has_replicaset, within=20, what="the Deployment's ReplicaSet")
    name = (await replicaset())[0]["metadata"]["name"]
    await wait_gone(kube, DEPLOYMENTS, namespace, "web", within=20)
    await wait_gone(kube, REPLICASETS, namespace, name, within=30)
    # Acting on copies (the old behaviour), the controller deletes the ReplicaSet too.
    if act_on_copies:
        await wait_event(kube, namespace, name, "Deleted")
    else:
        assert [e for e in await events_of(kube, namespace, name) if e[1] == "Deleted"] == []
