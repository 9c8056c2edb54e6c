"""The view a policy deletion is decided on changed while the controller's watches are held:
no deletion that view no longer allows (docs/reliability.md#policy-fence).

The controller runs through the loopback proxy (``tests/faults/proxy.py``), which from the
start answers every watch of lifecycle policies (both kinds) and of Namespaces with a stream
that sends nothing (watches that are behind, as after a slow or partitioned API server);
lists, GETs, DELETEs and the other watches pass. Each case lists a policy (``delete-after:
1s``), changes the view behind the held watches, then creates ConfigMaps all due by the
controller's stale copy. While the watches are held no DELETE reaches the API server: each
deletion is held by the fence (``lifecycle_policy_fence_checks_total{result="changed"}``).
Once they are let go the controller's view catches up and decides:

* the ``LifecyclePolicy`` ``sweep`` (``tmp-*``) **narrowed** to ``tmp-go-*`` deletes
  ``tmp-go-1``, with exactly one DELETE in the audit log (whatever its answer) and one
  ``Deleted`` Event, and never the others; **deleted**, it deletes nothing;
* the ``ClusterLifecyclePolicy`` ``sweep`` (``tmp-*`` in Namespaces labelled for the test,
  through a ``namespaceSelector``): the Namespace **relabelled** out of the selector, no
  policy decides the objects; a ``LifecyclePolicy`` ``keep`` (``delete-after: 1000h``)
  created in the namespace **outranks** it and schedules them far away; an invalid
  ``LifecyclePolicy`` ``broken`` created there **holds** them. None of them is deleted.

Whatever should not happen is looked for once the controller is quiet (its queue empty, no
write for a while: :func:`tests.faults.quiet.wait_quiet`), in the audit log as well as at
the proxy.

Caught: the deletions were decided on the stale copy and carried out, the objects' DELETE
preconditions (their own UID and resourceVersion) being no fence against a changed view;
and, while the fence compared the deciding policy's generation alone, whenever the change
was another policy or the Namespace's labels (the deciding policy itself unchanged).
"""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest
from aiohttp import web

from lifecycle_controller.controller.policy.decisions import PolicyDecisions, Tally
from lifecycle_controller.devcluster import ControlPlane
from lifecycle_controller.kube import KubeClient, NotFound
from lifecycle_controller.kube.resources import CLUSTER_POLICIES, CONFIGMAPS, NAMESPACES, POLICIES
from tests.faults.proxy import FaultProxy
from tests.faults.quiet import queue_idle, wait_quiet
from tests.faults.support import controller_kubeconfig, deletion_tally, writes
from tests.integration.controller import RunningController, StartController
from tests.integration.policy_crds import install_policy_crds
from tests.integration.policy_tools import cluster_policy, labelled, namespaced_policy
from tests.integration.scenario_support import create, gone, start_for, wait_gone
from tests.integration.support import eventually

STAY = ("tmp-stay-1", "tmp-stay-2")
GO = "tmp-go-1"


def held_watch(path: str) -> str | None:
    """What a watch of ``path`` is held as (None: it passes): ``policies`` (either kind) or
    ``namespaces`` (the namespace store's watch, cluster-wide or of one name)."""
    if "/lifecyclepolicies" in path or "/clusterlifecyclepolicies" in path:
        return "policies"
    return "namespaces" if path.rstrip("/") == "/api/v1/namespaces" else None


