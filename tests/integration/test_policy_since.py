"""``since`` on the real API server (docs/policies.md#since), with the recipes of
docs/policies.md#since-recipes applied as written.

Each recipe's deletion is hours or days away, so what is checked is the due time the
controller holds for each object (its policy tally, the figure the policy's
``status.nextAction`` reports): it must count from the field ``since`` reads, move when the
field moves, and be absent (the object left alone) when the field is. Pods really fail and Jobs
really complete: on the control plane with fake nodes, kwok plays a failing or a succeeding
container for a labelled Pod (``devcluster/nodes.py``). ``matchedAt`` starts again when an
object is used again and when the controller restarts (kept in memory only).
"""

from __future__ import annotations

import contextlib
import time
import uuid
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any
from unittest import mock

import pytest
import yaml

from lifecycle_controller.controller.policy.matched_store import record_name
from lifecycle_controller.core.objects.resources import ResourceType
from lifecycle_controller.core.policy.model import PolicyKind, PolicyRef
from lifecycle_controller.core.text.timestamps import format_rfc3339_nano, parse_rfc3339
from lifecycle_controller.devcluster import ControlPlane
from lifecycle_controller.devcluster.nodes import FAIL_LABEL, SUCCEED_LABEL
from lifecycle_controller.kube import KubeClient, NotFound
from lifecycle_controller.kube.resources import CLUSTER_POLICIES, NAMESPACES, PODS, POLICIES
from tests.integration.controller import RunningController, StartController
from tests.integration.scenario_support import cached, create, patch, read, run_cli, start_for
from tests.integration.support import CONFIGMAPS, configmap, eventually

DOCS = Path(__file__).resolve().parents[2] / "docs" / "policies.md"
JOBS = ResourceType("batch", "v1", "jobs", "Job", namespaced=True)
HOUR = 3600 * 10**9
DAY = 24 * HOUR
DEPLOYED = "example.com/deployed-at"


def recipe(marker: str) -> dict[str, Any]:
    """The YAML block after ``<!-- recipe: MARKER -->`` in docs/policies.md, as written."""
    text = DOCS.read_text().split(f"<!-- recipe: {marker} -->\n```yaml\n", 1)[1]
    policy: dict[str, Any] = yaml.safe_load(text.split("```", 1)[0])
    return policy


def due_of(running: RunningController, resource: ResourceType, name: str) -> int | None:
    """When the controller will act on the object a policy decides (None: none decides it)."""
    pipeline = running.controller.pipeline
    assert pipeline is not None
    policies = pipeline.reconciler.policies
    assert policies is not None
    for key, tally in policies.tallies.items():
        if key.resource == resource and key.name == name and tally.decided_by:
            return tally.due_ns
    return None


async def wait_due(
    running: RunningController, resource: ResourceType, name: str, expected: int | None
) -> None:
    async def due() -> bool:
        return due_of(running, resource, name) == expected

    shown = "none" if expected is None else format_rfc3339_nano(expected)
    await eventually(due, within=60, what=f"{name} due {shown}")


async def wait_changed(
    running: RunningController, resource: ResourceType, name: str, old: int | None
) -> int | None:
    """The object's due time once it is no longer ``old``."""
    found: list[int | None] = []

    async def changed() -> bool:
        found[:] = [due_of(running, resource, name)]
        return found[0] != old

    await eventually(changed, within=60, what=f"{name}'s due time to change")
    return found[0]


@pytest.fixture
async def cluster_policy(kube: KubeClient) -> AsyncIterator[list[str]]:
    """Names of ClusterLifecyclePolicy objects to delete after the test (others see them)."""
    names: list[str] = []
    yield names
    for name in names:
        with contextlib.suppress(NotFound):
            await kube.delete(CLUSTER_POLICIES, None, name)


def _renamed(policy: dict[str, Any]) -> dict[str, Any]:
    name = f"{policy['metadata']['name']}-{uuid.uuid4().hex[:6]}"
    return {**policy, "metadata": {**policy["metadata"], "name": name}}


def _pod(name: str, labels: dict[str, str] | None = None, **spec: Any) -> dict[str, Any]:
    return {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {"name": name, "labels": labels or {}},
        "spec": {"restartPolicy": "Never", "containers": [{"name": "c", "image": "x"}], **spec},
    }


# --- Pods that failed, Jobs that finished: on fake nodes ------------------------------------


async def _cluster_recipe(kube: KubeClient, marker: str) -> dict[str, Any]:
    policy = _renamed(recipe(marker))
    await create(kube, CLUSTER_POLICIES, None, policy)
    return policy


async def _finished_at(kube: KubeClient, namespace: str, name: str) -> int:
    found: list[int] = []

    async def finished() -> bool:
        pod = await read(kube, PODS, namespace, name) or {}
        statuses = (pod.get("status") or {}).get("containerStatuses") or [{}]
        terminated = statuses[0].get("state", {}).get("terminated") or {}
        if terminated.get("finishedAt"):
            found[:] = [parse_rfc3339(terminated["finishedAt"])]
        return bool(found)

    await eventually(finished, within=60, what=f"Pod {name} to finish")
    return found[0]


