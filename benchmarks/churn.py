"""The cost of churn: CPU per watch event of objects the controller never acts on, beside its floor.

    python -m benchmarks.churn --objects 5000 --patches 15000 --in-flight 32 --rounds 3 \
        --output benchmarks/results/

In a busy cluster most of what the controller pays for is the watch events of objects that
carry no lifecycle annotation and that no policy selects. On a fresh local control plane:

* **objects**: ``--objects`` unannotated ConfigMaps of 512 B over 10 namespaces (``--kind
  pods``: Pods of one container that no scheduler places, so they stay Pending);
* **controller**: ``lifecycle-controller run --watch-resource=configmaps`` (or ``pods``), a
  process of its own, all other flags default, started once the objects exist;
* **floor**: ``benchmarks.floor_churn``, a plain aiohttp client in a process of its own that
  watches the same collection as JSON ``PartialObjectMetadata`` and ``json.loads`` each event;
* **rounds** (``--rounds``): first an idle window (``--idle`` seconds) that gives each
  process's idle CPU per second, then the churn: ``--patches`` label merge patches over the
  objects, ``--in-flight`` at a time, from this process; the window ends when both the
  floor and the controller (its ``lifecycle_watch_events_total``) have seen every event.
  Each process's CPU (utime + stime from ``/proc/PID/stat``) over the window, less its idle
  CPU over the same duration, divided by the number of patches, is its CPU per event.

The report gives the median of the rounds for each, and the ratio controller / floor (the
median of each round's ratio); ``events_per_core_s`` is the churn one core follows at the
controller's median (1 s / CPU per event). ``--profile`` samples the controller with py-spy
during the churn. Writes ``churn[-pods].json`` and ``churn[-pods].md`` into ``--output``.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import json
import signal
import statistics
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import aiohttp

from benchmarks.bytecode import compile_bytecode
from benchmarks.cluster import _Running, _start
from benchmarks.cluster_measure import BENCH_AGENT, proc_sample
from benchmarks.cluster_objects import CONFIGMAPS, PAYLOAD, gather_limited
from benchmarks.profile_stacks import Sampler as StackSampler
from benchmarks.profile_stacks import top_items
from lifecycle_controller.devcluster import ControlPlane
from lifecycle_controller.kube import NAMESPACES, KubeClient, NotFound, ResourceType
from lifecycle_controller.kube.resources import PODS

__all__ = ["main"]

NAMESPACES_USED = 10
#: The longest wait for the last events of a round to reach both watchers.
DRAIN_LIMIT_S = 120.0


def _namespace(i: int) -> str:
    return f"churn-{i % NAMESPACES_USED:02d}"


def _body(kind: str, i: int) -> dict[str, Any]:
    metadata = {"name": f"obj-{i:06d}", "labels": {"churn": "0"}}
    if kind == "configmaps":
        return {"apiVersion": "v1", "kind": "ConfigMap", "metadata": metadata, "data": PAYLOAD}
    container = {"name": "app", "image": "registry.invalid/app:1"}
    spec = {"containers": [container], "automountServiceAccountToken": False}
    return {"apiVersion": "v1", "kind": "Pod", "metadata": metadata, "spec": spec}


async def _default_service_accounts(kube: KubeClient, limit: float = 60.0) -> None:
    """Pods are admitted once their namespace's ``default`` ServiceAccount exists
    (kube-controller-manager creates it)."""
    accounts = ResourceType("", "v1", "serviceaccounts", "ServiceAccount", namespaced=True)
    deadline = time.monotonic() + limit
    for n in range(NAMESPACES_USED):
        while True:
            try:
                await kube.get_metadata(accounts, _namespace(n), "default")
                break
            except NotFound:
                if time.monotonic() > deadline:
                    raise
                await asyncio.sleep(0.5)


async def populate(kube: KubeClient, kind: str, objects: int) -> float:
    started = time.perf_counter()
    for n in range(NAMESPACES_USED):
        body = {"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": _namespace(n)}}
        await kube.create(NAMESPACES, None, body)
    resource = CONFIGMAPS if kind == "configmaps" else PODS
    if kind == "pods":
        await _default_service_accounts(kube)
    await gather_limited(
        [kube.create(resource, _namespace(i), _body(kind, i)) for i in range(objects)]
    )
    return time.perf_counter() - started


async def churn(
    kube: KubeClient, kind: str, objects: int, patches: int, in_flight: int, tag: str
) -> None:
    """``patches`` label merge patches over the objects, ``in_flight`` at a time."""
    resource = CONFIGMAPS if kind == "configmaps" else PODS
    work = [
        kube.merge_patch(
            resource,
            _namespace(i % objects),
            f"obj-{i % objects:06d}",
            {"metadata": {"labels": {"churn": f"{tag}-{i}"}}},
            field_manager="churn-bench",
        )
        for i in range(patches)
    ]
    await gather_limited(work, limit=in_flight)


class _Floor:
    """The floor's process: asked for its count by SIGUSR1, answering one JSON line."""

    def __init__(self, kubeconfig: Path, path: str) -> None:
        compile_bytecode()
        argv = [sys.executable, "-m", "benchmarks.floor_churn", f"--kubeconfig={kubeconfig}"]
        self.process = subprocess.Popen(
            [*argv, f"--path={path}"], stdout=subprocess.PIPE, text=True
        )

    async def watching(self) -> None:
        assert self.process.stdout is not None
        line = await asyncio.to_thread(self.process.stdout.readline)
        if line.strip() != "watching":
            raise RuntimeError(f"the churn floor did not start: {line!r}")

    async def events(self) -> int:
        assert self.process.stdout is not None
        self.process.send_signal(signal.SIGUSR1)
        line = await asyncio.to_thread(self.process.stdout.readline)
        while line.strip() == "watching":  # its watch was opened again
            line = await asyncio.to_thread(self.process.stdout.readline)
        return int(json.loads(line)["events"])

    def stop(self) -> None:
        self.process.send_signal(signal.SIGINT)
        with contextlib.suppress(subprocess.TimeoutExpired):
            self.process.wait(10)
        if self.process.poll() is None:
            self.process.kill()
            self.process.wait()
        if self.process.stdout is not None:
            self.process.stdout.close()


