"""``status`` with lifecycle policies: a POLICY column, and the unannotated objects a policy
decides listed too, judged as the controller judges them (against the real API server)."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

from lifecycle_controller.core.text.timestamps import format_rfc3339_nano, parse_rfc3339
from lifecycle_controller.devcluster import ControlPlane
from lifecycle_controller.kube import KubeClient
from lifecycle_controller.kube.resources import POLICIES
from tests.integration.keys import DELETE_AT, P
from tests.integration.policy_tools import (
    cache_policies,
    create_configmap,
    labelled,
    namespaced_policy,
    run_tool,
    tool_json,
)
from tests.integration.scenario_support import create
from tests.integration.support import DEPLOYMENTS, deployment

CACHE = {"tier": "cache"}
HOUR_NS = 3600 * 10**9


async def test_status_lists_what_policies_decide_with_a_policy_column(
    policy_crds: None, control_plane: ControlPlane, kube: KubeClient, namespace: str
) -> None:
    await cache_policies(kube, namespace)
    created = await create_configmap(kube, namespace, labelled("matched", CACHE))
    await create_configmap(kube, namespace, labelled("web", {"tier": "web"}))
    own = labelled("own", CACHE, **{DELETE_AT: "2099-01-01T00:00:00Z"})
    await create_configmap(kube, namespace, own)
    await create_configmap(kube, namespace, labelled("keep", CACHE, **{P + "exempt": "true"}))
    cache = f"LifecyclePolicy/{namespace}/cache"
    everything = f"LifecyclePolicy/{namespace}/all-configmaps"

    args = ("status", "-n", namespace, "--watch-resource", "configmaps")
    rows = {row["name"]: row for row in tool_json(control_plane, *args)}
    assert sorted(rows) == ["matched", "own", "web"]  # an exempt object has nothing to do
    assert rows["matched"]["policy"] == cache
    assert rows["matched"]["overlapped"] == [everything]
    assert rows["matched"]["next"] == format_rfc3339_nano(parse_rfc3339(created) + 48 * HOUR_NS)
    assert rows["web"]["policy"] == everything
    assert rows["own"]["policy"] == ""
    assert rows["own"]["own_action"] is True
    assert rows["own"]["next"] == "2099-01-01T00:00:00Z"

    table = run_tool(control_plane, *args)
    assert table.returncode == 0, table.stderr
    header, *lines = table.stdout.splitlines()
    assert header.split()[6:] == ["POLICY", "DETAIL"]
    by_name = {line.split()[2]: line for line in lines}
    assert by_name["matched"].split()[5] == cache
    assert by_name["own"].split()[5] == "-"
    assert by_name["own"].endswith(f"its own action annotations win over {cache}, {everything}")


async def test_a_policy_restart_counts_from_the_template_marker_status_reads(
    policy_crds: None, control_plane: ControlPlane, kube: KubeClient, namespace: str
) -> None:
    nightly = await create(
        kube,
        POLICIES,
        namespace,
        namespaced_policy(
            "nightly", namespace, resources=["deployments.apps"], lifecycle={"restart-every": "24h"}
        ),
    )
    # As a controller that accepted the generation long ago would have reported it.
    status = {"observedGeneration": nightly["metadata"]["generation"]}
    status["scheduleSince"] = "2000-01-01T00:00:00Z"
    await kube.merge_patch(POLICIES, namespace, "nightly", {"status": status}, subresource="status")
    marker = (datetime.now(UTC) + timedelta(hours=1)).strftime("%Y-%m-%dT%H:%M:%SZ")
    restarted = deployment("restarted")
    restarted["spec"]["template"]["metadata"]["annotations"] = {P + "restartedAt": marker}
    await create(kube, DEPLOYMENTS, namespace, restarted)
    fresh = await create(kube, DEPLOYMENTS, namespace, deployment("fresh"))
    created = fresh["metadata"]["creationTimestamp"]

    args = ("status", "-n", namespace, "--watch-resource", "deployments.apps")
    rows = {row["name"]: row for row in tool_json(control_plane, *args)}
    assert sorted(rows) == ["fresh", "restarted"]
    assert rows["restarted"]["policy"] == f"LifecyclePolicy/{namespace}/nightly"
    assert rows["restarted"]["next"] == format_rfc3339_nano(parse_rfc3339(marker) + 24 * HOUR_NS)
    assert rows["fresh"]["next"] == format_rfc3339_nano(parse_rfc3339(created) + 24 * HOUR_NS)
