"""Lifecycle policies end to end on the real control plane (docs/policies.md).

The chart's policy CRDs are installed by the ``policy_crds`` fixture (conftest.py); every
policy here is a ``LifecyclePolicy`` in the test's own namespace, so controllers of other
tests, which now see the CRDs too, never act on what these policies match. Shown: a policy
deletes the labelled ConfigMaps it matches, unannotated, and the Event names it; an exempt one
stays; an object's own ``delete-after`` beats the policy and its own ``dry-run`` turns the
policy's deletion into a dry run; ``status`` counts what the policy decides and overlaps; an
invalid CEL condition gets the ``Invalid`` condition and a Warning while a policy ranked
above it keeps working; editing a policy re-evaluates its objects at once, and deleting it
cancels its pending deletions; a policy restart writes only the Pod template marker and its
rollout is followed (real Pods replaced, on the control plane with fake nodes); of two matching
policies the higher priority decides and the other reports the overlap; a closed
maintenance window holds a policy deletion; owned ReplicaSets are left alone while a loose one
is deleted.
"""

from __future__ import annotations

import asyncio
import time
from datetime import UTC, datetime, timedelta
from typing import Any

from lifecycle_controller.core.text.timestamps import parse_rfc3339
from lifecycle_controller.kube import KubeClient
from lifecycle_controller.kube.resources import POLICIES
from tests.integration.controller import StartController
from tests.integration.events import ROLLOUT_COMPLETED, list_events, wait_event
from tests.integration.keys import DELETE_AFTER, DRY_RUN, P
from tests.integration.policy_tools import labelled, namespaced_policy
from tests.integration.rollout_support import pods_of, real_workload, wait_serving
from tests.integration.scenario_support import create, gone, owned_by, start_for, wait_gone
from tests.integration.support import (
    CONFIGMAPS,
    DEPLOYMENTS,
    REPLICASETS,
    eventually,
)
from tests.integration.timestamps import stamp

EXEMPT = P + "exempt"


def policy(name: str, namespace: str, spec: dict[str, Any]) -> dict[str, Any]:
    return namespaced_policy(name, namespace, **spec)


async def status_of(kube: KubeClient, namespace: str, name: str) -> dict[str, Any]:
    obj = await kube.get(POLICIES, namespace, name)
    status = obj.get("status")
    return status if isinstance(status, dict) else {}


async def test_a_policy_deletes_what_it_matches_and_annotations_still_win(
    policy_crds: None, start_controller: StartController, namespace: str, kube: KubeClient
) -> None:
    cache = {"tier": "cache"}
    await create(
        kube,
        POLICIES,
        namespace,
        policy(
            "stale-cache",
            namespace,
            {
                "resources": ["configmaps"],
                "selector": {"matchLabels": cache},
                "lifecycle": {"delete-after": "3s"},
            },
        ),
    )
    running = await start_for(start_controller, namespace)
    await create(kube, CONFIGMAPS, namespace, labelled("matched", cache))
    await create(kube, CONFIGMAPS, namespace, labelled("exempt", cache, **{EXEMPT: "true"}))
    await create(kube, CONFIGMAPS, namespace, labelled("own-ttl", cache, **{DELETE_AFTER: "1h"}))
    await create(kube, CONFIGMAPS, namespace, labelled("own-dry-run", cache, **{DRY_RUN: "true"}))
    await create(kube, CONFIGMAPS, namespace, labelled("unlabelled", {"tier": "web"}))

    await wait_gone(kube, CONFIGMAPS, namespace, "matched", within=20)
    deleted = await wait_event(kube, namespace, "matched", "Deleted")
    assert "(based on LifecyclePolicy/" in deleted[-1][2]
    assert "stale-cache: delete-after 3s)" in deleted[-1][2]
    dry = await wait_event(kube, namespace, "own-dry-run", "DryRunDelete")
    assert "stale-cache" in dry[-1][2]
    for name in ("exempt", "own-ttl", "own-dry-run", "unlabelled"):
        assert not await gone(kube, CONFIGMAPS, namespace, name), name
    assert await list_events(kube, namespace, "exempt") == []

    async def counted() -> bool:
        status = await status_of(kube, namespace, "stale-cache")
        # own-dry-run is still decided by the policy (its dry-run only modifies it); own-ttl
        # carries its own action, so the policy is overlapped there.
        return status.get("matched") == 1 and status.get("overlapped") == 1

    await eventually(counted, within=20, what="the policy's status counts")
    status = await status_of(kube, namespace, "stale-cache")
    ready = [c for c in status["conditions"] if c["type"] == "Ready"]
    assert ready[0]["status"] == "True"
    registry = running.controller.metrics.registry
    by_policy = {"action": "delete", "source": "policy", "result": "success"}
    assert registry.get_sample_value("lifecycle_actions_by_source_total", by_policy) == 1.0
    matched = {"policy": f"LifecyclePolicy/{namespace}/stale-cache"}
    assert registry.get_sample_value("lifecycle_policy_matched_objects", matched) == 1.0


