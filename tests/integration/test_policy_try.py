"""``policies`` lists the policies with what the controller reports of them, and ``policies try``
shows what a policy would do before it is applied, writing nothing (real API server)."""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import pytest
import yaml

from lifecycle_controller.core.text.timestamps import format_rfc3339_nano, parse_rfc3339
from lifecycle_controller.devcluster import ControlPlane
from lifecycle_controller.kube import KubeClient, NotFound
from lifecycle_controller.kube.resources import CLUSTER_POLICIES, NAMESPACES, POLICIES
from tests.integration.controller import StartController
from tests.integration.keys import DELETE_AT, P
from tests.integration.policy_tools import (
    cache_policies,
    create_configmap,
    labelled,
    namespaced_policy,
    run_tool,
    tool_json,
)
from tests.integration.scenario_support import create, start_for
from tests.integration.support import CONFIGMAPS, configmap, eventually
from tests.integration.test_kubectl_plugin import kubeconfig_for, kubectl

CACHE = {"tier": "cache"}
HOUR_NS = 3600 * 10**9


@pytest.fixture
async def preview_policy(policy_crds: None, kube: KubeClient, namespace: str) -> AsyncIterator[str]:
    """A dry-run ClusterLifecyclePolicy for the test's namespace only, removed afterwards."""
    name = f"{namespace}-preview"
    body = {
        "apiVersion": "lifecycle.cezary.dev/v1alpha1",
        "kind": "ClusterLifecyclePolicy",
        "metadata": {"name": name},
        "spec": {
            "resources": ["configmaps"],
            "namespaces": [namespace],
            "lifecycle": {"delete-after": "240h", "dry-run": "true"},
        },
    }
    await create(kube, CLUSTER_POLICIES, None, body)
    yield f"ClusterLifecyclePolicy/{name}"
    with contextlib.suppress(NotFound):
        await kube.request("DELETE", CLUSTER_POLICIES.object_path(None, name))


async def test_policies_lists_what_the_controller_reports(
    preview_policy: str,
    start_controller: StartController,
    control_plane: ControlPlane,
    kube: KubeClient,
    namespace: str,
    tmp_path: Path,
) -> None:
    await cache_policies(kube, namespace)
    broken = namespaced_policy(
        "broken", namespace, resources=["configmaps"], lifecycle={"delete-after": "2x"}
    )
    await create(kube, POLICIES, namespace, broken)
    await create_configmap(kube, namespace, labelled("matched", CACHE))
    await create_configmap(kube, namespace, labelled("web", {"tier": "web"}))
    await start_for(start_controller, namespace)

    async def reported() -> bool:
        rows = tool_json(control_plane, "policies", "-n", namespace)
        by_name = {row["name"]: row for row in rows}
        return all(by_name[name]["reported"] for name in by_name)

    await eventually(reported, within=30, what="the controller reporting on every policy")
    rows = {row["name"]: row for row in tool_json(control_plane, "policies", "-n", namespace)}
    preview = preview_policy.split("/")[1]
    assert sorted(rows) == sorted(["all-configmaps", "broken", "cache", preview])
    assert (rows["cache"]["matched"], rows["cache"]["overlapped"]) == (1, 0)
    assert (rows["all-configmaps"]["matched"], rows["all-configmaps"]["overlapped"]) == (1, 1)
    assert (rows[preview]["matched"], rows[preview]["overlapped"]) == (0, 2)
    assert rows["cache"]["action"] == "delete-after 48h"
    assert rows[preview]["action"] == "delete-after 240h, dry-run true"
    assert rows["cache"]["conditions"] == ["Ready"]
    assert "Invalid" in rows["broken"]["conditions"]
    assert 'spec.lifecycle.delete-after: invalid duration format: "2x"' in rows["broken"]["detail"]
    assert rows["cache"]["next_action"].endswith(f" delete ConfigMap/{namespace}/matched")

    config = kubeconfig_for(control_plane, tmp_path, namespace)
    table = kubectl("policies", kubeconfig=config)
    assert table.returncode == 0, table.stderr
    header, *lines = table.stdout.splitlines()
    assert header.split()[:7] == [
        "KIND", "NAMESPACE", "NAME", "ACTION", "MATCHED", "OVERLAPPED", "NEXT",
    ]  # fmt: skip
    assert lines[0].startswith("ClusterLifecyclePolicy")  # cluster policies first
    (line,) = [line for line in lines if f" {namespace} " in line and " cache " in line]
    assert line.split()[-1] == "Ready"
    assert f"delete ConfigMap/{namespace}/matched" in line


