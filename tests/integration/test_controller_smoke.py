"""The whole controller against the real API server: the two headline behaviours."""

from __future__ import annotations

from lifecycle_controller.kube import NotFound, ResourceType
from tests.integration.controller import StartController, events_of
from tests.integration.support import configmap, deployment, eventually

CONFIGMAPS = ResourceType("", "v1", "configmaps", "ConfigMap", namespaced=True)
DEPLOYMENTS = ResourceType("apps", "v1", "deployments", "Deployment", namespaced=True)


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
        configmap("short-lived", **{"lifecycle.cezary.dev/delete-after": "2s"}),
    )
    await kube.create(
        DEPLOYMENTS,
        namespace,
        deployment("web", {"lifecycle.cezary.dev/restart-at": "2020-01-01T00:00:00Z"}),
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
        return "lifecycle.cezary.dev/restartedAt" in template

    await eventually(restarted, within=15, what="the restart marker")
    await eventually(configmap_gone, within=15, what="the ConfigMap deletion")
    events = await events_of(kube, namespace, "short-lived")
    assert [reason for _, reason, _ in events] == ["Deleted"]
    restart_events = await events_of(kube, namespace, "web")
    assert ("Normal", "RestartTriggered", "Updated Pod template for a restart request") in (
        restart_events
    )
