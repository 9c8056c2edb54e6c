"""A ClusterLifecyclePolicy's ``namespaceSelector`` on the real control plane
(docs/policies.md#namespaceselector).

The controller reads the Namespaces' labels through its namespace informers; a test that
shows something is *not* done first waits until a sentinel with its own short TTL, created
after the object under test, is gone (see test_policy_safety.py).
"""

from __future__ import annotations

import asyncio
import contextlib
import re
import uuid
from collections.abc import AsyncIterator, Awaitable, Callable
from pathlib import Path
from typing import Any

import pytest
import yaml

from lifecycle_controller.devcluster import ControlPlane
from lifecycle_controller.kube import KubeClient, NotFound
from lifecycle_controller.kube.resources import CLUSTER_POLICIES, NAMESPACES
from tests.integration.controller import StartController
from tests.integration.keys import DELETE_AFTER
from tests.integration.policy_tools import (
    ClusterPolicies,
    cluster_policy,
    labelled,
    run_tool,
    tool_json,
)
from tests.integration.scenario_support import create, gone, sample, start_for, wait_gone
from tests.integration.support import CONFIGMAPS, eventually
from tests.integration.test_scenarios_recurring_catchup import (
    POLICY_READER_RULES,
    controller_rules,
)

DOCS = Path(__file__).resolve().parents[2] / "docs" / "policies.md"
PREVIEW = {"matchLabels": {"env": "preview"}}

Namespaces = Callable[..., Awaitable[str]]


@pytest.fixture
async def namespaces(kube: KubeClient) -> AsyncIterator[Namespaces]:
    """Creates a Namespace with the given labels; deleted when the test ends."""
    names: list[str] = []

    async def add(**labels: str) -> str:
        name = f"t-{uuid.uuid4().hex[:10]}"
        names.append(name)
        metadata: dict[str, Any] = {"name": name, "labels": labels}
        body = {"apiVersion": "v1", "kind": "Namespace", "metadata": metadata}
        await create(kube, NAMESPACES, None, body)
        return name

    yield add
    for name in names:
        with contextlib.suppress(NotFound):
            await kube.request("DELETE", NAMESPACES.object_path(None, name))


async def relabel(kube: KubeClient, namespace: str, labels: dict[str, str | None]) -> None:
    await kube.merge_patch(NAMESPACES, None, namespace, {"metadata": {"labels": labels}})


async def sentinel_gone(kube: KubeClient, namespace: str, name: str = "sentinel") -> None:
    """Create an object with its own 1 s TTL and wait until the controller deleted it."""
    await create(kube, CONFIGMAPS, namespace, labelled(name, {}, **{DELETE_AFTER: "1s"}))
    await wait_gone(kube, CONFIGMAPS, namespace, name, within=30)


async def status_of(kube: KubeClient, name: str) -> dict[str, Any]:
    policy = await kube.get(CLUSTER_POLICIES, None, name)
    return dict(policy.get("status") or {})


async def wait_matched(kube: KubeClient, name: str, count: int) -> None:
    async def matched() -> bool:
        return (await status_of(kube, name)).get("matched") == count

    await eventually(matched, within=30, what=f"status.matched == {count} of {name}")


def documented_recipe(marker: str) -> dict[str, Any]:
    """The YAML block after ``<!-- recipe: MARKER -->`` in docs/policies.md, as written."""
    found = re.search(
        rf"<!-- recipe: {re.escape(marker)} -->\n```yaml\n(.*?)```", DOCS.read_text(), re.S
    )
    assert found is not None, f"no recipe {marker} in docs/policies.md"
    manifest = yaml.safe_load(found.group(1))
    assert isinstance(manifest, dict)
    return manifest


async def test_acts_in_a_labelled_namespace_and_not_in_an_unlabelled_one(
    policy_crds: None,
    start_controller: StartController,
    kube: KubeClient,
    namespaces: Namespaces,
    cluster_policies: ClusterPolicies,
) -> None:
    labelled_ns = await namespaces(env="preview")
    other = await namespaces(env="prod")
    await cluster_policies(
        f"previews-{labelled_ns}",
        resources=["configmaps"],
        namespaceSelector=PREVIEW,
        lifecycle={"delete-after": "1s"},
    )
    await start_controller(watch_resource=["configmaps"], watch_namespace=[labelled_ns, other])
    await create(kube, CONFIGMAPS, labelled_ns, labelled("tmp", {}))
    await create(kube, CONFIGMAPS, other, labelled("tmp", {}))
    await wait_gone(kube, CONFIGMAPS, labelled_ns, "tmp", within=30)
    await sentinel_gone(kube, other)
    assert not await gone(kube, CONFIGMAPS, other, "tmp")