@dataclass
class PolicyWatchHold(FaultProxy):
    """The recording proxy; while :attr:`holding`, a watch of lifecycle policies or of
    Namespaces gets an answer that sends nothing until :meth:`release` ends it (the client
    watches again, from the last resourceVersion it saw)."""

    holding: bool = True
    held: int = 0
    #: How many watches were held, by what they watch (``held_watch``).
    held_of: dict[str, int] = field(default_factory=dict)
    _released: asyncio.Event = field(default_factory=asyncio.Event)
    _handlers: set[asyncio.Task[Any]] = field(default_factory=set)

    async def _handle(self, request: web.Request) -> web.StreamResponse:
        handler = asyncio.current_task()
        assert handler is not None
        self._handlers.add(handler)
        try:
            return await self._hold_or_forward(request)
        finally:
            self._handlers.discard(handler)

    async def _hold_or_forward(self, request: web.Request) -> web.StreamResponse:
        watch = request.query.get("watch") in ("true", "1")
        what = held_watch(request.path)
        if not (self.holding and watch and what is not None):
            return await super()._handle(request)
        self.held += 1
        self.held_of[what] = self.held_of.get(what, 0) + 1
        out = web.StreamResponse(status=200, headers={"Content-Type": "application/json"})
        await out.prepare(request)
        await self._released.wait()
        await out.write_eof()
        return out

    async def __aexit__(self, *exc: object) -> None:
        # A forwarded watch waits on the API server, not on its client that went away: end
        # them now rather than after the server's 60 s shutdown timeout.
        for handler in list(self._handlers):
            handler.cancel()
        await super().__aexit__(*exc)

    def release(self) -> None:
        self.holding = False
        self._released.set()


def deletes_of(proxy: FaultProxy, names: tuple[str, ...]) -> list[str]:
    """Every DELETE of one of ``names`` that reached the proxy."""
    return [
        path
        for method, path, _ in proxy.arrived
        if method == "DELETE" and path.split("?")[0].rsplit("/", 1)[-1] in names
    ]


def fence_checks(running: RunningController, result: str) -> float:
    registry = running.controller.metrics.registry
    value = registry.get_sample_value("lifecycle_policy_fence_checks_total", {"result": result})
    return value or 0.0


def decisions_of(running: RunningController) -> PolicyDecisions:
    pipeline = running.controller.pipeline
    decisions = None if pipeline is None else pipeline.reconciler.policies
    assert decisions is not None
    return decisions


def policy_generation(running: RunningController) -> int | None:
    """The generation of ``sweep`` in the controller's store (None: it holds no policy)."""
    valid = decisions_of(running).store.current.valid
    return valid[0].generation if valid else None


def policies_known(running: RunningController) -> list[str]:
    """Every policy in the controller's store, valid or not."""
    current = decisions_of(running).store.current
    return sorted([str(p.ref) for p in current.valid] + [str(p.ref) for p in current.invalid])


@pytest.mark.parametrize("change", ["narrowed", "deleted"])
async def test_a_policy_changed_behind_a_held_watch_deletes_nothing_it_no_longer_allows(
    control_plane: ControlPlane,
    kube: KubeClient,
    namespace: str,
    start_controller: StartController,
    tmp_path: Path,
    change: str,
) -> None:
    install_policy_crds(control_plane)
    lifecycle = {"delete-after": "1s"}
    policy = namespaced_policy(
        "sweep", namespace, resources=["configmaps"], names=["tmp-*"], lifecycle=lifecycle
    )
    await create(kube, POLICIES, namespace, policy)
    upstream = Path(controller_kubeconfig(control_plane))
    proxy = PolicyWatchHold(upstream)
    async with proxy:
        running = await start_for(
            start_controller, namespace, kubeconfig=proxy.kubeconfig(tmp_path / "proxied")
        )
        assert policy_generation(running) == 1  # listed before the watch was held

        async def watch_held() -> bool:
            return proxy.held_of.get("policies", 0) > 0

        await eventually(watch_held, within=30, what="the policy watch held")
        if change == "narrowed":
            narrowed = {"spec": {"names": ["tmp-go-*"]}}
            await kube.merge_patch(POLICIES, namespace, "sweep", narrowed)
        else:
            await kube.request("DELETE", POLICIES.object_path(namespace, "sweep"))
        for name in (GO, *STAY):
            await create(kube, CONFIGMAPS, namespace, labelled(name, {}))

        async def every_one_held() -> bool:
            # Without the fence the deletions go instead: stop waiting and show them below.
            return fence_checks(running, "changed") >= 3 or bool(deletes_of(proxy, STAY))

        await eventually(every_one_held, within=60, what="the three deletions held")
        assert deletes_of(proxy, (GO, *STAY)) == []
        assert policy_generation(running) == 1  # the store is still behind

        proxy.release()

        async def caught_up() -> bool:
            return policy_generation(running) == (2 if change == "narrowed" else None)

        await eventually(caught_up, within=30, what="the policy store caught up")
        if change == "narrowed":
            await wait_gone(kube, CONFIGMAPS, namespace, GO, within=60)
        await wait_quiet(control_plane, queue_idle(running))  # re-decided, any double shown
        if change == "deleted":  # nothing may act any more
            assert not await gone(kube, CONFIGMAPS, namespace, GO)
        for name in STAY:
            assert not await gone(kube, CONFIGMAPS, namespace, name), name
        assert deletes_of(proxy, STAY) == []
        await running.stop()  # before the proxy goes away (it would wait for open watches)
    expected = [GO] if change == "narrowed" else []
    tally = await deletion_tally(
        control_plane,
        kube,
        f"11 policy {change} behind a held watch",
        expected,
        namespace=namespace,
    )
    tally.record()
    tally.assert_exactly_once()
    deletes = writes(control_plane, verb="delete", resource="configmaps", namespace=namespace)
    assert set(deletes) == set(expected), deletes  # no DELETE of the others, whatever answer


