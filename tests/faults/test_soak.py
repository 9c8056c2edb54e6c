"""Scenario 8: the churn soak (on demand: ``tox -e soak``; marker ``soak``, not ``faults``).

The controller (in this process, so its asyncio tasks and event loop can be measured) watches
ConfigMaps in one namespace. The namespace first gets ``LIFECYCLE_SOAK_OBJECTS`` ConfigMaps
(default 10,000; every tenth annotated with a far-future ``delete-at``, so the cache holds
them), then the test churns for ``LIFECYCLE_SOAK_SECONDS`` (default 1,200 = 20 minutes):
every second it creates :data:`DUE_PER_SECOND` ConfigMaps that are due at once and
:data:`PLAIN_PER_SECOND` plain ones, moves one annotated object's deadline, updates and
deletes plain ones, so the churned plain population stays around :data:`PLAIN_KEPT`. Every
:data:`SAMPLE_EVERY` seconds it records RSS, asyncio tasks, open file descriptors and
event-loop lag (how late a 0.1 s sleep wakes) to a CSV (``LIFECYCLE_SOAK_CSV``, else the
test's temporary folder).

Asserted, after the first fifth (warm-up): RSS grows less than 10 %, tasks and fds stay
flat (within a small margin of the warm-up's maximum), loop-lag p99 under 100 ms, and every
due ConfigMap deleted exactly once (audit log) with no ``Deleted`` Event doubled. With
``LIFECYCLE_SOAK_PLOT=1`` (needs the ``soak`` extra: matplotlib) it writes ``docs/soak-*.png``.
"""

from __future__ import annotations

import asyncio
import contextlib
import csv
import os
import statistics
import time
from pathlib import Path

import pytest

from lifecycle_controller.devcluster import ControlPlane
from lifecycle_controller.kube import KubeClient, NotFound
from lifecycle_controller.kube.resources import CONFIGMAPS
from tests.faults.quiet import queue_idle, wait_quiet
from tests.faults.support import controller_kubeconfig, deletion_tally
from tests.faults.test_api_outage import live_names
from tests.integration.controller import StartController
from tests.integration.keys import DELETE_AT
from tests.integration.scenario_support import start_for
from tests.integration.support import configmap, eventually
from tests.integration.timestamps import FAR, PAST

pytestmark = pytest.mark.soak

DUE_PER_SECOND = 2
PLAIN_PER_SECOND = 5
PLAIN_KEPT = 300
SAMPLE_EVERY = 5.0
ANNOTATED_EVERY = 10
CREATE_CONCURRENCY = 16
DOCS = Path(__file__).resolve().parents[2] / "docs"


async def populate(kube: KubeClient, namespace: str, count: int) -> list[str]:
    """``count`` ConfigMaps, every ANNOTATED_EVERY-th with a far-future deadline; their names."""
    gate = asyncio.Semaphore(CREATE_CONCURRENCY)
    annotated: list[str] = []

    async def one(i: int) -> None:
        name = f"base-{i:06d}"
        extra = {DELETE_AT: FAR} if i % ANNOTATED_EVERY == 0 else {}
        if extra:
            annotated.append(name)
        async with gate:
            await kube.create(CONFIGMAPS, namespace, configmap(name, **extra))

    await asyncio.gather(*(one(i) for i in range(count)))
    return sorted(annotated)


