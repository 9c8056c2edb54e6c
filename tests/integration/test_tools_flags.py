"""``status``, ``explain``, ``plan`` and the kubectl plugin judge by every decision flag.

A controller started with ``--maintenance-window`` defers a due action to the next opening,
with ``--warn-before`` posts a warning that long before, and with ``--min-restart-interval``
holds a restart back; the tools must accept each such flag (and its ``LIFECYCLE_*``
variable) and show the decision it makes, not the one a controller without it would make.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import pytest

from lifecycle_controller.devcluster import ControlPlane
from lifecycle_controller.kube import KubeClient
from tests.integration.keys import DELETE_AT, LAST_RESTART, RESTART_AT
from tests.integration.processes import clean_environment
from tests.integration.scenario_support import workload
from tests.integration.support import CONFIGMAPS, DEPLOYMENTS, configmap

BIN = Path(sys.executable).parent
NOW = datetime.now(UTC).replace(microsecond=0)


def stamp(moment: datetime) -> str:
    return moment.strftime("%Y-%m-%dT%H:%M:%SZ")


def closed_window() -> tuple[str, datetime]:
    """A daily window that opens in about 12 hours (so it is closed now), and its opening."""
    opening = (NOW + timedelta(hours=12)).replace(minute=0, second=0)
    start = opening.strftime("%H:%M")
    end = (opening + timedelta(minutes=30)).strftime("%H:%M")
    return f"Mon-Sun {start}-{end} UTC", opening


def tool(
    control_plane: ControlPlane, *args: str, env: dict[str, str] | None = None
) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "lifecycle_controller", *args],
        capture_output=True,
        text=True,
        timeout=120,
        env=clean_environment({"LIFECYCLE_KUBECONFIG": str(control_plane.admin_kubeconfig)})
        | (env or {}),
        check=False,
    )


def rows(result: subprocess.CompletedProcess[str]) -> dict[str, dict[str, Any]]:
    assert result.returncode == 0, result.stderr
    return {row["name"]: row for row in json.loads(result.stdout)}


@pytest.fixture
async def due(kube: KubeClient, namespace: str) -> None:
    await kube.create(CONFIGMAPS, namespace, configmap("due", **{DELETE_AT: stamp(NOW)}))
    soon = configmap("soon", **{DELETE_AT: stamp(NOW + timedelta(hours=1))})
    await kube.create(CONFIGMAPS, namespace, soon)
    recent = {
        RESTART_AT: stamp(NOW - timedelta(seconds=30)),
        LAST_RESTART: stamp(NOW - timedelta(minutes=5)),
    }
    await kube.create(DEPLOYMENTS, namespace, workload("Deployment", "recent", recent))


@pytest.mark.usefixtures("due")
def test_status_defers_to_the_maintenance_window_from_the_flag_or_the_environment(
    control_plane: ControlPlane, namespace: str
) -> None:
    window, opening = closed_window()
    plain = rows(tool(control_plane, "status", "-n", namespace, "-o", "json"))
    assert plain["due"]["summary"] == "delete now"

    status = ("status", "-n", namespace, "-o", "json")
    for found in (
        rows(tool(control_plane, *status, "--maintenance-window", window)),
        rows(tool(control_plane, *status, env={"LIFECYCLE_MAINTENANCE_WINDOW": window})),
    ):
        row = found["due"]
        assert row["action"] == "delete"
        assert row["next"] == stamp(opening)
        assert "maintenance window" in row["summary"]


@pytest.mark.usefixtures("due")
def test_explain_shows_the_window_and_the_warning_lead_time(
    control_plane: ControlPlane, namespace: str
) -> None:
    window, opening = closed_window()
    deferred = tool(
        control_plane, "explain", "configmap/due", "-n", namespace,
        "--maintenance-window", window, "--warn-before", "15m", "-o", "json",
    )  # fmt: skip
    assert deferred.returncode == 0, deferred.stderr
    report = json.loads(deferred.stdout)
    assert report["due"] == stamp(opening)
    assert "maintenance window" in report["decision"]
    assert report["warning"].startswith(
        f"UpcomingDeletion at {stamp(opening - timedelta(minutes=15))}"
    )

    soon = tool(
        control_plane, "explain", "configmap/soon", "-n", namespace,
        env={"LIFECYCLE_WARN_BEFORE": "1m30s"},
    )  # fmt: skip
    assert soon.returncode == 0, soon.stderr
    expected = stamp(NOW + timedelta(hours=1) - timedelta(seconds=90))
    assert f"Warning:      UpcomingDeletion at {expected}" in soon.stdout


@pytest.mark.usefixtures("due")
def test_status_and_the_plugin_hold_a_restart_for_the_minimum_interval(
    control_plane: ControlPlane, namespace: str
) -> None:
    guarded = rows(
        tool(control_plane, "status", "-n", namespace, "-o", "json", "--min-restart-interval", "1h")
    )["recent"]
    assert guarded["next"] == stamp(NOW - timedelta(minutes=5) + timedelta(hours=1))
    assert "minimum restart interval" in guarded["summary"]

    env = {**os.environ, "PATH": f"{BIN}{os.pathsep}{os.environ.get('PATH', '')}"}
    plugin = subprocess.run(
        [
            str(BIN / "kubectl"), "lifecycle", "status", "-n", namespace, "-o", "json",
            "--min-restart-interval", "1h",
            "--kubeconfig", str(control_plane.admin_kubeconfig),
        ],
        capture_output=True, text=True, timeout=120, env=env, check=False,
    )  # fmt: skip
    assert rows(plugin)["recent"]["next"] == guarded["next"]


def test_plan_defers_to_the_maintenance_window(tmp_path: Path, control_plane: ControlPlane) -> None:
    window, opening = closed_window()
    manifest = tmp_path / "cm.json"
    manifest.write_text(json.dumps(configmap("due", **{DELETE_AT: stamp(NOW)})))
    found = rows(
        tool(control_plane, "plan", "-f", str(manifest), "-o", "json", "--now", stamp(NOW),
             "--maintenance-window", window)
    )  # fmt: skip
    assert found["due"]["next"] == stamp(opening)
