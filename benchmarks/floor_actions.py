"""The floors of CPU per action, each measured in a fresh process of its own.

    python -m benchmarks.floor_actions --kubeconfig KUBECONFIG --action delete \
        --namespace floor --prefix f16- --concurrency 16
    python -m benchmarks.floor_actions --kubeconfig KUBECONFIG --action delete \
        --namespace floor --prefix job- --count 1000 --whole-job

The floors used to be timed inside the benchmark process, which holds the client that
created and listed every object. Measured alternately on one control plane with 20,000
objects (16 in flight, three rounds each), that process spent 0.85 ms of CPU per DELETE +
Event where a fresh process spent 0.71 ms (and 0.95 ms with the garbage collector's heap
frozen: the collector was not the cause). Most of the gap between the 1.4-1.8 ms the
benchmark used to report and the 0.4 ms of a plain client alone lies elsewhere: the
benchmark reported the floor at 4 requests in flight (the controller's workers), which costs
about 1.5x the CPU per request of 16 in flight (fewer replies arrive together, so more loop
turns and system calls per request), and it measured while etcd and the API server were busy
on the same two cores (the same fresh-process floor was 0.7 ms under that load against 0.4
ms on a quiet machine, measured earlier). So the floors now run in a fresh process of their
own (the cleanest yardstick), at both concurrencies, and each figure is read only beside the
controller's from the same run. This script does the same work as the controller's action
with nothing else in its process, and reports its own CPU time (``time.process_time``) over
that work only (imports, credentials and the TLS context are set up before the clock
starts).

Two floors:

* **request** (the default): the preconditioned writes alone, each followed by its
  ``events.k8s.io/v1`` Event: a DELETE with UID and resourceVersion preconditions
  (``--action delete``), or a guarded merge patch restarting a Deployment
  (``--action restart``, as the controller's: acknowledgement and Pod-template marker in one
  patch), from a plain aiohttp client with ``--concurrency`` requests in flight. The targets
  are listed before the clock starts.
* **whole job** (``--whole-job``): everything the controller does per object, done the
  plainest way: a watch (JSON, each event decoded) that sees the object appear (a
  ConfigMap created, or ``restart-at`` set on a Deployment), the write and its Event, and
  the watch events of the write. For a deletion the watch is metadata-only and ends with
  the DELETED event. A restart is verified, as the controller verifies every restart: the
  watch carries whole Deployments, follows each rollout until its status is complete (the
  controller's rule, ``core/objects/rollout_progress.py``), and then writes the
  ``RolloutCompleted`` Event (``--annotation-prefix`` names another prefix for
  ``restart-at`` and the annotations the patch writes, so the floor can run beside a
  controller that ignores them). The
  script prints ``watching`` once its watch is open; the caller then creates (or
  annotates) ``--count`` objects whose names start with ``--prefix``. The clock covers
  everything after ``watching``.

Prints one JSON object: ``cpu_s`` (process CPU over the measured work),
``cpu_ms_per_object``, ``seconds`` (wall time of the writes), ``watch_events`` (events
decoded, whole job only) and the options.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import json
import sys
import time
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any

import aiohttp

from benchmarks.cluster_measure import PlainClient
from lifecycle_controller.core.objects import keys
from lifecycle_controller.core.objects.rollout_progress import rollout_progress
from lifecycle_controller.kube import ACCEPT_METADATA, ACCEPT_METADATA_LIST, load_configuration

__all__ = ["Target", "event_body", "main", "restart_body"]

CONFIGMAPS_PATH = "/api/v1/namespaces/{ns}/configmaps"
DEPLOYMENTS_PATH = "/apis/apps/v1/namespaces/{ns}/deployments"
ALL_DEPLOYMENTS_PATH = "/apis/apps/v1/deployments"
MERGE_PATCH = "application/merge-patch+json"


@dataclass
class Target:
    """One object to act on: its key, UID and the resourceVersion the write is guarded by."""

    namespace: str
    name: str
    uid: str
    rv: str


def event_body(namespace: str, name: str, uid: str, kind: str, reason: str) -> dict[str, Any]:
    now = datetime.now().astimezone().isoformat(timespec="microseconds")
    return {
        "apiVersion": "events.k8s.io/v1",
        "kind": "Event",
        "metadata": {"name": f"{name}.{time.time_ns():x}", "namespace": namespace},
        "eventTime": now,
        "reportingController": "lifecycle-controller",
        "reportingInstance": "floor",
        "action": reason,
        "reason": reason,
        "type": "Normal",
        "note": f"{reason} {namespace}/{name}",
        "regarding": {"kind": kind, "namespace": namespace, "name": name, "uid": uid},
    }


def restart_body(rv: str, prefix: str = keys.PREFIX) -> dict[str, Any]:
    """A guarded restart like the controller's: acknowledge ``restart-at`` and set the Pod
    template's marker in one merge patch (the annotations under ``prefix``: the
    controller's own, or a prefix it ignores when it runs beside the floor)."""
    stamp = datetime.now().astimezone().isoformat(timespec="microseconds")
    return {
        "metadata": {
            "resourceVersion": rv,
            "annotations": {prefix + "restart-at": None, prefix + "managed-by": "floor"},
        },
        "spec": {"template": {"metadata": {"annotations": {prefix + "restartedAt": stamp}}}},
    }


