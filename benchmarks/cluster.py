"""The controller as a user runs it, on a real local control plane, beside its floors.

    python -m benchmarks.cluster --objects 20000 --output benchmarks/results/
    python -m benchmarks.cluster --objects 1000,5000,20000,100000 --output benchmarks/results/

For each object count: start the local control plane with its audit log on, create the
object set (N ConfigMaps of 512 B over 50 namespaces, 500 Deployments, 200 Secrets of 4 KiB,
2 % of them annotated far in the future), measure the floor of the initial list (a plain
paginated metadata-only list of the three types, one after another and in parallel), start
``lifecycle-controller run`` as a separate process and measure: time to /readyz (polled every
50 ms), time to its first API request, CPU to ready, RSS when ready, after idling, and peak
(VmHWM), requests per phase by verb and resource (audit log, by user agent), event-loop lag
(the controller's own histogram); then, at sizes up to ``--actions-up-to``, a burst of
``--burst`` ConfigMaps due at the same second (due → gone from a watch) and a restart storm
of the 500 Deployments, each beside its floor (the same preconditioned writes, each followed
by its Event, from a plain aiohttp client with as many requests in flight as the controller
has workers). Writes ``cluster.json``, ``cluster.md`` and, with matplotlib (the ``bench``
extra), PNG plots. See benchmarks/README.md.

At large counts (a million ConfigMaps) the ConfigMaps are written straight into etcd
(``--seed``, :mod:`benchmarks.etcd_seed`), and every start is also judged against a plain
client's protobuf streaming list of the same objects in a process of its own
(:mod:`benchmarks.floor_list`), the real floor of a metadata-only informer.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import math
import os
import signal
import socket
import statistics
import subprocess
import sys
import time
from collections.abc import Awaitable, Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from benchmarks.bytecode import compile_bytecode
from benchmarks.cluster_floors import (
    deletion_job_floor,
    request_floors,
    restart_job_floor,
    stream_floor,
)
from benchmarks.cluster_measure import (
    BENCH_AGENT,
    ProcSample,
    Sampler,
    lag_summary,
    list_floor,
    proc_sample,
    read_audit,
    requests_between,
    scrape_lag_buckets,
)
from benchmarks.cluster_objects import (
    CONFIGMAPS,
    DEPLOYMENT_COUNT,
    DEPLOYMENTS,
    FAR,
    NAMESPACE_COUNT,
    PAYLOAD,
    SECRET_COUNT,
    SECRETS,
    WATCHED,
    configmap,
    deployment,
    due_time,
    gather_limited,
)
from benchmarks.cluster_report import write_reports
from benchmarks.etcd_seed import (
    Seeded,
    etcd_db_bytes,
    seed_configmaps,
    served_count,
    verify_seeded,
)
from benchmarks.profile_stacks import Sampler as StackSampler
from benchmarks.profile_stacks import top_items
from lifecycle_controller.core.objects import keys
from lifecycle_controller.devcluster import ControlPlane
from lifecycle_controller.kube import (
    EVENTS,
    NAMESPACES,
    KubeClient,
    ResourceType,
    load_configuration,
)

IDLE_AFTER_READY = 5.0  # seconds after ready before idle CPU is counted
#: Seconds after the storm's due time by which every rollout must be verified.
VERIFY_LIMIT_S = 180.0
#: ``--seed auto`` writes the ConfigMaps into etcd above this count (through the API up to it).
SEED_API_UP_TO = 20000
#: etcd's limits for a seeded control plane: a million objects need more than the default
#: 2 GiB quota once their revisions are counted, and a transaction holds up to 1,000 puts.
ETCD_QUOTA_BYTES = 8 * 1024**3
ETCD_MAX_TXN_OPS = 1000
CONTROL_PLANE = ("etcd", "kube-apiserver", "kube-controller-manager")


def _free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port: int = sock.getsockname()[1]
        return port


def _annotations(i: int, key: str) -> dict[str, str]:
    return {key: FAR} if i % 50 == 0 else {}


async def settle(kube: KubeClient, quiet: float = 5.0, limit: float = 300.0) -> float:
    """Wait until the Deployments stop changing (no item's resourceVersion moved for
    ``quiet`` seconds): after the object set is created, kube-controller-manager creates a
    ReplicaSet for each and writes its status for a minute or more, and every write is a
    watch event the controller handles. Idle CPU measured in that minute was the cost of
    those events, not of idling. Returns the seconds waited."""
    started = time.perf_counter()
    last = ""
    while time.perf_counter() - started < limit:
        listing = await kube.list_metadata(DEPLOYMENTS, limit=0)
        newest = max(
            (int(item["metadata"]["resourceVersion"]) for item in listing["items"]), default=0
        )
        if str(newest) == last:
            break
        last = str(newest)
        await asyncio.sleep(quiet)
    return time.perf_counter() - started


def _configmaps(objects: int) -> Iterator[Seeded]:
    """The ConfigMaps of the object set: namespace, name and annotations."""
    delete_at = keys.PREFIX + "delete-at"
    for i in range(objects):
        yield f"bench-{i % NAMESPACE_COUNT:02d}", f"cm-{i:06d}", _annotations(i, delete_at)


async def seed_through_etcd(kube: KubeClient, etcd_url: str, objects: int) -> dict[str, float]:
    """The ConfigMaps written straight into etcd (``benchmarks.etcd_seed``), then checked
    served by the API server: the seconds each step took."""
    before = await served_count(kube, CONFIGMAPS)
    started = time.perf_counter()
    await seed_configmaps(etcd_url, _configmaps(objects), payload=PAYLOAD)
    seeded = time.perf_counter()
    first = next(_configmaps(1))
    await verify_seeded(kube, CONFIGMAPS, before + objects, first)
    return {"seed_s": seeded - started, "seed_verify_s": time.perf_counter() - seeded}


async def populate(
    kube: KubeClient,
    objects: int,
    etcd_url: str | None = None,
    timings: dict[str, float] | None = None,
) -> float:
    """The object set, through the API (or its ConfigMaps through etcd, with ``etcd_url``;
    ``timings`` gets the seeding's)."""
    started = time.perf_counter()
    namespaces = [f"bench-{i:02d}" for i in range(NAMESPACE_COUNT)]
    for ns in [*namespaces, "burst", "floor"]:
        body = {"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": ns}}
        await kube.create(NAMESPACES, None, body)
    delete_at, restart_at = keys.PREFIX + "delete-at", keys.PREFIX + "restart-at"
    work: list[Any] = []
    if etcd_url:
        seeding = await seed_through_etcd(kube, etcd_url, objects)
        if timings is not None:
            timings.update(seeding)
    else:
        work += [
            kube.create(CONFIGMAPS, ns, configmap(ns, n, a)) for ns, n, a in _configmaps(objects)
        ]
    for i in range(SECRET_COUNT):
        ns = namespaces[i % NAMESPACE_COUNT]
        secret = {
            "apiVersion": "v1",
            "kind": "Secret",
            "metadata": {"name": f"s-{i:04d}", "annotations": _annotations(i, delete_at)},
            "stringData": {"key": "s" * 4096},
        }
        work.append(kube.create(SECRETS, ns, secret))
    for i in range(DEPLOYMENT_COUNT):
        ns = namespaces[i % NAMESPACE_COUNT]
        work.append(
            kube.create(DEPLOYMENTS, ns, deployment(ns, f"d-{i:04d}", _annotations(i, restart_at)))
        )
    await gather_limited(work)
    return time.perf_counter() - started