def rss_bytes() -> int:
    for line in Path("/proc/self/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1]) * 1024
    return 0


def open_fds() -> int:
    return len(os.listdir("/proc/self/fd"))


async def loop_lag() -> float:
    started = time.monotonic()
    await asyncio.sleep(0.1)
    return time.monotonic() - started - 0.1


def write_csv(target: Path, rows: list[dict[str, float]]) -> None:
    with target.open("w", newline="") as out:
        writer = csv.DictWriter(out, fieldnames=list(rows[0]))
        writer.writeheader()
        writer.writerows(rows)


def plot(rows: list[dict[str, float]]) -> None:
    import matplotlib  # the soak extra only

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    t = [row["t"] for row in rows]
    for column, label in (
        ("rss_mb", "RSS (MB)"),
        ("tasks", "asyncio tasks"),
        ("lag_ms", "loop lag (ms)"),
    ):
        figure, axes = plt.subplots(figsize=(7, 3))
        axes.plot(t, [row[column] for row in rows])
        axes.set_xlabel("seconds")
        axes.set_ylabel(label)
        figure.tight_layout()
        figure.savefig(DOCS / f"soak-{column}.png")
        plt.close(figure)


async def test_churn_soak_flat_growth_nothing_missed_or_doubled(
    control_plane: ControlPlane,
    kube: KubeClient,
    namespace: str,
    start_controller: StartController,
    tmp_path: Path,
) -> None:
    duration = float(os.environ.get("LIFECYCLE_SOAK_SECONDS", "1200"))
    population = int(os.environ.get("LIFECYCLE_SOAK_OBJECTS", "10000"))
    target = Path(os.environ.get("LIFECYCLE_SOAK_CSV") or tmp_path / "soak.csv")
    annotated = await populate(kube, namespace, population)
    running = await start_for(
        start_controller, namespace, kubeconfig=controller_kubeconfig(control_plane)
    )
    due_names: list[str] = []
    plain: list[str] = []
    rows: list[dict[str, float]] = []
    lags: list[float] = []
    start = time.monotonic()
    next_sample = start
    second = 0
    while time.monotonic() - start < duration:
        tick = time.monotonic()
        for i in range(DUE_PER_SECOND):
            name = f"due-{second:05d}-{i}"
            await kube.create(CONFIGMAPS, namespace, configmap(name, **{DELETE_AT: PAST}))
            due_names.append(name)
        for i in range(PLAIN_PER_SECOND):
            name = f"plain-{second:05d}-{i}"
            await kube.create(CONFIGMAPS, namespace, configmap(name))
            plain.append(name)
        if plain:
            body = {"metadata": {"labels": {"touched": str(second)}}}
            await kube.merge_patch(CONFIGMAPS, namespace, plain[-1], body)
        if annotated:  # an annotated object's deadline moves: a relevant update, a reconcile
            later = {
                "metadata": {"annotations": {DELETE_AT: f"29{second % 100:02d}-01-01T00:00:00Z"}}
            }
            await kube.merge_patch(CONFIGMAPS, namespace, annotated[second % len(annotated)], later)
        while len(plain) > PLAIN_KEPT:
            with contextlib.suppress(NotFound):
                await kube.delete(CONFIGMAPS, namespace, plain.pop(0))
        lags.append(await loop_lag())
        if time.monotonic() >= next_sample:
            rows.append(
                {
                    "t": round(time.monotonic() - start, 1),
                    "rss_mb": round(rss_bytes() / 1e6, 2),
                    "tasks": float(len(asyncio.all_tasks())),
                    "fds": float(open_fds()),
                    "lag_ms": round(max(lags[-5:]) * 1000, 2),
                }
            )
            next_sample += SAMPLE_EVERY
        second += 1
        await asyncio.sleep(max(0.0, 1.0 - (time.monotonic() - tick)))

    async def due_gone() -> bool:
        return not (set(due_names) & await live_names(kube, namespace))

    await eventually(due_gone, within=60, interval=1.0, what="every due ConfigMap deleted")
    await wait_quiet(control_plane, queue_idle(running))  # any doubled delete or Event
    write_csv(target, rows)
    if os.environ.get("LIFECYCLE_SOAK_PLOT"):
        plot(rows)
    tally = await deletion_tally(
        control_plane, kube, "8 churn soak", due_names, namespace=namespace, gone=due_names
    )
    warm = max(1, len(rows) // 5)
    warmed, after = rows[:warm], rows[warm:] or rows[-1:]
    base_rss = max(r["rss_mb"] for r in warmed)
    p99 = sorted(lags)[int(0.99 * (len(lags) - 1))] * 1000
    tally.extra = {
        "seconds": duration,
        "objects": population + len(due_names) + PLAIN_KEPT,
        "csv": target.name,
        "rss_growth_pct": round(100 * (after[-1]["rss_mb"] / base_rss - 1), 1),
        "tasks": [min(r["tasks"] for r in rows), max(r["tasks"] for r in rows)],
        "fds": [min(r["fds"] for r in rows), max(r["fds"] for r in rows)],
        "lag_p99_ms": round(p99, 1),
        "lag_median_ms": round(statistics.median(lags) * 1000, 1),
    }
    tally.record()
    tally.assert_exactly_once()
    assert after[-1]["rss_mb"] < base_rss * 1.10, tally.extra
    assert max(r["tasks"] for r in after) <= max(r["tasks"] for r in warmed) + 20, tally.extra
    assert max(r["fds"] for r in after) <= max(r["fds"] for r in warmed) + 10, tally.extra
    assert p99 < 100, tally.extra