async def act(plain: PlainClient, action: str, target: Target, prefix: str = keys.PREFIX) -> None:
    """The write and its Event (a restart that lost a race with the deployment controller's
    status write is read again and retried, as the controller's quiet conflict retry does)."""
    ns, name = target.namespace, target.name
    if action == "delete":
        path = CONFIGMAPS_PATH.format(ns=ns) + "/" + name
        body: dict[str, Any] = {
            "apiVersion": "v1",
            "kind": "DeleteOptions",
            "preconditions": {"uid": target.uid, "resourceVersion": target.rv},
        }
        status, _ = await plain.call("DELETE", path, body)
        kind, reason = "ConfigMap", "Deleted"
    else:
        path = DEPLOYMENTS_PATH.format(ns=ns) + "/" + name
        status, _ = await plain.call(
            "PATCH", path, restart_body(target.rv, prefix), content_type=MERGE_PATCH
        )
        if status == 409:
            _, raw = await plain.call("GET", path, accept=ACCEPT_METADATA)
            rv = json.loads(raw)["metadata"]["resourceVersion"]
            body = restart_body(rv, prefix)
            status, _ = await plain.call("PATCH", path, body, content_type=MERGE_PATCH)
        kind, reason = "Deployment", "RestartTriggered"
    if status >= 300:
        raise RuntimeError(f"floor {action} {ns}/{name}: HTTP {status}")
    await write_event(plain, target, kind, reason)


async def write_event(plain: PlainClient, target: Target, kind: str, reason: str) -> None:
    """One ``events.k8s.io/v1`` Event about ``target``."""
    ns = target.namespace
    await plain.call(
        "POST",
        f"/apis/events.k8s.io/v1/namespaces/{ns}/events",
        event_body(ns, target.name, target.uid, kind, reason),
    )


async def run_all(
    targets: list[Target], concurrency: int, one: Callable[[Target], Awaitable[None]]
) -> None:
    """``one(target)`` for every target, ``concurrency`` at a time."""
    pending = iter(targets)

    async def worker() -> None:
        for target in pending:
            await one(target)

    await asyncio.gather(*(worker() for _ in range(concurrency)))


async def list_targets(plain: PlainClient, args: argparse.Namespace) -> list[Target]:
    path = (
        CONFIGMAPS_PATH.format(ns=args.namespace)
        if args.action == "delete"
        else ALL_DEPLOYMENTS_PATH
    )
    _, raw = await plain.call("GET", path, accept=ACCEPT_METADATA_LIST)
    found = [
        Target(m["namespace"], m["name"], m["uid"], m["resourceVersion"])
        for m in (item["metadata"] for item in json.loads(raw)["items"])
        if m["name"].startswith(args.prefix)
    ]
    return found[: args.count] if args.count else found


# ---------------------------------------------------------------------- the whole job


