"""The controller on a real local control plane with many objects: sync time, memory, throughput.

Creates N ConfigMaps in one namespace (every 10th carries a far-future ``delete-at``, every
100th a past one), then starts the controller (metadata-only informers) and measures:
time to ready (list + cache sync), objects kept in the cache, Python heap growth while
syncing (tracemalloc), and how long the due deletions take.

Run: python -m tests.profiling.in_process_cluster [N]   (default 5000; Go for the first build)
"""

from __future__ import annotations

import asyncio
import resource
import sys
import time
import tracemalloc

from lifecycle_controller.app import Controller
from lifecycle_controller.config import RawFlags, build_settings
from lifecycle_controller.devcluster import ControlPlane
from lifecycle_controller.kube import NAMESPACES, KubeClient, ResourceType
from lifecycle_controller.machinery.logs import configure_logging

CONFIGMAPS = ResourceType("", "v1", "configmaps", "ConfigMap", namespaced=True)
NAMESPACE = "bench"


def configmap(i: int) -> dict[str, object]:
    annotations = {}
    if i % 100 == 0:
        annotations["lifecycle.cezary.dev/delete-at"] = "2020-01-01T00:00:00Z"
    elif i % 10 == 0:
        annotations["lifecycle.cezary.dev/delete-at"] = "2099-01-01T00:00:00Z"
    return {
        "apiVersion": "v1",
        "kind": "ConfigMap",
        "metadata": {
            "name": f"cm-{i:06d}",
            "annotations": annotations,
            "labels": {"app": "bench", "tier": "t" + str(i % 7)},
        },
        "data": {"payload": "x" * 512},
    }


async def populate(kube: KubeClient, count: int) -> float:
    started = time.perf_counter()
    await kube.create(
        NAMESPACES, None, {"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": NAMESPACE}}
    )
    semaphore = asyncio.Semaphore(32)

    async def one(i: int) -> None:
        async with semaphore:
            await kube.create(CONFIGMAPS, NAMESPACE, configmap(i))

    await asyncio.gather(*(one(i) for i in range(count)))
    return time.perf_counter() - started


async def run(plane: ControlPlane, count: int) -> None:
    async with await KubeClient.connect(str(plane.admin_kubeconfig)) as kube:
        created = await populate(kube, count)
        print(f"created {count} ConfigMaps in {created:.1f}s")
        settings = build_settings(
            RawFlags(
                watch_resource=("configmaps",),
                health_probe_bind_address="127.0.0.1:0",
                log_level="error",
                log_format="json",
            )
        )
        rss_before = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
        tracemalloc.start()
        heap_before = tracemalloc.get_traced_memory()[0]
        controller = Controller(settings, kube)
        task = asyncio.create_task(controller.run())
        started = time.perf_counter()
        while True:
            if controller.pipeline is not None and controller.not_ready_reason() is None:
                break
            await asyncio.sleep(0.01)
        ready = time.perf_counter() - started
        heap_after, heap_peak = tracemalloc.get_traced_memory()
        tracemalloc.stop()
        pipeline = controller.pipeline
        cached = pipeline.informers._cache.count(CONFIGMAPS) if pipeline else 0
        print(
            f"ready (list + sync of {count} objects) in {ready:.2f}s; "
            f"{cached} annotated objects cached"
        )
        print(
            f"heap growth during sync: {(heap_after - heap_before) / 1e6:.1f} MB "
            f"(peak {(heap_peak - heap_before) / 1e6:.1f} MB)"
        )
        due = count // 100 + (1 if count % 100 else 0)
        started = time.perf_counter()
        while True:
            listing = await kube.list_metadata(CONFIGMAPS, namespace=NAMESPACE, limit=1)
            remaining = listing["metadata"].get("remainingItemCount", 0) + len(listing["items"])
            if remaining <= count - due:
                break
            await asyncio.sleep(0.05)
        print(f"{due} due deletions done {time.perf_counter() - started:.2f}s after ready")
        rss_after = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
        print(
            f"max RSS of the benchmark process: {rss_after / 1024:.0f} MB "
            f"(before the controller: {rss_before / 1024:.0f} MB)"
        )
        task.cancel()
        await asyncio.gather(task, return_exceptions=True)


def main() -> None:
    count = int(sys.argv[1]) if len(sys.argv) > 1 else 5000
    configure_logging("json", "error")
    with ControlPlane(controller_manager=False, log=lambda line: None) as plane:
        asyncio.run(run(plane, count))


if __name__ == "__main__":
    main()
