"""``explain`` names the lifecycle policy that decides an object, the ones it overlapped, and why
the others leave it alone (core's match reasons), read live from the cluster."""

from __future__ import annotations

from datetime import timedelta

from lifecycle_controller.core.policy.match import MatchReason
from lifecycle_controller.core.text.timestamps import format_rfc3339_nano, parse_rfc3339
from lifecycle_controller.devcluster import ControlPlane
from lifecycle_controller.kube import KubeClient
from tests.integration.keys import P
from tests.integration.policy_tools import (
    cache_policies,
    create_configmap,
    labelled,
    run_tool,
    tool_json,
)
from tests.integration.support import CONFIGMAPS, configmap

CACHE = {"tier": "cache"}
HOUR_NS = int(timedelta(hours=1).total_seconds()) * 10**9


def _after(created: str, hours: int) -> str:
    return format_rfc3339_nano(parse_rfc3339(created) + hours * HOUR_NS)


async def test_explain_names_the_deciding_policy_and_the_overlapped_one(
    policy_crds: None, control_plane: ControlPlane, kube: KubeClient, namespace: str
) -> None:
    await cache_policies(kube, namespace)
    created = await create_configmap(kube, namespace, labelled("matched", CACHE))
    report = tool_json(control_plane, "explain", "cm/matched", "-n", namespace)
    policies = report["policies"]
    assert policies["decided_by"] == f"LifecyclePolicy/{namespace}/cache"
    assert policies["based_on"] == f"based on LifecyclePolicy/{namespace}/cache: delete-after 48h"
    assert policies["overlapped"] == [f"LifecyclePolicy/{namespace}/all-configmaps"]
    assert report["action"] == "delete"
    assert report["due"] == _after(created, 48)
    assert report["why_nothing_happened"] is None
    text = run_tool(control_plane, "explain", "cm/matched", "-n", namespace).stdout
    assert (
        f"Policy:       LifecyclePolicy/{namespace}/cache decides "
        f"(based on LifecyclePolicy/{namespace}/cache: delete-after 48h)"
    ) in text
    assert f"Overlapped:   LifecyclePolicy/{namespace}/all-configmaps" in text


async def test_explain_says_why_policies_leave_an_object_alone(
    policy_crds: None, control_plane: ControlPlane, kube: KubeClient, namespace: str
) -> None:
    await cache_policies(kube, namespace)
    parent = await kube.create(CONFIGMAPS, namespace, configmap("parent"))
    owner = {
        "apiVersion": "v1",
        "kind": "ConfigMap",
        "name": "parent",
        "uid": parent["metadata"]["uid"],
        "controller": True,
    }
    owned = labelled("owned", CACHE)
    owned["metadata"]["ownerReferences"] = [owner]
    await create_configmap(kube, namespace, owned)
    await create_configmap(kube, namespace, labelled("keep", CACHE, **{P + "exempt": "true"}))
    created = await create_configmap(kube, namespace, labelled("web", {"tier": "web"}))
    cache = f"LifecyclePolicy/{namespace}/cache"
    everything = f"LifecyclePolicy/{namespace}/all-configmaps"

    exempt = tool_json(control_plane, "explain", "cm/keep", "-n", namespace)
    assert exempt["policies"]["decided_by"] is None
    assert exempt["policies"]["exempt"] is True
    assert exempt["policies"]["not_matched"] == [
        {"policy": everything, "why": str(MatchReason.EXEMPT)},
        {"policy": cache, "why": str(MatchReason.EXEMPT)},
    ]
    assert exempt["action"] is None
    assert "exempt from every lifecycle policy" in exempt["why_nothing_happened"]

    child = tool_json(control_plane, "explain", "cm/owned", "-n", namespace)
    assert child["policies"]["decided_by"] is None
    assert {r["why"] for r in child["policies"]["not_matched"]} == {str(MatchReason.OWNED)}
    assert child["why_nothing_happened"] == (
        "it has no action annotation (delete-* or restart-*); no lifecycle policy matches it "
        f"({everything}: {MatchReason.OWNED})"
    )

    web = tool_json(control_plane, "explain", "cm/web", "-n", namespace)
    assert web["policies"]["decided_by"] == everything
    assert web["policies"]["not_matched"] == [{"policy": cache, "why": str(MatchReason.SELECTOR)}]
    assert web["due"] == _after(created, 96)
    text = run_tool(control_plane, "explain", "cm/web", "-n", namespace).stdout
    assert f"Not matched:  {cache}: {MatchReason.SELECTOR}" in text


async def test_explain_of_an_object_without_policies_in_its_namespace(
    policy_crds: None, control_plane: ControlPlane, kube: KubeClient, namespace: str
) -> None:
    await create_configmap(kube, namespace, configmap("own", **{P + "delete-after": "1h"}))
    report = tool_json(control_plane, "explain", "cm/own", "-n", namespace)
    assert report["action"] == "delete"
    policies = report["policies"]
    assert policies is None or (policies["decided_by"] is None and policies["overlapped"] == [])