async def test_an_invalid_policy_is_reported_and_acts_on_nothing(
    policy_crds: None, start_controller: StartController, namespace: str, kube: KubeClient
) -> None:
    await create(
        kube,
        POLICIES,
        namespace,
        policy(
            "broken",
            namespace,
            {
                "resources": ["configmaps"],
                "condition": "object.metadata.labels[",
                "lifecycle": {"delete-after": "1s"},
            },
        ),
    )
    await create(
        kube,
        POLICIES,
        namespace,
        policy(
            "working",
            namespace,
            {
                "resources": ["configmaps"],
                "names": ["tmp-*"],
                # Ranked above the broken policy, which holds every ConfigMap here (an
                # invalid policy fails closed: no policy below it acts on what it would match).
                "priority": 10,
                "lifecycle": {"delete-after": "2s"},
            },
        ),
    )
    await start_for(start_controller, namespace)
    await create(kube, CONFIGMAPS, namespace, labelled("keep", {}))
    await create(kube, CONFIGMAPS, namespace, labelled("tmp-1", {}))
    await wait_gone(kube, CONFIGMAPS, namespace, "tmp-1", within=20)

    async def invalid() -> bool:
        conditions = (await status_of(kube, namespace, "broken")).get("conditions") or []
        return any(c["type"] == "Invalid" and c["status"] == "True" for c in conditions)

    await eventually(invalid, within=20, what="the Invalid condition")
    warning = await wait_event(kube, namespace, "broken", "InvalidLifecyclePolicy")
    assert warning[-1][0] == "Warning"
    assert "spec.condition" in warning[-1][2]
    assert not await gone(kube, CONFIGMAPS, namespace, "keep")


async def test_editing_a_policy_reevaluates_and_deleting_it_cancels(
    policy_crds: None, start_controller: StartController, namespace: str, kube: KubeClient
) -> None:
    await create(
        kube,
        POLICIES,
        namespace,
        policy(
            "edited",
            namespace,
            {
                "resources": ["configmaps"],
                "names": ["edit-*"],
                "lifecycle": {"delete-after": "1h"},
            },
        ),
    )
    await create(
        kube,
        POLICIES,
        namespace,
        policy(
            "removed",
            namespace,
            {
                "resources": ["configmaps"],
                "names": ["gone-*"],
                "lifecycle": {"delete-after": "15s"},
            },
        ),
    )
    running = await start_for(start_controller, namespace)
    await create(kube, CONFIGMAPS, namespace, labelled("edit-1", {}))
    created = await create(kube, CONFIGMAPS, namespace, labelled("gone-1", {}))
    due = parse_rfc3339(created["metadata"]["creationTimestamp"]) / 10**9 + 15
    registry = running.controller.metrics.registry
    removed = {"policy": f"LifecyclePolicy/{namespace}/removed"}

    async def pending() -> bool:
        return registry.get_sample_value("lifecycle_policy_matched_objects", removed) == 1.0

    await eventually(pending, within=10, what="the removed policy deciding gone-1")
    await kube.request("DELETE", POLICIES.object_path(namespace, "removed"))
    await kube.request(
        "PATCH",
        POLICIES.object_path(namespace, "edited"),
        body={"spec": {"lifecycle": {"delete-after": "1s"}}},
        content_type="application/merge-patch+json",
    )
    await wait_gone(kube, CONFIGMAPS, namespace, "edit-1", within=15)

    async def forgotten() -> bool:
        return registry.get_sample_value("lifecycle_policy_matched_objects", removed) is None

    await eventually(forgotten, within=10, what="the controller forgetting the removed policy")
    assert time.time() < due, "the test ran too slowly to show the cancellation"
    await asyncio.sleep(max(0.0, due + 2 - time.time()))  # past the removed policy's deadline
    assert not await gone(kube, CONFIGMAPS, namespace, "gone-1")


