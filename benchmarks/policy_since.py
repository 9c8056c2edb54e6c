"""What a policy's ``since`` costs, on a real local control plane, beside floors.

    python -m benchmarks.policy_since --pods 20000 --configmaps 20000 --output benchmarks/results/

One control plane (no kube-controller-manager: its Pod garbage collector would delete the
terminated Pods) with the chart's policy CRDs. Every round starts ``lifecycle-controller run``
as a separate process and measures time to /readyz, RSS when ready and RSS once its reconciles
are quiet (RSS "settled"); medians of ``--rounds``.

**Failed Pods** (``--watch-resource=pods``): N Pods seeded through etcd over 50 namespaces
(the API takes a Pod's status only through a second write per Pod), two containers each,
every 10th ``Failed`` with both containers terminated in the last ten minutes, the others
``Running``. Three modes:

* **metadata**: no policy (the informers stay metadata-only);
* **metadata policy**: one ``ClusterLifecyclePolicy`` over Pods matching the same Pods by
  metadata alone (condition ``object.metadata.name.endsWith("0")``, ``delete-after`` ten years
  away): the informers stay metadata-only, the cache keeps a view of every Pod as with
  ``since`` (the baseline of the conditions benchmark, :mod:`benchmarks.policy_state`);
* **since**: one ``ClusterLifecyclePolicy`` over Pods, condition ``object.status.phase ==
  "Failed"``, since ``timestamp(object.status.containerStatuses[0].state.terminated
  .finishedAt)``, ``delete-after: 1h`` (nothing falls due during the run: the benchmark checks
  that every Pod is still there).

Floors before every round, each by a plain client in a process of its own
(:mod:`benchmarks.floor_list`, timed from just before its start, as the controller's time to
ready is), listing what the controller lists before it is ready: the Namespaces' metadata and
both policy kinds whole, beside the Pods as a metadata-only streaming list (the floor of the
metadata run) or whole in JSON (pages of 500, decoded and dropped: the floor of the since run,
whose informer must read ``status``). Targets: since RSS at most 1.3 times the metadata
policy run's (also reported against the run without a policy); since time to ready at most 1.5
times the whole-object floor.

**matchedAt** (``--watch-resource=configmaps``): M ConfigMaps seeded through etcd, one
``ClusterLifecyclePolicy`` over ConfigMaps with no condition (``delete-after`` ten years): in
mode **policy** without ``since``, in mode **since** with ``since: matchedAt``, in mode
**persisted** with ``since: matchedAt`` and ``--persist-observations``. Memory per tracked
object: (settled RSS of since - settled RSS of policy) / the matched objects. Writes of the
matchedAt store while nothing changes (``lifecycle_matched_at_writes_total`` over ``--idle``
seconds, from once the first records are written; the goal is none).

Writes ``policy-since.json`` and ``policy-since.md``.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import json
import time
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import aiohttp

from benchmarks.cluster import _Running, _start
from benchmarks.cluster_floors import run_floor
from benchmarks.cluster_measure import BENCH_AGENT
from benchmarks.cluster_objects import NAMESPACE_COUNT
from benchmarks.etcd_seed import Seeded, seed_configmaps, seed_pairs, served_count
from benchmarks.policies import settled
from benchmarks.policy_state import _medians
from lifecycle_controller.devcluster import ControlPlane
from lifecycle_controller.devcluster.policy_crds import install_policy_crds
from lifecycle_controller.devcluster.storage_encoding import (
    ContainerRun,
    pod_spec,
    pod_status,
    pod_storage_bytes,
)
from lifecycle_controller.kube import (
    NAMESPACES,
    KubeClient,
    NotFound,
    ResourceType,
)
from lifecycle_controller.kube.resources import CLUSTER_POLICIES, CONFIGMAPS, PODS, POLICIES

POLICY = "since-bench"
FAILED_EVERY = 10
FAILED_PODS = {
    "resources": ["pods"],
    "condition": 'object.status.phase == "Failed"',
    "since": "timestamp(object.status.containerStatuses[0].state.terminated.finishedAt)",
    "lifecycle": {"delete-after": "1h"},
}
#: The same Pods (``p-...0``: every 10th) matched on metadata alone, nothing falling due.
BY_NAME = {
    "resources": ["pods"],
    "condition": 'object.metadata.name.endsWith("0")',
    "lifecycle": {"delete-after": "87600h"},
}
UNUSED = {"resources": ["configmaps"], "lifecycle": {"delete-after": "87600h"}}
MATCHED_AT_MODES = {
    "policy": ({}, ()),
    "since": ({"since": "matchedAt"}, ()),
    "persisted": ({"since": "matchedAt"}, ("--persist-observations",)),
}
_IMAGES = ("registry.invalid/team/app:1.2.3", "registry.invalid/team/sidecar:4.5.6")
_ENV = {f"SETTING_{i}": f"value-{i}" for i in range(6)}


def _namespaces(prefix: str) -> list[str]:
    return [f"{prefix}-{i:02d}" for i in range(NAMESPACE_COUNT)]


def pods(namespaces: list[str], count: int, now: int) -> Iterator[tuple[bytes, bytes]]:
    """(registry key, stored Pod) of ``count`` Pods, every :data:`FAILED_EVERY` th failed in
    the last ten minutes."""
    spec = pod_spec([("app", _IMAGES[0], _ENV), ("sidecar", _IMAGES[1], _ENV)])
    for i in range(count):
        namespace, name, uid = namespaces[i % len(namespaces)], f"p-{i:06d}", str(uuid.uuid4())
        started = now - 3600
        failed = i % FAILED_EVERY == 0
        finished = now - 600 + i % 600 if failed else None
        runs = [
            ContainerRun(c, image, started, finished)
            for c, image in zip(("app", "sidecar"), _IMAGES, strict=True)
        ]
        status = pod_status("Failed" if failed else "Running", started, runs, uid)
        stored = pod_storage_bytes(
            namespace,
            name,
            uid=uid,
            created=started,
            spec=spec,
            status=status,
            labels={"app": "bench"},
        )
        yield f"/registry/pods/{namespace}/{name}".encode(), stored


async def _create_namespaces(kube: KubeClient, names: list[str]) -> None:
    for ns in names:
        await kube.create(
            NAMESPACES, None, {"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": ns}}
        )


async def _served(kube: KubeClient, resource: ResourceType, want: int, limit: float = 300) -> None:
    deadline = time.perf_counter() + limit
    while (count := await served_count(kube, resource)) < want:
        if time.perf_counter() > deadline:
            raise RuntimeError(f"the API server serves {count} {resource.resource}, not {want}")
        await asyncio.sleep(1.0)


async def seed_pods(kube: KubeClient, etcd_url: str, count: int) -> float:
    """Seed the Pods through etcd; seconds until the API server serves them all, the first
    failed one read back whole with its container's ``finishedAt``."""
    started = time.perf_counter()
    namespaces = _namespaces("pods")
    await _create_namespaces(kube, namespaces)
    await seed_pairs(etcd_url, pods(namespaces, count, int(time.time())))
    await _served(kube, PODS, count)
    first = await kube.get(PODS, namespaces[0], "p-000000")
    terminated = first["status"]["containerStatuses"][0]["state"]["terminated"]
    if first["status"]["phase"] != "Failed" or not terminated.get("finishedAt"):
        raise RuntimeError(f"a seeded Pod reads back as {first['status']}")
    return time.perf_counter() - started


