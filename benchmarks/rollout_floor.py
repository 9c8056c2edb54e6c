"""The floor of a restart storm that follows its rollouts: a plain client, in its own process.

    python -m benchmarks.rollout_floor --kubeconfig KUBECONFIG --concurrency 10 --marker M

What ``lifecycle-controller run --max-concurrent-rollouts N`` does for a storm of due
restarts, done as cheaply as a plain aiohttp client can: one list of the Deployments, then
for each one the guarded merge patch of its Pod template's ``lifecycle.cezary.dev/restartedAt``
marker (a 409 re-reads and tries again) and its ``RestartTriggered`` Event, never more than N
rollouts in progress; completion is read from ONE watch of every Deployment (whole objects,
judged by the controller's own rule, ``core/objects/rollout_progress.py``), and each completion gets
its ``RolloutCompleted`` Event. It prints one JSON line: wall seconds from the first patch to
the last completion, this process's CPU seconds from its first request on (its imports left
out, as the controller's start-up is), and its requests.
``benchmarks/rollouts.py`` runs it beside the controller.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import time
from collections import Counter
from collections.abc import AsyncIterator
from typing import Any

import aiohttp

from benchmarks.cluster_measure import PlainClient
from benchmarks.floor_actions import event_body
from lifecycle_controller.core.objects.keys import RESTARTED_AT
from lifecycle_controller.core.objects.rollout_progress import rollout_progress
from lifecycle_controller.kube import ClusterConfig, load_configuration

DEPLOYMENTS = "/apis/apps/v1/deployments"


def _path(namespace: str, name: str) -> str:
    return f"/apis/apps/v1/namespaces/{namespace}/deployments/{name}"


class WatchingClient(PlainClient):
    """The floor's client, plus a streamed watch (one JSON event per line)."""

    def __init__(self, config: ClusterConfig) -> None:
        super().__init__(config)
        self.requests: Counter[str] = Counter()

    async def call(self, method: str, path: str, body: Any = None, **kwargs: Any) -> Any:
        self.requests[f"{method} {'events' if '/events' in path else 'deployments'}"] += 1
        return await super().call(method, path, body, **kwargs)

    async def watch(self, path: str, resource_version: str) -> AsyncIterator[dict[str, Any]]:
        params = [
            ("watch", "1"),
            ("resourceVersion", resource_version),
            ("allowWatchBookmarks", "true"),
            ("timeoutSeconds", "3600"),
        ]
        self.requests["WATCH deployments"] += 1
        unbounded = aiohttp.ClientTimeout(total=None, sock_connect=30)
        async with self.stream("GET", path, params=params, timeout=unbounded) as response:
            async for line in response.content:
                if line.strip():
                    yield json.loads(line)


