"""What ``referencedBy`` costs, on a real local control plane, beside its floor.

    python -m benchmarks.references --configmaps 20000 --pods 5000 --output benchmarks/results/

One control plane with the chart's policy CRDs, N ConfigMaps over 50 namespaces and M Pods
(no node: they stay Pending), each Pod using one ConfigMap through ``envFrom`` and one
through a volume, so 2M ConfigMaps are used and the rest not. The floor, with a plain
client: list the ConfigMaps' metadata and the Pods whole (pages of 500), read each Pod's
references (:func:`~lifecycle_controller.core.objects.pod_references.pod_spec_references`) and keep
them. Each round then starts ``lifecycle-controller run --watch-resource=configmaps`` as a
separate process with one ``ClusterLifecyclePolicy`` whose condition is
``size(referencedBy) == 0`` (``delete-after`` ten years: nothing becomes due), and measures
time to /readyz, RSS when ready and the peak, and time until the policy's matched gauge
counts every unused ConfigMap (the index synced and every ConfigMap decided; the gauge is
written with the policy status, every few seconds, so this figure is coarse).

Writes ``references.json`` and ``references.md``. See benchmarks/README.md.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import statistics
import time
from pathlib import Path
from typing import Any

import aiohttp

from benchmarks.cluster import _start
from benchmarks.cluster_measure import BENCH_AGENT, PlainClient
from benchmarks.cluster_objects import CONFIGMAPS, NAMESPACE_COUNT, gather_limited
from benchmarks.policies import reported
from lifecycle_controller.core.objects.pod_references import pod_spec_references
from lifecycle_controller.devcluster import ControlPlane
from lifecycle_controller.devcluster.policy_crds import install_policy_crds
from lifecycle_controller.kube import NAMESPACES, KubeClient, load_configuration
from lifecycle_controller.kube.client import ClusterConfig
from lifecycle_controller.kube.resources import CLUSTER_POLICIES, PODS

POLICY = "scratch-configmaps"  # the name benchmarks.policies.scrape follows


def _policy() -> dict[str, Any]:
    return {
        "apiVersion": "lifecycle.cezary.dev/v1alpha1",
        "kind": "ClusterLifecyclePolicy",
        "metadata": {"name": POLICY},
        "spec": {
            "resources": ["configmaps"],
            "namespaces": ["bench-*"],
            "condition": "size(referencedBy) == 0",
            "lifecycle": {"delete-after": "87600h"},
        },
    }


def _pod(name: str, first: str, second: str) -> dict[str, Any]:
    return {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {"name": name},
        "spec": {
            "containers": [
                {"name": "c", "image": "x", "envFrom": [{"configMapRef": {"name": first}}]}
            ],
            "volumes": [{"name": "v", "configMap": {"name": second}}],
        },
    }


async def populate(kube: KubeClient, configmaps: int, pods: int) -> float:
    started = time.perf_counter()
    namespaces = [f"bench-{i:02d}" for i in range(NAMESPACE_COUNT)]
    for ns in namespaces:
        await kube.create(
            NAMESPACES, None, {"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": ns}}
        )
    work = []
    for i in range(configmaps):
        body = {"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": f"cm-{i:06d}"}}
        work.append(kube.create(CONFIGMAPS, namespaces[i % NAMESPACE_COUNT], body))
    for i in range(pods):  # the k-th Pod of namespace n uses ConfigMaps (2k)*50+n, (2k+1)*50+n
        k, n = divmod(i, NAMESPACE_COUNT)
        ns = namespaces[n]
        first, second = 2 * k * NAMESPACE_COUNT + n, (2 * k + 1) * NAMESPACE_COUNT + n
        body = _pod(f"pod-{i:06d}", f"cm-{first:06d}", f"cm-{second:06d}")
        work.append(kube.create(PODS, ns, body))
    await gather_limited(work)
    return time.perf_counter() - started


async def reference_floor(config: ClusterConfig) -> dict[str, Any]:
    """ConfigMaps' metadata and every Pod whole, paged, each Pod's references kept."""
    started = time.perf_counter()
    kept: dict[tuple[str, str], frozenset[tuple[str, str]]] = {}
    async with PlainClient(config) as plain:
        await plain.list_all(CONFIGMAPS)
        token = ""
        while True:
            params = [("limit", "500")] + ([("continue", token)] if token else [])
            _, raw = await plain.call("GET", PODS.collection_path(None), params=params)
            page = json.loads(raw)
            for pod in page.get("items") or ():
                meta = pod["metadata"]
                kept[(meta["namespace"], meta["name"])] = pod_spec_references(pod.get("spec"))
            token = page.get("metadata", {}).get("continue") or ""
            if not token:
                break
    return {"seconds": round(time.perf_counter() - started, 3), "pods": len(kept)}


async def measure(
    plane: ControlPlane, configmaps: int, pods: int, args: argparse.Namespace
) -> dict[str, Any]:
    unused = configmaps - min(configmaps, 2 * pods)
    result: dict[str, Any] = {"configmaps": configmaps, "pods": pods, "unused": unused}
    config, _ = await load_configuration(str(plane.admin_kubeconfig))
    async with (
        await KubeClient.connect(str(plane.admin_kubeconfig), user_agent=BENCH_AGENT) as kube,
        aiohttp.ClientSession(timeout=aiohttp.ClientTimeout(total=5)) as session,
    ):
        await asyncio.to_thread(install_policy_crds, plane)
        result["create_s"] = round(await populate(kube, configmaps, pods), 1)
        await kube.create(CLUSTER_POLICIES, None, _policy())
        rounds = []
        for _ in range(args.rounds):
            floor = await reference_floor(config)
            running = _start(plane, args, resources=("configmaps",))
            try:
                at_ready = await running.until_ready()
                assert running.sampler.ready_at is not None
                matched = await reported(session, running.metrics_url, unused)
                decided = time.time() - running.started
                rounds.append(
                    {
                        "ready_s": round(running.sampler.ready_at, 3),
                        "decided_s": round(decided, 3),
                        "matched": matched,
                        "floor_s": floor["seconds"],
                        "ratio": round(running.sampler.ready_at / floor["seconds"], 3),
                        "decided_ratio": round(decided / floor["seconds"], 3),
                        "rss_ready_mb": round(at_ready.rss_mb, 1),
                        "rss_decided_mb": round(running.sampler.last().rss_mb, 1),
                        "hwm_mb": round(running.sampler.last().hwm_mb, 1),
                    }
                )
            finally:
                await running.stop()
    keys = ("ready_s", "decided_s", "floor_s", "ratio", "decided_ratio", "rss_ready_mb")
    result.update({k: round(statistics.median(r[k] for r in rounds), 3) for k in keys})
    result["rss_decided_mb"] = round(statistics.median(r["rss_decided_mb"] for r in rounds), 1)
    result["hwm_max_mb"] = max(r["hwm_mb"] for r in rounds)
    result["rounds"] = rounds
    return result


def _report(run: dict[str, Any]) -> str:
    return (
        "| ConfigMaps (unused) | Pods | ready (floor) | ratio | all decided | ratio "
        "| RSS ready / decided | peak |\n|---|---|---|---|---|---|---|---|\n"
        f"| {run['configmaps']:,} ({run['unused']:,}) | {run['pods']:,} | {run['ready_s']} s "
        f"({run['floor_s']} s) | {run['ratio']}x | {run['decided_s']} s | "
        f"{run['decided_ratio']}x | {run['rss_ready_mb']} / {run['rss_decided_mb']} MB | "
        f"{run['hwm_max_mb']} MB |\n"
    )


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(
        prog="python -m benchmarks.references", description=__doc__.split("\n\n")[0]
    )
    parser.add_argument("--configmaps", type=int, default=20000)
    parser.add_argument("--pods", type=int, default=5000)
    parser.add_argument("--output", type=Path, default=Path("benchmarks/results"))
    parser.add_argument("--rounds", type=int, default=3, help="controller starts")
    parser.add_argument("--controller-source", help="run the controller from this folder")
    parser.add_argument("--controller-python", help="run the controller with this interpreter")
    args = parser.parse_args(argv)
    with ControlPlane(audit_log=False, log=lambda line: None) as plane:
        run = asyncio.run(measure(plane, args.configmaps, args.pods, args))
    print(json.dumps({k: v for k, v in run.items() if k != "rounds"}), flush=True)
    args.output.mkdir(parents=True, exist_ok=True)
    (args.output / "references.json").write_text(json.dumps(run, indent=2) + "\n")
    (args.output / "references.md").write_text(_report(run))
    print(f"wrote {args.output}/references.json and references.md")


if __name__ == "__main__":
    main()