async def _controller_events(session: aiohttp.ClientSession, url: str, kind: str) -> float:
    """Every watch event of ``kind`` the controller counted (``lifecycle_watch_events_total``)."""
    async with session.get(url) as response:
        text = await response.text()
    total = 0.0
    for line in text.splitlines():
        if line.startswith("lifecycle_watch_events_total{") and f'resource="{kind}' in line:
            total += float(line.rsplit(" ", 1)[1])
    return total


def _cpu(pid: int) -> float:
    sample = proc_sample(pid, 0.0)
    if sample is None:
        raise RuntimeError(f"process {pid} is gone")
    return sample.cpu_s


async def _round(
    kube: KubeClient,
    args: argparse.Namespace,
    running: _Running,
    floor: _Floor,
    session: aiohttp.ClientSession,
    tag: str,
    profile: Path | None,
) -> dict[str, Any]:
    pids = {"controller": running.process.pid, "floor": floor.process.pid}
    before = {name: _cpu(pid) for name, pid in pids.items()}
    started = time.perf_counter()
    await asyncio.sleep(args.idle)
    idle_s = time.perf_counter() - started
    idle_rate = {name: (_cpu(pid) - before[name]) / idle_s for name, pid in pids.items()}

    floor_before = await floor.events()
    controller_before = await _controller_events(session, running.metrics_url, args.kind)
    stacks = StackSampler(running.process.pid, profile) if profile else None
    if stacks is not None:
        stacks.start()
    before = {name: _cpu(pid) for name, pid in pids.items()}
    started = time.perf_counter()
    await churn(kube, args.kind, args.objects, args.patches, args.in_flight, tag)
    patched_s = time.perf_counter() - started
    deadline = time.monotonic() + DRAIN_LIMIT_S
    while True:
        floor_seen = await floor.events() - floor_before
        controller_seen = (
            await _controller_events(session, running.metrics_url, args.kind) - controller_before
        )
        if floor_seen >= args.patches and controller_seen >= args.patches:
            break
        if time.monotonic() > deadline:
            raise RuntimeError(f"events seen: floor {floor_seen}, controller {controller_seen}")
        await asyncio.sleep(0.2)
    window_s = time.perf_counter() - started
    cpu = {name: _cpu(pid) - before[name] for name, pid in pids.items()}
    if stacks is not None:
        stacks.stop()
    per_event = {
        name: (cpu[name] - idle_rate[name] * window_s) / args.patches * 1e6 for name in pids
    }
    return {
        "patched_s": round(patched_s, 3),
        "window_s": round(window_s, 3),
        "events": {"floor": floor_seen, "controller": controller_seen},
        "cpu_s": {name: round(value, 3) for name, value in cpu.items()},
        "idle_cpu_per_s": {name: round(value, 5) for name, value in idle_rate.items()},
        "us_per_event": {name: round(value, 1) for name, value in per_event.items()},
        "ratio": _ratio(per_event["controller"], per_event["floor"]),
    }


