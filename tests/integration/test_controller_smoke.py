"""The whole controller against the real API server: the two headline behaviours."""

from __future__ import annotations

from lifecycle_controller.kube import NotFound
from tests.integration.controller import StartController
from tests.integration.events import events_of, wait_event
from tests.integration.keys import DELETE_AFTER, RESTART_AT, RESTARTED_AT
from tests.integration.support import CONFIGMAPS, DEPLOYMENTS, configmap, deployment, eventually
from tests.integration.timestamps import PAST


async def test_delete_after_deletes_and_restart_at_restarts(
    start_controller: StartController, namespace: str
) -> None:
    running = await start_controller(
        watch_resource=["configmaps", "deployments.apps"], watch_namespace=[namespace]
    )
    kube = running.kube
    await kube.create(
        CONFIGMAPS,
        namespace,
        configmap("short-lived", **{DELETE_AFTER: "2s"}),
    )
    await kube.create(
        DEPLOYMENTS,
        namespace,
        deployment("web", {RESTART_AT: PAST}),
    )

    async def configmap_gone() -> bool:
        try:
            await kube.get(CONFIGMAPS, namespace, "short-lived")
        except NotFound:
            return True
        return False

    async def restarted() -> bool:
        obj = await kube.get(DEPLOYMENTS, namespace, "web")
        template = obj["spec"]["template"]["metadata"].get("annotations") or {}
        return RESTARTED_AT in template

    await eventually(restarted, within=15, what="the restart marker")
    await eventually(configmap_gone, within=15, what="the ConfigMap deletion")
    # The Event is written after the DELETE has returned: wait for it, then check it is alone.
    await wait_event(kube, namespace, "short-lived", "Deleted")
    events = await events_of(kube, namespace, "short-lived", reporter=None)
    assert [reason for _, reason, _ in events] == ["Deleted"]
    await wait_event(kube, namespace, "web", "RestartTriggered")
    restart_events = await events_of(kube, namespace, "web", reporter=None)
    assert ("Normal", "RestartTriggered", "Updated Pod template for a restart request") in (
        restart_events
    )
