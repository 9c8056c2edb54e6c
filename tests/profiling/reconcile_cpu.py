"""The controller's own CPU per deletion, the API left out: what the package adds to a request.

    python -m tests.profiling.reconcile_cpu [--objects 4000] [--rounds 5] [--profile PREFIX]

The reconciles of a deletion burst, run in one process through the controller's real
pieces (work queue and its metrics, workers, reconciler, guardrails, accounting, Event
recorder in the background, Prometheus registry, JSON logging at ``warning`` as the
benchmarks run it), with the two writes answered at once by a stub instead of the API: the
Event POST and the DELETE. Each round puts ``--objects`` ConfigMaps in the cache due in an
hour and queues them (the reconcile that schedules a deletion, as when an annotated object
appears), then makes them due and queues them again (the reconcile that deletes, and its
Event). Prints the CPU (``time.process_time``) per object of each phase, median over the
rounds, as one JSON object. ``--profile PREFIX`` writes a cProfile of the last round's
phases to ``PREFIX-schedule`` and ``PREFIX-delete``.

What this leaves out is the informer (decoding the watch events), TLS and aiohttp: the
``benchmarks.cluster`` figures hold everything; this one moves only with the package's own
work per reconcile, so a change to it shows here without the noise of a control plane.
"""

from __future__ import annotations

import argparse
import asyncio
import cProfile
import json
import statistics
import sys
import time
from collections.abc import Mapping
from typing import Any

from lifecycle_controller.app.controller import CONTROLLER_NAME
from lifecycle_controller.app.loop_activity import LoopActivity
from lifecycle_controller.controller.events.background import BackgroundRecorder
from lifecycle_controller.controller.events.recorder import KubeEventRecorder
from lifecycle_controller.controller.reconcile.assembly import build_reconciler
from lifecycle_controller.controller.watch.cache import CachedObject, MetadataCache
from lifecycle_controller.controller.work.workers import run_workers
from lifecycle_controller.core import Action, DecisionSettings, Ledger
from lifecycle_controller.core.objects import keys
from lifecycle_controller.core.objects.resources import ObjectKey, ResourceType
from lifecycle_controller.core.text.timestamps import format_rfc3339_nano
from lifecycle_controller.machinery.budget import ActionBudget
from lifecycle_controller.machinery.clock import RealClock
from lifecycle_controller.machinery.logs import configure_logging
from lifecycle_controller.machinery.ratelimit import default_controller_rate_limiter
from lifecycle_controller.machinery.workqueue import WorkQueue
from lifecycle_controller.serving.metrics import Metrics

CONFIGMAPS = ResourceType("", "v1", "configmaps", "ConfigMap", True)
HOUR_NS = 3600 * 10**9
WORKERS = 4


class InstantApi:
    """The writes a deletion makes, answered at once (one loop turn, as an answer takes)."""

    async def delete(
        self,
        resource: ResourceType,
        namespace: str | None,
        name: str,
        *,
        uid: str | None = None,
        resource_version: str | None = None,
        answer: bool = True,
        propagation: str | None = None,
    ) -> dict[str, Any]:
        await asyncio.sleep(0)
        return {}

    async def create(
        self,
        resource: ResourceType,
        namespace: str | None,
        body: Mapping[str, Any],
        *,
        answer: bool = True,
    ) -> dict[str, Any]:
        await asyncio.sleep(0)
        return {}

    async def merge_patch(
        self, resource: ResourceType, namespace: str | None, name: str, patch: Mapping[str, Any]
    ) -> dict[str, Any]:
        raise NotImplementedError("a deletion burst patches nothing")

    async def get_metadata(
        self, resource: ResourceType, namespace: str | None, name: str
    ) -> dict[str, Any]:
        raise NotImplementedError("a deletion burst reads nothing")

    async def get(self, resource: ResourceType, namespace: str | None, name: str) -> dict[str, Any]:
        raise NotImplementedError("a deletion burst reads nothing")

    async def list_objects(
        self,
        resource: ResourceType,
        *,
        namespace: str | None = None,
        limit: int = 500,
        continue_token: str | None = None,
    ) -> dict[str, Any]:
        raise NotImplementedError("a deletion burst reads nothing (no policy to fence)")


