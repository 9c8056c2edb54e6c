"""The cluster benchmark's outputs: JSON (every figure), a markdown table, PNG plots."""

from __future__ import annotations

import json
import statistics
from pathlib import Path
from typing import Any

TARGETS = {
    "ready_ratio": 1.5,
    "hwm_mb_20k": 95.0,
    "hwm_mb_100k": 150.0,
    "rss_idle_mb_20k": 80.0,
    "rss_idle_mb_100k": 100.0,
    "cpu_per_deletion_ms": 1.8,
    "burst_ratio": 1.1,
    "storm_ratio": 1.1,
    "lag_p99_s": 0.05,
    "ready_stream_ratio_1m": 1.2,
    "rss_mb_1m": 100.0,
}


def derived(run: dict[str, Any]) -> dict[str, Any]:
    """The figures the targets are stated in (ratios, per-action CPU)."""
    out: dict[str, Any] = {}
    floor = run["list_floor"]["sequential_s"]
    ratios = run.get("ready_ratio_rounds")  # each start against the floor measured just before
    if ratios:
        out["ready_ratio"] = round(statistics.median(ratios), 2)
    else:
        out["ready_ratio"] = round(run["ready_s"] / floor, 2) if floor else None
    for key in ("ready_stream_ratio", "ready_stream_process_ratio"):
        if run.get(f"{key}_rounds"):
            out[key] = round(statistics.median(run[f"{key}_rounds"]), 2)
    burst, storm, floors = run.get("burst"), run.get("storm"), run.get("action_floors", {})
    if burst and burst.get("done"):
        out["cpu_per_deletion_ms"] = round(1000 * burst["controller_cpu_s"] / burst["done"], 2)
        out["floor_cpu_per_deletion_ms"] = floors.get("delete_cpu_ms_at_4")
        _job_floor(out, "deletion", burst, floors.get("delete_job_cpu_ms"))
        floor4 = floors.get("delete_at_4_s")
        out["burst_ratio"] = round(burst["last_gone_s"] / floor4, 2) if floor4 else None
        requests = run["requests"].get("burst", {})
        out["requests_per_deletion"] = round(sum(requests.values()) / burst["done"], 2)
    if storm and storm.get("done"):
        out["cpu_per_restart_ms"] = round(1000 * storm["controller_cpu_s"] / storm["done"], 2)
        out["floor_cpu_per_restart_ms"] = floors.get("restart_cpu_ms_at_4")
        _job_floor(out, "restart", storm, floors.get("restart_job_cpu_ms"))
        floor4 = floors.get("restart_at_4_s")
        out["storm_ratio"] = round(storm["last_done_s"] / floor4, 2) if floor4 else None
    if run.get("idle_s"):
        out["idle_cpu_percent"] = round(100 * run["cpu_idle_s"] / run["idle_s"], 3)
    return out


def _job_floor(
    out: dict[str, Any], action: str, rounds: dict[str, Any], after: float | None
) -> None:
    """The whole-job floor of ``action`` and the ratio to it: the median over the rounds,
    each paired with the floor measured right after it (``benchmarks/cluster_floors.py``); runs
    older than the pairing measured the floors after every round (``after``)."""
    job = rounds.get("job_floor_cpu_ms", after)
    out[f"job_floor_cpu_per_{action}_ms"] = job
    if "cpu_ratio" in rounds:
        out[f"cpu_per_{action}_ratio"] = round(rounds["cpu_ratio"], 2)
    else:
        out[f"cpu_per_{action}_ratio"] = (
            round(out[f"cpu_per_{action}_ms"] / job, 2) if job else None
        )


def _lag(summary: dict[str, Any]) -> str:
    """The p99 bound of a lag window, or why there is none."""
    if not summary.get("samples"):
        return "no sample (ready within the sampling interval)"
    return f"≤ {summary.get('p99_le_s')} s"


