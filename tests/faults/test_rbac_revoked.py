"""Scenario 5: RBAC removed at runtime for one watched type, then restored (issue 8).

The controller runs as a non-admin user whose Role grants ConfigMaps, Secrets and Events in
the test namespace. The grant for ConfigMaps is taken away (the Role replaced through the
admin API), and later put back:

* the ConfigMap informer reports it: ``lifecycle_watch_restarts_total{reason="forbidden"}``,
  the log line ``access forbidden: grant list and watch on this resource (RBAC)``, and
  ``/readyz`` names the type (docs/reliability.md#probes-during-an-outage: a 403 makes that
  type's cache not current);
* it backs off (the refused requests are counted in the audit log: no hammering);
* Secrets keep working: a due Secret is deleted while ConfigMaps are refused;
* after the grant is back, without a restart, the ConfigMap informer lists again, readiness
  recovers, and a ConfigMap that fell due meanwhile is deleted, exactly once.

Authorization is checked when a request starts, so an open watch outlives the revocation
until it ends (``timeoutSeconds`` 300 to 600 s in production). The test shortens the watch
timeout to 2 to 3 s so the refusal shows within seconds.
"""

from __future__ import annotations

import asyncio
import time
from dataclasses import replace
from typing import Any

import pytest
import structlog

from lifecycle_controller.controller.watch import informers
from lifecycle_controller.controller.watch.ports import InformerSettings
from lifecycle_controller.devcluster import ControlPlane
from lifecycle_controller.kube import KubeClient
from lifecycle_controller.kube.resources import CONFIGMAPS, ResourceType
from lifecycle_controller.serving.server import CACHES_STALE
from tests.faults.quiet import queue_idle, wait_quiet
from tests.faults.support import deletion_tally, requests_of
from tests.integration.controller import StartController
from tests.integration.keys import DELETE_AT
from tests.integration.scenario_support import sample, start_for
from tests.integration.support import configmap, eventually
from tests.integration.timestamps import PAST

SECRETS = ResourceType("", "v1", "secrets", "Secret", namespaced=True)
WATCH = ["get", "list", "watch", "patch", "delete"]


def rules(*resources: str) -> list[dict[str, Any]]:
    return [
        {"apiGroups": [""], "resources": list(resources), "verbs": WATCH},
        {"apiGroups": ["events.k8s.io"], "resources": ["events"], "verbs": ["create", "patch"]},
    ]


def secret(name: str, **annotations: str) -> dict[str, Any]:
    return {
        "apiVersion": "v1",
        "kind": "Secret",
        "metadata": {"name": name, "annotations": annotations},
        "stringData": {"key": "value"},
    }


async def test_rbac_revoked_for_one_type_then_restored(
    control_plane: ControlPlane,
    kube: KubeClient,
    namespace: str,
    start_controller: StartController,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    short = replace(InformerSettings(), watch_timeout_min=2, watch_timeout_max=3)
    monkeypatch.setattr(informers, "InformerSettings", lambda: short)
    user = f"rbac-{namespace}"
    subject = {"kind": "User", "apiGroup": "rbac.authorization.k8s.io", "name": user}
    kubeconfig = control_plane.user_kubeconfig(
        user, namespaced_rules={namespace: rules("configmaps", "secrets")}
    )
    running = await start_for(
        start_controller, namespace, "configmaps", "secrets", kubeconfig=str(kubeconfig)
    )
    controller = running.controller

    def forbidden() -> float:
        labels = {"resource": "configmaps", "reason": "forbidden"}
        return sample(running, "lifecycle_watch_restarts_total", **labels) or 0.0

    def grant(*resources: str) -> None:
        control_plane.grant(
            subject, name=f"devcluster:{user}", namespaced_rules={namespace: rules(*resources)}
        )

    with structlog.testing.capture_logs() as log:
        await asyncio.to_thread(grant, "secrets")
        revoked = time.time()

        async def refused() -> bool:
            reason = controller.not_ready_reason()
            return forbidden() >= 1 and reason is not None and CACHES_STALE in reason

        await eventually(refused, within=20, interval=0.1, what="the ConfigMap informer refused")
        reason = controller.not_ready_reason()
        assert reason is not None
        assert "configmaps" in reason
        assert "secrets" not in reason, reason

        # Secrets keep working, and a ConfigMap falls due while ConfigMaps are refused.
        await kube.create(SECRETS, namespace, secret("due-secret", **{DELETE_AT: PAST}))
        await kube.create(CONFIGMAPS, namespace, configmap("due-cm", **{DELETE_AT: PAST}))

        async def secret_gone() -> bool:
            listing = await kube.list_metadata(SECRETS, namespace=namespace)
            return "due-secret" not in {i["metadata"]["name"] for i in listing.get("items") or []}

        await eventually(secret_gone, within=20, what="the due Secret deleted meanwhile")
        await asyncio.sleep(max(0.0, revoked + 15 - time.time()))  # 15 s refused in all
        assert controller.not_ready_reason() is not None  # still refused: still not ready
        refused_window = time.time() - revoked
        refused_requests = [
            event
            for event in requests_of(control_plane, user)
            if (event.get("objectRef") or {}).get("resource") == "configmaps"
            and (event.get("responseStatus") or {}).get("code") == 403
        ]
    assert any(
        entry["event"] == "access forbidden: grant list and watch on this resource (RBAC)"
        for entry in log
    ), log

    await asyncio.to_thread(grant, "configmaps", "secrets")
    restored = time.monotonic()

    async def cm_gone() -> bool:
        listing = await kube.list_metadata(CONFIGMAPS, namespace=namespace)
        return "due-cm" not in {i["metadata"]["name"] for i in listing.get("items") or []}

    await eventually(cm_gone, within=45, interval=0.2, what="the due ConfigMap after the restore")
    recovered = time.monotonic() - restored

    async def ready() -> bool:
        return controller.not_ready_reason() is None

    await eventually(ready, within=10, what="ready again after the grant came back")
    await wait_quiet(control_plane, queue_idle(running), user=user)  # any doubled delete or Event
    tally = await deletion_tally(
        control_plane,
        kube,
        "5 RBAC revoked, restored",
        ["due-cm", "due-secret"],
        namespace=namespace,
        resources=["configmaps", "secrets"],
        user=user,
    )
    tally.extra = {
        "refused_s": round(refused_window, 1),
        "refused_requests": len(refused_requests),
        "forbidden_restarts": forbidden(),
        "recovered_after_grant_s": round(recovered, 1),
    }
    tally.record()
    tally.assert_exactly_once()
    # Backed off: a 403 keeps the full exponential curve (docs/reliability.md#watch-recovery).
    assert len(refused_requests) <= 8, refused_requests
