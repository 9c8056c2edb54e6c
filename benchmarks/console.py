"""What the console costs over many scheduled objects, beside ``status -A`` on the same objects.

N ConfigMaps over 50 namespaces, every one with a ``delete-at`` spread evenly over the next
24 hours (every 10th in dry run, every 7th with a ``warn-before``), are written straight
into etcd (``benchmarks.etcd_seed``). Then, per round:

* **status**: ``lifecycle-controller status -A --watch-resource configmaps -o json`` as a
  process of its own: its wall time and its peak RSS (``wait4``'s ``ru_maxrss``);
* **console**: ``lifecycle-controller console -A --watch-resource configmaps`` (the default
  ``--interval``): the time from its start until its first list and judgement are published
  (``/api/overview`` ready), its RSS then (VmRSS, VmHWM), the time of one ``/api/timeline``
  answer (the server-side count over every mark), and the **first draw**: headless chromium
  loads the page, and the time from the navigation's start until the timeline is drawn
  (``performance.now()`` the page records at its first draw), the drawing alone (from the
  timeline's answer to the SVG in the page), and the wall time of the whole load as the
  benchmark sees it. Then, the page still open, the **live update**: one object's
  ``delete-at`` is changed (a merge patch, as ``kubectl annotate`` sends), and the time from
  the patch's answer until the page has drawn the new version (its ``data-version``); and
  the console's **idle CPU**: its CPU time (user + system, ``/proc/PID/stat``) over
  :data:`IDLE_S` seconds in which nothing changes, as a share of one core.

Medians of the rounds; writes ``console.json`` and ``console.md``.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import statistics
import subprocess
import sys
import time
from collections.abc import Iterator
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import aiohttp
from selenium.webdriver.common.by import By
from selenium.webdriver.support.ui import WebDriverWait

from benchmarks.browser import console_process, headless
from benchmarks.etcd_seed import Seeded, seed_configmaps, served_count, verify_seeded
from lifecycle_controller.core.objects import keys
from lifecycle_controller.devcluster import ControlPlane
from lifecycle_controller.kube import KubeClient
from lifecycle_controller.kube.resources import CONFIGMAPS, NAMESPACES

NAMESPACE_COUNT = 50
PAYLOAD = {"payload": "x" * 64}
ETCD_QUOTA_BYTES = 8 * 1024**3
ETCD_MAX_TXN_OPS = 1000
#: Seconds over which the console's idle CPU is measured.
IDLE_S = 30.0


def _configmaps(objects: int, start: datetime) -> Iterator[Seeded]:
    spread = timedelta(hours=24) / max(1, objects)
    for i in range(objects):
        due = (start + spread * i).strftime("%Y-%m-%dT%H:%M:%SZ")
        annotations = {keys.DELETE_AT: due}
        if i % 10 == 0:
            annotations[keys.DRY_RUN] = "true"
        if i % 7 == 0:
            annotations[keys.WARN_BEFORE] = "30m"
        yield f"bench-{i % NAMESPACE_COUNT:02d}", f"cm-{i:06d}", annotations


async def seed(plane: ControlPlane, objects: int) -> float:
    started = time.perf_counter()
    start = datetime.now(UTC) + timedelta(hours=1)
    async with await KubeClient.connect(str(plane.admin_kubeconfig)) as kube:
        for i in range(NAMESPACE_COUNT):
            body = {"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": f"bench-{i:02d}"}}
            await kube.create(NAMESPACES, None, body)
        before = await served_count(kube, CONFIGMAPS)
        await seed_configmaps(plane.etcd_url, _configmaps(objects, start), payload=PAYLOAD)
        await verify_seeded(kube, CONFIGMAPS, before + objects, next(_configmaps(1, start)))
    return time.perf_counter() - started


def _tool(plane: ControlPlane, *args: str) -> list[str]:
    command = [sys.executable, "-m", "lifecycle_controller", *args]
    return [*command, "--kubeconfig", str(plane.admin_kubeconfig)]


def status_round(plane: ControlPlane) -> dict[str, float]:
    """``status -A`` once: wall seconds and peak RSS (MiB)."""
    started = time.perf_counter()
    with subprocess.Popen(
        _tool(plane, "status", "-A", "--watch-resource", "configmaps", "-o", "json"),
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
    ) as process:
        _, code, usage = os.wait4(process.pid, 0)
        process.returncode = os.waitstatus_to_exitcode(code)
    if process.returncode != 0:
        raise RuntimeError(f"status failed: {process.returncode}")
    return {"wall_s": time.perf_counter() - started, "peak_rss_mib": usage.ru_maxrss / 1024}


def _memory(pid: int) -> dict[str, float]:
    found = {}
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        name, _, value = line.partition(":")
        if name in ("VmRSS", "VmHWM"):
            found[name] = int(value.split()[0]) / 1024
    return {"rss_mib": found["VmRSS"], "peak_rss_mib": found["VmHWM"]}


async def _ready(url: str, limit: float) -> float:
    started = time.perf_counter()
    async with aiohttp.ClientSession() as session:
        while time.perf_counter() - started < limit:
            async with session.get(url + "api/overview") as response:
                if (await response.json()).get("ready"):
                    return time.perf_counter() - started
            await asyncio.sleep(0.1)
    raise RuntimeError(f"the console's first look took over {limit} s")


async def _timeline_s(url: str) -> float:
    async with aiohttp.ClientSession() as session:
        started = time.perf_counter()
        async with session.get(url + "api/timeline", params={"span": "day"}) as response:
            body = await response.json()
        took = time.perf_counter() - started
    if sum(body["totals"].values()) == 0:
        raise RuntimeError("the timeline is empty")
    return took


def _cpu_seconds(pid: int) -> float:
    fields = Path(f"/proc/{pid}/stat").read_text().rpartition(")")[2].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


async def _annotate(plane: ControlPlane, due: str) -> None:
    patch = {"metadata": {"annotations": {keys.DELETE_AT: due}}}
    async with await KubeClient.connect(str(plane.admin_kubeconfig)) as kube:
        await kube.merge_patch(CONFIGMAPS, "bench-01", "cm-000001", patch)


def live_update(plane: ControlPlane, driver: Any, limit: float) -> float:
    """Seconds from a ``delete-at`` patch's answer until the open page drew the change."""
    body = driver.find_element(By.TAG_NAME, "body")
    version = body.get_attribute("data-version")
    due = (datetime.now(UTC) + timedelta(minutes=90)).strftime("%Y-%m-%dT%H:%M:%SZ")
    asyncio.run(_annotate(plane, due))
    patched = time.perf_counter()
    WebDriverWait(driver, limit, poll_frequency=0.02).until(
        lambda d: d.find_element(By.TAG_NAME, "body").get_attribute("data-version") != version
    )
    return time.perf_counter() - patched


