"""What many lifecycle policies cost, on a real local control plane, beside the same run
without them.

    python -m benchmarks.policies_many --objects 20000 --policies 1000 --output benchmarks/results/

One control plane with the chart's policy CRDs and N ConfigMaps of 512 B over 50 namespaces.
Each round alternates ``--starts`` list floors with as many starts of ``lifecycle-controller
run --watch-resource=configmaps`` as a separate process, each timed to /readyz (all but the
last stopped once ready), then measures the last one's CPU while idle (after the reconciles
that follow ready are done). The headline ratio is the median of every start of a mode over
the median of every floor (the ratio of the medians): one floor is as noisy as one start on
a 2-core machine (the API server streams a large list at one of two speeds), so a round's
own ratio, also reported, swings with which speed each of its two samples hit. A mode's
first round waits ``--settle`` seconds after what was just written (100,000 ConfigMaps or
1,000 policies), which the API server and etcd are still digesting.

The floor is everything the controller must list before it is ready, done by a plain client
in a process of its own (:mod:`benchmarks.floor_list`), timed from just before that process
starts, as the controller's time to ready is: the ConfigMaps and the Namespaces (streaming
lists of metadata, as the controller's informers read them) and both policy kinds (whole
objects in pages of 500, as the policy store reads them), all at once. An earlier floor
listed only the ConfigMaps, in pages of JSON, inside the benchmark's own warm process: it
left out the policies, the Namespaces and an interpreter's start, which the controller pays,
so its ratios overstated the controller's own cost; it is still measured
(``floor_configmaps_s``) so that earlier figures can be compared.

The rounds run first with no policy, then with P policies, half
``LifecyclePolicy`` objects (one namespace each, round robin) and half
``ClusterLifecyclePolicy`` objects (``namespaces`` naming one), each naming two ConfigMaps of
its namespace (``delete-after`` ten years: nothing becomes due). With policies, the idle
period starts once every policy has a status, and the policies whose ``resourceVersion``
moved during it are counted: the status writes while nothing changes (the target is 0).

Targets: time to ready at most 1.5 times the list floor; idle CPU at most twice the
no-policy idle; no status write while idle. Writes ``policies-many.json`` and
``policies-many.md``.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import statistics
import time
from pathlib import Path
from typing import Any

from benchmarks.cluster import IDLE_AFTER_READY, _start
from benchmarks.cluster_floors import run_floor
from benchmarks.cluster_measure import BENCH_AGENT, list_floor
from benchmarks.cluster_objects import CONFIGMAPS, NAMESPACE_COUNT, gather_limited
from benchmarks.profile_stacks import Sampler as StackSampler
from benchmarks.profile_stacks import top_items
from lifecycle_controller.devcluster import ControlPlane
from lifecycle_controller.devcluster.policy_crds import install_policy_crds
from lifecycle_controller.kube import NAMESPACES, KubeClient, load_configuration
from lifecycle_controller.kube.resources import CLUSTER_POLICIES, POLICIES

API_VERSION = "lifecycle.cezary.dev/v1alpha1"


def _namespace(i: int) -> str:
    return f"bench-{i % NAMESPACE_COUNT:02d}"


def _object_name(i: int) -> str:
    return f"cm-{i:06d}"


async def populate(kube: KubeClient, objects: int) -> float:
    started = time.perf_counter()
    for i in range(NAMESPACE_COUNT):
        body = {"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": _namespace(i)}}
        await kube.create(NAMESPACES, None, body)
    work = []
    for i in range(objects):
        body = {
            "apiVersion": "v1",
            "kind": "ConfigMap",
            "metadata": {"name": _object_name(i)},
            "data": {"payload": "x" * 512},
        }
        work.append(kube.create(CONFIGMAPS, _namespace(i), body))
    await gather_limited(work)
    return time.perf_counter() - started


def policy_manifests(policies: int, objects: int) -> list[dict[str, Any]]:
    """Half namespaced, half cluster; each names two ConfigMaps of one namespace."""
    out = []
    for p in range(policies):
        first = (2 * p * NAMESPACE_COUNT + p % NAMESPACE_COUNT) % objects
        namespace = _namespace(first)
        names = [_object_name(first), _object_name((first + NAMESPACE_COUNT) % objects)]
        spec: dict[str, Any] = {
            "resources": ["configmaps"],
            "names": names,
            "lifecycle": {"delete-after": "87600h"},
        }
        metadata: dict[str, Any] = {"name": f"bench-{p:04d}"}
        if p % 2 == 0:
            kind = "LifecyclePolicy"
            metadata["namespace"] = namespace
        else:
            kind = "ClusterLifecyclePolicy"
            spec["namespaces"] = [namespace]
        out.append({"apiVersion": API_VERSION, "kind": kind, "metadata": metadata, "spec": spec})
    return out


async def create_policies(kube: KubeClient, manifests: list[dict[str, Any]]) -> None:
    work = []
    for manifest in manifests:
        namespace = manifest["metadata"].get("namespace")
        resource = POLICIES if namespace else CLUSTER_POLICIES
        work.append(kube.create(resource, namespace, manifest))
    await gather_limited(work)


async def policy_versions(kube: KubeClient) -> dict[str, tuple[str, bool]]:
    """Every policy's resourceVersion and whether it has a status."""
    out: dict[str, tuple[str, bool]] = {}
    for resource in (POLICIES, CLUSTER_POLICIES):
        token: str | None = None
        while True:
            query = "?limit=500" + (f"&continue={token}" if token else "")
            page = await kube.request("GET", resource.collection_path(None) + query)
            for item in page["items"]:
                meta = item["metadata"]
                key = f"{resource.kind}/{meta.get('namespace', '')}/{meta['name']}"
                out[key] = (meta["resourceVersion"], bool(item.get("status")))
            token = page["metadata"].get("continue") or None
            if not token:
                break
    return out


