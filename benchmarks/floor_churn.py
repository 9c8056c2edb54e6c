"""The floor of watch churn: a plain JSON metadata watch, each event decoded, own process.

    python -m benchmarks.floor_churn --kubeconfig KUBECONFIG --path /api/v1/configmaps

What a client must at least do for each watch event of an object it will never act on, done
as plainly as aiohttp allows: one watch of ``path`` as JSON ``PartialObjectMetadata`` (the
resourceVersion from a one-item list, then ``watch=true`` with bookmarks), each line read
with aiohttp's line iterator and ``json.loads``-ed, its resourceVersion remembered (an
informer needs it to go on after a reconnect). ``benchmarks.churn`` runs it beside the
controller and reads the CPU of both from ``/proc``.

Prints ``watching`` once the watch is open. On SIGUSR1 it prints one JSON line: the events
decoded so far (``events``) and the last resourceVersion.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import signal
import sys

import aiohttp

from benchmarks.cluster_measure import PlainClient
from lifecycle_controller.kube import ACCEPT_METADATA_LIST, load_configuration

__all__ = ["ACCEPT_JSON_METADATA", "main"]

ACCEPT_JSON_METADATA = "application/json;as=PartialObjectMetadata;g=meta.k8s.io;v=v1"
#: A watch has no total deadline (aiohttp's session default is 5 minutes).
WATCH_TIMEOUT = aiohttp.ClientTimeout(total=None, sock_connect=10, sock_read=600)


class _Seen:
    events = 0
    resource_version = ""

    def report(self) -> None:
        line = {"events": self.events, "resource_version": self.resource_version}
        print(json.dumps(line), flush=True)


async def watch(plain: PlainClient, path: str, seen: _Seen) -> None:
    """List one item for the resourceVersion, then watch from it until cancelled."""
    _, raw = await plain.call("GET", path, accept=ACCEPT_METADATA_LIST, params=[("limit", "1")])
    seen.resource_version = json.loads(raw)["metadata"]["resourceVersion"]
    while True:
        params = [
            ("watch", "true"),
            ("resourceVersion", seen.resource_version),
            ("allowWatchBookmarks", "true"),
            ("timeoutSeconds", "3600"),
        ]
        async with plain.stream(
            "GET", path, accept=ACCEPT_JSON_METADATA, params=params, timeout=WATCH_TIMEOUT
        ) as response:
            if response.status != 200:
                raise RuntimeError(f"{path}: {response.status} {await response.read()!r}")
            print("watching", flush=True)
            async for line in response.content:
                if not line.strip():
                    continue
                event = json.loads(line)
                seen.events += 1
                version = event["object"]["metadata"].get("resourceVersion")
                if version:
                    seen.resource_version = version


async def _main(kubeconfig: str, path: str) -> None:
    config, _ = await load_configuration(kubeconfig)
    seen = _Seen()
    asyncio.get_running_loop().add_signal_handler(signal.SIGUSR1, seen.report)
    async with PlainClient(config) as plain:
        await watch(plain, path, seen)


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(
        prog="python -m benchmarks.floor_churn", description=__doc__.split("\n\n")[0]
    )
    parser.add_argument("--kubeconfig", required=True)
    parser.add_argument("--path", required=True, help="a collection path")
    args = parser.parse_args(argv)
    try:
        asyncio.run(_main(args.kubeconfig, args.path))
    except KeyboardInterrupt:
        sys.exit(0)


if __name__ == "__main__":
    main()
