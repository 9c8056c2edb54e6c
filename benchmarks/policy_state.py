"""What a condition over ``object.spec`` costs, on a real local control plane, beside floors.

    python -m benchmarks.policy_state --objects 20000 --output benchmarks/results/

One control plane (no kube-controller-manager: the Deployments get no ReplicaSets or Pods)
with the chart's policy CRDs and N Deployments over 50 namespaces, every 10th scaled to zero,
each with a Pod template of a realistic size (two containers, env, probes, resources). Each
round starts ``lifecycle-controller run --watch-resource=deployments.apps`` as a separate
process and measures time to /readyz and RSS when ready, in two modes with one
``ClusterLifecyclePolicy`` over every Deployment (``delete-after`` ten years: nothing becomes
due):

* **metadata**: condition ``object.metadata.name != ""``: every Deployment is kept, with the
  metadata matching reads, and the informers stay metadata-only (protobuf, streaming list);
* **spec**: condition ``object.spec.replicas == 0``: the informers list and watch whole
  objects in JSON (paged) and keep ``spec.replicas`` of each beside the same metadata.

Floors, measured before every round: the plain metadata-only list (pages of 500) and the plain
whole-object JSON list (pages of 500, each page decoded and dropped), the least a client must
do to read ``spec.replicas`` of every Deployment. Targets: spec RSS at most 1.3 times the
metadata RSS; spec time to ready at most 1.5 times its list floor (the whole-object list).
Writes ``policy-state.json`` and ``policy-state.md``.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import statistics
import time
from pathlib import Path
from typing import Any

from benchmarks.cluster import _Running, _start
from benchmarks.cluster_measure import BENCH_AGENT, PlainClient
from benchmarks.cluster_objects import DEPLOYMENTS, NAMESPACE_COUNT, gather_limited
from lifecycle_controller.devcluster import ControlPlane
from lifecycle_controller.devcluster.policy_crds import install_policy_crds
from lifecycle_controller.kube import (
    NAMESPACES,
    ClusterConfig,
    KubeClient,
    ResourceType,
    load_configuration,
)
from lifecycle_controller.kube.resources import CLUSTER_POLICIES

POLICY = "scaled-to-zero"
ZERO_EVERY = 10
CONDITIONS = {"metadata": 'object.metadata.name != ""', "spec": "object.spec.replicas == 0"}


def _policy(condition: str) -> dict[str, Any]:
    return {
        "apiVersion": "lifecycle.cezary.dev/v1alpha1",
        "kind": "ClusterLifecyclePolicy",
        "metadata": {"name": POLICY},
        "spec": {
            "resources": ["deployments.apps"],
            "condition": condition,
            "lifecycle": {"delete-after": "87600h"},
        },
    }


def _container(name: str) -> dict[str, Any]:
    return {
        "name": name,
        "image": f"registry.invalid/team/{name}:1.2.3",
        "ports": [{"containerPort": 8080, "name": "http"}],
        "env": [{"name": f"SETTING_{i}", "value": f"value-{i}"} for i in range(6)],
        "resources": {"requests": {"cpu": "100m", "memory": "128Mi"}},
        "readinessProbe": {"httpGet": {"path": "/ready", "port": "http"}},
    }


def deployment(namespace: str, name: str, replicas: int) -> dict[str, Any]:
    labels = {"app": name, "team": "bench"}
    return {
        "apiVersion": "apps/v1",
        "kind": "Deployment",
        "metadata": {"name": name, "namespace": namespace, "labels": labels},
        "spec": {
            "replicas": replicas,
            "selector": {"matchLabels": {"app": name}},
            "template": {
                "metadata": {"labels": labels},
                "spec": {"containers": [_container("app"), _container("sidecar")]},
            },
        },
    }


async def populate(kube: KubeClient, objects: int) -> float:
    started = time.perf_counter()
    namespaces = [f"bench-{i:02d}" for i in range(NAMESPACE_COUNT)]
    for ns in namespaces:
        await kube.create(
            NAMESPACES, None, {"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": ns}}
        )
    work = []
    for i in range(objects):
        ns = namespaces[i % NAMESPACE_COUNT]
        replicas = 0 if i % ZERO_EVERY == 0 else 1
        work.append(kube.create(DEPLOYMENTS, ns, deployment(ns, f"d-{i:06d}", replicas)))
    await gather_limited(work)
    return time.perf_counter() - started


async def whole_list(config: ClusterConfig, resource: ResourceType) -> tuple[float, int]:
    """Seconds to list every object whole in JSON (pages of 500, decoded and dropped)."""
    async with PlainClient(config) as plain:
        started = time.perf_counter()
        token, received = "", 0
        while True:
            params = [("limit", "500")] + ([("continue", token)] if token else [])
            _, raw = await plain.call("GET", resource.collection_path(None), params=params)
            received += len(raw)
            page = json.loads(raw)
            token = page.get("metadata", {}).get("continue") or ""
            if not token:
                return time.perf_counter() - started, received


async def metadata_list(config: ClusterConfig, resource: ResourceType) -> float:
    async with PlainClient(config) as plain:
        started = time.perf_counter()
        await plain.list_all(resource)
        return time.perf_counter() - started


async def one_round(plane: ControlPlane, args: argparse.Namespace, config: Any) -> dict[str, Any]:
    metadata_s = await metadata_list(config, DEPLOYMENTS)
    whole_s, whole_bytes = await whole_list(config, DEPLOYMENTS)
    running: _Running = _start(plane, args, resources=("deployments.apps",))
    try:
        at_ready = await running.until_ready()
        assert running.sampler.ready_at is not None
        await asyncio.sleep(args.settle)
        settled = running.sampler.last()
        return {
            "ready_s": round(running.sampler.ready_at, 3),
            "metadata_floor_s": round(metadata_s, 3),
            "whole_floor_s": round(whole_s, 3),
            "whole_list_mb": round(whole_bytes / 1e6, 1),
            "rss_ready_mb": round(at_ready.rss_mb, 1),
            "rss_settled_mb": round(settled.rss_mb, 1),
            "hwm_mb": round(settled.hwm_mb, 1),
        }
    finally:
        await running.stop()


def _medians(rounds: list[dict[str, Any]]) -> dict[str, Any]:
    out: dict[str, Any] = {
        key: round(statistics.median(r[key] for r in rounds), 3)
        for key in rounds[0]
        if isinstance(rounds[0][key], int | float)
    }
    out["rounds"] = rounds
    return out


async def measure(plane: ControlPlane, objects: int, args: argparse.Namespace) -> dict[str, Any]:
    result: dict[str, Any] = {"objects": objects, "scaled_to_zero": objects // ZERO_EVERY}
    config, _ = await load_configuration(str(plane.admin_kubeconfig))
    async with await KubeClient.connect(
        str(plane.admin_kubeconfig), user_agent=BENCH_AGENT
    ) as kube:
        await asyncio.to_thread(install_policy_crds, plane)
        result["create_s"] = round(await populate(kube, objects), 1)
        await kube.create(CLUSTER_POLICIES, None, _policy(CONDITIONS["metadata"]))
        for mode, condition in CONDITIONS.items():
            await kube.merge_patch(
                CLUSTER_POLICIES, None, POLICY, {"spec": {"condition": condition}}
            )
            result[mode] = _medians(
                [await one_round(plane, args, config) for _ in range(args.rounds)]
            )
    meta, spec = result["metadata"], result["spec"]
    result["rss_ratio"] = round(spec["rss_ready_mb"] / meta["rss_ready_mb"], 3)
    result["rss_settled_ratio"] = round(spec["rss_settled_mb"] / meta["rss_settled_mb"], 3)
    result["spec_ready_ratio"] = round(spec["ready_s"] / spec["whole_floor_s"], 3)
    result["metadata_ready_ratio"] = round(meta["ready_s"] / meta["metadata_floor_s"], 3)
    return result


def _report(runs: list[dict[str, Any]]) -> str:
    lines = [
        "| Deployments | condition reads | ready | list floor | ratio | RSS ready / settled |",
        "|---|---|---|---|---|---|",
    ]
    for run in runs:
        for mode, floor in (("metadata", "metadata_floor_s"), ("spec", "whole_floor_s")):
            one = run[mode]
            lines.append(
                f"| {run['objects']:,} | {mode} | {one['ready_s']} s | {one[floor]} s "
                f"({'metadata' if mode == 'metadata' else 'whole objects'}) | "
                f"{round(one['ready_s'] / one[floor], 2)}x | "
                f"{one['rss_ready_mb']} / {one['rss_settled_mb']} MB |"
            )
        lines.append(
            f"| | spec ÷ metadata RSS | | | {run['rss_ratio']}x (settled "
            f"{run['rss_settled_ratio']}x) | |"
        )
    return "\n".join(lines) + "\n"


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(
        prog="python -m benchmarks.policy_state", description=__doc__.split("\n\n")[0]
    )
    parser.add_argument("--objects", default="20000", help="Deployment counts, comma-separated")
    parser.add_argument("--output", type=Path, default=Path("benchmarks/results"))
    parser.add_argument("--rounds", type=int, default=3, help="controller starts per mode")
    parser.add_argument("--settle", type=float, default=5.0, help="seconds after ready for RSS")
    parser.add_argument("--controller-source", help="run the controller from this folder")
    parser.add_argument("--controller-python", help="run the controller with this interpreter")
    args = parser.parse_args(argv)
    runs = []
    for objects in (int(v) for v in args.objects.split(",")):
        with ControlPlane(
            audit_log=False, controller_manager=False, log=lambda line: None
        ) as plane:
            run = asyncio.run(measure(plane, objects, args))
        runs.append(run)
        print(json.dumps({k: v for k, v in run.items() if k not in CONDITIONS}))
        for mode in CONDITIONS:
            print(mode, {k: v for k, v in run[mode].items() if k != "rounds"}, flush=True)
    args.output.mkdir(parents=True, exist_ok=True)
    (args.output / "policy-state.json").write_text(json.dumps(runs, indent=2) + "\n")
    (args.output / "policy-state.md").write_text(_report(runs))
    print(f"wrote {args.output}/policy-state.json and policy-state.md")


if __name__ == "__main__":
    main()
