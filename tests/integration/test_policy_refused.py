"""``max-delete-ttl`` against a policy shows on the policy (docs/policies.md#status).

A policy ``delete-after: 720h`` under a cap of 168h (``--max-delete-ttl``, or a Namespace's
``max-delete-ttl`` annotation) is refused on every object it decides: nothing is deleted, and
its status says so, ``Refused=True`` (reason ``MaxDeleteTTL``, the objects counted with the cap
and where it comes from) and ``Ready=False``. ``policies``, ``policies try`` and ``explain``
say the same words. Before, the status said ``Ready=True``, "the policy is in force".
"""

from __future__ import annotations

from typing import Any

import pytest
import yaml

from lifecycle_controller.devcluster import ControlPlane
from lifecycle_controller.kube import KubeClient
from lifecycle_controller.kube.resources import CONFIGMAPS, NAMESPACES, POLICIES
from tests.integration.controller import StartController
from tests.integration.keys import P
from tests.integration.policy_tools import (
    create_configmap,
    labelled,
    namespaced_policy,
    run_tool,
    tool_json,
)
from tests.integration.scenario_support import create, gone, start_for
from tests.integration.support import eventually

MONTHLY = {"refused-test": "yes"}
FLAG = "delete-after 720h exceeds max-delete-ttl 168h (--max-delete-ttl)"


def _monthly(namespace: str) -> dict[str, Any]:
    return namespaced_policy(
        "monthly",
        namespace,
        resources=["configmaps"],
        selector={"matchLabels": MONTHLY},
        lifecycle={"delete-after": "720h"},
    )


def _condition(status: dict[str, Any], kind: str) -> dict[str, Any]:
    return next((c for c in status.get("conditions") or () if c.get("type") == kind), {})


async def _refused_shown(kube: KubeClient, namespace: str, message: str) -> dict[str, Any]:
    """The policy's status once its ``Refused`` condition says ``message``."""

    async def shown() -> bool:
        policy = await kube.get(POLICIES, namespace, "monthly")
        return _condition(policy.get("status") or {}, "Refused").get("message") == message

    await eventually(shown, within=30, what=f"Refused: {message}")
    status: dict[str, Any] = (await kube.get(POLICIES, namespace, "monthly"))["status"]
    return status


@pytest.mark.parametrize("where", ["flag", "namespace"])
async def test_a_policy_the_cap_refuses_says_so_in_its_status_and_the_tools(
    policy_crds: None,
    start_controller: StartController,
    control_plane: ControlPlane,
    kube: KubeClient,
    namespace: str,
    where: str,
) -> None:
    if where == "flag":
        cap: tuple[str, ...] = ("--max-delete-ttl", "168h")
        cause = FLAG
        flags: dict[str, Any] = {"max_delete_ttl": "168h"}
    else:
        annotation = {"metadata": {"annotations": {P + "max-delete-ttl": "168h"}}}
        await kube.merge_patch(NAMESPACES, None, namespace, annotation)
        cap = ()
        cause = (
            f"delete-after 720h exceeds max-delete-ttl 168h (Namespace {namespace}'s annotation)"
        )
        flags = {}
    await create(kube, POLICIES, namespace, _monthly(namespace))
    for index in range(3):
        await create_configmap(kube, namespace, labelled(f"month-{index}", MONTHLY))
    running = await start_for(start_controller, namespace, **flags)

    status = await _refused_shown(kube, namespace, f"3 objects: {cause}")
    refused = _condition(status, "Refused")
    assert (refused["status"], refused["reason"]) == ("True", "MaxDeleteTTL")
    ready = _condition(status, "Ready")
    assert (ready["status"], ready["reason"]) == ("False", "MaxDeleteTTL"), ready
    assert ready["message"].startswith("max-delete-ttl refuses the deletion of every object")
    assert status["matched"] == 3
    for index in range(3):  # refused, not shortened: nothing is deleted
        assert not await gone(kube, CONFIGMAPS, namespace, f"month-{index}")

    # A new object is counted as it is decided.
    await create_configmap(kube, namespace, labelled("month-3", MONTHLY))
    status = await _refused_shown(kube, namespace, f"4 objects: {cause}")
    assert _condition(status, "Ready")["status"] == "False"

    rows = tool_json(control_plane, "policies", "-n", namespace)
    (row,) = [r for r in rows if r["name"] == "monthly"]
    assert "Refused" in row["conditions"]
    assert "Ready=False" in row["conditions"]
    assert f"Refused: 4 objects: {cause}" in row["detail"]

    tried = yaml.safe_dump(
        {**_monthly(namespace), "metadata": {"name": "monthly"}}  # placed with -n
    )
    args = ("policies", "try", "-f", "-", "-n", namespace, "--watch-resource", "configmaps")
    report = tool_json(control_plane, *args, *cap, stdin=tried)
    assert report["totals"][f"LifecyclePolicy/{namespace}/monthly"]["refused"] == {cause: 4}
    table = run_tool(control_plane, *args, *cap, stdin=tried)
    assert table.returncode == 0, table.stderr
    assert f"max-delete-ttl refuses 4 objects: {cause}" in table.stdout

    explained = tool_json(control_plane, "explain", "cm/month-0", "-n", namespace, *cap)
    assert explained["policies"]["refused"] == cause
    assert explained["why_nothing_happened"] == (
        f"max-delete-ttl refuses LifecyclePolicy/{namespace}/monthly's deletion: {cause}"
    )
    text = run_tool(control_plane, "explain", "cm/month-0", "-n", namespace, *cap).stdout
    assert f"Refused:      {cause}: it deletes nothing here" in text
    await running.stop()