def _configmaps(namespaces: list[str], count: int) -> Iterator[Seeded]:
    for i in range(count):
        yield namespaces[i % len(namespaces)], f"cm-{i:06d}", {}


async def seed_unused(kube: KubeClient, etcd_url: str, count: int) -> float:
    started = time.perf_counter()
    namespaces = _namespaces("cms")
    await _create_namespaces(kube, namespaces)
    before = await served_count(kube, CONFIGMAPS)
    await seed_configmaps(etcd_url, _configmaps(namespaces, count), payload={"payload": "x" * 512})
    await _served(kube, CONFIGMAPS, before + count)
    return time.perf_counter() - started


WRITES = "lifecycle_matched_at_writes_total"


async def _scrape_total(
    session: aiohttp.ClientSession, url: str, name: str, within: str = ""
) -> float:
    """The sum of the series of ``name`` whose line holds ``within``."""
    async with session.get(url) as response:
        text = await response.text()
    return sum(
        float(line.rsplit(" ", 1)[1])
        for line in text.splitlines()
        if line.startswith(name) and within in line
    )


async def _matched(session: aiohttp.ClientSession, url: str, want: int) -> float:
    """Wait (up to 60 s) until the policy's matched gauge, written every few seconds, says
    ``want``; its value."""
    deadline = time.perf_counter() + 60
    while True:
        matched = await _scrape_total(session, url, "lifecycle_policy_matched_objects{", POLICY)
        if matched >= want or time.perf_counter() > deadline:
            return matched
        await asyncio.sleep(0.5)