async def all_reported(kube: KubeClient, policies: int, within: float = 300.0) -> float:
    """Seconds until every policy has a status (``within`` at most)."""
    started = time.perf_counter()
    while time.perf_counter() - started < within:
        versions = await policy_versions(kube)
        if sum(1 for _, has in versions.values() if has) >= policies:
            break
        await asyncio.sleep(1.0)
    return round(time.perf_counter() - started, 1)


async def start_floor(kubeconfig: Path) -> float:
    """Seconds from just before a plain client's process starts until it has listed what the
    controller must list before it is ready (see the module docstring)."""
    spawned = time.time()
    floor = await run_floor(
        kubeconfig,
        [
            f"--path={CONFIGMAPS.collection_path(None)}",
            f"--path={NAMESPACES.collection_path(None)}",
            f"--whole-path={POLICIES.collection_path(None)}",
            f"--whole-path={CLUSTER_POLICIES.collection_path(None)}",
        ],
        module="benchmarks.floor_list",
    )
    return round(float(floor["done_at"]) - spawned, 3)


async def _paired_starts(
    plane: ControlPlane, args: argparse.Namespace, policies: int
) -> tuple[list[float], list[float], Any]:
    """``args.starts`` pairs of a floor and a controller start, alternated; every start but
    the last is stopped once ready. Returns the floors, the ready times and the last start,
    still running."""
    floors: list[float] = []
    readies: list[float] = []
    for pair in range(args.starts):
        floors.append(await start_floor(plane.admin_kubeconfig))
        running = _start(plane, args, resources=("configmaps",))
        profiler = None
        if args.profile and policies and pair == 0:
            profiler = StackSampler(running.process.pid, args.output / "profile-policies-start.txt")
            if not profiler.start():
                profiler = None
        try:
            await running.until_ready()
        except BaseException:
            await running.stop()
            raise
        if profiler is not None:
            profiler.stop()
            args.profiles["start"] = top_items(profiler.output)
        assert running.sampler.ready_at is not None
        readies.append(round(running.sampler.ready_at, 3))
        if pair < args.starts - 1:
            await running.stop()
            await asyncio.sleep(0.5)
    return floors, readies, running


