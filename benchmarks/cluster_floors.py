"""The floors the cluster benchmark reads the controller's figures beside.

Each floor runs in a fresh process of its own (:mod:`benchmarks.floor_actions`,
:mod:`benchmarks.floor_list`): the same work as the controller's, done the plainest way.

The whole-job floors of a deletion and of a restart are paired with the controller's rounds:
each burst or storm is followed at once by its floor, on the same control plane in the same
state, and the ratio is taken per pair. The API server and etcd drift during a run (their
heaps and stores grow with every round), and a client's CPU per request follows the API
server's speed: measured one after another, three floors in a row rose from 1.2 to 1.5 to
1.8 ms per deletion. A floor measured after every controller round was read beside rounds
taken in another state of the server.

The controller keeps running while its paired floor runs (stopping and starting it would add
a start to every round). The floor's objects therefore carry annotations under
:data:`FLOOR_PREFIX`, which the controller ignores: it sees their watch events and does
nothing else, and the CPU it spends meanwhile is reported beside each pair.
"""

from __future__ import annotations

import asyncio
import json
import sys
import time
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import Any

from benchmarks.bytecode import compile_bytecode
from benchmarks.cluster_objects import (
    CONFIGMAPS,
    DEPLOYMENTS,
    NAMESPACE_COUNT,
    WATCHED,
    WORKERS,
    configmap,
    due_time,
    gather_limited,
)
from lifecycle_controller.core.objects import keys
from lifecycle_controller.kube import KubeClient

__all__ = [
    "FLOOR_PREFIX",
    "deletion_job_floor",
    "request_floors",
    "restart_job_floor",
    "run_floor",
    "stream_floor",
]

#: The annotation prefix of the floors' objects: as long as the controller's, and not its.
FLOOR_PREFIX = "floor-benchmark.test/"
assert len(FLOOR_PREFIX) == len(keys.PREFIX)


async def run_floor(
    kubeconfig: Path,
    options: list[str],
    then: Callable[[], Awaitable[object]] | None = None,
    *,
    module: str = "benchmarks.floor_actions",
) -> dict[str, Any]:
    """One floor in a fresh process of its own (``benchmarks.floor_actions``, whose docstring
    says what moved the old in-process figure, or another ``module``). ``then`` runs once the
    floor's watch is open (it creates the objects)."""
    compile_bytecode()
    process = await asyncio.create_subprocess_exec(
        sys.executable,
        "-m",
        module,
        f"--kubeconfig={kubeconfig}",
        *options,
        stdout=asyncio.subprocess.PIPE,
    )
    assert process.stdout is not None
    if then is not None:
        line = await process.stdout.readline()
        if line.strip() != b"watching":
            raise RuntimeError(f"floor {options}: {line!r}")
        await then()
    out = await process.stdout.read()
    if await process.wait() != 0:
        raise RuntimeError(f"floor {options} exited with {process.returncode}")
    result: dict[str, Any] = json.loads(out.decode().strip().splitlines()[-1])
    return result


async def stream_floor(kubeconfig: Path) -> dict[str, Any]:
    """The streaming-list floor (``benchmarks.floor_list``, a process of its own) of the
    watched types; ``process_s`` is from just before its start to its last bookmark, as the
    controller's time to ready runs from just before its start."""
    compile_bytecode()
    spawned = time.time()
    paths = [f"--path={resource.collection_path(None)}" for resource in WATCHED]
    floor = await run_floor(kubeconfig, paths, module="benchmarks.floor_list")
    floor["process_s"] = round(floor.pop("done_at") - spawned, 3)
    return floor


async def request_floors(
    kube: KubeClient, kubeconfig: Path, count: int, storm: int
) -> dict[str, Any]:
    """The request floors, with the controller stopped: the preconditioned writes alone, each
    with its Event (fresh ConfigMaps at the controller's workers and at 16 in flight; the
    storm's Deployments at the controller's workers)."""
    out: dict[str, Any] = {}
    for concurrency in (WORKERS, 16):
        names = [f"f{concurrency}-{i:05d}" for i in range(count)]
        await gather_limited(
            [kube.create(CONFIGMAPS, "floor", configmap("floor", n, {})) for n in names]
        )
        floor = await run_floor(
            kubeconfig, [f"--prefix=f{concurrency}-", f"--concurrency={concurrency}"]
        )
        out[f"delete_at_{concurrency}_s"] = round(floor["seconds"], 3)
        out[f"delete_cpu_ms_at_{concurrency}"] = floor["cpu_ms_per_object"]
    floor = await run_floor(
        kubeconfig,
        ["--action=restart", "--prefix=d-", f"--count={storm}", f"--concurrency={WORKERS}"],
    )
    out[f"restart_at_{WORKERS}_s"] = round(floor["seconds"], 3)
    out[f"restart_cpu_ms_at_{WORKERS}"] = floor["cpu_ms_per_object"]
    return out


async def deletion_job_floor(
    kube: KubeClient, kubeconfig: Path, count: int, lead: float, tag: str
) -> dict[str, Any]:
    """The whole job of ``count`` deletions: the floor watches ``count`` ConfigMaps appear
    (created as the burst's are, in namespace ``floor``, named ``j{tag}-*``), deletes each
    with its Event, and watches them go."""
    annotations = {FLOOR_PREFIX + "delete-at": due_time(lead)[1]}

    async def create() -> None:
        await gather_limited(
            [
                kube.create(CONFIGMAPS, "floor", configmap("floor", f"j{tag}-{i:05d}", annotations))
                for i in range(count)
            ]
        )

    options = ["--whole-job", f"--prefix=j{tag}-", f"--count={count}", f"--concurrency={WORKERS}"]
    floor = await run_floor(kubeconfig, options, create)
    return {"cpu_ms": floor["cpu_ms_per_object"], "watch_events": floor["watch_events"]}


async def restart_job_floor(
    kube: KubeClient, kubeconfig: Path, storm: int, lead: float
) -> dict[str, Any]:
    """The whole job of restarting the storm's ``storm`` Deployments: the floor watches
    ``restart-at`` (under :data:`FLOOR_PREFIX`) appear on each, patches it as the controller
    does, follows each rollout to completion and writes its ``RolloutCompleted`` Event."""
    patch = {"metadata": {"annotations": {FLOOR_PREFIX + "restart-at": due_time(lead)[1]}}}
    workloads = [(f"bench-{i % NAMESPACE_COUNT:02d}", f"d-{i:04d}") for i in range(storm)]

    async def annotate() -> None:
        await gather_limited([kube.merge_patch(DEPLOYMENTS, ns, n, patch) for ns, n in workloads])

    options = [
        "--action=restart",
        "--whole-job",
        "--prefix=d-",
        f"--count={storm}",
        f"--concurrency={WORKERS}",
        f"--annotation-prefix={FLOOR_PREFIX}",
    ]
    floor = await run_floor(kubeconfig, options, annotate)
    return {"cpu_ms": floor["cpu_ms_per_object"], "watch_events": floor["watch_events"]}