async def _quiet_writes(session: aiohttp.ClientSession, url: str, quiet: float) -> float:
    """Wait until the matchedAt store wrote and then did not write for ``quiet`` seconds;
    its writes so far."""
    last, still_since = await _scrape_total(session, url, WRITES), time.perf_counter()
    while last == 0 or time.perf_counter() - still_since < quiet:
        await asyncio.sleep(0.5)
        now = await _scrape_total(session, url, WRITES)
        if now != last:
            last, still_since = now, time.perf_counter()
    return last


async def controller_round(
    plane: ControlPlane,
    args: argparse.Namespace,
    resource: str,
    want: int,
    flags: tuple[str, ...] = (),
    idle: float = 0.0,
) -> dict[str, Any]:
    """One start: ready, RSS ready and settled (reconciles quiet and the policy's matched
    gauge at ``want``); with ``idle``, the matchedAt store's writes in that many seconds once
    its first records are written."""
    running: _Running = _start(plane, args, resources=(resource,), flags=flags)
    try:
        at_ready = await running.until_ready()
        assert running.sampler.ready_at is not None
        async with aiohttp.ClientSession() as session:
            quiet = await settled(session, running.metrics_url)
            out: dict[str, Any] = {
                "ready_s": round(running.sampler.ready_at, 3),
                "rss_ready_mb": round(at_ready.rss_mb, 1),
                "matched": await _matched(session, running.metrics_url, want),
                "reconciles": quiet["reconciles"],
            }
            out["rss_settled_mb"] = round(running.sampler.last().rss_mb, 1)
            if idle:
                written = await _quiet_writes(session, running.metrics_url, 12.0)
                await asyncio.sleep(idle)
                idle_writes = await _scrape_total(session, running.metrics_url, WRITES) - written
                out["writes_before_idle"] = written
                out["idle_writes_per_min"] = round(idle_writes * 60 / idle, 2)
        out["hwm_mb"] = round(running.sampler.last().hwm_mb, 1)
        return out
    finally:
        await running.stop()


async def list_floor(kubeconfig: Path, pods: str) -> dict[str, Any]:
    """What the controller lists before ready, by a plain client in a process of its own,
    the Pods as ``pods`` (``--path``: a metadata-only stream, ``--whole-path``: whole);
    ``process_s`` from just before its start to its last list's end."""
    spawned = time.time()
    floor = await run_floor(
        kubeconfig,
        [
            f"{pods}={PODS.collection_path(None)}",
            f"--path={NAMESPACES.collection_path(None)}",
            f"--whole-path={POLICIES.collection_path(None)}",
            f"--whole-path={CLUSTER_POLICIES.collection_path(None)}",
        ],
        module="benchmarks.floor_list",
    )
    return {
        "process_s": round(float(floor["done_at"]) - spawned, 3),
        "lists_s": floor["seconds"],
        "pods_mb": round(floor["bytes"][PODS.collection_path(None)] / 1e6, 1),
    }


async def pods_round(plane: ControlPlane, args: argparse.Namespace, want: int) -> dict[str, Any]:
    metadata = await list_floor(plane.admin_kubeconfig, "--path")
    whole = await list_floor(plane.admin_kubeconfig, "--whole-path")
    out = await controller_round(plane, args, "pods", want)
    out |= {
        "metadata_floor_s": metadata["process_s"],
        "metadata_lists_s": metadata["lists_s"],
        "whole_floor_s": whole["process_s"],
        "whole_lists_s": whole["lists_s"],
        "whole_list_mb": whole["pods_mb"],
    }
    return out


