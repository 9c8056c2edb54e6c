"""Real rollouts at scale: one cron restarts many Deployments on fake nodes, beside a plain client.

    python -m benchmarks.rollouts --output benchmarks/results/
    python -m benchmarks.rollouts --deployments 200 --replicas 5 --nodes 50 \\
        --max-concurrent-rollouts 10 --rounds 2 --output benchmarks/results/

On a local control plane with kube-scheduler, kwok and ``--nodes`` fake Nodes (Pods Running
and Ready a second after they are bound) and its audit log on: ``--deployments`` Deployments
of ``--replicas`` replicas (RollingUpdate, 25 % surge and unavailability) over 10 namespaces,
every Pod serving. Then, per round:

* **floor**: ``benchmarks/rollout_floor.py`` as a process of its own restarts every
  Deployment with at most ``--max-concurrent-rollouts`` rollouts in progress, following them
  with one watch (the least a client can do for the same job); its CPU, wall time and
  requests;
* **controller**: ``lifecycle-controller run --watch-resource=deployments.apps`` with
  ``--max-concurrent-rollouts``, every
  Deployment annotated with the same ``restart-cron`` for the next whole minute; from that
  minute until ``lifecycle_rollouts_total{result="completed"}`` counts them all (its
  ``/metrics`` read once a second, which the controller's figures include): its CPU
  (``/proc``), the wall time, the widest ``lifecycle_rollouts_in_progress`` seen, and its
  requests by verb and resource from the audit log, the rollout reads (GET and LIST of
  Deployments) apart;
* **Pods**: every Pod serving and carrying its Deployment's new template marker, counted.

Writes ``rollouts.json`` and ``rollouts.md``. See benchmarks/README.md.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import statistics
import subprocess
import sys
import time
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import aiohttp

from benchmarks.cluster import _Running, _start
from benchmarks.cluster_measure import BENCH_AGENT, FLOOR_AGENT, read_audit, requests_between
from benchmarks.cluster_objects import gather_limited
from lifecycle_controller.core.objects import keys
from lifecycle_controller.core.objects.keys import RESTARTED_AT
from lifecycle_controller.core.objects.rollout_progress import rollout_progress
from lifecycle_controller.devcluster import ControlPlane
from lifecycle_controller.devcluster.nodes import FakeNodes
from lifecycle_controller.kube import NAMESPACES, KubeClient
from lifecycle_controller.kube.resources import DEPLOYMENTS, PODS

NAMESPACE_COUNT = 10
CONTROLLER_AGENT = "lifecycle-controller/"


def _deployment(name: str, replicas: int) -> dict[str, Any]:
    labels = {"app": name}
    return {
        "apiVersion": "apps/v1",
        "kind": "Deployment",
        "metadata": {"name": name},
        "spec": {
            "replicas": replicas,
            "selector": {"matchLabels": labels},
            "template": {
                "metadata": {"labels": labels},
                "spec": {
                    "terminationGracePeriodSeconds": 0,
                    "containers": [{"name": "app", "image": "registry.invalid/app:1"}],
                },
            },
        },
    }


def _names(count: int) -> list[tuple[str, str]]:
    return [(f"roll-{i % NAMESPACE_COUNT:02d}", f"d-{i:04d}") for i in range(count)]


async def populate(kube: KubeClient, count: int, replicas: int) -> float:
    """Create the Deployments and wait until every one serves; seconds it took."""
    started = time.perf_counter()
    for index in range(NAMESPACE_COUNT):
        body = {"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": f"roll-{index:02d}"}}
        await kube.create(NAMESPACES, None, body)
    await gather_limited(
        [kube.create(DEPLOYMENTS, ns, _deployment(name, replicas)) for ns, name in _names(count)]
    )
    await settled(kube, count, timeout=900)
    return time.perf_counter() - started


async def settled(kube: KubeClient, count: int, *, timeout: float) -> None:
    """Wait until ``count`` Deployments have completed rollouts (by the controller's rule)."""
    deadline = time.monotonic() + timeout
    while True:
        listing = await kube.request("GET", DEPLOYMENTS.collection_path(None))
        done = 0
        for item in listing["items"]:
            item.setdefault("kind", "Deployment")
            done += rollout_progress(item).complete
        if done >= count:
            return
        if time.monotonic() > deadline:
            raise TimeoutError(f"{done} of {count} Deployments settled")
        await asyncio.sleep(2)


async def pods_replaced(kube: KubeClient) -> dict[str, int]:
    """Pods that serve and carry their Deployment's current template marker, of all Pods."""
    deployments = await kube.request("GET", DEPLOYMENTS.collection_path(None))
    marker = {
        (item["metadata"]["namespace"], item["metadata"]["name"]): (
            item["spec"]["template"]["metadata"].get("annotations") or {}
        ).get(RESTARTED_AT)
        for item in deployments["items"]
    }
    pods = await kube.request("GET", PODS.collection_path(None))
    replaced = 0
    for pod in pods["items"]:
        metadata = pod["metadata"]
        key = (metadata["namespace"], (metadata.get("labels") or {}).get("app", ""))
        ready = any(
            c.get("type") == "Ready" and c.get("status") == "True"
            for c in (pod.get("status") or {}).get("conditions") or []
        )
        own = (metadata.get("annotations") or {}).get(RESTARTED_AT)
        replaced += bool(ready and own and own == marker.get(key))
    return {"pods": len(pods["items"]), "replaced_and_serving": replaced}


def run_floor(plane: ControlPlane, concurrency: int, marker: str) -> dict[str, Any]:
    """The floor, in a process of its own."""
    command = [sys.executable, "-m", "benchmarks.rollout_floor"]
    argv = [f"--kubeconfig={plane.admin_kubeconfig}", f"--concurrency={concurrency}"]
    started = time.time()
    output = subprocess.run(
        [*command, *argv, f"--marker={marker}"],
        check=True,
        capture_output=True,
        text=True,
        timeout=1800,
    ).stdout
    result: dict[str, Any] = json.loads(output.strip().splitlines()[-1])
    result["window"] = (started, time.time())
    return result


async def _metric(session: aiohttp.ClientSession, url: str, name: str, **labels: str) -> float:
    """One series of the controller's /metrics (0 when absent)."""
    async with session.get(url) as response:
        text = await response.text()
    wanted = [f'{key}="{value}"' for key, value in labels.items()]
    for line in text.splitlines():
        series, _, value = line.rpartition(" ")
        if series.split("{", 1)[0] == name and all(pair in series for pair in wanted):
            return float(value)
    return 0.0


def _next_minute(lead: float) -> float:
    """The first whole minute at least ``lead`` seconds ahead (epoch seconds)."""
    return (int(time.time() + lead) // 60 + 1) * 60


async def controller_round(
    plane: ControlPlane, kube: KubeClient, args: argparse.Namespace
) -> dict[str, Any]:
    """One controller start: the cron fires for every Deployment, rollouts followed to the end."""
    flags = (f"--max-concurrent-rollouts={args.max_concurrent_rollouts}",)
    running: _Running = _start(plane, args, ("deployments.apps",), flags)
    try:
        await running.until_ready()
        due = _next_minute(args.lead)
        moment = datetime.fromtimestamp(due, UTC)
        cron = f"{moment.minute} {moment.hour} * * *"
        patch = {"metadata": {"annotations": {keys.RESTART_CRON: cron}}}
        names = _names(args.deployments)
        await gather_limited([kube.merge_patch(DEPLOYMENTS, ns, n, patch) for ns, n in names])
        await asyncio.sleep(max(0.0, due - time.time() - 1))
        before = running.sampler.last()
        widest = 0.0
        completed = 0.0
        async with aiohttp.ClientSession() as session:
            while completed < len(names):
                if time.time() > due + args.timeout:
                    raise TimeoutError(f"{completed} of {len(names)} rollouts completed")
                await asyncio.sleep(1)
                url = running.metrics_url
                in_progress = await _metric(session, url, "lifecycle_rollouts_in_progress")
                widest = max(widest, in_progress)
                completed = await _metric(
                    session, url, "lifecycle_rollouts_total", kind="Deployment", result="completed"
                )
        end = time.time()
        after = running.sampler.last()
    finally:
        await running.stop()
    clear = {"metadata": {"annotations": {keys.RESTART_CRON: None}}}
    await gather_limited([kube.merge_patch(DEPLOYMENTS, ns, n, clear) for ns, n in names])
    return {
        "restarts": len(names),
        "wall_s": round(end - due, 3),
        "cpu_s": round(after.cpu_s - before.cpu_s, 3),
        "widest": int(widest),
        "window": (due, end),
        "rss_mb": round(after.rss_mb, 1),
    }


def _reads(requests: dict[str, int]) -> int:
    return sum(
        count
        for request, count in requests.items()
        if request in ("get deployments", "list deployments")
    )


async def measure(plane: ControlPlane, args: argparse.Namespace) -> dict[str, Any]:
    result: dict[str, Any] = {
        "deployments": args.deployments,
        "replicas": args.replicas,
        "nodes": args.nodes,
        "max_concurrent_rollouts": args.max_concurrent_rollouts,
    }
    rounds: list[dict[str, Any]] = []
    async with await KubeClient.connect(
        str(plane.admin_kubeconfig), user_agent=BENCH_AGENT
    ) as kube:
        result["populate_s"] = round(await populate(kube, args.deployments, args.replicas), 1)
        for number in range(args.rounds):
            floor = run_floor(plane, args.max_concurrent_rollouts, f"floor-{number}")
            floor["pods"] = await pods_replaced(kube)
            controller = await controller_round(plane, kube, args)
            await settled(kube, args.deployments, timeout=300)
            controller["pods"] = await pods_replaced(kube)
            rounds.append({"floor": floor, "controller": controller})
    audit = read_audit(plane.audit_log)
    for measured in rounds:
        controller, floor = measured["controller"], measured["floor"]
        controller["requests"] = requests_between(audit, CONTROLLER_AGENT, *controller["window"])
        floor["audit_requests"] = requests_between(audit, FLOOR_AGENT, *floor["window"])
        for side in (controller, floor):
            side["cpu_ms_per_restart"] = round(1000 * side["cpu_s"] / side["restarts"], 3)
        controller["rollout_reads"] = _reads(controller["requests"])
        floor["rollout_reads"] = _reads(floor["audit_requests"])
        measured["cpu_ratio"] = round(
            controller["cpu_ms_per_restart"] / floor["cpu_ms_per_restart"], 3
        )
        measured["wall_ratio"] = round(controller["wall_s"] / floor["wall_s"], 3)
    result["rounds"] = rounds
    result["median"] = {
        key: round(statistics.median(r[key] for r in rounds), 3)
        for key in ("cpu_ratio", "wall_ratio")
    } | {
        f"{side}_{key}": round(statistics.median(r[side][key] for r in rounds), 3)
        for side in ("controller", "floor")
        for key in ("cpu_ms_per_restart", "wall_s", "rollout_reads")
    }
    return result


def report(result: dict[str, Any]) -> str:
    """The Markdown table of one run."""
    lines = [
        f"# Rollouts at scale: {result['deployments']} Deployments x {result['replicas']} "
        f"replicas on {result['nodes']} fake nodes, --max-concurrent-rollouts "
        f"{result['max_concurrent_rollouts']}",
        "",
        "| round | side | wall s | CPU ms/restart | widest | requests | rollout reads | "
        "Pods replaced |",
        "|---|---|---|---|---|---|---|---|",
    ]
    for number, measured in enumerate(result["rounds"], 1):
        for side in ("floor", "controller"):
            row = measured[side]
            requests = row.get("requests") if side == "controller" else row["audit_requests"]
            total = sum((requests or {}).values())
            pods = row["pods"]
            lines.append(
                f"| {number} | {side} | {row['wall_s']} | {row['cpu_ms_per_restart']} | "
                f"{row['widest']} | {total} ({json.dumps(requests)}) | {row['rollout_reads']} | "
                f"{pods['replaced_and_serving']} of {pods['pods']} |"
            )
    median = result["median"]
    lines += [
        "",
        f"Medians: CPU per restart {median['controller_cpu_ms_per_restart']} ms (controller) vs "
        f"{median['floor_cpu_ms_per_restart']} ms (floor), ratio {median['cpu_ratio']}; wall "
        f"{median['controller_wall_s']} s vs {median['floor_wall_s']} s, ratio "
        f"{median['wall_ratio']}; rollout reads {median['controller_rollout_reads']} vs "
        f"{median['floor_rollout_reads']}.",
    ]
    return "\n".join(lines) + "\n"


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--deployments", type=int, default=200)
    parser.add_argument("--replicas", type=int, default=5)
    parser.add_argument("--nodes", type=int, default=50)
    parser.add_argument("--max-concurrent-rollouts", type=int, default=10)
    parser.add_argument("--rounds", type=int, default=2)
    parser.add_argument("--lead", type=float, default=20.0, help="seconds before the cron fires")
    parser.add_argument("--timeout", type=float, default=1200.0)
    parser.add_argument("--controller-python", default=None)
    parser.add_argument("--controller-source", default=None)
    parser.add_argument("--output", type=Path, default=Path("benchmarks/results"))
    args = parser.parse_args(argv)
    with ControlPlane(nodes=FakeNodes(args.nodes), audit_log=True) as plane:
        result = asyncio.run(measure(plane, args))
    args.output.mkdir(parents=True, exist_ok=True)
    (args.output / "rollouts.json").write_text(json.dumps(result, indent=1) + "\n")
    text = report(result)
    (args.output / "rollouts.md").write_text(text)
    print(text)


if __name__ == "__main__":
    main()
