"""What a policy's limit costs while it holds a backlog, on a real local control plane.

    python -m benchmarks.limit --held 10000 --output benchmarks/results/

One control plane with the chart's policy CRDs and N ConfigMaps labelled ``limit: held`` over
10 namespaces. Each round starts ``lifecycle-controller run --watch-resource=configmaps`` as
a separate process, twice:

* **floor** (no policy): once its first reconciles are done, its CPU over ``--idle`` seconds;
* **held**: one ``ClusterLifecyclePolicy`` selects every object, ``delete-after: 1s`` (all due
  at once) with ``limit: {actions: A, window: W}``. The controller deletes A, then holds the
  other N - A in the policy's line. Measured: its CPU while they wait (over ``--idle``
  seconds, before the window turns), then one **window turn**: the CPU from just before the
  window frees its A places until A more are deleted and the controller is quiet again, per
  turn and per freed place (each freed place is one DELETE, its Event and its audit entry:
  the cost of the action itself is in it).

The goals (docs/performance.md): idle while N wait at most 2x the floor's idle, and a freed
place whose cost does not grow with N (compare ``--held 1000,10000``). CPU is read from
``/proc``; medians of ``--rounds``. Writes ``limit.json`` and ``limit.md``. See
benchmarks/README.md.
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
from benchmarks.cluster_measure import BENCH_AGENT, work_done, work_sums
from benchmarks.cluster_objects import CONFIGMAPS, gather_limited
from lifecycle_controller.devcluster import ControlPlane
from lifecycle_controller.devcluster.policy_crds import install_policy_crds
from lifecycle_controller.kube import NAMESPACES, KubeClient, NotFound
from lifecycle_controller.kube.resources import CLUSTER_POLICIES

POLICY = "held-backlog"
NAMESPACES_USED = 10
LABEL = {"limit": "held"}


def _policy(actions: int, window_s: int) -> dict[str, Any]:
    return {
        "apiVersion": "lifecycle.cezary.dev/v1alpha1",
        "kind": "ClusterLifecyclePolicy",
        "metadata": {"name": POLICY},
        "spec": {
            "resources": ["configmaps"],
            "selector": {"matchLabels": LABEL},
            "limit": {"actions": actions, "window": f"{window_s}s"},
            "lifecycle": {"delete-after": "1s"},
        },
    }


async def populate(kube: KubeClient, objects: int, prefix: str) -> None:
    for i in range(NAMESPACES_USED):
        with contextlib.suppress(Exception):
            body = {"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": f"lim-{i:02d}"}}
            await kube.create(NAMESPACES, None, body)
    work = [
        kube.create(
            CONFIGMAPS,
            f"lim-{i % NAMESPACES_USED:02d}",
            {
                "apiVersion": "v1",
                "kind": "ConfigMap",
                "metadata": {"name": f"{prefix}-{i:06d}", "labels": LABEL},
            },
        )
        for i in range(objects)
    ]
    await gather_limited(work)


#: The deletions the controller made, beside its work.
_DELETED = ("lifecycle_actions_total{", 'result="success"')


async def _deleted(session: aiohttp.ClientSession, url: str, want: float) -> float:
    """Until the controller has deleted ``want`` objects; when (time.time())."""
    deadline = time.perf_counter() + 300
    while (await work_sums(session, url, deleted=_DELETED))["deleted"] < want:
        if time.perf_counter() > deadline:
            raise RuntimeError(f"fewer than {want} deletions within 300 s")
        await asyncio.sleep(0.05)
    return time.time()


def _cpu(running: _Running) -> float:
    return running.sampler.last().cpu_s


async def _idle(running: _Running, seconds: float) -> float:
    """CPU over ``seconds``, in % of one core."""
    before = _cpu(running)
    await asyncio.sleep(seconds)
    return round(100 * (_cpu(running) - before) / seconds, 2)


async def floor_round(
    plane: ControlPlane, args: argparse.Namespace, session: aiohttp.ClientSession
) -> dict[str, Any]:
    running = _start(plane, args, resources=("configmaps",))
    try:
        await running.until_ready()
        await work_done(session, running.metrics_url)
        return {"idle_pct": await _idle(running, args.idle)}
    finally:
        await running.stop()


async def held_round(
    plane: ControlPlane,
    args: argparse.Namespace,
    kube: KubeClient,
    session: aiohttp.ClientSession,
    held: int,
    number: int,
) -> dict[str, Any]:
    actions, window = args.actions, args.window
    await populate(kube, held + actions, f"r{number}")
    await kube.create(CLUSTER_POLICIES, None, _policy(actions, window))
    await asyncio.sleep(1.5)  # every one due
    running = _start(plane, args, resources=("configmaps",))
    try:
        await running.until_ready()
        url = running.metrics_url
        first = await _deleted(session, url, actions)
        await work_done(session, url)
        turn_at = first + window
        idle_for = min(args.idle, turn_at - time.time() - 3)
        if idle_for < 5:
            raise RuntimeError("the window is too short to measure idle: raise --window")
        idle = await _idle(running, idle_for)
        await asyncio.sleep(max(0.0, turn_at - time.time() - 1))
        before = _cpu(running)
        await _deleted(session, url, 2 * actions)
        await work_done(session, url)
        turn = _cpu(running) - before
        return {
            "held": held,
            "idle_pct": idle,
            "idle_s": round(idle_for, 1),
            "turn_cpu_ms": round(1000 * turn, 1),
            "per_place_ms": round(1000 * turn / actions, 2),
        }
    finally:
        await running.stop()
        with contextlib.suppress(NotFound):
            await kube.delete(CLUSTER_POLICIES, None, POLICY)
        for i in range(NAMESPACES_USED):  # the rest of the backlog, for the next round
            with contextlib.suppress(NotFound):
                await kube.request(
                    "DELETE",
                    CONFIGMAPS.collection_path(f"lim-{i:02d}") + "?labelSelector=limit%3Dheld",
                )


def _median(rounds: list[dict[str, Any]], key: str) -> float:
    return round(float(statistics.median(float(r[key]) for r in rounds)), 2)


async def measure(plane: ControlPlane, args: argparse.Namespace) -> dict[str, Any]:
    result: dict[str, Any] = {"actions": args.actions, "window_s": args.window, "runs": []}
    async with (
        await KubeClient.connect(str(plane.admin_kubeconfig), user_agent=BENCH_AGENT) as kube,
        aiohttp.ClientSession(timeout=aiohttp.ClientTimeout(total=5)) as session,
    ):
        await asyncio.to_thread(install_policy_crds, plane)
        for held in (int(v) for v in args.held.split(",")):
            floors, rounds = [], []
            for number in range(args.rounds):
                await populate(kube, held, f"f{number}")  # the floor watches as many
                floors.append(await floor_round(plane, args, session))
                for i in range(NAMESPACES_USED):
                    await kube.request(
                        "DELETE",
                        CONFIGMAPS.collection_path(f"lim-{i:02d}") + "?labelSelector=limit%3Dheld",
                    )
                rounds.append(await held_round(plane, args, kube, session, held, number))
                print(json.dumps({"floor": floors[-1], "held": rounds[-1]}), flush=True)
            floor_idle = _median(floors, "idle_pct")
            idle = _median(rounds, "idle_pct")
            result["runs"].append(
                {
                    "held": held,
                    "floor_idle_pct": floor_idle,
                    "idle_pct": idle,
                    "idle_ratio": round(idle / floor_idle, 2) if floor_idle else None,
                    "turn_cpu_ms": _median(rounds, "turn_cpu_ms"),
                    "per_place_ms": _median(rounds, "per_place_ms"),
                    "floors": floors,
                    "rounds": rounds,
                }
            )
    return result


def _report(result: dict[str, Any]) -> str:
    lines = [
        f"limit {result['actions']}/{result['window_s']}s; medians of the rounds",
        "",
        "| held | idle while held (floor: no policy) | ratio | CPU per window turn "
        "| per freed place |",
        "|---|---|---|---|---|",
    ]
    for run in result["runs"]:
        lines.append(
            f"| {run['held']:,} | {run['idle_pct']} % ({run['floor_idle_pct']} %) | "
            f"{run['idle_ratio']}x | {run['turn_cpu_ms']} ms | {run['per_place_ms']} ms |"
        )
    return "\n".join(lines) + "\n"


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(
        prog="python -m benchmarks.limit", description=__doc__.split("\n\n")[0]
    )
    parser.add_argument("--held", default="10000", help="objects held, comma-separated")
    parser.add_argument("--actions", type=int, default=50, help="the limit's actions")
    parser.add_argument("--window", type=int, default=60, help="the limit's window, seconds")
    parser.add_argument("--idle", type=float, default=30.0, help="seconds of idle measured")
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--output", type=Path, default=Path("benchmarks/results"))
    parser.add_argument("--controller-source", help="run the controller from this folder")
    parser.add_argument("--controller-python", help="run the controller with this interpreter")
    args = parser.parse_args(argv)
    with ControlPlane(audit_log=False, log=lambda line: None) as plane:
        result = asyncio.run(measure(plane, args))
    args.output.mkdir(parents=True, exist_ok=True)
    (args.output / "limit.json").write_text(json.dumps(result, indent=2) + "\n")
    (args.output / "limit.md").write_text(_report(result))
    print(_report(result))
    print(f"wrote {args.output}/limit.json and limit.md")


if __name__ == "__main__":
    main()