def _policy(spec: dict[str, Any]) -> dict[str, Any]:
    return {
        "apiVersion": "lifecycle.cezary.dev/v1alpha1",
        "kind": "ClusterLifecyclePolicy",
        "metadata": {"name": POLICY},
        "spec": spec,
    }


async def _replace_policy(kube: KubeClient, spec: dict[str, Any] | None) -> None:
    """The benchmark's policy gone, then (with ``spec``) created anew."""
    with contextlib.suppress(NotFound):
        await kube.delete(CLUSTER_POLICIES, None, POLICY)
    if spec is not None:
        await kube.create(CLUSTER_POLICIES, None, _policy(spec))


async def measure_pods(
    plane: ControlPlane, kube: KubeClient, args: argparse.Namespace
) -> dict[str, Any]:
    result: dict[str, Any] = {"pods": args.pods, "failed": len(range(0, args.pods, FAILED_EVERY))}
    result["seed_s"] = round(await seed_pods(kube, plane.etcd_url, args.pods), 1)
    modes = (
        ("metadata", None, 0),
        ("metadata_policy", BY_NAME, result["failed"]),
        ("since", FAILED_PODS, result["failed"]),
    )
    for mode, spec, want in modes:
        await _replace_policy(kube, spec)
        result[mode] = _medians([await pods_round(plane, args, want) for _ in range(args.rounds)])
    await _replace_policy(kube, None)
    left = await served_count(kube, PODS)
    if left != args.pods:
        raise RuntimeError(f"{args.pods - left} Pods were deleted during the run")
    meta, since = result["metadata"], result["since"]
    by_name = result["metadata_policy"]
    result["rss_ratio"] = round(since["rss_ready_mb"] / by_name["rss_ready_mb"], 3)
    result["rss_settled_ratio"] = round(since["rss_settled_mb"] / by_name["rss_settled_mb"], 3)
    result["rss_no_policy_ratio"] = round(since["rss_ready_mb"] / meta["rss_ready_mb"], 3)
    result["since_ready_ratio"] = round(since["ready_s"] / since["whole_floor_s"], 3)
    result["metadata_ready_ratio"] = round(meta["ready_s"] / meta["metadata_floor_s"], 3)
    result["metadata_policy_ready_ratio"] = round(
        by_name["ready_s"] / by_name["metadata_floor_s"], 3
    )
    return result


async def measure_matched_at(
    plane: ControlPlane, kube: KubeClient, args: argparse.Namespace
) -> dict[str, Any]:
    result: dict[str, Any] = {"configmaps": args.configmaps}
    result["seed_s"] = round(await seed_unused(kube, plane.etcd_url, args.configmaps), 1)
    for mode, (since, flags) in MATCHED_AT_MODES.items():
        await _replace_policy(kube, UNUSED | since)
        idle = args.idle if flags else 0.0
        result[mode] = _medians(
            [
                await controller_round(plane, args, "configmaps", args.configmaps, flags, idle)
                for _ in range(args.rounds)
            ]
        )
    await _replace_policy(kube, None)
    tracked = result["since"]["matched"]
    for mode in ("since", "persisted"):
        extra = result[mode]["rss_settled_mb"] - result["policy"]["rss_settled_mb"]
        result[f"{mode}_bytes_per_object"] = round(extra * 1e6 / tracked) if tracked else None
    return result


async def measure(plane: ControlPlane, args: argparse.Namespace) -> dict[str, Any]:
    async with await KubeClient.connect(
        str(plane.admin_kubeconfig), user_agent=BENCH_AGENT
    ) as kube:
        await asyncio.to_thread(install_policy_crds, plane)
        run: dict[str, Any] = {"rounds": args.rounds, "idle_s": args.idle}
        if args.pods:
            run["failed_pods"] = await measure_pods(plane, kube, args)
        if args.configmaps:
            run["matched_at"] = await measure_matched_at(plane, kube, args)
        return run


