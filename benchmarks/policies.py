"""What a lifecycle policy costs, on a real local control plane, beside its floor.

    python -m benchmarks.policies --objects 100000 --output benchmarks/results/

One control plane with the chart's policy CRDs and N ConfigMaps of 512 B over 50 namespaces,
every 10th labelled ``tier: scratch`` (1 % also carry a lifecycle annotation far in the
future). Each round lists ConfigMaps with a plain client (metadata only, pages of 500: the
floor), then starts ``lifecycle-controller run --watch-resource=configmaps`` as a separate
process and measures time to /readyz, RSS when ready and the peak (VmHWM). The rounds run
first with no policy and then with one ``ClusterLifecyclePolicy`` whose selector matches the
labelled 10 % (``delete-after`` ten years: nothing becomes due).

On the last controller with the policy, once its initial reconciles are done, two changes
are timed from the PATCH until every matched object was reconciled again (the controller's
``controller_runtime_reconcile_total`` grew by at least the matched count and its work queue
is empty), scraping /metrics every 50 ms:

* **lifecycle change** (``delete-after`` edited): what the policy matches is unchanged, so
  the cached objects it matched are queued again, no list;
* **selector change** (``tier in (scratch, temp)``, which selects the same objects): what the
  informers keep may differ, so ConfigMaps are listed again too.

Writes ``policies.json`` and ``policies.md``. See benchmarks/README.md.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import json
import statistics
import time
from pathlib import Path
from typing import Any

import aiohttp

from benchmarks.cluster import _Running, _start
from benchmarks.cluster_measure import BENCH_AGENT, list_floor, work_done, work_sums
from benchmarks.cluster_objects import CONFIGMAPS, FAR, NAMESPACE_COUNT, gather_limited
from lifecycle_controller.core.objects import keys
from lifecycle_controller.devcluster import ControlPlane
from lifecycle_controller.devcluster.policy_crds import install_policy_crds
from lifecycle_controller.kube import NAMESPACES, KubeClient, NotFound, load_configuration
from lifecycle_controller.kube.resources import CLUSTER_POLICIES

POLICY = "scratch-configmaps"
MATCHED_EVERY = 10  # 10 % of the ConfigMaps carry the label the policy selects
ANNOTATED_EVERY = 100


def _policy(spec_selector: dict[str, Any], delete_after: str) -> dict[str, Any]:
    return {
        "apiVersion": "lifecycle.cezary.dev/v1alpha1",
        "kind": "ClusterLifecyclePolicy",
        "metadata": {"name": POLICY},
        "spec": {
            "resources": ["configmaps"],
            "selector": spec_selector,
            "lifecycle": {"delete-after": delete_after},
        },
    }


LABELS = {"matchLabels": {"tier": "scratch"}}
EXPRESSIONS = {
    "matchExpressions": [{"key": "tier", "operator": "In", "values": ["scratch", "temp"]}]
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
        metadata: dict[str, Any] = {"name": f"cm-{i:06d}"}
        if i % MATCHED_EVERY == 0:
            metadata["labels"] = {"tier": "scratch"}
        if i % ANNOTATED_EVERY == 1:
            metadata["annotations"] = {keys.PREFIX + "delete-at": FAR}
        body = {"apiVersion": "v1", "kind": "ConfigMap", "metadata": metadata}
        body["data"] = {"payload": "x" * 512}
        work.append(kube.create(CONFIGMAPS, ns, body))
    await gather_limited(work)
    return time.perf_counter() - started


#: The policy's matched-objects gauge, beside the controller's work.
_MATCHED = ("lifecycle_policy_matched_objects{", POLICY)


async def scrape(session: aiohttp.ClientSession, url: str) -> dict[str, float]:
    """The sums the benchmark follows: reconciles, queue depth, matched objects."""
    return await work_sums(session, url, matched=_MATCHED)


async def settled(session: aiohttp.ClientSession, url: str, quiet: float = 2.0) -> dict[str, float]:
    """Wait until the reconcile count has not moved for ``quiet`` seconds with an empty queue."""
    return await work_done(session, url, quiet, matched=_MATCHED)


async def reported(session: aiohttp.ClientSession, url: str, want: int) -> float:
    """Wait (up to 60 s) until the policy's matched-objects gauge says ``want``; its value."""
    deadline = time.perf_counter() + 60
    while True:
        matched = (await scrape(session, url))["matched"]
        if matched >= want or time.perf_counter() > deadline:
            return matched
        await asyncio.sleep(0.5)


async def timed_change(
    kube: KubeClient, session: aiohttp.ClientSession, url: str, body: dict[str, Any], want: int
) -> dict[str, Any]:
    """PATCH the policy; seconds until ``want`` more reconciles ran and the queue is empty."""
    before = await settled(session, url)
    started = time.perf_counter()
    await kube.merge_patch(CLUSTER_POLICIES, None, POLICY, body)
    while True:
        now = await scrape(session, url)
        if now["reconciles"] - before["reconciles"] >= want and now["depth"] == 0:
            return {
                "seconds": round(time.perf_counter() - started, 3),
                "reconciled": int(now["reconciles"] - before["reconciles"]),
            }
        if time.perf_counter() - started > 120:
            raise RuntimeError(f"not re-evaluated within 120 s: {now} (before {before})")
        await asyncio.sleep(0.05)