def idle_cpu(pid: int) -> float:
    """The process's CPU over :data:`IDLE_S` seconds, as a percentage of one core."""
    before, started = _cpu_seconds(pid), time.perf_counter()
    time.sleep(IDLE_S)
    return 100 * (_cpu_seconds(pid) - before) / (time.perf_counter() - started)


def console_round(plane: ControlPlane, limit: float) -> dict[str, float]:
    started = time.perf_counter()
    args = ("-A", "--watch-resource", "configmaps")
    with console_process(plane.admin_kubeconfig, *args) as console:
        served = time.perf_counter() - started
        first_look = asyncio.run(_ready(console.url, limit)) + served
        memory = _memory(console.process.pid)
        timeline = asyncio.run(_timeline_s(console.url))
        driver = headless()
        try:
            loading = time.perf_counter()
            driver.get(console.url)
            WebDriverWait(driver, limit, poll_frequency=0.02).until(
                lambda d: d.find_element(By.TAG_NAME, "body").get_attribute("data-ready") == "true"
            )
            load_s = time.perf_counter() - loading
            body = driver.find_element(By.TAG_NAME, "body")
            drawn_ms = float(body.get_attribute("data-first-draw-ms") or 0)
            drawing_ms = float(body.get_attribute("data-first-draw-work-ms") or 0)
            marks = len(driver.find_elements(By.CSS_SELECTOR, "#chart .mark"))
            idle = idle_cpu(console.process.pid)
            shown = live_update(plane, driver, limit)
        finally:
            driver.quit()
    return {
        "first_look_s": first_look,
        "timeline_request_s": timeline,
        "first_draw_s": drawn_ms / 1000,
        "drawing_s": drawing_ms / 1000,
        "page_load_s": load_s,
        "marks_drawn": marks,
        "change_shown_s": shown,
        "idle_cpu_percent": idle,
        **memory,
    }


