"""What the cluster benchmark reads: /proc, the controller's probes and metrics, the audit log,
and the floors (a plain aiohttp client doing the same API work with nothing else around it)."""

from __future__ import annotations

import asyncio
import contextlib
import json
import os
import statistics
import time
from collections import Counter
from collections.abc import AsyncIterator, Sequence
from dataclasses import dataclass, field
from datetime import datetime
from pathlib import Path
from typing import Any

import aiohttp

from lifecycle_controller.kube import ACCEPT_METADATA_LIST, ClusterConfig, ResourceType

CLOCK_TICKS = os.sysconf("SC_CLK_TCK")
FLOOR_AGENT = "lifecycle-bench-floor/1"
BENCH_AGENT = "lifecycle-bench/1"


# ---------------------------------------------------------------------- /proc


@dataclass
class ProcSample:
    t: float  # seconds since the process started
    rss_mb: float
    hwm_mb: float
    cpu_s: float


def proc_sample(pid: int, started: float) -> ProcSample | None:
    try:
        status = Path(f"/proc/{pid}/status").read_text()
        stat = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return None
    values = {}
    for line in status.splitlines():
        if line.startswith(("VmRSS:", "VmHWM:")):
            values[line[:5]] = int(line.split()[1]) / 1024
    fields = stat.rsplit(")", 1)[1].split()
    cpu = (int(fields[11]) + int(fields[12])) / CLOCK_TICKS  # utime + stime
    return ProcSample(
        time.time() - started, values.get("VmRSS", 0.0), values.get("VmHWM", 0.0), cpu
    )


#: How often the controller's /proc is sampled.
SAMPLE_S = 0.05
#: How often /readyz is polled until it answers 200: its ready time is resolved to 10 ms (a
#: 50 ms poll over-reported it by 25 ms on average, against floors that time themselves).
READY_POLL_S = 0.01


@dataclass
class Sampler:
    """Samples the controller every :data:`SAMPLE_S` and, until it is ready, polls /readyz
    every :data:`READY_POLL_S`."""

    pid: int
    started: float
    readyz: str
    samples: list[ProcSample] = field(default_factory=list)
    ready_at: float | None = None

    async def run(self) -> None:
        timeout = aiohttp.ClientTimeout(total=1.0)
        async with aiohttp.ClientSession(timeout=timeout) as session:
            sampled_at = -SAMPLE_S
            while True:
                now = time.monotonic()
                if now - sampled_at >= SAMPLE_S:
                    sample = proc_sample(self.pid, self.started)
                    if sample is None:
                        return
                    self.samples.append(sample)
                    sampled_at = now
                if self.ready_at is None:
                    try:
                        async with session.get(self.readyz) as response:
                            if response.status == 200:
                                self.ready_at = time.time() - self.started
                    except (aiohttp.ClientError, TimeoutError, OSError):
                        pass
                await asyncio.sleep(READY_POLL_S if self.ready_at is None else SAMPLE_S)

    def last(self) -> ProcSample:
        sample = proc_sample(self.pid, self.started)
        return sample if sample is not None else self.samples[-1]


# ---------------------------------------------------------------------- metrics


async def _metrics_text(url: str) -> str:
    async with aiohttp.ClientSession() as session, session.get(url) as response:
        return await response.text()


#: The controller's work in its metrics: reconciles run and the queues' depth.
_WORK: dict[str, tuple[str, str]] = {
    "reconciles": ("controller_runtime_reconcile_total{", ""),
    "depth": ("workqueue_depth{", ""),
}


async def work_sums(
    session: aiohttp.ClientSession, url: str, **more: tuple[str, str]
) -> dict[str, float]:
    """The controller's metrics at ``url`` summed over their series: ``reconciles``,
    ``depth`` and each of ``more`` (its name: the line's start, a text the line holds)."""
    async with session.get(url) as response:
        text = await response.text()
    wanted = {**_WORK, **more}
    sums = dict.fromkeys(wanted, 0.0)
    for line in text.splitlines():
        for name, (start, holds) in wanted.items():
            if line.startswith(start) and holds in line:
                sums[name] += float(line.rsplit(" ", 1)[1])
                break
    return sums


async def work_done(
    session: aiohttp.ClientSession, url: str, quiet: float = 2.0, **more: tuple[str, str]
) -> dict[str, float]:
    """Wait until the reconcile count has not moved for ``quiet`` seconds with an empty
    queue; the last :func:`work_sums`."""
    last = await work_sums(session, url, **more)
    still_since = time.perf_counter()
    while True:
        await asyncio.sleep(0.2)
        now = await work_sums(session, url, **more)
        if now["reconciles"] != last["reconciles"] or now["depth"] > 0:
            last, still_since = now, time.perf_counter()
        elif time.perf_counter() - still_since >= quiet:
            return now


async def scrape_lag_buckets(url: str) -> dict[float, float]:
    """Cumulative ``lifecycle_event_loop_lag_seconds`` buckets from the controller's /metrics."""
    text = await _metrics_text(url)
    buckets: dict[float, float] = {}
    for line in text.splitlines():
        if line.startswith("lifecycle_event_loop_lag_seconds_bucket{"):
            le = line.split('le="', 1)[1].split('"', 1)[0]
            buckets[float("inf") if le == "+Inf" else float(le)] = float(line.rsplit(" ", 1)[1])
    return buckets