async def start_round(
    plane: ControlPlane, args: argparse.Namespace, config: Any
) -> tuple[_Running, dict[str, Any]]:
    floor = await list_floor(config, (CONFIGMAPS,), runs=1)
    running = _start(plane, args, resources=("configmaps",))
    at_ready = await running.until_ready()
    assert running.sampler.ready_at is not None
    return running, {
        "ready_s": round(running.sampler.ready_at, 3),
        "floor_s": floor["sequential_s"],
        "ratio": round(running.sampler.ready_at / floor["sequential_s"], 3),
        "rss_ready_mb": round(at_ready.rss_mb, 1),
        "hwm_ready_mb": round(at_ready.hwm_mb, 1),
    }


def _medians(rounds: list[dict[str, Any]]) -> dict[str, Any]:
    keys_ = ("ready_s", "floor_s", "ratio", "rss_ready_mb", "hwm_ready_mb")
    out: dict[str, Any] = {k: round(statistics.median(r[k] for r in rounds), 3) for k in keys_}
    out["hwm_max_mb"] = max(r["hwm_ready_mb"] for r in rounds)
    out["rounds"] = rounds
    return out


async def measure(plane: ControlPlane, objects: int, args: argparse.Namespace) -> dict[str, Any]:
    result: dict[str, Any] = {"objects": objects, "matched": objects // MATCHED_EVERY}
    config, _ = await load_configuration(str(plane.admin_kubeconfig))
    async with (
        await KubeClient.connect(str(plane.admin_kubeconfig), user_agent=BENCH_AGENT) as kube,
        aiohttp.ClientSession(timeout=aiohttp.ClientTimeout(total=5)) as session,
    ):
        await asyncio.to_thread(install_policy_crds, plane)
        result["create_s"] = round(await populate(kube, objects), 1)
        for mode in ("no_policy", "policy"):
            if mode == "policy":
                await kube.create(CLUSTER_POLICIES, None, _policy(LABELS, "87600h"))
            rounds = []
            for number in range(args.rounds):
                running, figures = await start_round(plane, args, config)
                try:
                    if mode == "policy" and number == args.rounds - 1:
                        url = running.metrics_url
                        want = result["matched"]
                        figures["matched_reported"] = await reported(session, url, want)
                        result["lifecycle_change"] = await timed_change(
                            kube,
                            session,
                            url,
                            {"spec": {"lifecycle": {"delete-after": "87000h"}}},
                            want,
                        )
                        result["selector_change"] = await timed_change(
                            kube, session, url, {"spec": {"selector": EXPRESSIONS}}, want
                        )
                        figures["rss_after_changes_mb"] = round(running.sampler.last().rss_mb, 1)
                        figures["hwm_after_changes_mb"] = round(running.sampler.last().hwm_mb, 1)
                finally:
                    await running.stop()
                rounds.append(figures)
            result[mode] = _medians(rounds)
        with contextlib.suppress(NotFound):
            await kube.delete(CLUSTER_POLICIES, None, POLICY)
    return result


def _report(runs: list[dict[str, Any]]) -> str:
    lines = [
        "| objects (matched) | policy | ready (floor) | ratio | RSS ready | peak "
        "| re-evaluated after a change |",
        "|---|---|---|---|---|---|---|",
    ]
    for run in runs:
        for mode in ("no_policy", "policy"):
            one = run[mode]
            change = "-"
            if mode == "policy":
                lc, sc = run["lifecycle_change"], run["selector_change"]
                change = f"lifecycle {lc['seconds']} s, selector {sc['seconds']} s (relist)"
            lines.append(
                f"| {run['objects']:,} ({run['matched']:,}) | {mode.replace('_', ' ')} | "
                f"{one['ready_s']} s ({one['floor_s']} s) | {one['ratio']}x | "
                f"{one['rss_ready_mb']} MB | {one['hwm_max_mb']} MB | {change} |"
            )
    return "\n".join(lines) + "\n"


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(
        prog="python -m benchmarks.policies", description=__doc__.split("\n\n")[0]
    )
    parser.add_argument("--objects", default="100000", help="ConfigMap counts, comma-separated")
    parser.add_argument("--output", type=Path, default=Path("benchmarks/results"))
    parser.add_argument("--rounds", type=int, default=3, help="controller starts per mode")
    parser.add_argument("--controller-source", help="run the controller from this folder")
    parser.add_argument("--controller-python", help="run the controller with this interpreter")
    args = parser.parse_args(argv)
    runs = []
    for objects in (int(v) for v in args.objects.split(",")):
        with ControlPlane(audit_log=False, log=lambda line: None) as plane:
            run = asyncio.run(measure(plane, objects, args))
        runs.append(run)
        print(json.dumps({k: v for k, v in run.items() if k not in ("no_policy", "policy")}))
        for mode in ("no_policy", "policy"):
            print(mode, {k: v for k, v in run[mode].items() if k != "rounds"}, flush=True)
    args.output.mkdir(parents=True, exist_ok=True)
    (args.output / "policies.json").write_text(json.dumps(runs, indent=2) + "\n")
    (args.output / "policies.md").write_text(_report(runs))
    print(f"wrote {args.output}/policies.json and policies.md")


if __name__ == "__main__":
    main()