DEFAULT_WATCH = ("configmaps", "secrets", "deployments.apps")


def _controller_argv(
    kubeconfig: Path,
    probe: int,
    metrics: int,
    python: str | None = None,
    resources: tuple[str, ...] | None = None,
    flags: tuple[str, ...] = (),
) -> list[str]:
    """The command line of the controller under test: ``resources`` watched (ConfigMaps,
    Secrets and Deployments when None), ``flags`` added to the usual ones."""
    interpreter = python or sys.executable
    script = Path(interpreter).with_name("lifecycle-controller")
    command = [str(script)] if script.exists() else [interpreter, "-m", "lifecycle_controller"]
    return [
        *command,
        "run",
        f"--kubeconfig={kubeconfig}",
        *(f"--watch-resource={resource}" for resource in resources or DEFAULT_WATCH),
        f"--health-probe-bind-address=127.0.0.1:{probe}",
        f"--metrics-bind-address=127.0.0.1:{metrics}",
        "--metrics-secure=false",
        "--log-format=json",
        "--log-level=warning",
        *flags,
    ]


def _spawn(argv: list[str], source: str | None, log: Path) -> subprocess.Popen[bytes]:
    env = dict(os.environ)
    if source:
        env["PYTHONPATH"] = str(Path(source).resolve())
    with log.open("wb") as handle:
        return subprocess.Popen(argv, env=env, stdout=subprocess.DEVNULL, stderr=handle)


