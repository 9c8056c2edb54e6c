"""Conditions over the whole object on the real control plane.

See docs/policies.md#what-a-condition-reads.

A policy whose condition reads ``object.spec.replicas`` deletes the Deployment at zero and
leaves the one at one; scaling one to zero makes it match within seconds (the spec change
reaches the field projection's watch); a condition reading a field the objects lack matches
nothing; a type no condition reads beyond metadata keeps its metadata-only informers, and the
Deployments' informers keep ``spec.replicas`` alone. The two recipes are applied as
docs/policies.md shows them.
"""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

import yaml

from lifecycle_controller.controller.watch.projection import (
    FieldProjection,
    MetadataProjection,
)
from lifecycle_controller.kube import KubeClient, ResourceType
from lifecycle_controller.kube.resources import PODS, POLICIES
from tests.integration.controller import RunningController, StartController
from tests.integration.policy_tools import namespaced_policy
from tests.integration.scenario_support import (
    cached,
    create,
    patch,
    read,
    start_for,
    wait_cached,
    wait_gone,
)
from tests.integration.support import CONFIGMAPS, DEPLOYMENTS, configmap, deployment, eventually

ROOT = Path(__file__).resolve().parents[2]
CLAIMS = ResourceType("", "v1", "persistentvolumeclaims", "PersistentVolumeClaim", namespaced=True)


def _scaled(name: str, replicas: int) -> dict[str, Any]:
    body = deployment(name)
    body["spec"]["replicas"] = replicas
    return body


def _projections(running: RunningController, resource: ResourceType) -> list[object]:
    pipeline = running.controller.pipeline
    assert pipeline is not None
    return [i.projection for i in pipeline.informers.informers() if i.resource == resource]


def _recipe(name: str, namespace: str) -> dict[str, Any]:
    """The recipe's policy exactly as docs/policies.md shows it, in the test's namespace."""
    text = (ROOT / "docs" / "policies.md").read_text()
    found = re.search(rf"<!-- recipe: {name} -->\n```yaml\n(.*?)```", text, re.DOTALL)
    assert found is not None, f"recipe {name} not in docs/policies.md"
    policy: dict[str, Any] = yaml.safe_load(found.group(1))
    policy["metadata"]["namespace"] = namespace
    return policy


async def test_a_condition_on_spec_replicas_deletes_the_deployment_at_zero_only(
    policy_crds: None, start_controller: StartController, namespace: str, kube: KubeClient
) -> None:
    await create(
        kube,
        POLICIES,
        namespace,
        namespaced_policy(
            "scaled-to-zero",
            namespace,
            resources=["deployments.apps"],
            condition="object.spec.replicas == 0",
            lifecycle={"delete-after": "3s"},
        ),
    )
    await create(kube, DEPLOYMENTS, namespace, _scaled("idle", 0))
    await create(kube, DEPLOYMENTS, namespace, _scaled("busy", 1))
    await create(kube, DEPLOYMENTS, namespace, _scaled("later", 1))
    running = await start_for(start_controller, namespace, "deployments.apps", "configmaps")
    await wait_gone(kube, DEPLOYMENTS, namespace, "idle", within=40)

    later = await wait_cached(running, DEPLOYMENTS, namespace, "later")
    assert later.view is not None
    assert later.view.fields == {"spec": {"replicas": 1}}  # the path the condition reads, alone
    assert all(isinstance(p, FieldProjection) for p in _projections(running, DEPLOYMENTS))
    # No condition reads ConfigMaps beyond metadata: their informers stay metadata-only.
    assert _projections(running, CONFIGMAPS)
    assert all(isinstance(p, MetadataProjection) for p in _projections(running, CONFIGMAPS))

    await patch(kube, DEPLOYMENTS, namespace, "later", {"spec": {"replicas": 0}})
    await wait_gone(kube, DEPLOYMENTS, namespace, "later", within=30)
    assert await read(kube, DEPLOYMENTS, namespace, "busy") is not None


def _pod_of(name: str, *containers: tuple[str, str]) -> dict[str, Any]:
    return {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {"name": name},
        "spec": {
            "restartPolicy": "Never",
            "containers": [{"name": n, "image": image} for n, image in containers],
        },
    }


async def test_a_condition_over_an_element_and_every_element_sees_what_it_reads(
    policy_crds: None, start_controller: StartController, namespace: str, kube: KubeClient
) -> None:
    """``containers[1].image`` and ``containers.all(c, c.name ...)``: the cache keeps element
    1's image in its position and every element's name, nothing else of the containers, and
    the condition answers on that as on the whole Pod: the canary Pod is deleted, the stable
    one and the one with a debug container stay."""
    await create(
        kube,
        POLICIES,
        namespace,
        namespaced_policy(
            "canaries",
            namespace,
            resources=["pods"],
            condition='object.spec.containers[1].image.endsWith(":canary") && '
            'object.spec.containers.all(c, c.name != "debug")',
            lifecycle={"delete-after": "2s"},
        ),
    )
    app, side = ("app", "registry.invalid/app:1"), ("sidecar", "registry.invalid/side:1")
    canary = ("sidecar", "registry.invalid/side:canary")
    await create(kube, PODS, namespace, _pod_of("canary", app, canary))
    await create(kube, PODS, namespace, _pod_of("stable", app, side))
    await create(kube, PODS, namespace, _pod_of("debugged", app, canary, ("debug", "x:1")))
    running = await start_for(start_controller, namespace, "pods")
    await wait_gone(kube, PODS, namespace, "canary", within=40)
    stable = await wait_cached(running, PODS, namespace, "stable")
    assert stable.view is not None
    assert stable.view.fields == {
        "spec": {"containers": [{"name": "app"}, {"name": "sidecar", "image": side[1]}]}
    }
    debugged = cached(running, PODS, namespace, "debugged")
    assert debugged is not None
    assert debugged.view is not None
    assert debugged.view.fields["spec"]["containers"][2] == {"name": "debug"}
    assert await read(kube, PODS, namespace, "stable") is not None
    assert await read(kube, PODS, namespace, "debugged") is not None