async def test_relabelling_a_namespace_starts_and_stops_the_policy_within_seconds(
    policy_crds: None,
    start_controller: StartController,
    kube: KubeClient,
    namespaces: Namespaces,
    cluster_policies: ClusterPolicies,
) -> None:
    """Adding the label makes the namespace's objects match (one deleted, one scheduled);
    removing it makes them stop (``status.matched`` back to 0)."""
    space = await namespaces()
    quick, slow = f"quick-{space}", f"slow-{space}"
    await cluster_policies(
        quick,
        resources=["configmaps"],
        names=["quick-*"],
        namespaceSelector=PREVIEW,
        lifecycle={"delete-after": "1s"},
    )
    await cluster_policies(
        slow,
        resources=["configmaps"],
        names=["slow-*"],
        namespaceSelector=PREVIEW,
        lifecycle={"delete-after": "1h"},
    )
    await start_for(start_controller, space)
    await create(kube, CONFIGMAPS, space, labelled("quick-1", {}))
    await create(kube, CONFIGMAPS, space, labelled("slow-1", {}))
    await sentinel_gone(kube, space)
    assert not await gone(kube, CONFIGMAPS, space, "quick-1")
    await wait_matched(kube, slow, 0)

    await relabel(kube, space, {"env": "preview"})
    await wait_gone(kube, CONFIGMAPS, space, "quick-1", within=30)
    await wait_matched(kube, slow, 1)
    assert (await status_of(kube, slow))["nextAction"]["name"] == "slow-1"

    await relabel(kube, space, {"env": None})
    await wait_matched(kube, slow, 0)
    assert not await gone(kube, CONFIGMAPS, space, "slow-1")


async def test_kube_system_labelled_as_a_preview_stays_untouched(
    policy_crds: None,
    start_controller: StartController,
    kube: KubeClient,
    namespaces: Namespaces,
    cluster_policies: ClusterPolicies,
) -> None:
    space = await namespaces(env="preview")
    name = f"previews-{space}"
    await cluster_policies(
        name,
        resources=["configmaps"],
        names=[f"{space}-*"],
        namespaceSelector=PREVIEW,
        lifecycle={"delete-after": "1s"},
    )
    victim = f"{space}-system"
    await relabel(kube, "kube-system", {"env": "preview"})
    try:
        await start_controller(
            watch_resource=["configmaps"], watch_namespace=[space, "kube-system"]
        )
        await create(kube, CONFIGMAPS, "kube-system", labelled(victim, {}))
        await create(kube, CONFIGMAPS, space, labelled(f"{space}-team", {}))
        await wait_gone(kube, CONFIGMAPS, space, f"{space}-team", within=30)
        await sentinel_gone(kube, space)
        assert not await gone(kube, CONFIGMAPS, "kube-system", victim)

        async def counted() -> bool:
            return (await status_of(kube, name)).get("protected") == 1

        await eventually(counted, within=30, what="status.protected of the preview policy")
    finally:
        await relabel(kube, "kube-system", {"env": None})
        with contextlib.suppress(NotFound):
            await kube.request("DELETE", CONFIGMAPS.object_path("kube-system", victim))


async def test_the_documented_recipe_schedules_previews_by_namespace_label(
    policy_crds: None,
    start_controller: StartController,
    kube: KubeClient,
    namespaces: Namespaces,
    cluster_policies: ClusterPolicies,
) -> None:
    """The recipe "previews by namespace label", applied exactly as docs/policies.md has it:
    the ConfigMap in the labelled namespace is scheduled 72 hours after its creation; the one
    in an unlabelled namespace is not matched."""
    recipe = documented_recipe("previews-by-namespace-label")
    name = recipe["metadata"]["name"]
    preview = await namespaces(env="preview")
    other = await namespaces()
    await cluster_policies(recipe)
    await start_controller(watch_resource=["configmaps"], watch_namespace=[preview, other])
    await create(kube, CONFIGMAPS, other, labelled("settings", {}))
    await create(kube, CONFIGMAPS, preview, labelled("settings", {}))
    await wait_matched(kube, name, 1)
    status = await status_of(kube, name)
    assert status["nextAction"]["namespace"] == preview
    assert status["nextAction"]["name"] == "settings"
    assert status["nextAction"]["action"] == "delete"