def _cpu(d: dict[str, Any], action: str) -> str:
    """The controller's CPU per ``action`` beside the plain client's (the requests alone, and
    the whole job, with the ratio to it; older runs lack them)."""
    text = f"{d.get(f'cpu_per_{action}_ms')} ms"
    cpu_ms, job_ms = d.get(f"floor_cpu_per_{action}_ms"), d.get(f"job_floor_cpu_per_{action}_ms")
    if cpu_ms is not None:
        text += f"; requests {cpu_ms} ms"
    if job_ms is not None:
        text += f"; whole job {job_ms} ms: {d.get(f'cpu_per_{action}_ratio')}x"
    return text


def _name(run: dict[str, Any]) -> str:
    rounds = run.get("rounds", 1)
    return f"{run.get('label', '')}" + (f" (median of {rounds})" if rounds > 1 else "")


def _s(value: float | None) -> str:
    return "skipped" if value is None else f"{value:.2f}"


def _ratio(value: float | None) -> str:
    return "skipped" if value is None else f"{value}x"


def markdown(runs: list[dict[str, Any]]) -> str:
    lines = [
        "| run | objects | ready (floor seq / par) | ratio | first request | CPU to ready "
        "| RSS ready / idle | peak (VmHWM) | idle CPU | idle requests | lag p99 sync |",
        "|---|---|---|---|---|---|---|---|---|---|---|",
    ]
    for run in runs:
        floor = run["list_floor"]
        idle = run["requests"].get("idle", {})
        lag = run["lag"].get("initial_sync", {})
        lines.append(
            f"| {_name(run)} | {run['objects']:,} "
            f"| {run['ready_s']:.2f} s ({_s(floor['sequential_s'])} / "
            f"{_s(floor['parallel_s'])} s) | {_ratio(derived(run)['ready_ratio'])} "
            f"| {run['first_request_s']} s | {run['cpu_to_ready_s']:.2f} s "
            f"| {run['rss_ready_mb']:.0f} / {run['rss_idle_mb']:.0f} MB "
            f"| {run['hwm_mb']:.0f} MB | {derived(run).get('idle_cpu_percent')} % of a core "
            f"| {sum(idle.values())} in {run['idle_s']:.0f} s "
            f"{idle} | {_lag(lag)} |"
        )
    lines += _stream_table(runs)
    action_runs = [r for r in runs if r.get("burst")]
    if action_runs:
        lines += [
            "",
            "| run | objects | burst: due → last gone (p99) | floor at 4 / 16 in flight | ratio "
            "| CPU per deletion (floors) | requests in the burst | lag p99 burst "
            "| storm: due → last restart (every rollout verified) | floor at 4 | ratio "
            "| CPU per restart (floors) | requests in the storm |",
            "|---|---|---|---|---|---|---|---|---|---|---|---|---|",
        ]
        for run in action_runs:
            burst, storm, floors, d = run["burst"], run["storm"], run["action_floors"], derived(run)
            lines.append(
                f"| {_name(run)} | {run['objects']:,} "
                f"| {burst['last_gone_s']} s ({burst['p99_s']} s), "
                f"{burst['done']}/{burst['count']} | {floors['delete_at_4_s']} / "
                f"{floors['delete_at_16_s']} s | {d.get('burst_ratio')}x "
                f"| {_cpu(d, 'deletion')} "
                f"| {run['requests'].get('burst')} "
                f"| {_lag(run['lag'].get('burst', {}))} "
                f"| {storm['last_done_s']} s, {storm['done']}/{storm['count']} "
                f"({storm.get('verified_s')} s, {storm.get('verified')}) "
                f"| {floors['restart_at_4_s']} s | {d.get('storm_ratio')}x "
                f"| {_cpu(d, 'restart')} | {run['requests'].get('storm')} |"
            )
    for run in action_runs:
        for phase in ("burst", "storm"):
            profile = run[phase].get("profile")
            if profile:
                lines += ["", *_profile_table(f"{_name(run)} {run['objects']:,}, {phase}", profile)]
    return "\n".join(lines) + "\n"


