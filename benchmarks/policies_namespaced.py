"""What a policy per tenant namespace costs the controller, beside one cluster policy doing the
same, on a real local control plane.

    python -m benchmarks.policies_namespaced --objects 100000 --namespaces 100 --rounds 3 \\
        --output benchmarks/results/

One control plane with the chart's policy CRDs, ``--namespaces`` namespaces and N ConfigMaps
of 512 B spread over them, written straight into etcd (:mod:`benchmarks.etcd_seed`: the
object set is the same as the API would make, in minutes less). Each round runs two modes,
in alternating order, each on a controller of its own (``lifecycle-controller run
--watch-resource=configmaps``, a separate process, cluster-wide):

* ``namespaced``: every namespace gains a ``LifecyclePolicy`` naming two of its ConfigMaps
  (all created at once, as a GitOps sync would; ``--spacing`` seconds apart, as tenants
  arriving one by one);
* ``cluster``: one ``ClusterLifecyclePolicy`` naming the same ConfigMaps.

``delete-after`` is ten years away: nothing becomes due. Once the controller is ready and
quiet, the policies are created; the window ends when every policy reports in its status
that it matches its ConfigMaps and the controller's CPU has been flat for
:data:`QUIET_S` seconds. Measured over the window: the controller's requests for ConfigMaps
from the API server's audit log (lists and watches, cluster-wide or in one namespace), the
bytes the API server sent for them (its ``apiserver_response_sizes`` of ConfigMap lists and
``apiserver_watch_events_sizes`` of ConfigMap watch events: nothing else reads ConfigMaps
meanwhile), the controller's CPU seconds (``/proc``),
and the seconds until every policy reported. Medians over the rounds, and the ratio of the
namespaced mode's median to the cluster mode's. ``--controller-source`` runs another tree's
controller (the figures before a change). Writes ``policies-namespaced.json`` and
``policies-namespaced.md``.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import json
import statistics
import time
from collections import Counter
from collections.abc import Iterator
from datetime import datetime
from pathlib import Path
from typing import Any

from benchmarks.cluster import ETCD_MAX_TXN_OPS, ETCD_QUOTA_BYTES, IDLE_AFTER_READY, _start
from benchmarks.cluster_measure import BENCH_AGENT
from benchmarks.cluster_objects import CONFIGMAPS, PAYLOAD, gather_limited
from benchmarks.etcd_seed import Seeded, seed_configmaps, served_count, verify_seeded
from lifecycle_controller.devcluster import ControlPlane
from lifecycle_controller.devcluster.policy_crds import install_policy_crds
from lifecycle_controller.kube import NAMESPACES, KubeClient, NotFound
from lifecycle_controller.kube.resources import CLUSTER_POLICIES, POLICIES

API_VERSION = "lifecycle.cezary.dev/v1alpha1"
POLICY = "tenant-configmaps"
#: Seconds of flat CPU (under one 10 ms tick a second) that end a window.
QUIET_S = 3.0
#: The controller's user agent prefix, as the audit log records it.
CONTROLLER_AGENT = "lifecycle-controller/"
MODES = ("namespaced", "cluster")


def namespace_of(i: int, namespaces: int) -> str:
    return f"tenant-{i % namespaces:03d}"


def configmaps(objects: int, namespaces: int) -> Iterator[Seeded]:
    for i in range(objects):
        yield namespace_of(i, namespaces), f"cm-{i:06d}", {}


def named(namespace: int, namespaces: int) -> list[str]:
    """The two ConfigMaps a namespace's policy names (two exist in every namespace)."""
    return [f"cm-{namespace:06d}", f"cm-{namespace + namespaces:06d}"]


def manifests(mode: str, namespaces: int) -> list[dict[str, Any]]:
    lifecycle = {"delete-after": "87600h"}
    if mode == "cluster":
        names = [name for n in range(namespaces) for name in named(n, namespaces)]
        spec = {"resources": ["configmaps"], "names": names, "lifecycle": lifecycle}
        meta: dict[str, Any] = {"name": POLICY}
        return [
            {
                "apiVersion": API_VERSION,
                "kind": CLUSTER_POLICIES.kind,
                "metadata": meta,
                "spec": spec,
            }
        ]
    return [
        {
            "apiVersion": API_VERSION,
            "kind": POLICIES.kind,
            "metadata": {"name": POLICY, "namespace": namespace_of(n, namespaces)},
            "spec": {
                "resources": ["configmaps"],
                "names": named(n, namespaces),
                "lifecycle": lifecycle,
            },
        }
        for n in range(namespaces)
    ]


async def create_all(kube: KubeClient, docs: list[dict[str, Any]], spacing: float) -> None:
    """Create ``docs``: all at once, or one every ``spacing`` seconds (tenants arriving)."""
    work = []
    for doc in docs:
        namespace = doc["metadata"].get("namespace")
        created = kube.create(POLICIES if namespace else CLUSTER_POLICIES, namespace, doc)
        if spacing:
            await created
            await asyncio.sleep(spacing)
        else:
            work.append(created)
    await gather_limited(work)


