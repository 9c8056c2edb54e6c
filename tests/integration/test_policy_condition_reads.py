"""What a condition may read, on the real control plane (docs/policies.md#what-a-condition-reads).

* A condition reading metadata the controller does not keep (``finalizers``) is ``Invalid``,
  naming the field, and deletes nothing; before, ``!has(object.metadata.finalizers)`` was
  true for an object with finalizers, which was deleted.
* ``object.kind`` and ``object.apiVersion`` are the type's: an object that arrived by the
  list (whose items lack them) matches as one that arrived by a watch (whose objects carry
  them), and the type stays metadata-only.
* A condition reading a Secret's data (``secrets`` named, or selected by ``*``), or the whole
  object, is ``Invalid``; the Secrets' informers stay metadata-only, so no Secret data is
  listed; ``plan``, ``policies try`` and ``explain`` say why, in the same words.
"""

from __future__ import annotations

import base64
import contextlib
from collections.abc import AsyncIterator
from typing import Any

import pytest
import yaml

from lifecycle_controller.controller.watch.projection import MetadataProjection
from lifecycle_controller.devcluster import ControlPlane
from lifecycle_controller.kube import KubeClient, NotFound, ResourceType
from lifecycle_controller.kube.resources import CLUSTER_POLICIES, POLICIES
from tests.integration.controller import RunningController, StartController
from tests.integration.policy_tools import (
    cluster_policy,
    invalid_message,
    namespaced_policy,
    run_tool,
    tool_json,
)
from tests.integration.scenario_support import (
    create,
    read,
    start_for,
    wait_cached,
    wait_gone,
)
from tests.integration.support import CONFIGMAPS, SECRETS, configmap

NOT_KEPT = (
    "spec.condition: reads object.metadata.finalizers, which the controller does not keep; a "
    "condition may read object.metadata.name, namespace, labels, annotations, "
    "creationTimestamp and ownerReferences"
)
SECRET_DATA = (
    "selects secrets: a condition never reads Secret data; leave secrets out of "
    "spec.resources, or match Secrets on their metadata (names, labels, annotations) alone"
)


def _projections(running: RunningController, resource: ResourceType) -> list[object]:
    pipeline = running.controller.pipeline
    assert pipeline is not None
    return [i.projection for i in pipeline.informers.informers() if i.resource == resource]


def _finalized(name: str) -> dict[str, Any]:
    body = configmap(name)
    body["metadata"]["finalizers"] = ["example.com/hold"]
    return body


async def test_a_condition_reading_unkept_metadata_is_invalid_and_deletes_nothing(
    policy_crds: None, start_controller: StartController, namespace: str, kube: KubeClient
) -> None:
    await create(
        kube,
        POLICIES,
        namespace,
        namespaced_policy(
            "unfinalized",
            namespace,
            resources=["configmaps"],
            names=["finalized"],
            condition="!has(object.metadata.finalizers)",
            lifecycle={"delete-after": "1s"},
        ),
    )
    # A valid policy beside it: once its ConfigMap is gone, the controller has judged both.
    await create(
        kube,
        POLICIES,
        namespace,
        namespaced_policy(
            "control", namespace, resources=["configmaps"], names=["control"],
            lifecycle={"delete-after": "1s"},
        ),
    )  # fmt: skip
    await create(kube, CONFIGMAPS, namespace, _finalized("finalized"))
    await create(kube, CONFIGMAPS, namespace, configmap("control"))
    try:
        await start_for(start_controller, namespace)
        assert await invalid_message(kube, POLICIES, namespace, "unfinalized") == NOT_KEPT
        await wait_gone(kube, CONFIGMAPS, namespace, "control", within=30)
        finalized = await read(kube, CONFIGMAPS, namespace, "finalized")
        assert finalized is not None
        assert "deletionTimestamp" not in finalized["metadata"]  # never deleted
    finally:
        with contextlib.suppress(NotFound):
            patch = {"metadata": {"finalizers": None}}
            await kube.merge_patch(CONFIGMAPS, namespace, "finalized", patch)


async def test_object_kind_is_the_same_for_a_listed_and_a_watched_object(
    policy_crds: None, start_controller: StartController, namespace: str, kube: KubeClient
) -> None:
    """The items of a list carry no ``kind``; the objects of a watch do: the condition sees
    the type's either way, and reads nothing beyond metadata."""
    await create(
        kube,
        POLICIES,
        namespace,
        namespaced_policy(
            "by-kind",
            namespace,
            resources=["configmaps"],
            names=["kind-*"],
            condition='object.kind == "ConfigMap" && object.apiVersion == "v1"',
            lifecycle={"delete-after": "1s"},
        ),
    )
    await create(kube, CONFIGMAPS, namespace, configmap("kind-listed"))
    listing = await kube.request("GET", CONFIGMAPS.collection_path(namespace))
    assert all("kind" not in item for item in listing["items"])  # what a list gives
    running = await start_for(start_controller, namespace)
    await wait_gone(kube, CONFIGMAPS, namespace, "kind-listed", within=30)
    await create(kube, CONFIGMAPS, namespace, configmap("kind-watched"))
    await wait_gone(kube, CONFIGMAPS, namespace, "kind-watched", within=30)
    assert _projections(running, CONFIGMAPS)
    assert all(isinstance(p, MetadataProjection) for p in _projections(running, CONFIGMAPS))