async def _watch_until(
    kube: KubeClient,
    resource: ResourceType,
    namespace: str | None,
    resource_version: str,
    done: Any,
    expected: int,
    deadline: float,
    *,
    whole: bool = False,
    name_of: Callable[[dict[str, Any]], str] | None = None,
) -> dict[str, float]:
    """Wall time per object name (``name_of(object)``: namespace/name) at which
    ``done(event)`` first held, from a watch of metadata (of whole objects when ``whole``)."""
    seen: dict[str, float] = {}
    while len(seen) < expected and time.time() < deadline:
        with contextlib.suppress(Exception):
            async with asyncio.timeout(max(0.1, deadline - time.time())):
                watch = kube.watch_objects if whole else kube.watch_metadata
                stream = watch(
                    resource,
                    namespace=namespace,
                    resource_version=resource_version,
                    timeout_seconds=300,
                )
                async for event in stream:
                    obj = event.get("object") or {}
                    metadata = obj.get("metadata") or {}
                    resource_version = metadata.get("resourceVersion", resource_version)
                    name = (
                        name_of(obj)
                        if name_of
                        else f"{metadata.get('namespace')}/{metadata.get('name')}"
                    )
                    if name not in seen and done(event):
                        seen[name] = time.time()
                        if len(seen) >= expected:
                            break
    return seen