async def delete_all(kube: KubeClient, docs: list[dict[str, Any]]) -> None:
    async def one(doc: dict[str, Any]) -> None:
        namespace = doc["metadata"].get("namespace")
        resource = POLICIES if namespace else CLUSTER_POLICIES
        with contextlib.suppress(NotFound):
            await kube.delete(resource, namespace, doc["metadata"]["name"])

    await gather_limited([one(doc) for doc in docs])


async def matched(kube: KubeClient, mode: str) -> int:
    """The ConfigMaps the policies of ``mode`` report as matched, summed."""
    resource = CLUSTER_POLICIES if mode == "cluster" else POLICIES
    listing = await kube.request("GET", resource.collection_path(None) + "?limit=500")
    return sum(
        int((item.get("status") or {}).get("matched") or 0)
        for item in listing["items"]
        if item["metadata"]["name"] == POLICY
    )


#: The API server's byte counters for ConfigMaps: list responses, and events sent on
#: watches (a streaming list's initial events among them).
SIZES = ("apiserver_response_sizes_sum{", "apiserver_watch_events_sizes_sum{")


async def configmap_bytes(plane: ControlPlane) -> float:
    """Bytes the API server has sent in answers to lists and watches of ConfigMaps, to any
    client (only the controller reads ConfigMaps during a window)."""
    response = await asyncio.to_thread(plane.request, "GET", "/metrics")
    total = 0.0
    for line in str(response.body.get("raw", "")).splitlines():
        if line.startswith(SIZES) and 'resource="configmaps"' in line:
            total += float(line.rsplit(" ", 1)[1])
    return total


async def quiet(running: Any, *, limit: float = 120.0) -> None:
    """Until the controller's CPU has been flat for :data:`QUIET_S` seconds."""
    deadline = time.monotonic() + limit
    last, since = running.sampler.last().cpu_s, time.monotonic()
    while time.monotonic() < deadline:
        await asyncio.sleep(0.5)
        cpu = running.sampler.last().cpu_s
        if cpu - last > 0.01 * QUIET_S:
            last, since = cpu, time.monotonic()
        elif time.monotonic() - since >= QUIET_S:
            return


def requests(plane: ControlPlane, start: float, end: float) -> dict[str, int]:
    """The controller's lists and watches of ConfigMaps received in [start, end]."""
    counts: Counter[str] = Counter()
    seen: set[str] = set()
    for event in plane.audit_events():
        if event.get("auditID") in seen or not str(event.get("userAgent", "")).startswith(
            CONTROLLER_AGENT
        ):
            continue
        seen.add(str(event.get("auditID")))
        ref = event.get("objectRef") or {}
        verb = str(event.get("verb", ""))
        if ref.get("resource") != "configmaps" or ref.get("name") or verb not in ("list", "watch"):
            continue
        at = _stamp(str(event.get("requestReceivedTimestamp", "")))
        if start <= at <= end:
            counts[f"{verb} {'namespace' if ref.get('namespace') else 'cluster'}"] += 1
    return dict(sorted(counts.items()))


def _stamp(text: str) -> float:
    return datetime.fromisoformat(text.replace("Z", "+00:00")).timestamp()


async def one_mode(
    plane: ControlPlane, args: argparse.Namespace, kube: KubeClient, mode: str
) -> dict[str, Any]:
    docs = manifests(mode, args.namespaces)
    running = _start(plane, args, resources=("configmaps",))
    try:
        await running.until_ready()
        await asyncio.sleep(IDLE_AFTER_READY)
        await quiet(running)
        cpu, sent, start = running.sampler.last().cpu_s, await configmap_bytes(plane), time.time()
        await create_all(kube, docs, args.spacing)
        expected = 2 * args.namespaces
        while await matched(kube, mode) < expected:
            if time.time() - start > args.limit:
                raise RuntimeError(f"{mode}: the policies did not report within {args.limit}s")
            await asyncio.sleep(0.2)
        reported = time.time() - start
        await quiet(running)
        end = time.time() - QUIET_S
        figures = {
            "reported_s": round(reported, 2),
            "cpu_s": round(running.sampler.last().cpu_s - cpu, 2),
            "read_mb": round((await configmap_bytes(plane) - sent) / 2**20, 2),
            "requests": requests(plane, start, end),
        }
    finally:
        await running.stop()
    await delete_all(kube, docs)
    await asyncio.sleep(2.0)
    return figures


def _median(values: list[float]) -> float:
    return round(statistics.median(values), 2)