def labelled_deployment(name: str, labels: dict[str, str]) -> dict[str, Any]:
    """A two-replica Deployment whose Pods run on the fake nodes, with ``labels``."""
    body = real_workload("Deployment", name, replicas=2)
    body["metadata"]["labels"] = labels
    return body


async def test_a_policy_restart_writes_only_the_template_marker_and_is_verified(
    kwok_policy_crds: None,
    start_kwok_controller: StartController,
    kwok_namespace: str,
    kwok_kube: KubeClient,
) -> None:
    kube, namespace = kwok_kube, kwok_namespace
    await create(kube, DEPLOYMENTS, namespace, labelled_deployment("web", {"restart": "nightly"}))
    await create(kube, DEPLOYMENTS, namespace, labelled_deployment("api", {"restart": "never"}))
    before = {
        name: await wait_serving(kube, DEPLOYMENTS, namespace, name, count=2)
        for name in ("web", "api")
    }
    await start_for(start_kwok_controller, namespace, "deployments.apps")
    await create(
        kube,
        POLICIES,
        namespace,
        policy(
            "nightly",
            namespace,
            {
                "resources": ["deployments.apps"],
                "selector": {"matchLabels": {"restart": "nightly"}},
                "lifecycle": {"restart-at": stamp(time.time() + 2)},
            },
        ),
    )
    events = await wait_event(kube, namespace, "web", ROLLOUT_COMPLETED, within=60)
    restarted = [e for e in events if e[1] == "RestartTriggered"]
    assert restarted
    assert "nightly: restart-at" in restarted[-1][2]
    web = await kube.get(DEPLOYMENTS, namespace, "web")
    marker = (web["spec"]["template"]["metadata"].get("annotations") or {})[P + "restartedAt"]
    assert not any(k.startswith(P) for k in web["metadata"].get("annotations") or {})
    # Verified on the Pods: both replaced by serving ones of the restarted template.
    pods = [pod for pod in await pods_of(kube, namespace, "web") if not pod.deleting]
    assert {pod.restarted_at for pod in pods if pod.serving} == {marker}, pods
    assert len(pods) == 2, pods
    assert not {pod.name for pod in pods} & {pod.name for pod in before["web"]}
    # The Deployment the policy does not select keeps its template and its Pods.
    api = await kube.get(DEPLOYMENTS, namespace, "api")
    assert P + "restartedAt" not in (api["spec"]["template"]["metadata"].get("annotations") or {})
    assert await pods_of(kube, namespace, "api") == before["api"]


async def test_the_higher_priority_wins_and_the_other_is_overlapped(
    policy_crds: None, start_controller: StartController, namespace: str, kube: KubeClient
) -> None:
    spec = {"resources": ["configmaps"], "names": ["both"]}
    await create(
        kube,
        POLICIES,
        namespace,
        policy(
            "first",
            namespace,
            {
                **spec,
                "priority": 10,
                "lifecycle": {"delete-after": "30m"},
            },
        ),
    )
    await create(
        kube,
        POLICIES,
        namespace,
        policy(
            "second",
            namespace,
            {
                **spec,
                "priority": 1,
                "lifecycle": {"delete-after": "5m"},
            },
        ),
    )
    await start_for(start_controller, namespace)
    created = await create(kube, CONFIGMAPS, namespace, labelled("both", {}))
    due = parse_rfc3339(created["metadata"]["creationTimestamp"]) + 30 * 60 * 10**9

    async def reported() -> bool:
        first = await status_of(kube, namespace, "first")
        second = await status_of(kube, namespace, "second")
        return (first.get("matched"), second.get("matched"), second.get("overlapped")) == (1, 0, 1)

    await eventually(reported, within=20, what="the winner decides, the other is overlapped")
    next_action = (await status_of(kube, namespace, "first"))["nextAction"]
    assert next_action["name"] == "both"
    assert parse_rfc3339(next_action["at"]) == due  # the winner's 30m, not the other's 5m


