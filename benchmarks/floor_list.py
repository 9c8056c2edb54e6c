"""The floor of a metadata-only informer's start: a plain streaming list, in a process of its own.

    python -m benchmarks.floor_list --kubeconfig KUBECONFIG \
        --path /api/v1/configmaps --path /api/v1/secrets --path /apis/apps/v1/deployments

What the controller's informers must at least do before it is ready, done as cheaply as a
plain aiohttp client can: one *streaming list* per type, all at once as the controller opens
them (a watch with ``sendInitialEvents=true``, ``resourceVersionMatch=NotOlderThan`` and
``allowWatchBookmarks=true``, in protobuf as ``PartialObjectMetadata``), each read frame by
frame (a 4-byte big-endian length, then a WatchEvent) until its ``k8s.io/initial-events-end``
BOOKMARK; the ADDED frames are counted, never decoded (the controller decodes only the
annotated ones). The paginated JSON list floor of ``benchmarks.cluster_measure`` pays for
JSON and for a round trip per page of 500, which the controller does not, so at large counts
this is the floor its time to ready is judged against.

``--whole-path`` adds a collection listed as the controller lists the lifecycle policies:
whole objects in JSON, pages of 500 (each page decoded: its ``continue`` token is needed),
alongside the streams.

Prints one JSON line: ``seconds`` from the first request to the last bookmark, ``done_at``
(epoch seconds then: the caller subtracts the moment it started this process, to compare
with the controller's ready time, which includes its interpreter's start), ``cpu_s`` (this
process's CPU over the lists) and ``cpu_total_s`` (imports included), the objects and bytes
received per path.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import struct
import sys
import time
from typing import Any

import aiohttp

from benchmarks.cluster_measure import PlainClient
from lifecycle_controller.kube import load_configuration
from lifecycle_controller.kube.watch_protobuf import PROTOBUF, decode_watch_event

__all__ = ["ACCEPT_PROTOBUF_METADATA", "main", "stream_list"]

ACCEPT_PROTOBUF_METADATA = f"{PROTOBUF};as=PartialObjectMetadata;g=meta.k8s.io;v=v1"
STREAMING_LIST = (
    ("watch", "1"),
    ("sendInitialEvents", "true"),
    ("resourceVersionMatch", "NotOlderThan"),
    ("allowWatchBookmarks", "true"),
    ("timeoutSeconds", "3600"),
)
INITIAL_EVENTS_END = "k8s.io/initial-events-end"
_ADDED = b"\n\x05ADDED"  # field 1 (type), length 5: how every ADDED frame starts
_BOOKMARK = b"\n\x08BOOKMARK"
_LENGTH = struct.Struct(">I")


async def stream_list(plain: PlainClient, path: str) -> dict[str, int]:
    """One streaming list of ``path``, read until its initial-events-end bookmark: the
    ADDED frames counted and the bytes received."""
    unbounded = aiohttp.ClientTimeout(total=None, sock_connect=30, sock_read=300)
    objects = received = 0
    async with plain.stream(
        "GET", path, accept=ACCEPT_PROTOBUF_METADATA, params=STREAMING_LIST, timeout=unbounded
    ) as response:
        kind = response.headers.get("Content-Type", "")
        if response.status != 200 or not kind.startswith(PROTOBUF):
            raise RuntimeError(f"{path}: {response.status} {kind} {await response.read()!r}")
        buffer = bytearray()
        async for chunk in response.content.iter_any():
            received += len(chunk)
            buffer += chunk
            start = 0
            while len(buffer) - start >= 4:
                (length,) = _LENGTH.unpack_from(buffer, start)
                body, end = start + 4, start + 4 + length
                if end > len(buffer):
                    break
                start = end
                if buffer.startswith(_ADDED, body):
                    objects += 1
                    continue
                event = decode_watch_event(buffer, body, end, what=path)
                annotations = event["object"].get("metadata", {}).get("annotations") or {}
                if event["type"] != "BOOKMARK":
                    raise RuntimeError(f"{path}: {event}")
                if annotations.get(INITIAL_EVENTS_END) == "true":
                    return {"objects": objects, "bytes": received}
            del buffer[:start]
    raise RuntimeError(f"{path}: the stream ended before its initial-events-end bookmark")


async def page_list(plain: PlainClient, path: str) -> dict[str, int]:
    """A paginated JSON list of whole objects (pages of 500): the objects and bytes."""
    objects = received = 0
    token = ""
    while True:
        params = [("limit", "500")] + ([("continue", token)] if token else [])
        _, raw = await plain.call("GET", path, params=params)
        received += len(raw)
        page = json.loads(raw)
        objects += len(page.get("items") or ())
        token = page.get("metadata", {}).get("continue") or ""
        if not token:
            return {"objects": objects, "bytes": received}


async def _main(kubeconfig: str, paths: list[str], whole: list[str]) -> dict[str, Any]:
    config, _ = await load_configuration(kubeconfig)
    async with PlainClient(config) as plain:
        cpu, started = time.process_time(), time.perf_counter()
        lists = await asyncio.gather(
            *(stream_list(plain, path) for path in paths),
            *(page_list(plain, path) for path in whole),
        )
        paths = [*paths, *whole]
        seconds, done_at = time.perf_counter() - started, time.time()
        cpu_s = time.process_time() - cpu
    return {
        "seconds": round(seconds, 3),
        "done_at": done_at,
        "cpu_s": round(cpu_s, 3),
        "cpu_total_s": round(time.process_time(), 3),
        "objects": dict(zip(paths, (one["objects"] for one in lists), strict=True)),
        "bytes": dict(zip(paths, (one["bytes"] for one in lists), strict=True)),
    }


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(
        prog="python -m benchmarks.floor_list", description=__doc__.split("\n\n")[0]
    )
    parser.add_argument("--kubeconfig", required=True)
    parser.add_argument(
        "--path", action="append", default=[], help="a collection path, a streaming list"
    )
    parser.add_argument(
        "--whole-path", action="append", default=[], help="a collection listed whole, in pages"
    )
    args = parser.parse_args(argv)
    if not args.path and not args.whole_path:
        parser.error("give at least one --path or --whole-path")
    result = asyncio.run(_main(args.kubeconfig, args.path, args.whole_path))
    print(json.dumps(result), file=sys.stdout, flush=True)


if __name__ == "__main__":
    main()