#: The label of the test's Namespace the cluster policy's namespaceSelector reads.
LABEL = "lifecycle-fence"
OBJECTS = ("tmp-1", "tmp-2")


def tallies_of(running: RunningController, namespace: str) -> dict[str, Tally]:
    """What the controller's last pass over each object of ``namespace`` said of policies."""
    tallies = decisions_of(running).tallies
    return {key.name: tally for key, tally in tallies.items() if key.namespace == namespace}


def labelled_for_the_test(running: RunningController, namespace: str) -> bool:
    """The controller's copy of the Namespace's labels still has the selector's label."""
    labels = decisions_of(running).store.namespace_labels(namespace) or {}
    return labels.get(LABEL) == "on"


async def change_the_view(kube: KubeClient, namespace: str, change: str) -> None:
    """Behind the held watches: the Namespace relabelled out of the selector, a policy that
    outranks the cluster policy, or an invalid one that holds the objects."""
    if change == "relabelled":
        await kube.merge_patch(NAMESPACES, None, namespace, {"metadata": {"labels": {LABEL: None}}})
        return
    spec: dict[str, Any] = {"resources": ["configmaps"], "names": ["tmp-*"]}
    if change == "outranked":  # a LifecyclePolicy outranks a cluster policy not enforced
        policy = namespaced_policy("keep", namespace, **spec, lifecycle={"delete-after": "1000h"})
    else:  # an invalid policy holds what it would match: nothing below it acts
        policy = namespaced_policy(
            "broken",
            namespace,
            **spec,
            condition="object.metadata.labels[",
            lifecycle={"delete-after": "1s"},
        )
    await create(kube, POLICIES, namespace, policy)


def decided_anew(change: str, namespace: str) -> Callable[[Tally | None], bool]:
    """Whether an object's tally is the one the caught-up view decides."""
    if change == "relabelled":  # no policy matches it any more
        return lambda tally: tally is None or tally.decided_by == ()
    if change == "outranked":
        keep = f"LifecyclePolicy/{namespace}/keep"
        return lambda tally: tally is not None and [str(r) for r in tally.decided_by] == [keep]
    broken = (f"LifecyclePolicy/{namespace}/broken", "invalid")
    return lambda tally: tally is not None and broken in [(str(r), w) for r, w in tally.held_by]