def _manifests(*docs: dict[str, Any]) -> str:
    return yaml.safe_dump_all(docs)


def _sweep(name: str, **spec: Any) -> dict[str, Any]:
    body = namespaced_policy(name, "", resources=["configmaps"], **spec)
    del body["metadata"]["namespace"]  # placed with -n, as kubectl apply would
    return body


async def test_try_lists_what_a_policy_would_do_and_writes_nothing(
    policy_crds: None, control_plane: ControlPlane, kube: KubeClient, namespace: str
) -> None:
    await cache_policies(kube, namespace)
    created = await create_configmap(kube, namespace, labelled("matched", CACHE))
    await create_configmap(kube, namespace, labelled("web", {"tier": "web"}))
    own = labelled("own", CACHE, **{DELETE_AT: "2099-01-01T00:00:00Z"})
    await create_configmap(kube, namespace, own)
    await create_configmap(kube, namespace, labelled("keep", CACHE, **{P + "exempt": "true"}))
    parent = await kube.create(CONFIGMAPS, namespace, configmap("parent"))
    child = labelled("child", {"tier": "web"})
    child["metadata"]["ownerReferences"] = [
        {"apiVersion": "v1", "kind": "ConfigMap", "name": "parent",
         "uid": parent["metadata"]["uid"], "controller": True}
    ]  # fmt: skip
    await create_configmap(kube, namespace, child)
    before = {
        item["metadata"]["name"]: item["metadata"]["resourceVersion"]
        for item in (await kube.list_objects(CONFIGMAPS, namespace=namespace))["items"]
    }
    tried = _manifests(
        _sweep("sweep", selector={"matchLabels": CACHE}, priority=20,
               lifecycle={"delete-after": "1h"}),
        _sweep("low", priority=-1, lifecycle={"delete-after": "2h"}),
    )  # fmt: skip
    sweep = f"LifecyclePolicy/{namespace}/sweep"
    low = f"LifecyclePolicy/{namespace}/low"
    args = ("policies", "try", "-f", "-", "-n", namespace, "--watch-resource", "configmaps")
    report = tool_json(control_plane, *args, stdin=tried)

    assert report["policies"] == [low, sweep]
    rows = {row["name"]: row for row in report["objects"]}
    assert sorted(rows) == ["matched", "own", "parent", "web"]
    assert rows["matched"]["policy"] == sweep
    assert rows["matched"]["next"] == format_rfc3339_nano(parse_rfc3339(created) + HOUR_NS)
    assert rows["web"]["policy"] == f"LifecyclePolicy/{namespace}/all-configmaps"
    assert rows["own"]["policy"] == ""
    assert rows["own"]["own_action"] is True
    totals = report["totals"]
    assert totals[sweep] == {
        "matched": 2, "decides": 1, "deletions": 1, "restarts": 0, "due_now": 0,
        "dry_run": 0, "problems": 0, "own_annotations": 1, "other_policy": 0,
        "exempt": 1, "exempt_namespace": 0, "owned": 0, "held": 0, "protected": 0,
        "spent": 0, "one_off": "", "limit": "", "limit_holds": 0, "limit_spread": "",
        "refused": {}, "no_since": [],
    }  # fmt: skip
    assert totals[low]["matched"] == 4  # matched, own, parent, web; child is owned
    assert totals[low]["decides"] == 0
    assert totals[low]["other_policy"] == 3
    assert (totals[low]["exempt"], totals[low]["owned"]) == (1, 1)

    table = run_tool(control_plane, *args, stdin=tried)
    assert table.returncode == 0, table.stderr
    assert f"{sweep}: matches 2 objects: decides 1 (1 deletion, 0 restarts" in table.stdout
    assert table.stdout.rstrip().endswith("Nothing was written: the policies are not applied.")
    after = {
        item["metadata"]["name"]: item["metadata"]["resourceVersion"]
        for item in (await kube.list_objects(CONFIGMAPS, namespace=namespace))["items"]
    }
    assert after == before
    with pytest.raises(NotFound):
        await kube.get(POLICIES, namespace, "sweep")