async def test_policies_try_and_explain_show_the_namespace_selectors_part(
    policy_crds: None,
    control_plane: ControlPlane,
    kube: KubeClient,
    namespaces: Namespaces,
    cluster_policies: ClusterPolicies,
) -> None:
    preview = await namespaces(env="preview")
    other = await namespaces()
    for space in (preview, other):
        await create(kube, CONFIGMAPS, space, labelled("settings", {}))
    policy = cluster_policy(
        f"try-{preview}",
        resources=["configmaps"],
        names=["settings"],
        namespaceSelector=PREVIEW,
        lifecycle={"delete-after": "72h"},
    )
    args = ("policies", "try", "-f", "-", "--watch-resource", "configmaps")
    report = tool_json(control_plane, *args, stdin=yaml.safe_dump(policy))
    rows = [row for row in report["objects"] if row["namespace"] in (preview, other)]
    assert [row["namespace"] for row in rows] == [preview]
    assert rows[0]["namespace_selection"] == f"namespace {preview} labels match env=preview"

    await cluster_policies(policy)
    explained = run_tool(control_plane, "explain", "configmap/settings", "-n", preview)
    assert explained.returncode == 0, explained.stderr
    assert f"namespace {preview} labels match env=preview (namespaceSelector)" in explained.stdout
    refused = run_tool(control_plane, "explain", "configmap/settings", "-n", other)
    assert refused.returncode == 0, refused.stderr
    assert f"namespace {other} labels do not match env=preview" in refused.stdout


async def test_namespace_labels_are_kept_only_while_a_policy_selects_by_label(
    policy_crds: None,
    start_controller: StartController,
    kube: KubeClient,
    namespaces: Namespaces,
    cluster_policies: ClusterPolicies,
) -> None:
    """Without a namespaceSelector policy the controller keeps no Namespace labels; one
    applied makes it read them (a Namespace labelled meanwhile is not missed: its ConfigMap
    goes); once deleted, the labels go again."""
    space = await namespaces()
    running = await start_for(start_controller, space)
    pipeline = running.controller.pipeline
    assert pipeline is not None
    assert pipeline.namespaces is not None
    store = pipeline.namespaces
    assert store.cached() == 0  # no defaults, and no policy reads the labels
    await create(kube, CONFIGMAPS, space, labelled("tmp", {}))
    await relabel(kube, space, {"env": "preview"})  # while nothing keeps the labels
    name = f"by-label-{space}"
    await cluster_policies(
        name, resources=["configmaps"], namespaceSelector=PREVIEW, lifecycle={"delete-after": "1s"}
    )
    await wait_gone(kube, CONFIGMAPS, space, "tmp", within=30)
    assert store.cached() == 1
    assert (store.labels(space) or {}).get("env") == "preview"
    await kube.request("DELETE", CLUSTER_POLICIES.object_path(None, name))

    async def dropped() -> bool:
        return store.cached() == 0

    await eventually(dropped, within=30, what="the namespace labels dropped")
    assert store.labels(space) is None


async def test_an_unknown_namespace_holds_under_its_own_reason(
    policy_crds: None,
    start_controller: StartController,
    control_plane: ControlPlane,
    kube: KubeClient,
    namespaces: Namespaces,
    cluster_policies: ClusterPolicies,
) -> None:
    """A controller that may not read Namespaces cannot know their labels: the policy holds
    the object, its status says why (``Held``, ``NamespaceUnknown``) and the held-objects
    metric counts it under ``namespace-unknown``, not ``condition-error``."""
    space = await namespaces(env="preview")
    name = f"unknown-{space}"
    await cluster_policies(
        name, resources=["configmaps"], namespaceSelector=PREVIEW, lifecycle={"delete-after": "1s"}
    )
    await create(kube, CONFIGMAPS, space, labelled("tmp", {}))
    kubeconfig = await asyncio.to_thread(
        control_plane.user_kubeconfig,
        f"no-namespaces-{space}",
        cluster_rules=POLICY_READER_RULES,
        namespaced_rules={space: controller_rules(delete=True)},
    )
    running = await start_for(start_controller, space, kubeconfig=str(kubeconfig))

    async def held() -> bool:
        return (await status_of(kube, name)).get("held") == 1

    await eventually(held, within=30, what="the policy holding the ConfigMap")
    assert not await gone(kube, CONFIGMAPS, space, "tmp")
    (condition,) = [c for c in (await status_of(kube, name))["conditions"] if c["type"] == "Held"]
    assert (condition["status"], condition["reason"]) == ("True", "NamespaceUnknown")
    assert condition["message"].startswith("1 held: the labels of their Namespace"), condition
    metric, policy = "lifecycle_policy_held_objects", f"ClusterLifecyclePolicy/{name}"
    assert sample(running, metric, policy=policy, reason="namespace-unknown") == 1
    assert sample(running, metric, policy=policy, reason="condition-error") is None