@pytest.mark.parametrize("change", ["relabelled", "outranked", "held"])
async def test_a_view_changed_around_its_unchanged_policy_behind_held_watches_deletes_nothing(
    control_plane: ControlPlane,
    kube: KubeClient,
    namespace: str,
    start_controller: StartController,
    tmp_path: Path,
    change: str,
) -> None:
    install_policy_crds(control_plane)
    await kube.merge_patch(NAMESPACES, None, namespace, {"metadata": {"labels": {LABEL: "on"}}})
    name = f"sweep-{namespace}"
    sweep = cluster_policy(
        name,
        resources=["configmaps"],
        names=["tmp-*"],
        namespaces=[namespace],  # no other test's objects, whatever their Namespace's labels
        namespaceSelector={"matchLabels": {LABEL: "on"}},
        lifecycle={"delete-after": "1s"},
    )
    await create(kube, CLUSTER_POLICIES, None, sweep)
    try:
        await _held_then_decided_anew(
            control_plane, kube, namespace, start_controller, tmp_path, change, name
        )
    finally:  # a cluster policy outlives the test's namespace: the next tests must not see it
        with contextlib.suppress(NotFound):
            await kube.request("DELETE", CLUSTER_POLICIES.object_path(None, name))


async def _held_then_decided_anew(
    control_plane: ControlPlane,
    kube: KubeClient,
    namespace: str,
    start_controller: StartController,
    tmp_path: Path,
    change: str,
    name: str,
) -> None:
    upstream = Path(controller_kubeconfig(control_plane))
    proxy = PolicyWatchHold(upstream)
    async with proxy:
        running = await start_for(
            start_controller, namespace, kubeconfig=proxy.kubeconfig(tmp_path / "proxied")
        )
        sweep = f"ClusterLifecyclePolicy/{name}"
        assert policies_known(running) == [sweep]  # listed before the watches were held

        async def watches_held() -> bool:
            # Both policy kinds; the Namespaces' watch after the list that kept their labels.
            held = proxy.held_of.get("policies", 0) >= 2 and "namespaces" in proxy.held_of
            return held and labelled_for_the_test(running, namespace)

        await eventually(watches_held, within=30, what="the policy and Namespace watches held")
        await change_the_view(kube, namespace, change)
        for obj in OBJECTS:
            await create(kube, CONFIGMAPS, namespace, labelled(obj, {}))

        async def every_one_held() -> bool:
            # Without the fence the deletions go instead: stop waiting and show them below.
            held = fence_checks(running, "changed") >= len(OBJECTS)
            return held or bool(deletes_of(proxy, OBJECTS))

        await eventually(every_one_held, within=60, what="the deletions held")
        assert deletes_of(proxy, OBJECTS) == []
        # The controller's view is still behind: the policy it decided on, the old labels.
        assert policies_known(running) == [sweep]
        assert labelled_for_the_test(running, namespace)
        deciders = {
            obj: [str(r) for r in t.decided_by] for obj, t in tallies_of(running, namespace).items()
        }
        assert deciders == {obj: [sweep] for obj in OBJECTS}

        proxy.release()

        async def caught_up() -> bool:
            if change == "relabelled":
                return not labelled_for_the_test(running, namespace)
            return len(policies_known(running)) == 2

        await eventually(caught_up, within=30, what="the controller's view caught up")
        anew = decided_anew(change, namespace)

        async def every_one_decided_anew() -> bool:
            tallies = tallies_of(running, namespace)
            return all(anew(tallies.get(obj)) for obj in OBJECTS)

        await eventually(every_one_decided_anew, within=30, what="the objects decided anew")
        await wait_quiet(control_plane, queue_idle(running))
        for obj in OBJECTS:
            assert not await gone(kube, CONFIGMAPS, namespace, obj), obj
        assert deletes_of(proxy, OBJECTS) == []
        await running.stop()  # before the proxy goes away (it would wait for open watches)
    deletes = writes(control_plane, verb="delete", resource="configmaps", namespace=namespace)
    assert deletes == {}, deletes  # the audit log agrees: no DELETE, whatever its answer