async def test_the_failed_pods_recipe_counts_from_when_the_container_finished(
    kwok_policy_crds: None,
    start_kwok_controller: StartController,
    kwok_namespace: str,
    kwok_kube: KubeClient,
) -> None:
    """A Pod kwok fails is due an hour after its container's ``finishedAt``, although it was
    created earlier; a Pod that runs is not matched. A copy of the recipe with a short
    ``delete-after`` deletes the failed Pod at that time."""
    namespace, kube = kwok_namespace, kwok_kube
    policy = await _cluster_recipe(kube, "failed-pods")
    try:
        await create(kube, PODS, namespace, _pod("crashed", {FAIL_LABEL: "true"}))
        await create(kube, PODS, namespace, _pod("running"))
        finished = await _finished_at(kube, namespace, "crashed")
        running = await start_for(start_kwok_controller, namespace, "pods")
        await wait_due(running, PODS, "crashed", finished + HOUR)
        assert due_of(running, PODS, "running") is None
        # What the cache keeps of the Pod: its phase and element 0's finishedAt, not the list.
        crashed = cached(running, PODS, namespace, "crashed")
        assert crashed is not None
        assert crashed.view is not None
        status = crashed.view.fields["status"]
        assert status["phase"] == "Failed"
        assert (
            parse_rfc3339(status["containerStatuses"][0]["state"]["terminated"]["finishedAt"])
            == finished
        )
        assert status["containerStatuses"] == [{"state": {"terminated": {"finishedAt": mock.ANY}}}]

        short = _renamed(policy)
        short["spec"] = {**short["spec"], "priority": 10, "lifecycle": {"delete-after": "2s"}}
        await create(kube, CLUSTER_POLICIES, None, short)
        try:

            async def deleted() -> bool:
                return await read(kube, PODS, namespace, "crashed") is None

            await eventually(deleted, within=60, what="the failed Pod deleted 2s after it finished")
            assert await read(kube, PODS, namespace, "running") is not None
        finally:
            await kube.delete(CLUSTER_POLICIES, None, short["metadata"]["name"])
    finally:
        await kube.delete(CLUSTER_POLICIES, None, policy["metadata"]["name"])


async def test_the_finished_jobs_recipe_counts_from_the_completion_time(
    kwok_policy_crds: None,
    start_kwok_controller: StartController,
    kwok_namespace: str,
    kwok_kube: KubeClient,
) -> None:
    """A Job whose Pod kwok completes is due a day after its ``status.completionTime``; one
    still running has no completion time and is left alone."""
    namespace, kube = kwok_namespace, kwok_kube
    policy = await _cluster_recipe(kube, "finished-jobs")
    try:
        for name, labels in (("done", {SUCCEED_LABEL: "true"}), ("busy", {})):
            template = _pod(name, labels)
            job = {
                "apiVersion": "batch/v1",
                "kind": "Job",
                "metadata": {"name": name},
                "spec": {
                    "backoffLimit": 0,
                    "template": {"metadata": {"labels": labels}, "spec": template["spec"]},
                },
            }
            await create(kube, JOBS, namespace, job)
        completed: list[int] = []

        async def complete() -> bool:
            job = await read(kube, JOBS, namespace, "done") or {}
            when = (job.get("status") or {}).get("completionTime")
            completed[:] = [parse_rfc3339(when)] if when else []
            return bool(completed)

        await eventually(complete, within=90, what="Job done to complete")
        running = await start_for(start_kwok_controller, namespace, "jobs.batch")
        await wait_due(running, JOBS, "done", completed[0] + DAY)
        assert due_of(running, JOBS, "busy") is None
    finally:
        await kube.delete(CLUSTER_POLICIES, None, policy["metadata"]["name"])


# --- preview namespaces: a field that moves, a field that is absent -------------------------