def _report(run: dict[str, Any]) -> str:
    lines: list[str] = []
    pods_run = run.get("failed_pods")
    if pods_run:
        meta, since = pods_run["metadata"], pods_run["since"]
        lines += [
            f"Failed Pods: {pods_run['pods']:,} Pods ({pods_run['failed']:,} failed), "
            f"medians of {run['rounds']} starts per mode.",
            "",
            "| mode | ready | list floor | ready ÷ floor | RSS ready / settled |",
            "|---|---|---|---|---|",
            f"| no policy (metadata) | {meta['ready_s']} s | {meta['metadata_floor_s']} s "
            f"(Pods' metadata) | {pods_run['metadata_ready_ratio']}x | "
            f"{meta['rss_ready_mb']} / {meta['rss_settled_mb']} MB |",
            f"| the same Pods matched by name (metadata policy) | "
            f"{pods_run['metadata_policy']['ready_s']} s | "
            f"{pods_run['metadata_policy']['metadata_floor_s']} s (Pods' metadata) | "
            f"{pods_run['metadata_policy_ready_ratio']}x | "
            f"{pods_run['metadata_policy']['rss_ready_mb']} / "
            f"{pods_run['metadata_policy']['rss_settled_mb']} MB |",
            f"| failed-Pods policy with since | {since['ready_s']} s | "
            f"{since['whole_floor_s']} s (Pods whole, {since['whole_list_mb']} MB) | "
            f"{pods_run['since_ready_ratio']}x | "
            f"{since['rss_ready_mb']} / {since['rss_settled_mb']} MB |",
            f"| since ÷ metadata policy RSS | | | | {pods_run['rss_ratio']}x (settled "
            f"{pods_run['rss_settled_ratio']}x; ÷ no policy {pods_run['rss_no_policy_ratio']}x) |",
            "",
        ]
    matched = run.get("matched_at")
    if matched:
        lines += [
            f"matchedAt: {matched['configmaps']:,} ConfigMaps, one policy with no condition, "
            f"medians of {run['rounds']} starts per mode.",
            "",
            "| mode | matched | ready | RSS ready / settled | bytes per tracked object | "
            "matchedAt writes / min idle |",
            "|---|---|---|---|---|---|",
        ]
        for mode in MATCHED_AT_MODES:
            one = matched[mode]
            per = matched.get(f"{mode}_bytes_per_object")
            lines.append(
                f"| {mode} | {one['matched']:,.0f} | {one['ready_s']} s | "
                f"{one['rss_ready_mb']} / {one['rss_settled_mb']} MB | "
                f"{'' if per is None else f'{per:,}'} | {one.get('idle_writes_per_min', '')} |"
            )
        lines.append("")
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(
        prog="python -m benchmarks.policy_since", description=__doc__.split("\n\n")[0]
    )
    parser.add_argument("--pods", type=int, default=20000, help="Pods (0: skip)")
    parser.add_argument("--configmaps", type=int, default=20000, help="ConfigMaps (0: skip)")
    parser.add_argument("--output", type=Path, default=Path("benchmarks/results"))
    parser.add_argument("--rounds", type=int, default=3, help="controller starts per mode")
    parser.add_argument("--idle", type=float, default=60.0, help="seconds of idle writes")
    parser.add_argument("--report-name", default="policy-since")
    parser.add_argument("--controller-source", help="run the controller from this folder")
    parser.add_argument("--controller-python", help="run the controller with this interpreter")
    args = parser.parse_args(argv)
    with ControlPlane(
        audit_log=False, controller_manager=False, etcd_max_txn_ops=1000, log=lambda line: None
    ) as plane:
        run = asyncio.run(measure(plane, args))
    print(json.dumps(run, indent=1))
    args.output.mkdir(parents=True, exist_ok=True)
    (args.output / f"{args.report_name}.json").write_text(json.dumps(run, indent=2) + "\n")
    (args.output / f"{args.report_name}.md").write_text(_report(run))
    print(f"wrote {args.output}/{args.report_name}.json and {args.report_name}.md")


if __name__ == "__main__":
    main()