def lag_summary(before: dict[float, float], after: dict[float, float]) -> dict[str, Any]:
    """Observations in a window; p99 as the smallest bucket bound holding 99 % of them."""
    delta = {le: after.get(le, 0.0) - before.get(le, 0.0) for le in sorted(after)}
    total = delta.get(float("inf"), 0.0)
    if total <= 0:
        return {"samples": 0, "p99_le_s": None, "share_under_50ms": None}
    p99 = next(le for le, count in delta.items() if count >= 0.99 * total)
    return {
        "samples": int(total),
        "p99_le_s": None if p99 == float("inf") else p99,
        "share_under_50ms": round(delta.get(0.05, 0.0) / total, 4),
    }


# ---------------------------------------------------------------------- audit log


def _stamp(text: str) -> float:
    return datetime.fromisoformat(text.replace("Z", "+00:00")).timestamp()


@dataclass(frozen=True)
class AuditRequest:
    at: float
    verb: str
    resource: str
    agent: str


def read_audit(path: Path) -> list[AuditRequest]:
    """One entry per request (by auditID), from the API server's JSON audit log."""
    seen: set[str] = set()
    out: list[AuditRequest] = []
    with path.open() as handle:
        for line in handle:
            try:
                entry = json.loads(line)
            except json.JSONDecodeError:
                continue
            audit_id = entry.get("auditID", "")
            if audit_id in seen:
                continue
            seen.add(audit_id)
            ref = entry.get("objectRef") or {}
            resource = ref.get("resource") or entry.get("requestURI", "").split("?")[0]
            if ref.get("subresource"):
                resource += "/" + ref["subresource"]
            out.append(
                AuditRequest(
                    _stamp(entry["requestReceivedTimestamp"]),
                    entry.get("verb", ""),
                    resource,
                    entry.get("userAgent", ""),
                )
            )
    return out


def requests_between(
    requests: Sequence[AuditRequest], agent: str, start: float, end: float
) -> dict[str, int]:
    counts = Counter(
        f"{r.verb} {r.resource}"
        for r in requests
        if r.agent.startswith(agent) and start <= r.at < end
    )
    return dict(sorted(counts.items()))


# ---------------------------------------------------------------------- floors


class PlainClient:
    """The floor: bare aiohttp with the same credentials, no framework around it."""

    def __init__(self, config: ClusterConfig) -> None:
        self._config = config
        self._ssl = config.ssl_context()
        self._session: aiohttp.ClientSession | None = None
        self.bytes_received: Counter[str] = Counter()

    async def __aenter__(self) -> PlainClient:
        self._session = aiohttp.ClientSession(
            connector=aiohttp.TCPConnector(limit=64, ssl=self._ssl),
            headers={"User-Agent": FLOOR_AGENT},
        )
        return self

    async def __aexit__(self, *exc: object) -> None:
        if self._session is not None:
            await self._session.close()

    async def call(
        self,
        method: str,
        path: str,
        body: Any = None,
        *,
        accept: str = "application/json",
        content_type: str = "application/json",
        params: Sequence[tuple[str, str]] = (),
    ) -> tuple[int, bytes]:
        async with self.stream(
            method, path, body, accept=accept, content_type=content_type, params=params
        ) as response:
            raw = await response.read()
            return response.status, raw

    @contextlib.asynccontextmanager
    async def stream(
        self,
        method: str,
        path: str,
        body: Any = None,
        *,
        accept: str = "application/json",
        content_type: str = "application/json",
        params: Sequence[tuple[str, str]] = (),
        timeout: aiohttp.ClientTimeout | None = None,
    ) -> AsyncIterator[aiohttp.ClientResponse]:
        """The response, unread (a watch reads it line by line); ``timeout`` replaces the
        session's (a watch longer than its total of 5 minutes needs one without a total)."""
        assert self._session is not None
        headers = {"Accept": accept, "Content-Type": content_type}
        authorization = await self._config.authorization_header()
        if authorization:
            headers["Authorization"] = authorization
        async with self._session.request(
            method,
            self._config.host + path,
            params=list(params),
            data=None if body is None else json.dumps(body),
            headers=headers,
            timeout=timeout or self._session.timeout,
        ) as response:
            yield response

    async def list_all(self, resource: ResourceType) -> int:
        """A paginated metadata-only list of every object (pages decoded and dropped)."""
        count = 0
        token = ""
        while True:
            params = [("limit", "500")] + ([("continue", token)] if token else [])
            _, raw = await self.call(
                "GET", resource.collection_path(None), accept=ACCEPT_METADATA_LIST, params=params
            )
            self.bytes_received[str(resource)] += len(raw)
            page = json.loads(raw)
            count += len(page.get("items") or ())
            token = page.get("metadata", {}).get("continue") or ""
            if not token:
                return count


async def list_floor(
    config: ClusterConfig, resources: Sequence[ResourceType], runs: int = 3
) -> dict[str, Any]:
    """Seconds to list every type one after another, and all at once (median of ``runs``)."""
    sequential: list[float] = []
    parallel: list[float] = []
    received: dict[str, int] = {}
    for _ in range(runs):
        async with PlainClient(config) as plain:
            started = time.perf_counter()
            for resource in resources:
                await plain.list_all(resource)
            sequential.append(time.perf_counter() - started)
            received = dict(plain.bytes_received)
        async with PlainClient(config) as plain:
            started = time.perf_counter()
            await asyncio.gather(*(plain.list_all(r) for r in resources))
            parallel.append(time.perf_counter() - started)
    return {
        "sequential_s": round(statistics.median(sequential), 3),
        "parallel_s": round(statistics.median(parallel), 3),
        "runs_sequential_s": [round(v, 3) for v in sequential],
        "metadata_bytes_per_type": received,
    }