async def one_round(
    plane: ControlPlane, args: argparse.Namespace, config: Any, kube: KubeClient, policies: int
) -> dict[str, Any]:
    load_1m = round(os.getloadavg()[0], 2)  # the machine is shared: say how busy it was
    old_floor = await list_floor(config, (CONFIGMAPS,), runs=1)
    floors, readies, running = await _paired_starts(plane, args, policies)
    try:
        figures: dict[str, Any] = {
            "ready_s": round(statistics.median(readies), 3),
            "floor_s": round(statistics.median(floors), 3),
            "readies_s": readies,
            "floors_s": floors,
            "floor_configmaps_s": old_floor["sequential_s"],
            "load_1m": load_1m,
        }
        figures["ratio"] = round(figures["ready_s"] / figures["floor_s"], 3)
        if policies:
            figures["all_reported_s"] = await all_reported(kube, policies)
        await asyncio.sleep(IDLE_AFTER_READY)
        before = await policy_versions(kube)
        quiet = running.sampler.last()
        idle_profiler = None
        if args.profile:
            name = "policies" if policies else "no-policy"
            stacks = args.output / f"profile-{name}-idle.txt"
            idle_profiler = StackSampler(running.process.pid, stacks)
            if not idle_profiler.start():
                idle_profiler = None
        await asyncio.sleep(args.idle)
        idle = running.sampler.last()
        if idle_profiler is not None:
            idle_profiler.stop()
            args.profiles[f"idle {policies}"] = top_items(idle_profiler.output)
        after = await policy_versions(kube)
        cpu = idle.cpu_s - quiet.cpu_s
        figures["idle_cpu_percent"] = round(100 * cpu / args.idle, 3)
        moved = sum(1 for key, value in after.items() if before.get(key) != value)
        figures["status_writes_per_minute_idle"] = round(moved * 60 / args.idle, 1)
        figures["rss_idle_mb"] = round(idle.rss_mb, 1)
        return figures
    finally:
        await running.stop()


async def measure(plane: ControlPlane, args: argparse.Namespace) -> dict[str, Any]:
    result: dict[str, Any] = {"objects": args.objects, "policy_count": args.policies}
    config, _ = await load_configuration(str(plane.admin_kubeconfig))
    async with await KubeClient.connect(
        str(plane.admin_kubeconfig), user_agent=BENCH_AGENT
    ) as kube:
        await asyncio.to_thread(install_policy_crds, plane)
        result["create_s"] = round(await populate(kube, args.objects), 1)
        for mode, count in (("no_policy", 0), ("policies", args.policies)):
            if count:
                await create_policies(kube, policy_manifests(count, args.objects))
            await asyncio.sleep(args.settle)  # the API server digests what was just written
            rounds = [await one_round(plane, args, config, kube, count) for _ in range(args.rounds)]
            medians = {
                key: round(statistics.median(r[key] for r in rounds), 3)
                for key in rounds[0]
                if isinstance(rounds[0][key], int | float)
            }
            result[mode] = {**medians, **_over_all_starts(rounds), "rounds": rounds}
    if args.profile:
        result["profiles"] = args.profiles
    base, many = result["no_policy"], result["policies"]
    result["idle_cpu_ratio"] = round(
        many["idle_cpu_percent"] / max(base["idle_cpu_percent"], 1e-3), 2
    )
    return result


def _over_all_starts(rounds: list[dict[str, Any]]) -> dict[str, Any]:
    """The headline figures: the medians of every start and of every floor of the mode, and
    their ratio (the ratio of the medians); the median of the rounds' own ratios beside it."""
    readies = [ready for one in rounds for ready in one["readies_s"]]
    floors = [floor for one in rounds for floor in one["floors_s"]]
    ready, floor = statistics.median(readies), statistics.median(floors)
    return {
        "ready_s": round(ready, 3),
        "floor_s": round(floor, 3),
        "ratio": round(ready / floor, 3),
        "ratio_median_of_rounds": round(statistics.median(one["ratio"] for one in rounds), 3),
        "starts": len(readies),
    }