def _ratio(controller: float, floor: float) -> float | None:
    """None when the floor's CPU is below what /proc can tell (a tick is 10 ms)."""
    return round(controller / floor, 3) if floor > 0 else None


async def measure(plane: ControlPlane, args: argparse.Namespace) -> dict[str, Any]:
    kubeconfig = plane.admin_kubeconfig
    async with await KubeClient.connect(str(kubeconfig), user_agent=BENCH_AGENT) as kube:
        populate_s = await populate(kube, args.kind, args.objects)
        running = _start(plane, args, resources=(args.kind,))
        floor = _Floor(kubeconfig, f"/api/v1/{args.kind}")
        rounds: list[dict[str, Any]] = []
        try:
            await running.until_ready()
            await floor.watching()
            await asyncio.sleep(args.settle)
            async with aiohttp.ClientSession() as session:
                for n in range(args.rounds):
                    profile = None
                    if args.profile:
                        profile = args.output / f"profile-churn-{args.kind}-{n}.txt"
                    one = await _round(kube, args, running, floor, session, f"r{n}", profile)
                    if profile is not None and profile.exists():
                        one["profile"] = top_items(profile)
                    rounds.append(one)
                    print(json.dumps({k: v for k, v in one.items() if k != "profile"}), flush=True)
        finally:
            floor.stop()
            await running.stop()
    controller = statistics.median(r["us_per_event"]["controller"] for r in rounds)
    floor_us = statistics.median(r["us_per_event"]["floor"] for r in rounds)
    return {
        "kind": args.kind,
        "objects": args.objects,
        "patches": args.patches,
        "in_flight": args.in_flight,
        "populate_s": round(populate_s, 1),
        "controller_us_per_event": round(controller, 1),
        "floor_us_per_event": round(floor_us, 1),
        "ratio": _median_ratio([r["ratio"] for r in rounds]),
        "events_per_core_s": round(1e6 / controller) if controller > 0 else None,
        "rounds": rounds,
    }


def _median_ratio(ratios: list[float | None]) -> float | None:
    known = [ratio for ratio in ratios if ratio is not None]
    return round(statistics.median(known), 3) if known else None


def _report(result: dict[str, Any]) -> str:
    lines = [
        f"Churn of {result['patches']:,} label patches over {result['objects']:,} unannotated "
        f"{result['kind']}, {result['in_flight']} in flight; medians of "
        f"{len(result['rounds'])} rounds.",
        "",
        "| | CPU per event |",
        "|---|---|",
        f"| controller | {result['controller_us_per_event']} µs |",
        f"| floor (plain JSON watch) | {result['floor_us_per_event']} µs |",
        f"| ratio (median of the rounds') | {result['ratio']}x |",
        f"| events per second at 100 % of a core | {result['events_per_core_s']:,} |",
        "",
        "| round | controller | floor | ratio | window |",
        "|---|---|---|---|---|",
    ]
    for n, one in enumerate(result["rounds"]):
        us = one["us_per_event"]
        lines.append(
            f"| {n} | {us['controller']} µs | {us['floor']} µs | {one['ratio']}x | "
            f"{one['window_s']} s |"
        )
    return "\n".join(lines) + "\n"


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(
        prog="python -m benchmarks.churn", description=__doc__.split("\n\n")[0]
    )
    parser.add_argument("--objects", type=int, default=5000)
    parser.add_argument("--patches", type=int, default=15000)
    parser.add_argument("--in-flight", type=int, default=32)
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--kind", choices=("configmaps", "pods"), default="configmaps")
    parser.add_argument("--idle", type=float, default=10.0, help="seconds of idle per round")
    parser.add_argument("--settle", type=float, default=5.0, help="seconds after ready")
    parser.add_argument("--profile", action="store_true", help="py-spy on the controller")
    parser.add_argument("--output", type=Path, default=Path("benchmarks/results"))
    parser.add_argument("--controller-source", help="run the controller from this folder")
    parser.add_argument("--controller-python", help="run the controller with this interpreter")
    args = parser.parse_args(argv)
    args.output.mkdir(parents=True, exist_ok=True)
    with ControlPlane(audit_log=False, log=lambda line: None) as plane:
        result = asyncio.run(measure(plane, args))
    name = "churn" if args.kind == "configmaps" else "churn-pods"
    (args.output / f"{name}.json").write_text(json.dumps(result, indent=2) + "\n")
    (args.output / f"{name}.md").write_text(_report(result))
    print(_report(result))
    print(f"wrote {args.output}/{name}.json and {name}.md")


if __name__ == "__main__":
    main()