async def test_try_replaces_a_policy_of_the_same_name_and_applies_namespace_caps(
    policy_crds: None, control_plane: ControlPlane, kube: KubeClient, namespace: str
) -> None:
    await cache_policies(kube, namespace)
    created = await create_configmap(kube, namespace, labelled("matched", CACHE))
    edited = _sweep(
        "cache", selector={"matchLabels": CACHE}, priority=10, lifecycle={"delete-after": "2h"}
    )
    args = ("policies", "try", "-f", "-", "-n", namespace, "--watch-resource", "configmaps")
    report = tool_json(control_plane, *args, stdin=_manifests(edited))
    (row,) = report["objects"]
    assert row["policy"] == f"LifecyclePolicy/{namespace}/cache"
    assert row["next"] == format_rfc3339_nano(parse_rfc3339(created) + 2 * HOUR_NS)
    assert row["overlapped"] == [f"LifecyclePolicy/{namespace}/all-configmaps"]

    cap = {"metadata": {"annotations": {P + "max-delete-ttl": "1h"}}}
    await kube.merge_patch(NAMESPACES, None, namespace, cap)
    capped = tool_json(control_plane, *args, stdin=_manifests(edited))
    (row,) = capped["objects"]
    assert row["problems"][0].startswith("DeleteTTLExceeded: ")
    assert capped["totals"][f"LifecyclePolicy/{namespace}/cache"]["problems"] == 1


async def test_try_of_an_invalid_policy_exits_1_with_its_problems(
    policy_crds: None, control_plane: ControlPlane, namespace: str
) -> None:
    bad = _sweep("bad", lifecycle={"delete-after": "1h", "restart-every": "2h"})
    result = run_tool(
        control_plane, "policies", "try", "-f", "-", "-n", namespace, stdin=_manifests(bad)
    )
    assert result.returncode == 1
    assert "InvalidLifecyclePolicy: spec.lifecycle: sets delete-after and restart-every" in (
        result.stdout
    )


async def test_try_says_when_a_rollout_would_hit_the_limit(
    policy_crds: None, control_plane: ControlPlane, kube: KubeClient, namespace: str
) -> None:
    """Three objects due now: a policy limited to 1 per hour holds 2; one without a limit
    takes --policy-default-limit (2/1h) and holds 1 (docs/policies.md#limit)."""
    for index in range(3):
        await create_configmap(kube, namespace, labelled(f"old-{index}", {"age": "old"}))
    await asyncio.sleep(1.5)
    tried = _manifests(
        _sweep("capped", selector={"matchLabels": {"age": "old"}}, priority=5,
               limit={"actions": 1, "window": "1h"}, lifecycle={"delete-after": "1s"}),
    )  # fmt: skip
    capped = f"LifecyclePolicy/{namespace}/capped"
    args = ("policies", "try", "-f", "-", "-n", namespace, "--watch-resource", "configmaps")
    report = tool_json(control_plane, *args, "--policy-default-limit", "2/1h", stdin=tried)
    assert report["totals"][capped]["due_now"] == 3
    assert report["totals"][capped]["limit"] == "1/1h"
    assert report["totals"][capped]["limit_holds"] == 2
    table = run_tool(control_plane, *args, stdin=tried)
    assert table.returncode == 0, table.stderr
    assert "would act on 3 objects now; limit 1/1h holds 2" in table.stdout

    default = _manifests(
        _sweep("default", selector={"matchLabels": {"age": "old"}}, priority=5,
               lifecycle={"delete-after": "1s"}),
    )  # fmt: skip
    mine = f"LifecyclePolicy/{namespace}/default"
    report = tool_json(control_plane, *args, "--policy-default-limit", "2/1h", stdin=default)
    assert report["totals"][mine]["limit"] == "2/1h"
    assert report["totals"][mine]["limit_holds"] == 1
    report = tool_json(control_plane, *args, stdin=default)  # no default: no limit
    assert report["totals"][mine]["limit"] == ""