async def measure(plane: ControlPlane, args: argparse.Namespace) -> dict[str, Any]:
    result: dict[str, Any] = {
        "objects": args.objects,
        "namespaces": args.namespaces,
        "spacing": args.spacing,
    }
    async with await KubeClient.connect(
        str(plane.admin_kubeconfig), user_agent=BENCH_AGENT
    ) as kube:
        await asyncio.to_thread(install_policy_crds, plane)
        started = time.perf_counter()
        for n in range(args.namespaces):
            body = {
                "apiVersion": "v1",
                "kind": "Namespace",
                "metadata": {"name": namespace_of(n, args.namespaces)},
            }
            await kube.create(NAMESPACES, None, body)
        before = await served_count(kube, CONFIGMAPS)
        await seed_configmaps(
            plane.etcd_url, configmaps(args.objects, args.namespaces), payload=PAYLOAD
        )
        first = next(configmaps(1, args.namespaces))
        await verify_seeded(kube, CONFIGMAPS, before + args.objects, first)
        result["seed_s"] = round(time.perf_counter() - started, 1)
        await asyncio.sleep(args.settle)
        rounds: list[dict[str, Any]] = []
        for number in range(args.rounds):
            order = MODES if number % 2 == 0 else MODES[::-1]
            rounds.append({mode: await one_mode(plane, args, kube, mode) for mode in order})
            print("round", number, json.dumps(rounds[-1]), flush=True)
    result["rounds"] = rounds
    for mode in MODES:
        ones = [r[mode] for r in rounds]
        verbs = sorted({verb for one in ones for verb in one["requests"]})
        result[mode] = {
            key: _median([one[key] for one in ones]) for key in ("reported_s", "cpu_s", "read_mb")
        }
        result[mode]["requests"] = {
            verb: _median([one["requests"].get(verb, 0) for one in ones]) for verb in verbs
        }
    many, one = result["namespaced"], result["cluster"]
    result["ratios"] = {
        key: round(many[key] / max(one[key], 0.01), 2) for key in ("reported_s", "cpu_s", "read_mb")
    }
    return result


def _report(result: dict[str, Any], source: str | None) -> str:
    spacing = result.get("spacing") or 0
    lines = [
        f"{result['objects']:,} ConfigMaps over {result['namespaces']} namespaces; "
        f"controller {'of --controller-source' if source else 'of this tree'}; policies created "
        + (f"{spacing} s apart" if spacing else "at once"),
        "",
        "| mode (medians of rounds) | until every policy reported | controller CPU | bytes read | "
        "ConfigMap lists and watches |",
        "|---|---|---|---|---|",
    ]
    for mode, what in (
        ("namespaced", f"{result['namespaces']} LifecyclePolicies, one per namespace"),
        ("cluster", "1 ClusterLifecyclePolicy naming the same ConfigMaps"),
    ):
        one = result[mode]
        requests = ", ".join(f"{verb}: {count:g}" for verb, count in one["requests"].items())
        lines.append(
            f"| {what} | {one['reported_s']} s | {one['cpu_s']} s | {one['read_mb']} MB | "
            f"{requests or 'none'} |"
        )
    ratios = result["ratios"]
    lines += [
        "",
        "namespaced / cluster (ratio of the medians): "
        f"CPU {ratios['cpu_s']}x, bytes read {ratios['read_mb']}x, "
        f"until reported {ratios['reported_s']}x",
    ]
    for mode in MODES:
        lines.append(
            f"{mode} per round: CPU "
            + ", ".join(f"{r[mode]['cpu_s']} s" for r in result["rounds"])
            + "; read "
            + ", ".join(f"{r[mode]['read_mb']} MB" for r in result["rounds"])
            + "; requests "
            + "; ".join(json.dumps(r[mode]["requests"]) for r in result["rounds"])
        )
    return "\n".join(lines) + "\n"


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(
        prog="python -m benchmarks.policies_namespaced", description=__doc__.split("\n\n")[0]
    )
    parser.add_argument("--objects", type=int, default=20000, help="ConfigMaps")
    parser.add_argument("--namespaces", type=int, default=100, help="tenant namespaces")
    parser.add_argument("--rounds", type=int, default=3, help="rounds (each runs both modes)")
    parser.add_argument("--settle", type=float, default=20.0, help="seconds of rest after seeding")
    parser.add_argument(
        "--spacing", type=float, default=0.0, help="seconds between policy creates (0: a burst)"
    )
    parser.add_argument("--limit", type=float, default=600.0, help="seconds a mode may take")
    parser.add_argument("--output", type=Path, default=Path("benchmarks/results"))
    parser.add_argument("--report-name", default="policies-namespaced")
    parser.add_argument("--controller-source", help="run the controller from this folder")
    parser.add_argument("--controller-python", help="run the controller with this interpreter")
    args = parser.parse_args(argv)
    args.output.mkdir(parents=True, exist_ok=True)
    with ControlPlane(
        audit_log=True,
        log=lambda line: None,
        etcd_quota_bytes=ETCD_QUOTA_BYTES,
        etcd_max_txn_ops=ETCD_MAX_TXN_OPS,
    ) as plane:
        result = asyncio.run(measure(plane, args))
    print(json.dumps({k: v for k, v in result.items() if k != "rounds"}))
    (args.output / f"{args.report_name}.json").write_text(json.dumps(result, indent=2) + "\n")
    (args.output / f"{args.report_name}.md").write_text(_report(result, args.controller_source))
    print(f"wrote {args.output}/{args.report_name}.json and .md")


if __name__ == "__main__":
    main()