def _median(rounds: list[dict[str, float]]) -> dict[str, float]:
    return {key: round(statistics.median(r[key] for r in rounds), 3) for key in rounds[0]}


def measure(objects: int, rounds: int, limit: float) -> dict[str, Any]:
    with ControlPlane(
        controller_manager=False,
        log=lambda line: None,
        etcd_quota_bytes=ETCD_QUOTA_BYTES,
        etcd_max_txn_ops=ETCD_MAX_TXN_OPS,
    ) as plane:
        seeded = seed(plane, objects)
        seed_s = asyncio.run(seeded)
        status_rounds, console_rounds = [], []
        for index in range(rounds):
            status_rounds.append(status_round(plane))
            console_rounds.append(console_round(plane, limit))
            print(f"round {index + 1}: {status_rounds[-1]} {console_rounds[-1]}", flush=True)
    return {
        "objects": objects,
        "seed_s": round(seed_s, 1),
        "status": _median(status_rounds),
        "console": _median(console_rounds),
        "rounds": {"status": status_rounds, "console": console_rounds},
    }


def _report(runs: list[dict[str, Any]]) -> str:
    lines = [
        "| objects | status -A | its peak RSS | console's first look | first draw (page) | "
        "drawing | page load | /api/timeline | marks | console RSS (peak) | "
        "annotation to page | idle CPU |",
        "|---|---|---|---|---|---|---|---|---|---|---|---|",
    ]
    for run in runs:
        s, c = run["status"], run["console"]
        lines.append(
            f"| {run['objects']:,} | {s['wall_s']:.1f} s | {s['peak_rss_mib']:.0f} MiB | "
            f"{c['first_look_s']:.1f} s | {c['first_draw_s'] * 1000:.0f} ms | "
            f"{c['drawing_s'] * 1000:.0f} ms | "
            f"{c['page_load_s'] * 1000:.0f} ms | {c['timeline_request_s'] * 1000:.0f} ms | "
            f"{c['marks_drawn']:,.0f} | "
            f"{c['rss_mib']:.0f} MiB ({c['peak_rss_mib']:.0f}) | "
            f"{c['change_shown_s'] * 1000:.0f} ms | {c['idle_cpu_percent']:.1f} % |"
        )
    return "\n".join(lines) + "\n"


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(
        prog="python -m benchmarks.console", description=__doc__.split("\n\n")[0]
    )
    parser.add_argument("--objects", default="20000", help="ConfigMap counts, comma-separated")
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--limit", type=float, default=900.0, help="seconds a look may take")
    parser.add_argument("--output", type=Path, default=Path("benchmarks/results"))
    args = parser.parse_args(argv)
    runs = [measure(int(n), args.rounds, args.limit) for n in args.objects.split(",")]
    args.output.mkdir(parents=True, exist_ok=True)
    (args.output / "console.json").write_text(json.dumps(runs, indent=2) + "\n")
    (args.output / "console.md").write_text(_report(runs))
    print(_report(runs))
    print(f"wrote {args.output}/console.json and console.md")


if __name__ == "__main__":
    main()