def _report(result: dict[str, Any]) -> str:
    lines = [
        f"{result['objects']:,} ConfigMaps; {result['policy_count']:,} policies (half namespaced, "
        "half cluster), each naming two of them",
        "",
        "| policies | ready (list floor), medians of all starts | ratio of the medians | "
        "median of the rounds' ratios | idle CPU | status writes/min idle | RSS idle |",
        "|---|---|---|---|---|---|---|",
    ]
    for mode in ("no_policy", "policies"):
        one = result[mode]
        count = 0 if mode == "no_policy" else result["policy_count"]
        lines.append(
            f"| {count:,} | {one['ready_s']} s ({one['floor_s']} s), {one['starts']} starts | "
            f"{one['ratio']}x | {one['ratio_median_of_rounds']}x | "
            f"{one['idle_cpu_percent']} % | {one['status_writes_per_minute_idle']} | "
            f"{one['rss_idle_mb']} MB |"
        )
    lines.append("")
    lines.append(f"idle CPU with policies / without: {result['idle_cpu_ratio']}x")
    for mode in ("no_policy", "policies"):
        rounds = result[mode]["rounds"]
        lines.append(
            f"{mode.replace('_', ' ')}: ready/floor per round "
            + ", ".join(f"{r['ratio']}x" for r in rounds)
            + "; 1-minute load average before each round "
            + ", ".join(str(r["load_1m"]) for r in rounds)
        )
        lines.append(
            f"{mode.replace('_', ' ')}: ready per start "
            + ", ".join(f"{ready}" for r in rounds for ready in r["readies_s"])
            + " s; floor per start "
            + ", ".join(f"{floor}" for r in rounds for floor in r["floors_s"])
            + " s"
        )
    return "\n".join(lines) + "\n"


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(
        prog="python -m benchmarks.policies_many", description=__doc__.split("\n\n")[0]
    )
    parser.add_argument("--objects", type=int, default=20000, help="ConfigMaps")
    parser.add_argument("--policies", type=int, default=1000, help="policies (half cluster)")
    parser.add_argument("--idle", type=float, default=30.0, help="seconds idle measured")
    parser.add_argument("--rounds", type=int, default=3, help="rounds per mode")
    parser.add_argument(
        "--starts", type=int, default=3, help="floor and controller starts per round, alternated"
    )
    parser.add_argument(
        "--settle", type=float, default=20.0, help="seconds of rest before a mode's first round"
    )
    parser.add_argument("--output", type=Path, default=Path("benchmarks/results"))
    parser.add_argument(
        "--profile", action="store_true", help="py-spy the start and the idle (bench extra)"
    )
    parser.add_argument("--controller-source", help="run the controller from this folder")
    parser.add_argument("--controller-python", help="run the controller with this interpreter")
    args = parser.parse_args(argv)
    args.profiles = {}
    args.output.mkdir(parents=True, exist_ok=True)
    with ControlPlane(audit_log=False, log=lambda line: None) as plane:
        result = asyncio.run(measure(plane, args))
    figures = ("no_policy", "policies", "profiles")
    print(json.dumps({k: v for k, v in result.items() if k not in figures}))
    for name, profile in result.get("profiles", {}).items():
        print("profile", name, json.dumps(profile))
    for mode in ("no_policy", "policies"):
        print(mode, {k: v for k, v in result[mode].items() if k != "rounds"}, flush=True)
    args.output.mkdir(parents=True, exist_ok=True)
    (args.output / "policies-many.json").write_text(json.dumps(result, indent=2) + "\n")
    (args.output / "policies-many.md").write_text(_report(result))
    print(f"wrote {args.output}/policies-many.json and policies-many.md")


if __name__ == "__main__":
    main()