async def burst(kube: KubeClient, count: int, lead: float) -> dict[str, Any]:
    """``count`` ConfigMaps due at the same second; lateness of each deletion from a watch."""
    listing = await kube.list_metadata(CONFIGMAPS, namespace="burst", limit=1)
    since = listing["metadata"]["resourceVersion"]
    due, stamp = due_time(lead)
    annotations = {keys.PREFIX + "delete-at": stamp}
    created = time.time()
    await gather_limited(
        [
            kube.create(CONFIGMAPS, "burst", configmap("burst", f"b-{i:05d}", annotations))
            for i in range(count)
        ]
    )
    creation_s = time.time() - created
    gone = await _watch_until(
        kube, CONFIGMAPS, "burst", since, lambda e: e.get("type") == "DELETED", count, due + 120
    )
    lateness = sorted(t - due for t in gone.values())
    return {
        "count": count,
        "due": due,
        "created_before_due_s": round(due - created - creation_s, 2),
        "done": len(gone),
        "last_gone_s": round(lateness[-1], 3) if lateness else None,
        "p50_s": round(lateness[len(lateness) // 2], 3) if lateness else None,
        "p99_s": round(lateness[min(len(lateness) - 1, int(0.99 * len(lateness)))], 3)
        if lateness
        else None,
        "lateness_s": [round(v, 3) for v in lateness],
        "end": max(gone.values()) if gone else due,
    }


async def restart_storm(kube: KubeClient, count: int, lead: float) -> dict[str, Any]:
    """Every Deployment gets the same ``restart-at``; time until each is acknowledged, and
    until the controller has verified every rollout: its ``RolloutCompleted`` Event about
    each Deployment is written (seen from a watch of Events: asking the controller's
    ``/metrics`` instead cost it CPU the floor does not spend). The round, and so its CPU,
    ends there, as the whole-job floor ends with its own ``RolloutCompleted`` Events."""
    listing = await kube.list_metadata(DEPLOYMENTS, limit=1)
    since = listing["metadata"]["resourceVersion"]
    events_since = (await kube.list_metadata(EVENTS, limit=1))["metadata"]["resourceVersion"]
    due, stamp = due_time(lead)
    patch = {"metadata": {"annotations": {keys.PREFIX + "restart-at": stamp}}}
    names = [(f"bench-{i % NAMESPACE_COUNT:02d}", f"d-{i:04d}") for i in range(count)]
    await gather_limited([kube.merge_patch(DEPLOYMENTS, ns, n, patch) for ns, n in names])

    def acknowledged(event: dict[str, Any]) -> bool:
        # The controller's one patch removes restart-at and sets managed-by (ours sets neither).
        annotations = event.get("object", {}).get("metadata", {}).get("annotations") or {}
        return keys.MANAGED_BY in annotations and keys.PREFIX + "restart-at" not in annotations

    followed = {f"{ns}/{n}" for ns, n in names}

    def regarding(event: dict[str, Any]) -> str:
        about = event.get("regarding") or {}
        return f"{about.get('namespace')}/{about.get('name')}"

    def completed(event: dict[str, Any]) -> bool:
        obj = event.get("object") or {}
        return obj.get("reason") == "RolloutCompleted" and regarding(obj) in followed

    verifying = asyncio.create_task(
        _watch_until(
            kube,
            EVENTS,
            None,
            events_since,
            completed,
            len(names),
            due + VERIFY_LIMIT_S,
            whole=True,
            name_of=regarding,
        )
    )
    done = await _watch_until(kube, DEPLOYMENTS, None, since, acknowledged, len(names), due + 60)
    verified = await verifying
    lateness = sorted(t - due for t in done.values())
    verified_at = max(verified.values()) if verified else time.time()
    return {
        "count": len(names),
        "due": due,
        "done": len(done),
        "last_done_s": round(lateness[-1], 3) if lateness else None,
        "verified": len(verified),
        "verified_s": round(verified_at - due, 3),
        "end": max(done.values()) if done else due,
        "verified_end": verified_at,
    }


@dataclass
class _Running:
    """One started controller process and its 50 ms sampler."""

    process: subprocess.Popen[bytes]
    sampler: Sampler
    sampling: asyncio.Task[None]
    started: float
    metrics_url: str

    async def until_ready(self) -> ProcSample:
        while self.sampler.ready_at is None:
            if self.process.poll() is not None:
                raise RuntimeError(f"the controller exited: {self.process.returncode}")
            await asyncio.sleep(0.02)
        return self.sampler.last()

    async def stop(self) -> None:
        self.process.send_signal(signal.SIGTERM)
        with contextlib.suppress(subprocess.TimeoutExpired):
            self.process.wait(20)
        if self.process.poll() is None:
            self.process.kill()
        self.sampling.cancel()
        with contextlib.suppress(asyncio.CancelledError):
            await self.sampling


def _start(
    plane: ControlPlane,
    args: argparse.Namespace,
    resources: tuple[str, ...] | None = None,
    flags: tuple[str, ...] = (),
) -> _Running:
    """``lifecycle-controller run`` as a process of its own (``flags`` added to the usual)."""
    probe, metrics = _free_port(), _free_port()
    compile_bytecode(args.controller_python, args.controller_source)
    started = time.time()
    argv = _controller_argv(
        plane.admin_kubeconfig,
        probe,
        metrics,
        args.controller_python,
        resources,
        flags,
    )
    process = _spawn(argv, args.controller_source, plane.logs_dir / "controller.log")
    sampler = Sampler(process.pid, started, f"http://127.0.0.1:{probe}/readyz")
    sampling = asyncio.create_task(sampler.run())
    return _Running(process, sampler, sampling, started, f"http://127.0.0.1:{metrics}/metrics")


def _median(values: list[float]) -> float:
    return round(statistics.median(values), 3)


def _startup(
    running: _Running,
    at_ready: ProcSample,
    floor: dict[str, Any],
    stream: dict[str, Any] | None = None,
) -> dict[str, Any]:
    """One start's figures beside its floors (the paginated one is absent above
    ``--paginated-floor-up-to``)."""
    assert running.sampler.ready_at is not None
    one = {
        "started": running.started,
        "ready_s": round(running.sampler.ready_at, 3),
        "floor_sequential_s": floor.get("sequential_s"),
        "floor_parallel_s": floor.get("parallel_s"),
        "cpu_to_ready_s": round(at_ready.cpu_s, 3),
        "rss_ready_mb": round(at_ready.rss_mb, 1),
        "hwm_ready_mb": round(at_ready.hwm_mb, 1),
    }
    if stream is not None:
        one["stream_floor_s"] = stream["seconds"]
        one["stream_floor_process_s"] = stream["process_s"]
        one["stream_floor_cpu_s"] = stream["cpu_s"]
        one["stream_floor_cpu_total_s"] = stream["cpu_total_s"]
        one["stream_floor_objects"] = sum(stream["objects"].values())
    return one


def _median_of(startups: list[dict[str, Any]], key: str) -> float | None:
    values = [s[key] for s in startups if s.get(key) is not None]
    return _median(values) if values else None


def _ratios(startups: list[dict[str, Any]], floor_key: str) -> list[float]:
    """Each start's time to ready over the floor measured just before it."""
    return [round(s["ready_s"] / s[floor_key], 3) for s in startups if s.get(floor_key)]


def control_plane_memory(plane: ControlPlane) -> dict[str, dict[str, float]]:
    """RSS, peak RSS (VmHWM) and CPU of etcd, kube-apiserver and kube-controller-manager."""
    out: dict[str, dict[str, float]] = {}
    for name in CONTROL_PLANE:
        sample = proc_sample(plane.pid(name), time.time())
        if sample is not None:
            out[name] = {
                "rss_mb": round(sample.rss_mb, 1),
                "hwm_mb": round(sample.hwm_mb, 1),
                "cpu_s": round(sample.cpu_s, 1),
            }
    return out


def _median_of_rounds(rounds: list[dict[str, Any]], key: str) -> dict[str, Any]:
    """The round whose ``key`` is the median (its figures stay together), with every round's."""

    def order(one: dict[str, Any]) -> float:
        value = one.get(key)
        return math.inf if value is None else float(value)

    ordered = sorted(rounds, key=order)
    chosen = dict(ordered[(len(ordered) - 1) // 2])
    chosen["rounds"] = [{k: v for k, v in r.items() if k != "lateness_s"} for r in rounds]
    return chosen


async def _actions(
    kube: KubeClient, kubeconfig: Path, running: _Running, args: argparse.Namespace
) -> tuple[dict[str, Any], dict[str, Any], dict[str, Any], dict[str, tuple[float, float]]]:
    """``--rounds`` bursts, then ``--rounds`` storms, on the running controller, each
    followed at once by its whole-job floor (``benchmarks/cluster_floors.py`` says why)."""

    profiles: dict[str, Any] = {}

    async def rounds(
        name: str,
        action: Callable[[], Awaitable[dict[str, Any]]],
        floor: Callable[[int], Awaitable[dict[str, Any]]],
    ) -> list[dict[str, Any]]:
        stacks = args.output / f"profile-{name}-{args.burst}.txt"
        stacks.unlink(missing_ok=True)
        done = []
        for number in range(args.rounds):
            profiler = StackSampler(running.process.pid, stacks.with_suffix(f".{number}.txt"))
            profiling = args.profile and profiler.start()
            cpu = running.sampler.last().cpu_s
            one = await action()
            one["controller_cpu_s"] = round(running.sampler.last().cpu_s - cpu, 3)
            if profiling:  # the controller's own rounds only, never its floor's
                profiler.stop()
                with stacks.open("a") as merged:
                    merged.write(profiler.output.read_text())
                profiler.output.unlink()
            cpu = running.sampler.last().cpu_s
            one["floor"] = await floor(number)
            one["floor"]["controller_cpu_s"] = round(running.sampler.last().cpu_s - cpu, 3)
            one["cpu_ratio"] = round(
                1000 * one["controller_cpu_s"] / max(1, one["done"]) / one["floor"]["cpu_ms"], 3
            )
            done.append(one)
        if args.profile and stacks.exists():
            profiles[name] = top_items(stacks)
        return done

    lag0 = await scrape_lag_buckets(running.metrics_url)
    bursts = await rounds(
        "burst",
        lambda: burst(kube, args.burst, args.lead),
        lambda n: deletion_job_floor(kube, kubeconfig, args.burst, args.lead, str(n)),
    )
    lag1 = await scrape_lag_buckets(running.metrics_url)
    storms = await rounds(
        "storm",
        lambda: restart_storm(kube, args.storm, args.lead),
        lambda n: restart_job_floor(kube, kubeconfig, args.storm, args.lead),
    )
    chosen_burst = _median_of_rounds(bursts, "last_gone_s")
    chosen_storm = _median_of_rounds(storms, "last_done_s")
    # CPU per action, its floor and their ratio are each their own median over the pairs.
    for chosen, done in ((chosen_burst, bursts), (chosen_storm, storms)):
        chosen["controller_cpu_s"] = _median([r["controller_cpu_s"] for r in done])
        chosen["job_floor_cpu_ms"] = _median([r["floor"]["cpu_ms"] for r in done])
        chosen["job_floor_watch_events"] = _median([r["floor"]["watch_events"] for r in done])
        chosen["cpu_ratio"] = _median([r["cpu_ratio"] for r in done])
    if profiles:
        chosen_burst["profile"], chosen_storm["profile"] = profiles["burst"], profiles["storm"]
    phases = {
        "burst": (chosen_burst["due"] - 0.5, chosen_burst["end"] + 0.5),
        "storm": (chosen_storm["due"] - 0.5, chosen_storm["verified_end"]),
    }
    return chosen_burst, chosen_storm, lag_summary(lag0, lag1), phases


async def measure(plane: ControlPlane, objects: int, args: argparse.Namespace) -> dict[str, Any]:
    result: dict[str, Any] = {
        "objects": objects,
        "deployments": DEPLOYMENT_COUNT,
        "secrets": SECRET_COUNT,
        "rounds": args.rounds,
    }
    config, _ = await load_configuration(str(plane.admin_kubeconfig))
    startups: list[dict[str, Any]] = []
    lag: dict[str, Any] = {}
    phases: dict[str, tuple[float, float]] = {}
    floor: dict[str, Any] = {}
    seed = _seed_mode(args, objects)
    result["seed"] = seed
    async with await KubeClient.connect(
        str(plane.admin_kubeconfig), user_agent=BENCH_AGENT
    ) as kube:
        timings: dict[str, float] = {}
        etcd_url = plane.etcd_url if seed == "etcd" else None
        result["create_s"] = round(await populate(kube, objects, etcd_url, timings), 1)
        result.update({key: round(value, 1) for key, value in timings.items()})
        result["settle_s"] = round(await settle(kube, limit=args.settle_limit), 1)
        result["etcd_db_mb_seeded"] = round(await etcd_db_bytes(plane.etcd_url) / 2**20, 1)
        # Each round: the floors, then a fresh controller start (paired, one after another).
        for round_number in range(args.rounds):
            stream = await stream_floor(plane.admin_kubeconfig) if args.stream_floor else None
            floor = {}
            if objects <= args.paginated_floor_up_to:
                floor = await list_floor(config, WATCHED, runs=max(1, 3 // args.rounds))
            running = _start(plane, args)
            try:
                at_ready = await running.until_ready()
                startups.append(_startup(running, at_ready, floor, stream))
                if round_number < args.rounds - 1:
                    continue
                lag_ready = await scrape_lag_buckets(running.metrics_url)
                lag["initial_sync"] = lag_summary({}, lag_ready)
                ready_wall = running.started + startups[-1]["ready_s"]
                phases["startup"] = (running.started, ready_wall)
                # The reconciles of the annotated objects listed run on after ready (2,000
                # at 100k): idle CPU is counted from when they are done.
                await asyncio.sleep(IDLE_AFTER_READY)
                quiet = running.sampler.last()
                await asyncio.sleep(args.idle)
                idle = running.sampler.last()
                phases["idle"] = (ready_wall, time.time())
                result["idle_s"] = args.idle
                result["rss_idle_mb"] = round(idle.rss_mb, 1)
                result["cpu_idle_s"] = round(idle.cpu_s - quiet.cpu_s, 3)
                if objects <= args.actions_up_to:
                    burst_run, storm_run, lag["burst"], windows = await _actions(
                        kube, plane.admin_kubeconfig, running, args
                    )
                    result["burst"], result["storm"] = burst_run, storm_run
                    phases.update(windows)
                result["hwm_mb"] = round(running.sampler.last().hwm_mb, 1)
            finally:
                await running.stop()
        result["control_plane"] = control_plane_memory(plane)
        result["etcd_db_mb"] = round(await etcd_db_bytes(plane.etcd_url) / 2**20, 1)
        result["lag"] = lag
        result["timeline"] = [
            [round(s.t, 2), round(s.rss_mb, 1), round(s.cpu_s, 2)] for s in running.sampler.samples
        ]
        if objects <= args.actions_up_to:
            floors = [
                await request_floors(kube, plane.admin_kubeconfig, args.burst, args.storm)
                for _ in range(args.rounds)
            ]
            result["action_floors"] = {k: _median([f[k] for f in floors]) for k in floors[0]}
            result["action_floor_rounds"] = floors
    audit = read_audit(plane.audit_log)
    ours = [r for r in audit if r.agent.startswith("lifecycle-controller/")]
    for startup in startups:
        after = [r.at for r in ours if r.at >= startup["started"]]
        startup["first_request_s"] = round(min(after) - startup["started"], 3) if after else None
    for key in ("ready_s", "cpu_to_ready_s", "rss_ready_mb", "hwm_ready_mb"):
        result[key] = _median([s[key] for s in startups])
    firsts = [s["first_request_s"] for s in startups if s["first_request_s"] is not None]
    result["first_request_s"] = _median(firsts) if firsts else None
    result["list_floor"] = {
        "sequential_s": _median_of(startups, "floor_sequential_s"),
        "parallel_s": _median_of(startups, "floor_parallel_s"),
        "metadata_bytes_per_type": floor.get("metadata_bytes_per_type"),
    }
    if startups and "stream_floor_s" in startups[0]:
        result["stream_floor"] = {
            key: _median_of(startups, f"stream_floor_{key}")
            for key in ("s", "process_s", "cpu_s", "cpu_total_s")
        }
        result["stream_floor"]["objects"] = startups[0]["stream_floor_objects"]
        result["ready_stream_ratio_rounds"] = _ratios(startups, "stream_floor_s")
        result["ready_stream_process_ratio_rounds"] = _ratios(startups, "stream_floor_process_s")
    # The peak is the worst of every start (and of the last one's whole run).
    result["hwm_mb"] = max([result.get("hwm_mb", 0.0)] + [s["hwm_ready_mb"] for s in startups])
    result["ready_ratio_rounds"] = _ratios(startups, "floor_sequential_s")
    result["startup_rounds"] = startups
    result["requests"] = {
        name: requests_between(audit, "lifecycle-controller/", *window)
        for name, window in phases.items()
    }
    return result


def _seed_mode(args: argparse.Namespace, objects: int) -> str:
    """How the ConfigMaps are created: ``--seed``, or with ``auto`` through the API up to
    SEED_API_UP_TO objects and straight into etcd above."""
    if args.seed != "auto":
        return str(args.seed)
    return "api" if objects <= SEED_API_UP_TO else "etcd"


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(
        prog="python -m benchmarks.cluster", description=__doc__.split("\n\n")[0]
    )
    parser.add_argument("--objects", default="20000", help="ConfigMap counts, comma-separated")
    parser.add_argument("--output", type=Path, default=Path("benchmarks/results"))
    parser.add_argument("--idle", type=float, default=60.0, help="seconds idle after ready")
    parser.add_argument("--burst", type=int, default=1000, help="ConfigMaps due at once")
    parser.add_argument(
        "--storm", type=int, default=DEPLOYMENT_COUNT, help="Deployments due at once"
    )
    parser.add_argument(
        "--lead", type=float, default=12.0, help="seconds from creating the burst to its due time"
    )
    parser.add_argument(
        "--actions-up-to", type=int, default=20000, help="burst and storm only up to this size"
    )
    parser.add_argument(
        "--controller-source",
        help="run the controller from this source folder (compare a checkout)",
    )
    parser.add_argument(
        "--controller-python",
        help="run the controller with this interpreter (e.g. a virtualenv with only the "
        "package installed, as a user has it: development tools change import times)",
    )
    parser.add_argument(
        "--rounds",
        type=int,
        default=3,
        help="startups (each paired with a list floor), bursts, storms and action floors per "
        "object count; the report gives medians",
    )
    parser.add_argument(
        "--settle-limit",
        type=float,
        default=300.0,
        help="seconds at most to wait, after creating the objects, until no Deployment changed "
        "for 5 s (kube-controller-manager's status writes)",
    )
    parser.add_argument(
        "--profile",
        action="store_true",
        help="sample the controller's stacks during the bursts and the storms (the bench "
        "extra's sampler); top items in the report, raw stacks in --output",
    )
    parser.add_argument(
        "--seed",
        choices=("auto", "api", "etcd"),
        default="auto",
        help="create the ConfigMaps through the API, or write them straight into etcd in the "
        f"API server's storage encoding (benchmarks/etcd_seed.py); auto: etcd above "
        f"{SEED_API_UP_TO:,}",
    )
    parser.add_argument(
        "--paginated-floor-up-to",
        type=int,
        default=10**9,
        help="measure the paginated JSON list floor only up to this size (it takes minutes "
        "at a million objects)",
    )
    parser.add_argument(
        "--no-stream-floor",
        dest="stream_floor",
        action="store_false",
        help="skip the streaming-list floor (benchmarks/floor_list.py) before each start",
    )
    parser.add_argument(
        "--report-name",
        default="cluster",
        help="the outputs' file name: NAME.json, NAME.md, NAME-scaling.png",
    )
    parser.add_argument("--label", default="", help="a name for this run in the report")
    parser.add_argument("--no-plots", action="store_true")
    args = parser.parse_args(argv)
    args.output.mkdir(parents=True, exist_ok=True)
    runs = []
    for objects in (int(v) for v in args.objects.split(",")):
        limits: dict[str, Any] = {}
        if _seed_mode(args, objects) == "etcd":
            limits = {"etcd_quota_bytes": ETCD_QUOTA_BYTES, "etcd_max_txn_ops": ETCD_MAX_TXN_OPS}
        with ControlPlane(audit_log=True, log=lambda line: None, **limits) as plane:
            run = asyncio.run(measure(plane, objects, args))
        run["label"] = args.label
        runs.append(run)
        print(
            f"{objects} objects: ready {run['ready_s']} s "
            f"(floor {run['list_floor']['sequential_s']} s, "
            f"streaming {run.get('stream_floor', {}).get('s')} s), "
            f"RSS {run['rss_ready_mb']}/{run['rss_idle_mb']} MB, peak {run['hwm_mb']} MB",
            flush=True,
        )
    write_reports(runs, args.output, plots_wanted=not args.no_plots, name=args.report_name)
    print(f"wrote {args.output}/{args.report_name}.json and {args.report_name}.md")


if __name__ == "__main__":
    main()
