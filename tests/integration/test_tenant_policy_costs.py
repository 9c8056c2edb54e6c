"""A tenant's LifecyclePolicy costs what it changed, on the real control plane.

* Editing an invalid LifecyclePolicy again and again re-queues the objects of its namespace
  only (counted by the running controller's ``workqueue_adds_total``), not every
  policy-kept object of every namespace.
* Editing a LifecyclePolicy's ``names`` again and again lists ConfigMaps again in its
  namespace only, once per edit, never cluster-wide (every request counted through the
  recording proxy, as tests/integration/test_policy_namespace_reads.py does).

Caught: an invalid policy's edit re-queued every kept object of every watched type; before
the scoped relists, each ``names`` edit restarted the type's cluster-wide informer.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from pathlib import Path

from lifecycle_controller.devcluster import ControlPlane
from lifecycle_controller.kube import KubeClient
from lifecycle_controller.kube.resources import POLICIES
from tests.conftest import fresh_namespace
from tests.integration.controller import RunningController, StartController
from tests.integration.policy_tools import namespaced_policy
from tests.integration.scenario_support import create, queue_adds
from tests.integration.support import CONFIGMAPS, configmap, eventually
from tests.integration.test_policy_namespace_reads import proxied, reads_of, scoped_policy

EDITS = 4


def _keep(namespace: str) -> dict[str, object]:
    """A valid policy keeping the ConfigMaps named cm-* of ``namespace`` for 1000h."""
    return namespaced_policy(
        "keep",
        namespace,
        resources=["configmaps"],
        names=["cm-*"],
        lifecycle={"delete-after": "1000h"},
    )


def _kept_in(running: RunningController, namespace: str) -> int:
    """The ConfigMaps of ``namespace`` the controller keeps with a policy view."""
    pipeline = running.controller.pipeline
    assert pipeline is not None
    cache = pipeline.reconciler.cache
    return sum(
        1
        for key, obj in cache.items(CONFIGMAPS)
        if key.namespace == namespace and obj.view is not None
    )


async def _idle(running: RunningController) -> None:
    async def idle() -> bool:
        pipeline = running.controller.pipeline
        return pipeline is not None and pipeline.idle()

    await eventually(idle, within=30, interval=0.05, what="every queued key reconciled")


async def test_editing_an_invalid_lifecycle_policy_re_queues_its_namespace_only(
    policy_crds: None,
    control_plane: ControlPlane,
    start_controller: StartController,
    namespace: str,
    kube: KubeClient,
) -> None:
    with fresh_namespace(control_plane) as other:
        for where, count in ((namespace, 3), (other, 20)):
            await create(kube, POLICIES, where, _keep(where))
            for index in range(count):
                await create(kube, CONFIGMAPS, where, configmap(f"cm-{index}"))
        broken = namespaced_policy(
            "broken",
            namespace,
            resources=["configmaps"],
            names=["cm-*"],
            lifecycle={"delete-after": "soon"},
        )
        await create(kube, POLICIES, namespace, broken)
        running = await start_controller(
            watch_resource=["configmaps"], watch_namespace=[namespace, other]
        )
        await _idle(running)
        mine, theirs = _kept_in(running, namespace), _kept_in(running, other)
        assert mine >= 3
        assert theirs >= 20
        for edit in range(EDITS):
            before = queue_adds(running)
            patch = {"spec": {"names": ["cm-*", f"edit-{edit}-*"]}}
            await kube.merge_patch(POLICIES, namespace, "broken", patch)

            async def queued(at: float = before) -> bool:
                return queue_adds(running) >= at + mine

            await eventually(queued, within=30, interval=0.05, what="the edit re-queued")
            await _idle(running)
            assert queue_adds(running) - before == mine, (edit, mine, theirs)


async def test_looping_names_edits_list_the_namespace_once_each_never_the_cluster(
    policy_crds: None,
    control_plane: ControlPlane,
    start_controller: StartController,
    namespace: str,
    kube: KubeClient,
    tmp_path: Path,
) -> None:
    await create(kube, CONFIGMAPS, namespace, configmap("cm-0"))
    async with proxied(control_plane, start_controller, tmp_path) as (proxy, _):
        await create(kube, POLICIES, namespace, scoped_policy(namespace, names=["cm-*"]))
        start = len(proxy.arrived)

        def listed_since(mark: int) -> Callable[[], Awaitable[bool]]:
            async def listed() -> bool:
                return bool(reads_of(proxy.arrived[mark:], "configmaps"))

            return listed

        await eventually(listed_since(start), within=30, what="the first list")
        for edit in range(EDITS):
            mark = len(proxy.arrived)
            patch = {"spec": {"names": ["cm-*", f"edit-{edit}-*"]}}
            await kube.merge_patch(POLICIES, namespace, "scoped", patch)
            await eventually(listed_since(mark), within=30, what=f"edit {edit} listed again")
        reads = reads_of(proxy.arrived[start:], "configmaps")
        assert {scope for scope, _ in reads} == {namespace}  # never cluster-wide
        assert len(reads) == EDITS + 1  # one list per change, no more