async def measure(objects: int, rounds: int, profile: str | None) -> dict[str, Any]:
    clock = RealClock()
    metrics = Metrics(
        controller=CONTROLLER_NAME,
        queue_name=CONTROLLER_NAME,
        leader_election_id="",
        max_concurrent_reconciles=WORKERS,
    )
    queue_metrics = metrics.queue_metrics()
    queue: WorkQueue[ObjectKey] = WorkQueue(
        rate_limiter=default_controller_rate_limiter(clock),
        clock=clock,
        metrics=LoopActivity().queue_metrics(queue_metrics),
        name=CONTROLLER_NAME,
    )
    queue_metrics.attach(queue)
    queue.start()
    api = InstantApi()
    events = BackgroundRecorder(
        KubeEventRecorder(api, clock=clock, reporting_instance="bench"), clock=clock
    )
    cache = MetadataCache()
    reconciler = build_reconciler(
        api=api,
        cache=cache,
        recorder=events,
        clock=clock,
        ledger=Ledger(),
        settings=DecisionSettings(),
        metrics=metrics,
        budgets={Action.DELETE: ActionBudget(0, clock=clock)},
    )
    workers = asyncio.create_task(
        run_workers(
            queue,
            reconciler,
            WORKERS,
            name=CONTROLLER_NAME,
            observer=metrics.reconcile_metrics(),
        )
    )
    per: dict[str, list[float]] = {"schedule": [], "delete": []}
    for round_ in range(rounds):
        names = [ObjectKey(CONFIGMAPS, "burst", f"r{round_}-{i:05d}") for i in range(objects)]
        for phase, due_ns in (("schedule", HOUR_NS), ("delete", -(10**9))):
            stamp = format_rfc3339_nano(time.time_ns() + due_ns)
            for i, key in enumerate(names):
                metadata = {
                    "name": key.name,
                    "namespace": key.namespace,
                    "uid": f"uid-{round_}-{i}",
                    "resourceVersion": str(i + 1),
                    "creationTimestamp": "2026-12-04T00:00:00Z",
                    "annotations": {keys.DELETE_AT: stamp},
                }
                cache.put(key, CachedObject.from_metadata(metadata))
            profiler = cProfile.Profile(time.process_time) if profile else None
            started = time.process_time()
            if profiler is not None:
                profiler.enable()
            for key in names:
                queue.add(key)
            # The queue and the recorder offer no "all done" event: poll them (1 ms turns).
            while len(queue) or queue.in_flight or events.pending:  # noqa: ASYNC110
                await asyncio.sleep(0.001)
            if profiler is not None:
                profiler.disable()
                profiler.dump_stats(f"{profile}-{phase}")
            per[phase].append(1e6 * (time.process_time() - started) / objects)
    workers.cancel()
    deleted = metrics.registry.get_sample_value(
        "lifecycle_actions_total", {"action": "delete", "kind": "ConfigMap", "result": "success"}
    )
    return {
        "objects": objects,
        "rounds": rounds,
        "deleted": int(deleted or 0),
        "schedule_us_per_object": round(statistics.median(per["schedule"]), 1),
        "delete_us_per_object": round(statistics.median(per["delete"]), 1),
        "schedule_rounds": [round(v, 1) for v in per["schedule"]],
        "delete_rounds": [round(v, 1) for v in per["delete"]],
    }


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--objects", type=int, default=4000)
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument("--profile", help="cProfile the last round's phases to PREFIX-<phase>")
    args = parser.parse_args(argv)
    configure_logging("json", "warning", stream=sys.stderr)
    print(json.dumps(asyncio.run(measure(args.objects, args.rounds, args.profile))))


if __name__ == "__main__":
    main()
