"""A policy narrowed or deleted while the controller's policy watch is held: no deletion the
policy no longer allows (docs/reliability.md#policy-fence).

The controller runs through the loopback proxy (``tests/faults/proxy.py``), which from the
start answers every watch of LifecyclePolicies with a stream that sends nothing (a watch
that is behind, as after a slow or partitioned API server); lists, GETs, DELETEs and the
other watches pass. The controller lists the policy ``sweep`` (ConfigMaps named ``tmp-*``,
``delete-after: 1s``), then the administrator narrows it to ``tmp-go-*`` (or deletes it) and
creates ``tmp-go-1``, ``tmp-stay-1`` and ``tmp-stay-2``, all due at once by the controller's
stale copy. While the watch is held no DELETE reaches the API server: each deletion is
held by the fence (``lifecycle_policy_fence_checks_total{result="changed"}``). Once the watch
is let go, the store catches up: the narrowed policy deletes ``tmp-go-1`` and never the
others; the deleted one deletes nothing.

Caught: the deletions were decided on the stale copy and carried out, the objects' DELETE
preconditions (their own UID and resourceVersion) being no fence against a changed policy.
"""

from __future__ import annotations

import asyncio
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest
from aiohttp import web

from lifecycle_controller.devcluster import ControlPlane
from lifecycle_controller.kube import KubeClient
from lifecycle_controller.kube.resources import CONFIGMAPS, POLICIES
from tests.faults.proxy import FaultProxy
from tests.faults.support import controller_kubeconfig
from tests.integration.controller import RunningController, StartController
from tests.integration.policy_crds import install_policy_crds
from tests.integration.policy_tools import labelled, namespaced_policy
from tests.integration.scenario_support import create, gone, start_for, wait_gone
from tests.integration.support import eventually

STAY = ("tmp-stay-1", "tmp-stay-2")
GO = "tmp-go-1"


@dataclass
class PolicyWatchHold(FaultProxy):
    """The recording proxy; while :attr:`holding`, a watch of lifecycle policies gets an
    answer that sends nothing until :meth:`release` ends it (the client watches again, from
    the last resourceVersion it saw)."""

    holding: bool = True
    held: int = 0
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
        if not (self.holding and watch and "/lifecyclepolicies" in request.path):
            return await super()._handle(request)
        self.held += 1
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


def policy_generation(running: RunningController) -> int | None:
    """The generation of ``sweep`` in the controller's store (None: it holds no policy)."""
    pipeline = running.controller.pipeline
    decisions = None if pipeline is None else pipeline.reconciler.policies
    valid = () if decisions is None else decisions.store.current.valid
    return valid[0].generation if valid else None


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
            return proxy.held > 0

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
        else:
            # Nothing may act any more; the objects are re-decided at once on the change.
            assert not await gone(kube, CONFIGMAPS, namespace, GO)
        for name in STAY:
            assert not await gone(kube, CONFIGMAPS, namespace, name), name
        assert deletes_of(proxy, STAY) == []
        await running.stop()  # before the proxy goes away (it would wait for open watches)