def _stream_table(runs: list[dict[str, Any]]) -> list[str]:
    """Time to ready beside the streaming-list floor, memory, and what the control plane
    held (runs that measured the streaming floor)."""
    streamed = [r for r in runs if r.get("stream_floor")]
    if not streamed:
        return []
    lines = [
        "",
        "| objects | seeded | ready | streaming floor (process) | ratio (to process) "
        "| CPU to ready (floor) | RSS ready / idle | VmHWM | etcd db "
        "| RSS etcd / apiserver / kcm |",
        "|---|---|---|---|---|---|---|---|---|---|",
    ]
    for run in streamed:
        floor, d, plane = run["stream_floor"], derived(run), run.get("control_plane", {})
        rss = " / ".join(f"{plane.get(n, {}).get('rss_mb', 0):,.0f}" for n in _PLANE)
        seeded = run.get("seed", "api")
        if "seed_s" in run:
            seeded += f" in {run['seed_s']:.0f} s (+{run['seed_verify_s']:.0f} s served)"
        lines.append(
            f"| {run['objects']:,} | {seeded} | {run['ready_s']:.2f} s "
            f"| {floor['s']:.2f} s ({floor['process_s']:.2f} s) "
            f"| **{d.get('ready_stream_ratio')}x** ({d.get('ready_stream_process_ratio')}x) "
            f"| {run['cpu_to_ready_s']:.2f} s ({floor['cpu_s']:.2f} s) "
            f"| {run['rss_ready_mb']:.0f} / {run['rss_idle_mb']:.0f} MB | {run['hwm_mb']:.0f} MB "
            f"| {run.get('etcd_db_mb', 0):,.0f} MB | {rss} MB |"
        )
    return lines


_PLANE = ("etcd", "kube-apiserver", "kube-controller-manager")


def _profile_table(title: str, profile: dict[str, Any]) -> list[str]:
    """The sampled controller's top functions, self and inclusive, side by side."""
    lines = [
        f"Profile of the controller, {title} ({profile['samples']} samples):",
        "",
        "| self | % | inclusive | % |",
        "|---|---|---|---|",
    ]
    for (own, own_share), (incl, incl_share) in zip(
        profile["self"], profile["inclusive"], strict=False
    ):
        lines.append(f"| `{own}` | {own_share} | `{incl}` | {incl_share} |")
    return lines


def plots(runs: list[dict[str, Any]], output: Path, name: str = "cluster") -> list[str]:
    try:
        import matplotlib

        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
    except ImportError:
        return []
    written = []
    ordered = sorted(
        (r for r in runs if not str(r.get("label", "")).startswith("before")),
        key=lambda r: r["objects"],
    )
    counts = [r["objects"] for r in ordered]
    figure, (left, right) = plt.subplots(1, 2, figsize=(10, 4))
    left.plot(counts, [r["hwm_mb"] for r in ordered], "o-", label="peak over the run (VmHWM)")
    left.plot(counts, [r["hwm_ready_mb"] for r in ordered], "o-", label="peak until ready")
    left.plot(counts, [r["rss_ready_mb"] for r in ordered], "o-", label="RSS when ready")
    left.plot(counts, [r["rss_idle_mb"] for r in ordered], "o-", label="RSS after idle")
    left.set(xscale="log", xlabel="ConfigMaps", ylabel="MB", title="memory")
    left.legend()
    right.plot(counts, [r["ready_s"] for r in ordered], "o-", label="controller ready")
    for key, style, what in (
        ("sequential_s", "o--", "sequential"),
        ("parallel_s", "o:", "parallel"),
    ):
        paged = [(r["objects"], r["list_floor"][key]) for r in ordered if r["list_floor"][key]]
        if paged:
            right.plot(*zip(*paged, strict=True), style, label=f"floor (paginated, {what})")
    streamed = [r for r in ordered if r.get("stream_floor")]
    if streamed:
        right.plot(
            [r["objects"] for r in streamed],
            [r["stream_floor"]["s"] for r in streamed],
            "o-.",
            label="floor (streaming list)",
        )
    right.set(xscale="log", xlabel="ConfigMaps", ylabel="seconds", title="time to ready")
    right.legend()
    figure.tight_layout()
    figure.savefig(output / f"{name}-scaling.png", dpi=90)
    written.append(f"{name}-scaling.png")
    plt.close(figure)
    if streamed:
        written.append(_stream_plot(plt, streamed, output, name))
    bursts = [r for r in ordered if r.get("burst")]
    if bursts:
        run = bursts[-1]
        figure, axis = plt.subplots(figsize=(6, 4))
        axis.hist(run["burst"]["lateness_s"], bins=40)
        floor = run["action_floors"]["delete_at_4_s"]
        axis.axvline(
            floor, color="red", linestyle="--", label=f"floor, 4 in flight ({floor:.2f} s)"
        )
        axis.set(
            xlabel="seconds after due",
            ylabel="ConfigMaps",
            title=f"{run['burst']['count']} deletions due at once ({run['objects']:,} objects)",
        )
        axis.legend()
        figure.tight_layout()
        figure.savefig(output / "cluster-burst.png", dpi=90)
        written.append("cluster-burst.png")
        plt.close(figure)
    return written