async def test_a_condition_reading_a_missing_field_matches_nothing(
    policy_crds: None, start_controller: StartController, namespace: str, kube: KubeClient
) -> None:
    """``has()`` of a field no ConfigMap has is false: nothing matches, nothing is held, and
    a ConfigMap that gets the field matches."""
    await create(
        kube,
        POLICIES,
        namespace,
        namespaced_policy(
            "by-mode",
            namespace,
            resources=["configmaps"],
            condition='has(object.data.mode) && object.data.mode == "scratch"',
            lifecycle={"delete-after": "2s"},
        ),
    )
    await create(kube, CONFIGMAPS, namespace, configmap("plain"))
    running = await start_for(start_controller, namespace, "configmaps")
    plain = await wait_cached(running, CONFIGMAPS, namespace, "plain")
    # Its data is kept down to the key the condition reads, which it lacks: "k" is dropped.
    assert plain.view is not None
    assert plain.view.fields == {"data": {}}
    scratch = configmap("scratch")
    scratch["data"] = {"mode": "scratch", "other": "x" * 1000}
    await create(kube, CONFIGMAPS, namespace, scratch)
    await wait_gone(kube, CONFIGMAPS, namespace, "scratch", within=30)
    assert await read(kube, CONFIGMAPS, namespace, "plain") is not None
    view = cached(running, CONFIGMAPS, namespace, "plain")
    assert view is not None
    assert view.view is not None
    assert view.view.fields == {"data": {}}


async def test_a_new_condition_relists_the_type_with_its_paths(
    policy_crds: None, start_controller: StartController, namespace: str, kube: KubeClient
) -> None:
    """Metadata-only until a policy reads spec; then the type is listed again with the new
    projection, and an object that matched nothing before is deleted."""
    await create(kube, DEPLOYMENTS, namespace, _scaled("idle", 0))
    running = await start_for(start_controller, namespace, "deployments.apps")
    assert all(isinstance(p, MetadataProjection) for p in _projections(running, DEPLOYMENTS))
    await create(
        kube,
        POLICIES,
        namespace,
        namespaced_policy(
            "scaled-to-zero",
            namespace,
            resources=["deployments.apps"],
            condition="object.spec.replicas == 0",
            lifecycle={"delete-after": "3s"},
        ),
    )

    async def field_projection() -> bool:
        found = _projections(running, DEPLOYMENTS)
        return bool(found) and all(isinstance(p, FieldProjection) for p in found)

    await eventually(field_projection, within=30, what="the Deployments relisted with spec")
    await wait_gone(kube, DEPLOYMENTS, namespace, "idle", within=40)


async def test_the_documented_recipes_match_what_they_say(
    policy_crds: None, start_controller: StartController, namespace: str, kube: KubeClient
) -> None:
    """The recipes exactly as written (only their namespace is the test's): a Deployment at
    zero and a Pending claim are matched and scheduled; the others are not matched."""
    for name in ("scaled-to-zero", "pending-claims"):
        await create(kube, POLICIES, namespace, _recipe(name, namespace))
    await create(kube, DEPLOYMENTS, namespace, _scaled("idle", 0))
    await create(kube, DEPLOYMENTS, namespace, _scaled("busy", 1))
    claim = {
        "apiVersion": "v1",
        "kind": "PersistentVolumeClaim",
        "metadata": {"name": "stuck"},
        "spec": {
            "accessModes": ["ReadWriteOnce"],
            "resources": {"requests": {"storage": "1Gi"}},
            "storageClassName": "no-such-class",
        },
    }
    created = await create(kube, CLAIMS, namespace, claim)
    assert created["status"]["phase"] == "Pending"
    running = await start_for(
        start_controller, namespace, "deployments.apps", "persistentvolumeclaims"
    )

    def decided(resource: ResourceType, name: str) -> bool:
        pipeline = running.controller.pipeline
        assert pipeline is not None
        policies = pipeline.reconciler.policies
        assert policies is not None
        for key, tally in policies.tallies.items():
            if key.resource == resource and key.name == name and tally.decided_by:
                return True
        return False

    async def scheduled() -> bool:
        return decided(DEPLOYMENTS, "idle") and decided(CLAIMS, "stuck")

    await eventually(scheduled, within=30, what="the recipes' objects decided by the policies")
    assert not decided(DEPLOYMENTS, "busy")
    stuck = cached(running, CLAIMS, namespace, "stuck")
    assert stuck is not None
    assert stuck.view is not None
    assert stuck.view.fields == {"status": {"phase": "Pending"}}