@dataclass
class _Watched:
    """What the whole-job watch has seen, per object name.

    A deletion is done when its DELETED event arrives. A restart is done when its rollout is
    (the controller verifies every restart it makes): a later state of the Deployment with
    ``restart-at`` gone (the floor's patch applied) whose status has caught up with that
    generation and is complete by the controller's own rule
    (``core/objects/rollout_progress.py``); then its ``RolloutCompleted`` Event is written
    (``complete`` schedules it)."""

    action: str
    prefix: str
    annotation_prefix: str = keys.PREFIX
    complete: Callable[[Target], None] = lambda target: None
    seen: dict[str, Target] = field(default_factory=dict)
    patched: dict[str, int] = field(default_factory=dict)  # key -> generation of the restart
    done: set[str] = field(default_factory=set)
    events: int = 0
    appeared: asyncio.Event = field(default_factory=asyncio.Event)
    finished: asyncio.Event = field(default_factory=asyncio.Event)
    expected: int = 0

    def feed(self, event: dict[str, Any]) -> None:
        self.events += 1
        obj = event.get("object") or {}
        metadata = obj.get("metadata") or {}
        name = metadata.get("name") or ""
        if not name.startswith(self.prefix):
            return
        key = f"{metadata.get('namespace')}/{name}"
        if event.get("type") == "DELETED":
            self.done.add(key)
        elif self.action == "delete":
            self.seen[key] = Target(
                metadata["namespace"], name, metadata["uid"], metadata["resourceVersion"]
            )
        else:
            self._restart_state(key, obj, metadata)
        if len(self.seen) >= self.expected:
            self.appeared.set()
        if len(self.done) >= self.expected:
            self.finished.set()

    def _restart_state(self, key: str, obj: dict[str, Any], metadata: dict[str, Any]) -> None:
        if key in self.done:
            return
        annotations = metadata.get("annotations") or {}
        if self.annotation_prefix + "restart-at" in annotations:
            self.seen[key] = Target(
                metadata["namespace"],
                metadata["name"],
                metadata["uid"],
                metadata["resourceVersion"],
            )
            return
        if key not in self.seen:
            return
        generation = self.patched.setdefault(key, int(metadata.get("generation") or 0))
        observed = int((obj.get("status") or {}).get("observedGeneration") or 0)
        obj.setdefault("kind", "Deployment")
        if observed >= generation and rollout_progress(obj).complete:
            self.done.add(key)
            self.complete(self.seen[key])


#: A watch has no total deadline (aiohttp's session default is 5 minutes); silence ends it.
WATCH_TIMEOUT = aiohttp.ClientTimeout(total=None, sock_connect=10, sock_read=120)


async def watch(plain: PlainClient, path: str, rv: str, watched: _Watched, accept: str) -> None:
    """A watch, every line decoded (the plainest informer): metadata only for deletions,
    whole Deployments for restarts (their status says when the rollout is complete).

    Like an informer's, it is opened again from the last resourceVersion it saw when the API
    server ends it (an ERROR event, a closed stream) or the connection breaks: a floor whose
    watch ended silently waited for objects it could no longer see."""
    while True:
        params = [("watch", "true"), ("resourceVersion", rv), ("allowWatchBookmarks", "true")]
        try:
            async with plain.stream(
                "GET", path, accept=accept, params=params, timeout=WATCH_TIMEOUT
            ) as response:
                async for line in response.content:
                    if not line.strip():
                        continue
                    event = json.loads(line)
                    if event.get("type") == "ERROR":
                        break
                    metadata = (event.get("object") or {}).get("metadata") or {}
                    rv = metadata.get("resourceVersion") or rv
                    watched.feed(event)
        except (aiohttp.ClientError, TimeoutError) as error:
            print(f"floor: watch ended ({error!r}); opening it again", file=sys.stderr)
        await asyncio.sleep(0.2)


