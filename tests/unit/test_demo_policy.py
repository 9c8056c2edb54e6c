"""The demo's policy act on the in-memory API server: the policy applied in dry run with the
ConfigMaps it matches, switched on only once every dry run was announced, and the summary;
without the chart's CRDs beside the package the act is skipped (nothing applied)."""

from __future__ import annotations

import asyncio
from pathlib import Path

import pytest

from lifecycle_controller.devcluster import ControlPlane, policy_crds
from lifecycle_controller.kube import KubeClient
from lifecycle_controller.kube.resources import CLUSTER_POLICIES, CONFIGMAPS, POLICIES
from lifecycle_controller.tools.demo_policy import POLICY, TEMPORARY, PolicyAct
from tests.doubles.fakeapi import FakeApiServer


def dry_run_event(name: str) -> dict[str, object]:
    return {"reason": "DryRunDelete", "regarding": {"kind": "ConfigMap", "name": name}}


async def test_the_policy_is_switched_on_once_every_dry_run_was_announced(
    api: FakeApiServer, kube: KubeClient
) -> None:
    api.serve(CLUSTER_POLICIES)
    api.serve(POLICIES)
    said: list[str] = []
    act = PolicyAct("demo", said.append)
    await act.apply(kube)
    policy = api.store.get(POLICIES, "demo", POLICY)
    assert policy is not None
    assert policy["spec"]["lifecycle"] == {"delete-after": "10s", "dry-run": "true"}
    assert sorted(cm["metadata"]["name"] for cm in api.store.objects(CONFIGMAPS)) == sorted(
        TEMPORARY
    )

    switch = asyncio.create_task(act.switch_on(kube))
    act.saw(dry_run_event(TEMPORARY[0]))
    act.saw({"reason": "Deleted", "regarding": {"name": TEMPORARY[1]}})
    await asyncio.sleep(0)
    assert not switch.done()  # one dry run is still to be announced
    act.saw(dry_run_event(TEMPORARY[1]))
    await switch
    policy = api.store.get(POLICIES, "demo", POLICY)
    assert policy is not None
    assert policy["spec"]["lifecycle"] == {"delete-after": "10s"}
    assert said[-1] == f"switching LifecyclePolicy {POLICY} on: dry-run removed"

    api.store.delete(CONFIGMAPS, "demo", TEMPORARY[0])
    assert await act.summary(kube) == [
        f"ConfigMap {TEMPORARY[0]}: deleted by LifecyclePolicy {POLICY}",
        f"ConfigMap {TEMPORARY[1]}: still there",
    ]


def test_without_the_charts_crds_nothing_is_installed(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    monkeypatch.setattr(policy_crds, "CRD_DIR", tmp_path)
    assert policy_crds.policy_crd_manifests() == {}
    plane = ControlPlane()  # never started: installing must not reach it
    assert policy_crds.install_policy_crds(plane) is False
