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
    burst, storm, floors = run.get("burst"), run.get("storm"), run.get("action_floors", {})
    if burst and burst.get("done"):
        out["cpu_per_deletion_ms"] = round(1000 * burst["controller_cpu_s"] / burst["done"], 2)
        out["floor_cpu_per_deletion_ms"] = floors.get("delete_cpu_ms_at_4")
        out["job_floor_cpu_per_deletion_ms"] = job = floors.get("delete_job_cpu_ms")
        out["cpu_per_deletion_ratio"] = round(out["cpu_per_deletion_ms"] / job, 2) if job else None
        floor4 = floors.get("delete_at_4_s")
        out["burst_ratio"] = round(burst["last_gone_s"] / floor4, 2) if floor4 else None
        requests = run["requests"].get("burst", {})
        out["requests_per_deletion"] = round(sum(requests.values()) / burst["done"], 2)
    if storm and storm.get("done"):
        out["cpu_per_restart_ms"] = round(1000 * storm["controller_cpu_s"] / storm["done"], 2)
        out["floor_cpu_per_restart_ms"] = floors.get("restart_cpu_ms_at_4")
        out["job_floor_cpu_per_restart_ms"] = job = floors.get("restart_job_cpu_ms")
        out["cpu_per_restart_ratio"] = round(out["cpu_per_restart_ms"] / job, 2) if job else None
        floor4 = floors.get("restart_at_4_s")
        out["storm_ratio"] = round(storm["last_done_s"] / floor4, 2) if floor4 else None
    if run.get("idle_s"):
        out["idle_cpu_percent"] = round(100 * run["cpu_idle_s"] / run["idle_s"], 3)
    return out


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
            f"| {run['ready_s']:.2f} s ({floor['sequential_s']:.2f} / "
            f"{floor['parallel_s']:.2f} s) | {derived(run)['ready_ratio']}x "
            f"| {run['first_request_s']} s | {run['cpu_to_ready_s']:.2f} s "
            f"| {run['rss_ready_mb']:.0f} / {run['rss_idle_mb']:.0f} MB "
            f"| {run['hwm_mb']:.0f} MB | {derived(run).get('idle_cpu_percent')} % of a core "
            f"| {sum(idle.values())} in {run['idle_s']:.0f} s "
            f"{idle} | {_lag(lag)} |"
        )
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


def plots(runs: list[dict[str, Any]], output: Path) -> list[str]:
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
    right.plot(
        counts,
        [r["list_floor"]["sequential_s"] for r in ordered],
        "o--",
        label="floor (sequential lists)",
    )
    right.plot(
        counts,
        [r["list_floor"]["parallel_s"] for r in ordered],
        "o:",
        label="floor (parallel lists)",
    )
    right.set(xscale="log", xlabel="ConfigMaps", ylabel="seconds", title="time to ready")
    right.legend()
    figure.tight_layout()
    figure.savefig(output / "cluster-scaling.png", dpi=90)
    written.append("cluster-scaling.png")
    plt.close(figure)
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


def write_reports(runs: list[dict[str, Any]], output: Path, *, plots_wanted: bool = True) -> None:
    output.mkdir(parents=True, exist_ok=True)
    for run in runs:
        run["derived"] = derived(run)
        run.pop("end", None)
    (output / "cluster.json").write_text(
        json.dumps({"targets": TARGETS, "runs": runs}, indent=1) + "\n"
    )
    (output / "cluster.md").write_text(markdown(runs))
    if plots_wanted:
        plots(runs, output)
