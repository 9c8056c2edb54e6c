"""A LifecyclePolicy costs its namespace, not the cluster (docs/architecture.md#scoped-relists).

The controller watches ConfigMaps cluster-wide through the recording proxy
(:mod:`tests.faults.proxy`), so every request it sends is seen. Creating a LifecyclePolicy in
one namespace lists ConfigMaps again in that namespace only, exactly at the watch's
resourceVersion, and never cluster-wide (the watch runs on); the ConfigMap there that newly
matches is deleted, one in another namespace is untouched. Deleting the policy lists that
namespace once more. A LifecyclePolicy whose condition reads ``referencedBy`` opens the
reference watches in its namespace only: a ConfigMap no Pod there uses goes, one a Pod uses
stays.

Caught: any change of the policies that changed what is kept restarted the type's
cluster-wide informer (a streaming list of every ConfigMap of the cluster), and one
LifecyclePolicy reading ``referencedBy`` opened cluster-wide Pod and workload watches.
"""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator, Iterable
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any
from urllib.parse import parse_qs, urlsplit

from lifecycle_controller.devcluster import ControlPlane
from lifecycle_controller.kube import KubeClient
from lifecycle_controller.kube.resources import PODS, POLICIES
from tests.conftest import fresh_namespace
from tests.faults.proxy import FaultProxy
from tests.integration.controller import RunningController, StartController
from tests.integration.policy_tools import labelled, namespaced_policy
from tests.integration.scenario_support import create, gone, settle, wait_gone
from tests.integration.support import CONFIGMAPS, configmap, eventually

#: The collections the reference index reads (core and apps/batch workloads).
REFERRING = ("pods", "deployments", "statefulsets", "daemonsets", "replicasets", "jobs", "cronjobs")


def reads_of(
    arrived: Iterable[tuple[str, str, str]], plural: str
) -> list[tuple[str | None, dict[str, list[str]]]]:
    """(namespace or None for cluster-wide, query) of every list or watch of ``plural``."""
    found: list[tuple[str | None, dict[str, list[str]]]] = []
    for method, path_qs, _ in arrived:
        if method != "GET":
            continue
        url = urlsplit(path_qs)
        parts = url.path.strip("/").split("/")
        # /api/v1/<plural>, /apis/<group>/<version>/<plural>, and the same under namespaces/<ns>
        core = parts[:2] == ["api", "v1"]
        rest = parts[2:] if core else parts[3:] if parts[:1] == ["apis"] else None
        if rest == [plural]:
            found.append((None, parse_qs(url.query)))
        elif rest is not None and len(rest) == 3 and rest[0] == "namespaces" and rest[2] == plural:
            found.append((rest[1], parse_qs(url.query)))
    return found


@asynccontextmanager
async def proxied(
    control_plane: ControlPlane, start_controller: StartController, tmp_path: Path
) -> AsyncIterator[tuple[FaultProxy, RunningController]]:
    """The controller acting on ConfigMaps cluster-wide, every request through the proxy."""
    upstream = await asyncio.to_thread(
        control_plane.user_kubeconfig, "nsscope", groups=("system:masters",)
    )
    async with FaultProxy(upstream) as proxy:
        running = await start_controller(
            kubeconfig=proxy.kubeconfig(tmp_path / "proxied.kubeconfig"),
            watch_resource=["configmaps"],
        )
        try:
            yield proxy, running
        finally:
            await running.stop()


def scoped_policy(namespace: str, **spec: Any) -> dict[str, Any]:
    return namespaced_policy(
        "scoped", namespace, resources=["configmaps"], lifecycle={"delete-after": "1s"}, **spec
    )


async def test_a_lifecycle_policy_lists_its_namespace_again_never_the_cluster(
    policy_crds: None,
    control_plane: ControlPlane,
    start_controller: StartController,
    namespace: str,
    kube: KubeClient,
    tmp_path: Path,
) -> None:
    with fresh_namespace(control_plane) as other:
        await create(kube, CONFIGMAPS, namespace, labelled("matches", {"tier": "scoped"}))
        await create(kube, CONFIGMAPS, namespace, labelled("plain", {}))
        await create(kube, CONFIGMAPS, other, labelled("elsewhere", {"tier": "scoped"}))
        async with proxied(control_plane, start_controller, tmp_path) as (proxy, _):
            first = [scope for scope, _ in reads_of(proxy.arrived, "configmaps")]
            assert first.count(None) == 1  # the one cluster-wide list at start
            start = len(proxy.arrived)
            body = scoped_policy(namespace, selector={"matchLabels": {"tier": "scoped"}})
            await create(kube, POLICIES, namespace, body)
            await wait_gone(kube, CONFIGMAPS, namespace, "matches", within=60)
            # Other tests' policies share this control plane: their namespaces may be read
            # again meanwhile, but never the cluster, and this namespace exactly once.
            reads = reads_of(proxy.arrived[start:], "configmaps")
            assert None not in {scope for scope, _ in reads}  # never cluster-wide
            reads = [(scope, query) for scope, query in reads if scope == namespace]
            assert len(reads) == 1  # one list, in its namespace
            query = reads[0][1]
            assert query.get("resourceVersionMatch") == ["Exact"]
            assert "watch" not in query
            assert query.get("resourceVersion")

            removed = len(proxy.arrived)
            await kube.delete(POLICIES, namespace, "scoped")

            async def listed_again() -> bool:
                again = reads_of(proxy.arrived[removed:], "configmaps")
                return any(scope == namespace for scope, _ in again)

            await eventually(listed_again, within=30, what="the namespace listed again")
            await settle(1)
            reads = reads_of(proxy.arrived[start:], "configmaps")
            assert None not in {scope for scope, _ in reads}  # never cluster-wide
        assert not await gone(kube, CONFIGMAPS, namespace, "plain")
        assert not await gone(kube, CONFIGMAPS, other, "elsewhere")


def _pod(name: str, uses: str) -> dict[str, Any]:
    return {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {"name": name},
        "spec": {
            "containers": [
                {"name": "c", "image": "x", "envFrom": [{"configMapRef": {"name": uses}}]}
            ]
        },
    }


async def test_a_lifecycle_policy_reading_references_watches_its_namespace_only(
    policy_crds: None,
    control_plane: ControlPlane,
    start_controller: StartController,
    namespace: str,
    kube: KubeClient,
    tmp_path: Path,
) -> None:
    await create(kube, PODS, namespace, _pod("user", "used"))
    for name in ("used", "orphan"):
        await create(kube, CONFIGMAPS, namespace, configmap(name))
    async with proxied(control_plane, start_controller, tmp_path) as (proxy, _):
        start = len(proxy.arrived)
        body = scoped_policy(namespace, condition="size(referencedBy) == 0")
        await create(kube, POLICIES, namespace, body)
        await wait_gone(kube, CONFIGMAPS, namespace, "orphan", within=60)
        await settle(2)
        assert not await gone(kube, CONFIGMAPS, namespace, "used")
        for plural in REFERRING:
            scopes = {scope for scope, _ in reads_of(proxy.arrived[start:], plural)}
            # listed and watched there, never cluster-wide (other tests' policies on this
            # control plane may open their own namespaces meanwhile)
            assert namespace in scopes, plural
            assert None not in scopes, plural