def _secret(name: str) -> dict[str, Any]:
    return {
        "apiVersion": "v1",
        "kind": "Secret",
        "metadata": {"name": name},
        "data": {"token": base64.b64encode(b"do not read").decode(), "mode": "eA=="},
    }


@pytest.fixture
async def any_data_policy(
    policy_crds: None, kube: KubeClient, namespace: str
) -> AsyncIterator[str]:
    """A ClusterLifecyclePolicy over ``*`` in the test's namespace reading ``object.data``
    (meant for ConfigMaps), removed afterwards."""
    name = f"{namespace}-any-data"
    body = cluster_policy(
        name,
        resources=["*"],
        namespaces=[namespace],
        condition='has(object.data.mode) && object.data.mode == "x"',
        lifecycle={"delete-after": "1s"},
    )
    await create(kube, CLUSTER_POLICIES, None, body)
    yield name
    with contextlib.suppress(NotFound):
        await kube.request("DELETE", CLUSTER_POLICIES.object_path(None, name))


_SECRET_POLICIES = {
    "by-data": "has(object.data.token)",
    "by-string-data": 'has(object.stringData.token) && object.stringData.token != ""',
    "whole": "size(object) > 0",
}


async def test_a_condition_reading_secret_data_is_invalid_and_no_secret_data_is_listed(
    any_data_policy: str, start_controller: StartController, namespace: str, kube: KubeClient
) -> None:
    for name, condition in _SECRET_POLICIES.items():
        body = namespaced_policy(
            name, namespace, resources=["secrets"], condition=condition,
            lifecycle={"delete-after": "1s"},
        )  # fmt: skip
        await create(kube, POLICIES, namespace, body)
    # Valid: a condition over Secrets reading their metadata and kind only (it matches none).
    metadata_only = namespaced_policy(
        "by-label", namespace, resources=["secrets"], lifecycle={"delete-after": "1s"},
        condition='object.kind == "Secret" && has(object.metadata.labels.scratch)',
    )  # fmt: skip
    await create(kube, POLICIES, namespace, metadata_only)
    await kube.create(SECRETS, namespace, _secret("token"))
    running = await start_for(start_controller, namespace, "configmaps", "secrets")

    message = await invalid_message(kube, POLICIES, namespace, "by-data")
    assert (
        message
        == f'spec.condition: reads object.data.token, and spec.resources[0] "secrets" {SECRET_DATA}'
    )
    message = await invalid_message(kube, POLICIES, namespace, "by-string-data")
    assert message.startswith("spec.condition: reads object.stringData.token, and ")
    message = await invalid_message(kube, POLICIES, namespace, "whole")
    assert message.startswith("spec.condition: reads the whole object")
    message = await invalid_message(kube, CLUSTER_POLICIES, None, any_data_policy)
    assert (
        message
        == f'spec.condition: reads object.data.mode, and spec.resources[0] "*" {SECRET_DATA}'
    )

    # Cached for the valid policy, with no field beyond metadata; never acted on.
    token = await wait_cached(running, SECRETS, namespace, "token")
    assert token.view is not None
    assert not token.view.fields
    assert _projections(running, SECRETS)
    assert all(isinstance(p, MetadataProjection) for p in _projections(running, SECRETS))
    assert await read(kube, SECRETS, namespace, "token") is not None


async def test_plan_try_and_explain_say_why_a_condition_is_refused(
    policy_crds: None, control_plane: ControlPlane, kube: KubeClient, namespace: str
) -> None:
    tried = namespaced_policy(
        "by-data", namespace, resources=["secrets"], condition="has(object.data.token)",
        lifecycle={"delete-after": "1h"},
    )  # fmt: skip
    expected = (
        "InvalidLifecyclePolicy: spec.condition: reads object.data.token, and "
        f'spec.resources[0] "secrets" {SECRET_DATA}'
    )
    secret = _secret("token")
    secret["metadata"]["namespace"] = namespace
    manifests = yaml.safe_dump_all([tried, secret])
    plan = run_tool(control_plane, "plan", "-f", "-", stdin=manifests)
    assert plan.returncode == 1, plan.stderr
    assert expected in plan.stdout

    args = ("policies", "try", "-f", "-", "-n", namespace, "--watch-resource", "secrets")
    tried_out = run_tool(control_plane, *args, stdin=yaml.safe_dump(tried))
    assert tried_out.returncode == 1, tried_out.stderr
    assert expected in tried_out.stdout

    finalizers = namespaced_policy(
        "unfinalized", namespace, resources=["configmaps"],
        condition="!has(object.metadata.finalizers)", lifecycle={"delete-after": "1h"},
    )  # fmt: skip
    await create(kube, POLICIES, namespace, finalizers)
    await create(kube, CONFIGMAPS, namespace, configmap("plain"))
    report = tool_json(control_plane, "explain", "cm/plain", "-n", namespace)
    assert {
        "policy": f"LifecyclePolicy/{namespace}/unfinalized",
        "why": f"it is invalid and acts on nothing: {NOT_KEPT}",
    } in report["policies"]["not_matched"]