async def test_a_deploy_annotation_that_moves_moves_the_due_time(
    policy_crds: None,
    start_controller: StartController,
    control_plane: ControlPlane,
    kube: KubeClient,
    cluster_policy: list[str],
) -> None:
    """The preview recipe: due seven days after the annotation; rewritten, the due time
    follows it, and a deploy a week ago (less a few seconds) deletes the namespace then. A
    labelled namespace without the annotation is left alone, and ``explain`` says so."""
    policy = _renamed(recipe("preview-namespaces-after-deploy"))
    cluster_policy.append(policy["metadata"]["name"])
    label = {"env": "preview"}
    preview, bare = f"pr-{uuid.uuid4().hex[:8]}", f"pr-{uuid.uuid4().hex[:8]}"
    # A deploy now: due a week ahead, so the due time is there to read (a deploy long ago
    # would be deleted at once, and its due time seen only in a race with the deletion).
    deployed = format_rfc3339_nano(time.time_ns() // 10**9 * 10**9)
    for name, marks in ((preview, {DEPLOYED: deployed}), (bare, {})):
        body = {"metadata": {"name": name, "labels": label, "annotations": marks}}
        await create(kube, NAMESPACES, None, {"apiVersion": "v1", "kind": "Namespace", **body})
    try:
        await create(kube, CLUSTER_POLICIES, None, policy)
        running = await start_controller(watch_resource=["namespaces"], watch_namespace=[preview])
        await wait_due(running, NAMESPACES, preview, parse_rfc3339(deployed) + 7 * DAY)

        soon = time.time_ns() - 7 * DAY + 3 * 10**9
        await patch(
            kube,
            NAMESPACES,
            None,
            preview,
            {"metadata": {"annotations": {DEPLOYED: format_rfc3339_nano(soon)}}},
        )

        async def terminating() -> bool:
            found = await read(kube, NAMESPACES, None, preview)
            return found is None or bool(found["metadata"].get("deletionTimestamp"))

        await eventually(terminating, within=60, what=f"namespace {preview} deleted")

        explained, _ = await run_cli(control_plane, bare, "explain", f"namespace/{bare}")
        assert (
            f"by ClusterLifecyclePolicy/{policy['metadata']['name']}: its since has no value: "
            f"a field since reads is absent (no key '{DEPLOYED}')" in explained
        ), explained
    finally:
        for name in (preview, bare):
            with contextlib.suppress(NotFound):
                await kube.delete(NAMESPACES, None, name)


# --- matchedAt: since a ConfigMap became unused ---------------------------------------------


async def test_matched_at_starts_again_when_used_again_and_after_a_restart(
    policy_crds: None, start_controller: StartController, namespace: str, kube: KubeClient
) -> None:
    """The unused-since-matched recipe: an unused ConfigMap is due a week after the
    controller first saw it unused, never from its creation; a Pod using it takes it out,
    and once the Pod goes it is due a week after that; a controller restart starts it again,
    later (``matchedAt`` is kept in memory only)."""
    policy = recipe("unused-since-matched")
    policy["metadata"]["namespace"] = namespace
    await create(kube, CONFIGMAPS, namespace, configmap("orphan"))
    await create(kube, POLICIES, namespace, policy)
    before = time.time_ns()
    running = await start_for(start_controller, namespace, "configmaps")
    first = await wait_changed(running, CONFIGMAPS, "orphan", None)
    assert first is not None
    orphan = await read(kube, CONFIGMAPS, namespace, "orphan")
    assert orphan is not None
    created = parse_rfc3339(orphan["metadata"]["creationTimestamp"])
    assert first - 7 * DAY >= before > created  # from when it was seen unused, not created

    volume = {"name": "v", "configMap": {"name": "orphan"}}
    await create(kube, PODS, namespace, _pod("user", volumes=[volume]))
    await wait_due(running, CONFIGMAPS, "orphan", None)  # used: no longer matched
    await kube.delete(PODS, namespace, "user")
    second = await wait_changed(running, CONFIGMAPS, "orphan", None)
    assert second is not None
    assert second > first

    await running.stop()
    restarted = await start_for(start_controller, namespace, "configmaps")
    third = await wait_changed(restarted, CONFIGMAPS, "orphan", None)
    assert third is not None
    assert third > second


async def test_matched_at_survives_a_restart_with_persist_observations(
    policy_crds: None, start_controller: StartController, namespace: str, kube: KubeClient
) -> None:
    """docs/reliability.md#matchedat-store: with ``--persist-observations`` the first
    instant is kept beside the Lease, so a restarted controller holds the same due time
    (to the second: the record keeps whole seconds, rounded up), not a later one; the
    record goes when the policy does."""
    policy = recipe("unused-since-matched")
    policy["metadata"]["namespace"] = namespace
    await create(kube, CONFIGMAPS, namespace, configmap("orphan"))
    await create(kube, POLICIES, namespace, policy)
    running = await start_for(start_controller, namespace, persist_observations="true")
    first = await wait_changed(running, CONFIGMAPS, "orphan", None)
    assert first is not None
    store = running.controller.matched_store
    assert store is not None

    async def written() -> bool:
        return store.writes >= 1 and not store.pending

    await eventually(written, within=60, what="the matchedAt record to be written")
    await running.stop()

    restarted = await start_for(start_controller, namespace, persist_observations="true")
    again = await wait_changed(restarted, CONFIGMAPS, "orphan", None)
    assert again is not None
    assert first <= again < first + 10**9  # the same instant, rounded up to the second

    await kube.delete(POLICIES, namespace, policy["metadata"]["name"])
    lease_namespace = restarted.controller.settings.leader_election.namespace or "default"
    name = record_name(
        restarted.controller.settings.leader_election.name,
        PolicyRef(PolicyKind.NAMESPACED, namespace, policy["metadata"]["name"]),
    )

    async def record_gone() -> bool:
        return await read(kube, CONFIGMAPS, lease_namespace, name) is None

    await eventually(record_gone, within=60, what="the matchedAt record to go with its policy")