#: The count the million-object targets are stated at, and drawn to by extrapolation.
MILLION = 1_000_000


def _fit(counts: list[int], values: list[float]) -> tuple[float, float]:
    """Least-squares line through (count, value): slope and intercept."""
    n = len(counts)
    mean_x, mean_y = sum(counts) / n, sum(values) / n
    spread = sum((x - mean_x) ** 2 for x in counts)
    covariance = sum((x - mean_x) * (y - mean_y) for x, y in zip(counts, values, strict=True))
    slope = covariance / spread if spread else 0.0
    return slope, mean_y - slope * mean_x


def _stream_plot(plt: Any, runs: list[dict[str, Any]], output: Path, name: str) -> str:
    """Time to ready over the streaming-list floor, and memory, against the object count,
    with the million-object targets; a straight line fitted to the points carries each
    memory curve to a million when the run stopped short of it."""
    counts = [r["objects"] for r in runs]
    figure, (left, right) = plt.subplots(1, 2, figsize=(10, 4))
    left.plot(counts, [derived(r).get("ready_stream_ratio") for r in runs], "o-", label="ready")
    left.plot(
        counts,
        [derived(r).get("ready_stream_process_ratio") for r in runs],
        "o:",
        label="ready / the floor's whole process",
    )
    left.axhline(TARGETS["ready_stream_ratio_1m"], color="red", linestyle="--", label="target")
    left.set(
        xscale="log", xlabel="ConfigMaps", ylabel="ready / streaming-list floor", title="ready"
    )
    left.legend()
    for key, label in (
        ("rss_ready_mb", "RSS when ready"),
        ("rss_idle_mb", "RSS after idle"),
        ("hwm_mb", "peak (VmHWM)"),
    ):
        values = [float(r[key]) for r in runs]
        (line,) = right.plot(counts, values, "o-", label=label)
        if len(runs) >= 2 and counts[-1] < MILLION:
            slope, intercept = _fit(counts, values)
            right.plot(
                [counts[-1], MILLION],
                [slope * counts[-1] + intercept, slope * MILLION + intercept],
                ":",
                color=line.get_color(),
            )
    right.axhline(TARGETS["rss_mb_1m"], color="red", linestyle="--", label="target at 1M")
    right.set(xscale="log", xlabel="ConfigMaps", ylabel="MB", title="controller memory")
    right.legend()
    figure.tight_layout()
    figure.savefig(output / f"{name}-stream.png", dpi=90)
    plt.close(figure)
    return f"{name}-stream.png"


def write_reports(
    runs: list[dict[str, Any]], output: Path, *, plots_wanted: bool = True, name: str = "cluster"
) -> None:
    output.mkdir(parents=True, exist_ok=True)
    for run in runs:
        run["derived"] = derived(run)
        run.pop("end", None)
    (output / f"{name}.json").write_text(
        json.dumps({"targets": TARGETS, "runs": runs}, indent=1) + "\n"
    )
    (output / f"{name}.md").write_text(markdown(runs))
    if plots_wanted:
        plots(runs, output, name)