async def test_a_closed_maintenance_window_holds_a_policy_deletion(
    policy_crds: None, start_controller: StartController, namespace: str, kube: KubeClient
) -> None:
    # A one-hour window on the weekday three days from now: closed for days.
    opening = datetime.now(UTC) + timedelta(days=3)
    day = opening.strftime("%a")
    window = f"{day}-{day} 01:00-02:00 UTC"
    await create(
        kube,
        POLICIES,
        namespace,
        policy(
            "windowed",
            namespace,
            {
                "resources": ["configmaps"],
                "lifecycle": {"delete-after": "1s", "maintenance-window": window},
            },
        ),
    )
    await start_for(start_controller, namespace)
    await create(kube, CONFIGMAPS, namespace, labelled("held", {}))

    async def scheduled() -> bool:
        at = ((await status_of(kube, namespace, "windowed")).get("nextAction") or {}).get("at")
        return isinstance(at, str) and "T01:00:00" in at

    await eventually(scheduled, within=20, what="the next action at the window's opening")
    assert not await gone(kube, CONFIGMAPS, namespace, "held")


async def test_owned_replicasets_are_left_alone_unless_included(
    policy_crds: None, start_controller: StartController, namespace: str, kube: KubeClient
) -> None:
    await create(
        kube,
        POLICIES,
        namespace,
        policy(
            "replicasets",
            namespace,
            {
                "resources": ["replicasets.apps"],
                "lifecycle": {"delete-after": "1s"},
            },
        ),
    )
    await create(kube, DEPLOYMENTS, namespace, labelled_deployment("owner", {}))
    loose = labelled_deployment("loose", {})
    loose.update(apiVersion="apps/v1", kind="ReplicaSet")
    loose["spec"].pop("strategy", None)
    await create(kube, REPLICASETS, namespace, loose)
    owner = await kube.get(DEPLOYMENTS, namespace, "owner")

    async def owned() -> bool:
        return bool(await owned_by(kube, REPLICASETS, namespace, owner["metadata"]["uid"]))

    await eventually(owned, within=30, what="the Deployment's ReplicaSet")
    await start_for(start_controller, namespace, "replicasets.apps")
    await wait_gone(kube, REPLICASETS, namespace, "loose", within=20)
    assert await owned_by(kube, REPLICASETS, namespace, owner["metadata"]["uid"])


async def test_a_new_action_needs_no_list_but_a_wider_match_lists_again(
    policy_crds: None, start_controller: StartController, namespace: str, kube: KubeClient
) -> None:
    """Editing ``lifecycle`` re-queues the cached objects without listing ConfigMaps again;
    widening ``names`` lists them again, and finds an object dropped while listing before."""
    await create(
        kube,
        POLICIES,
        namespace,
        policy(
            "widened",
            namespace,
            {
                "resources": ["configmaps"],
                "names": ["first-*"],
                "lifecycle": {"delete-after": "1h"},
            },
        ),
    )
    await create(kube, CONFIGMAPS, namespace, labelled("first-1", {}))
    await create(kube, CONFIGMAPS, namespace, labelled("later-1", {}))
    running = await start_for(start_controller, namespace)
    registry = running.controller.metrics.registry
    by_policy = {"policy": f"LifecyclePolicy/{namespace}/widened"}

    async def deciding(count: float) -> bool:
        return registry.get_sample_value("lifecycle_policy_matched_objects", by_policy) == count

    await eventually(lambda: deciding(1.0), within=10, what="the policy deciding first-1")
    lists = registry.get_sample_value("lifecycle_relists_total", {"resource": "configmaps"})

    async def edit(spec: dict[str, Any]) -> None:
        await kube.request(
            "PATCH",
            POLICIES.object_path(namespace, "widened"),
            body={"spec": spec},
            content_type="application/merge-patch+json",
        )

    await edit({"lifecycle": {"delete-after": "1s"}})
    await wait_gone(kube, CONFIGMAPS, namespace, "first-1", within=15)
    after = registry.get_sample_value("lifecycle_relists_total", {"resource": "configmaps"})
    assert after == lists, "a new lifecycle value listed ConfigMaps again"
    assert not await gone(kube, CONFIGMAPS, namespace, "later-1")

    await edit({"names": ["first-*", "later-*"]})
    await wait_gone(kube, CONFIGMAPS, namespace, "later-1", within=15)
    widened = registry.get_sample_value("lifecycle_relists_total", {"resource": "configmaps"})
    assert widened is not None
    assert widened > (after or 0.0)
