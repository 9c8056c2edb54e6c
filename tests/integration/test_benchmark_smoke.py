"""The cluster benchmark's smoke run (1,000 objects, short phases), so the command cannot rot.

The full run (``python -m benchmarks.cluster --objects 20000``) is on demand; see
benchmarks/README.md. This one checks that every row is still measured, not its figures.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from benchmarks.cluster import main
from benchmarks.policies_namespaced import main as namespaced_main

pytestmark = [pytest.mark.integration, pytest.mark.long]  # half a minute to two minutes each


@pytest.mark.timeout(300)  # the floors start a fresh process each (eight per smoke run)
def test_the_cluster_benchmark_measures_every_row(tmp_path: Path) -> None:
    main(
        [
            "--objects=1000",
            "--idle=2",
            "--burst=100",
            "--storm=20",
            "--lead=6",
            "--rounds=2",
            "--settle-limit=10",
            "--no-plots",
            f"--output={tmp_path}",
        ]
    )
    run = json.loads((tmp_path / "cluster.json").read_text())["runs"][0]
    assert run["ready_s"] > 0
    assert run["list_floor"]["sequential_s"] > 0
    assert run["first_request_s"] is not None
    assert run["first_request_s"] < run["ready_s"]
    assert run["hwm_mb"] >= run["rss_ready_mb"] > 0
    assert run["burst"]["done"] == 100
    assert run["storm"]["done"] == 20
    assert run["storm"]["verified"] == 20  # the round ends once every rollout is verified
    assert run["requests"]["burst"] == {"create events": 100, "delete configmaps": 100}
    assert run["derived"]["requests_per_deletion"] == 2.0
    assert set(run["action_floors"]) == {
        "delete_at_4_s",
        "delete_at_16_s",
        "restart_at_4_s",
        "delete_cpu_ms_at_4",
        "delete_cpu_ms_at_16",
        "restart_cpu_ms_at_4",
    }
    assert run["derived"]["floor_cpu_per_deletion_ms"] > 0
    # Each round was paired with its whole-job floor, which saw every object appear and go
    # (or be restarted) while the controller, still running, left the floor's objects alone.
    for phase, events in (("burst", 200), ("storm", 40)):
        for one in run[phase]["rounds"]:
            assert one["floor"]["watch_events"] >= events
            assert one["floor"]["cpu_ms"] > 0
            assert one["cpu_ratio"] > 0
    assert run["burst"]["job_floor_cpu_ms"] == run["derived"]["job_floor_cpu_per_deletion_ms"]
    assert run["derived"]["cpu_per_deletion_ratio"] > 0
    assert run["derived"]["cpu_per_restart_ratio"] > 0
    assert run["derived"]["idle_cpu_percent"] >= 0
    assert run["lag"]["burst"]["samples"] > 0
    assert [len(run["startup_rounds"]), len(run["burst"]["rounds"])] == [2, 2]
    assert len(run["storm"]["rounds"]) == len(run["action_floor_rounds"]) == 2
    assert all(r["first_request_s"] is not None for r in run["startup_rounds"])
    assert "| 1,000 |" in (tmp_path / "cluster.md").read_text()


@pytest.mark.timeout(300)
def test_the_churn_benchmark_measures_the_controller_and_its_floor(tmp_path: Path) -> None:
    from benchmarks.churn import main as churn

    churn(
        [
            "--objects=200",
            "--patches=600",
            "--rounds=1",
            "--idle=1",
            "--settle=1",
            f"--output={tmp_path}",
        ]
    )
    result = json.loads((tmp_path / "churn.json").read_text())
    (one,) = result["rounds"]
    assert one["events"]["floor"] >= 600
    assert one["events"]["controller"] >= 600
    assert result["controller_us_per_event"] > 0  # a floor of 600 events can be under a tick
    assert (tmp_path / "churn.md").read_text().startswith("Churn of 600 label patches")


@pytest.mark.timeout(300)
def test_the_namespaced_policies_benchmark_counts_scoped_lists(tmp_path: Path) -> None:
    """A LifecyclePolicy per namespace lists each namespace once, never the cluster; the one
    cluster policy doing the same lists (streams) the cluster once."""
    namespaced_main(
        ["--objects=400", "--namespaces=4", "--rounds=1", "--settle=0", f"--output={tmp_path}"]
    )
    result = json.loads((tmp_path / "policies-namespaced.json").read_text())
    assert result["namespaced"]["requests"] == {"list namespace": 4}
    assert set(result["cluster"]["requests"]) <= {"watch cluster", "list cluster"}
    assert result["namespaced"]["cpu_s"] >= 0
    assert (tmp_path / "policies-namespaced.md").read_text().startswith("400 ConfigMaps")


def test_the_limit_benchmark_measures_idle_and_a_window_turn(tmp_path: Path) -> None:
    from benchmarks.limit import main as limit

    limit(
        [
            "--held=100",
            "--actions=5",
            "--window=15",
            "--idle=6",
            "--rounds=1",
            f"--output={tmp_path}",
        ]
    )
    result = json.loads((tmp_path / "limit.json").read_text())
    (run,) = result["runs"]
    assert run["held"] == 100
    assert run["turn_cpu_ms"] > 0
    assert (tmp_path / "limit.md").read_text().startswith("limit 5/15s")


@pytest.mark.timeout(300)
def test_the_since_benchmark_measures_pods_and_matched_at_beside_floors(tmp_path: Path) -> None:
    from benchmarks.policy_since import main as since_main

    since_main(["--pods=300", "--configmaps=200", "--rounds=1", "--idle=2", f"--output={tmp_path}"])
    run = json.loads((tmp_path / "policy-since.json").read_text())
    pods, matched = run["failed_pods"], run["matched_at"]
    assert pods["since"]["matched"] == pods["failed"] == 30  # every 10th Pod failed
    assert pods["metadata_policy"]["matched"] == 30  # the same Pods, by name
    assert pods["rss_no_policy_ratio"] > 0
    assert pods["metadata"]["whole_floor_s"] > 0
    assert pods["since"]["ready_s"] > 0
    assert pods["since_ready_ratio"] > 0
    assert pods["rss_ratio"] > 0
    assert matched["since"]["matched"] >= 200
    # The store wrote its record, then nothing while nothing changed.
    assert matched["persisted"]["writes_before_idle"] >= 1
    assert matched["persisted"]["idle_writes_per_min"] == 0
    assert matched["since_bytes_per_object"] is not None
    assert "matchedAt writes / min idle" in (tmp_path / "policy-since.md").read_text()
