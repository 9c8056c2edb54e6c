"""Policy actions under the guardrails and in notifications, on the real control plane.

The circuit breaker holds policy deletions as it holds annotation deletions: four labelled
ConfigMaps due by a ``LifecyclePolicy`` with ``--breaker-max-actions 2``: two go, the breaker
trips, the other two are held (each gets ``ActionsHalted``) and ``lifecycle-controller
breaker reset`` (a real process) lets them go; the deletions are counted with
``source="policy"``. A webhook notification of a policy deletion names the policy.
"""

from __future__ import annotations

from typing import Any

import pytest

from lifecycle_controller.devcluster import ControlPlane
from lifecycle_controller.kube import KubeClient
from lifecycle_controller.kube.breaker_store import breaker_name, read_breaker
from lifecycle_controller.kube.resources import POLICIES
from tests.integration.controller import StartController
from tests.integration.events import events_of
from tests.integration.policy_tools import labelled, namespaced_policy
from tests.integration.scenario_support import (
    create,
    gone,
    run_cli,
    sample,
    settle,
    start_for,
    wait_gone,
)
from tests.integration.support import CONFIGMAPS, eventually
from tests.integration.webhook_receiver import Receiver, wait_documents

pytestmark = pytest.mark.integration

LEASE = "9a46ead0.lifecycle.cezary.dev"
DOOMED = {"tier": "doomed"}


def _policy(name: str, namespace: str, lifecycle: dict[str, str]) -> dict[str, Any]:
    return namespaced_policy(
        name,
        namespace,
        resources=["configmaps"],
        selector={"matchLabels": DOOMED},
        lifecycle=lifecycle,
    )


def _labelled(name: str) -> dict[str, Any]:
    return labelled(name, dict(DOOMED))


async def _remaining(kube: KubeClient, namespace: str, names: list[str]) -> set[str]:
    return {name for name in names if not await gone(kube, CONFIGMAPS, namespace, name)}


async def test_the_breaker_holds_policy_deletions_until_reset(
    policy_crds: None,
    start_controller: StartController,
    control_plane: ControlPlane,
    namespace: str,
    kube: KubeClient,
) -> None:
    names = [f"doomed-{i}" for i in range(4)]
    for name in names:
        await create(kube, CONFIGMAPS, namespace, _labelled(name))
    await create(kube, POLICIES, namespace, _policy("doomed", namespace, {"delete-after": "1s"}))
    flags = {"leader_election_namespace": namespace}
    running = await start_for(start_controller, namespace, breaker_max_actions=2, **flags)

    async def tripped() -> bool:
        return (await read_breaker(kube, namespace, breaker_name(LEASE))).open

    await eventually(tripped, within=20, what="the breaker to trip")
    await settle(2.0)
    held = await _remaining(kube, namespace, names)
    assert len(held) == 2

    async def all_told() -> bool:
        for name in held:
            reasons = [event[1] for event in await events_of(kube, namespace, name)]
            if "ActionsHalted" not in reasons:
                return False
        return True

    await eventually(all_told, within=20, what="ActionsHalted on every held object")
    success = {"action": "delete", "source": "policy", "result": "success"}
    assert sample(running, "lifecycle_actions_by_source_total", **success) == 2

    out, _ = await run_cli(control_plane, namespace, "breaker", "reset")
    assert "closed" in out

    async def released() -> bool:
        return not await _remaining(kube, namespace, names)

    await eventually(released, within=30, what="the held policy deletions after the reset")
    assert sample(running, "lifecycle_actions_by_source_total", **success) == 4


async def test_a_notification_of_a_policy_deletion_names_the_policy(
    policy_crds: None,
    start_controller: StartController,
    namespace: str,
    kube: KubeClient,
    receiver: Receiver,
) -> None:
    await create(kube, POLICIES, namespace, _policy("notified", namespace, {"delete-after": "2s"}))
    await start_for(start_controller, namespace, notify_webhook=[receiver.url])
    await create(kube, CONFIGMAPS, namespace, _labelled("tmp"))
    await wait_gone(kube, CONFIGMAPS, namespace, "tmp", within=20)
    await wait_documents(receiver, 1, within=10)
    (document,) = [d for d in receiver.received if d["reason"] == "Deleted"]
    assert document["name"] == "tmp"
    assert (
        f"(based on LifecyclePolicy/{namespace}/notified: delete-after 2s)" in (document["message"])
    )
    assert "notified" in document["text"]