class Storm:
    """Restarts every listed Deployment, at most ``concurrency`` rollouts at a time."""

    def __init__(self, plain: WatchingClient, concurrency: int, marker: str) -> None:
        self.plain = plain
        self.concurrency = concurrency
        self.marker = marker
        self.latest: dict[tuple[str, str], dict[str, Any]] = {}
        self.following: dict[tuple[str, str], int] = {}  # key -> generation of the patch
        self.slot_free = asyncio.Condition()
        self.completed = 0
        self.widest = 0
        self._background: set[asyncio.Task[Any]] = set()

    def _soon(self, work: Any) -> None:
        task = asyncio.get_running_loop().create_task(work)
        self._background.add(task)
        task.add_done_callback(self._background.discard)

    async def restart(self, key: tuple[str, str]) -> None:
        namespace, name = key
        obj = self.latest[key]
        body: dict[str, Any] = {
            "metadata": {"resourceVersion": obj["metadata"]["resourceVersion"]},
            "spec": {"template": {"metadata": {"annotations": {RESTARTED_AT: self.marker}}}},
        }
        merge = "application/merge-patch+json"
        status, raw = await self.plain.call(
            "PATCH", _path(namespace, name), body, content_type=merge
        )
        while status == 409:  # the Deployment controller wrote its status meanwhile
            _, fresh = await self.plain.call("GET", _path(namespace, name))
            body["metadata"]["resourceVersion"] = json.loads(fresh)["metadata"]["resourceVersion"]
            status, raw = await self.plain.call(
                "PATCH", _path(namespace, name), body, content_type=merge
            )
        if status >= 300:
            raise RuntimeError(f"restart {namespace}/{name}: HTTP {status}")
        patched = json.loads(raw)
        self.following[key] = int(patched["metadata"].get("generation") or 0)
        self.widest = max(self.widest, len(self.following))
        uid = patched["metadata"]["uid"]
        event = event_body(namespace, name, uid, "Deployment", "RestartTriggered")
        await self.plain.call(
            "POST", f"/apis/events.k8s.io/v1/namespaces/{namespace}/events", event
        )
        self.check(key, patched)

    def check(self, key: tuple[str, str], obj: dict[str, Any]) -> None:
        """A Deployment's new state: when it completes a followed rollout, free its slot."""
        generation = self.following.get(key)
        observed = int((obj.get("status") or {}).get("observedGeneration") or 0)
        if generation is None or observed < generation or not rollout_progress(obj).complete:
            return
        del self.following[key]
        self.completed += 1
        namespace, name = key
        event = event_body(
            namespace, name, obj["metadata"]["uid"], "Deployment", "RolloutCompleted"
        )
        path = f"/apis/events.k8s.io/v1/namespaces/{namespace}/events"
        self._soon(self.plain.call("POST", path, event))
        self._soon(self._wake())

    async def _wake(self) -> None:
        async with self.slot_free:
            self.slot_free.notify_all()

    async def follow(self, resource_version: str) -> None:
        async for event in self.plain.watch(DEPLOYMENTS, resource_version):
            obj = event.get("object") or {}
            if event.get("type") not in ("ADDED", "MODIFIED"):
                continue
            metadata = obj.get("metadata") or {}
            key = (metadata.get("namespace", ""), metadata.get("name", ""))
            obj.setdefault("kind", "Deployment")
            self.latest[key] = obj
            self.check(key, obj)

    async def run(self) -> dict[str, Any]:
        _, raw = await self.plain.call("GET", DEPLOYMENTS)
        listing = json.loads(raw)
        for item in listing["items"]:
            item.setdefault("kind", "Deployment")
            metadata = item["metadata"]
            self.latest[(metadata["namespace"], metadata["name"])] = item
        pending = sorted(self.latest)
        watcher = asyncio.create_task(self.follow(listing["metadata"]["resourceVersion"]))
        started = time.perf_counter()
        try:
            for key in pending:
                async with self.slot_free:
                    await self.slot_free.wait_for(lambda: len(self.following) < self.concurrency)
                await self.restart(key)
            async with self.slot_free:
                await self.slot_free.wait_for(lambda: self.completed >= len(pending))
            wall = time.perf_counter() - started
            await asyncio.gather(*self._background)
        finally:
            watcher.cancel()
            await asyncio.gather(watcher, return_exceptions=True)
        return {"restarts": len(pending), "wall_s": round(wall, 3), "widest": self.widest}


async def storm(kubeconfig: str, concurrency: int, marker: str) -> dict[str, Any]:
    cpu = time.process_time()  # after the imports, as the controller's window is after its start
    config, _ = await load_configuration(kubeconfig)
    plain = WatchingClient(config)
    async with plain:
        result = await Storm(plain, concurrency, marker).run()
        result["requests"] = dict(sorted(plain.requests.items()))
    result["cpu_s"] = round(time.process_time() - cpu, 3)
    return result


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--kubeconfig", required=True)
    parser.add_argument("--concurrency", type=int, default=10)
    parser.add_argument("--marker", required=True, help="the restartedAt value to write")
    args = parser.parse_args(argv)
    print(json.dumps(asyncio.run(storm(args.kubeconfig, args.concurrency, args.marker))))


if __name__ == "__main__":
    main()