async def whole_job(plain: PlainClient, args: argparse.Namespace) -> dict[str, Any]:
    path = (
        CONFIGMAPS_PATH.format(ns=args.namespace)
        if args.action == "delete"
        else ALL_DEPLOYMENTS_PATH
    )
    _, raw = await plain.call("GET", path, accept=ACCEPT_METADATA_LIST, params=[("limit", "1")])
    rv = json.loads(raw)["metadata"]["resourceVersion"]
    completions: set[asyncio.Task[Any]] = set()

    def complete(target: Target) -> None:
        task = asyncio.create_task(write_event(plain, target, "Deployment", "RolloutCompleted"))
        completions.add(task)
        task.add_done_callback(completions.discard)

    watched = _Watched(
        args.action, args.prefix, args.annotation_prefix, complete, expected=args.count
    )
    accept = ACCEPT_METADATA if args.action == "delete" else "application/json"
    streaming = asyncio.create_task(watch(plain, path, rv, watched, accept))
    await asyncio.sleep(0.5)  # the watch is open before the caller starts
    cpu = time.process_time()
    print("watching", flush=True)
    await _within(watched.appeared.wait(), args.timeout, watched, "appear")
    cpu_appeared = time.process_time() - cpu
    started = time.perf_counter()
    await run_all(
        list(watched.seen.values()),
        args.concurrency,
        lambda t: act(plain, args.action, t, args.annotation_prefix),
    )
    seconds = time.perf_counter() - started
    await _within(watched.finished.wait(), args.timeout, watched, "finish")
    await asyncio.gather(*completions)
    cpu_s = time.process_time() - cpu
    streaming.cancel()
    with contextlib.suppress(asyncio.CancelledError):
        await streaming
    return {
        "cpu_s": cpu_s,
        "cpu_until_seen_s": cpu_appeared,
        "seconds": seconds,
        "count": len(watched.seen),
        "watch_events": watched.events,
    }


async def _within(waiting: Awaitable[Any], timeout: float, watched: _Watched, what: str) -> None:
    """``waiting``, or a RuntimeError after ``timeout`` seconds that names the objects still
    waited for (a rollout kube-controller-manager never completed, a watch that broke)."""
    try:
        await asyncio.wait_for(waiting, timeout)
    except TimeoutError:
        pending = sorted(set(watched.seen) - watched.done)
        raise RuntimeError(
            f"floor: {len(watched.seen)} of {watched.expected} objects seen, "
            f"{len(watched.done)} done, after {timeout:.0f} s waiting for them to {what}; "
            f"still waiting for {pending[:10]}{' ...' if len(pending) > 10 else ''}"
        ) from None


async def request_floor(plain: PlainClient, args: argparse.Namespace) -> dict[str, Any]:
    targets = await list_targets(plain, args)
    cpu, started = time.process_time(), time.perf_counter()
    await run_all(
        targets, args.concurrency, lambda t: act(plain, args.action, t, args.annotation_prefix)
    )
    return {
        "cpu_s": time.process_time() - cpu,
        "seconds": time.perf_counter() - started,
        "count": len(targets),
    }


async def _main(args: argparse.Namespace) -> dict[str, Any]:
    config, _ = await load_configuration(args.kubeconfig)
    async with PlainClient(config) as plain:
        measured = await (whole_job if args.whole_job else request_floor)(plain, args)
    count = max(1, measured["count"])
    return {
        "floor": "whole_job" if args.whole_job else "request",
        "action": args.action,
        "concurrency": args.concurrency,
        **measured,
        "cpu_ms_per_object": round(1000 * measured["cpu_s"] / count, 3),
    }


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(
        prog="python -m benchmarks.floor_actions", description=__doc__.split("\n\n")[0]
    )
    parser.add_argument("--kubeconfig", required=True)
    parser.add_argument("--action", choices=("delete", "restart"), default="delete")
    parser.add_argument("--namespace", default="floor", help="the ConfigMaps' namespace")
    parser.add_argument("--prefix", default="", help="act on objects whose name starts so")
    parser.add_argument("--count", type=int, default=0, help="objects (0: every match)")
    parser.add_argument("--concurrency", type=int, default=16, help="requests in flight")
    parser.add_argument(
        "--annotation-prefix",
        default=keys.PREFIX,
        help="restarts: the prefix of restart-at and of the annotations the patch writes (one "
        "the controller ignores lets the floor run beside it)",
    )
    parser.add_argument(
        "--whole-job",
        action="store_true",
        help="watch the objects appear and go too (the caller creates them after 'watching')",
    )
    parser.add_argument(
        "--timeout",
        type=float,
        default=600.0,
        help="whole job: seconds to wait for the objects to appear, then to be done",
    )
    args = parser.parse_args(argv)
    if args.whole_job and not args.count:
        parser.error("--whole-job needs --count")
    print(json.dumps(asyncio.run(_main(args))), file=sys.stdout, flush=True)


if __name__ == "__main__":
    main()
