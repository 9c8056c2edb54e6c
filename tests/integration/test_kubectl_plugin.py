"""``kubectl lifecycle`` (the plugin) and ``explain``, through a real kubectl and API server.

kubectl finds the package's ``kubectl-lifecycle`` executable on the PATH, as it would for an
operator; every call here is a real kubectl process, so the plugin's flags (``--kubeconfig``,
``--context``, ``-n``, ``-A``, ``-o``) are exercised exactly as users type them.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import pytest
import yaml

from lifecycle_controller.devcluster import ControlPlane
from lifecycle_controller.kube import KubeClient
from tests.integration.controller import StartController
from tests.integration.events import wait_for_event
from tests.integration.keys import CRON_TIMEZONE, DELETE_AFTER, LAST_RESTART, RESTART_CRON
from tests.integration.scenario_support import start_for, workload
from tests.integration.support import CONFIGMAPS, DEPLOYMENTS, configmap

BIN = Path(sys.executable).parent
KUBECTL = BIN / "kubectl"


def kubectl(*args: str, kubeconfig: Path, timeout: float = 60) -> subprocess.CompletedProcess[str]:
    """``kubectl lifecycle ARGS`` with the plugin on the PATH, as an operator runs it.

    kubectl refuses flags before a plugin's name, so ``--kubeconfig`` goes last.
    """
    env = {**os.environ, "PATH": f"{BIN}{os.pathsep}{os.environ.get('PATH', '')}"}
    return subprocess.run(
        [str(KUBECTL), "lifecycle", *args, "--kubeconfig", str(kubeconfig)],
        capture_output=True,
        text=True,
        timeout=timeout,
        env=env,
        check=False,
    )


def kubeconfig_for(control_plane: ControlPlane, tmp_path: Path, namespace: str) -> Path:
    """The admin kubeconfig whose current context has ``namespace``, plus a context 'other'."""
    config: dict[str, Any] = yaml.safe_load(control_plane.admin_kubeconfig.read_text())
    current = next(c for c in config["contexts"] if c["name"] == config["current-context"])
    current["context"]["namespace"] = namespace
    other = {"name": "other", "context": {**current["context"], "namespace": "default"}}
    config["contexts"].append(other)
    path = tmp_path / "kubeconfig"
    path.write_text(yaml.safe_dump(config))
    return path


@pytest.fixture
async def objects(kube: KubeClient, namespace: str) -> None:
    nightly = {
        RESTART_CRON: "30 2 * * *",
        CRON_TIMEZONE: "Europe/Warsaw",
        LAST_RESTART: "2026-10-29T00:00:00Z",
    }
    await kube.create(DEPLOYMENTS, namespace, workload("Deployment", "nightly", nightly))
    await kube.create(CONFIGMAPS, namespace, configmap("preview", **{DELETE_AFTER: "2h"}))
    await kube.create(CONFIGMAPS, namespace, configmap("broken", **{DELETE_AFTER: "2x"}))


@pytest.mark.usefixtures("objects")
def test_status_follows_kubectl_namespace_conventions(
    control_plane: ControlPlane, namespace: str, tmp_path: Path
) -> None:
    config = kubeconfig_for(control_plane, tmp_path, namespace)
    mine = kubectl("status", "-o", "json", kubeconfig=config)
    assert mine.returncode == 0, mine.stderr
    assert sorted(row["name"] for row in json.loads(mine.stdout)) == [
        "broken",
        "nightly",
        "preview",
    ]
    elsewhere = kubectl("status", "--context", "other", "-o", "json", kubeconfig=config)
    assert elsewhere.returncode == 0, elsewhere.stderr
    assert namespace not in {row["namespace"] for row in json.loads(elsewhere.stdout)}
    everywhere = kubectl("status", "-A", "-o", "json", kubeconfig=config)
    assert namespace in {row["namespace"] for row in json.loads(everywhere.stdout)}
    table = kubectl("status", "-n", namespace, kubeconfig=config)
    assert table.stdout.splitlines()[0].split()[:3] == ["KIND", "NAMESPACE", "NAME"]
    both = kubectl("status", "-n", namespace, "-A", kubeconfig=config)
    assert both.returncode == 2
    assert both.stderr.strip() == "kubectl lifecycle: -n and -A cannot be used together"


@pytest.mark.usefixtures("objects")
def test_the_plugin_takes_the_users_kubeconfig_before_the_pods_account(
    control_plane: ControlPlane, namespace: str, tmp_path: Path
) -> None:
    """Caught: inside a Pod (KUBERNETES_SERVICE_HOST set) the plugin and the CLI took the
    Pod's ServiceAccount before ~/.kube/config, so an operator in a debug shell acted with
    other rights than kubectl's; kubectl's order is the kubeconfig first. Here the Pod's
    credentials lead nowhere, so only the kubeconfig can answer."""
    home = tmp_path / "home"
    (home / ".kube").mkdir(parents=True)
    kubeconfig_for(control_plane, tmp_path, namespace).rename(home / ".kube" / "config")
    env = {
        key: value
        for key, value in os.environ.items()
        if key not in ("KUBECONFIG", "LIFECYCLE_KUBECONFIG")
    }
    env.update(
        HOME=str(home),
        PATH=f"{BIN}{os.pathsep}{os.environ.get('PATH', '')}",
        KUBERNETES_SERVICE_HOST="127.0.0.1",
        KUBERNETES_SERVICE_PORT="1",
    )
    result = subprocess.run(
        [str(KUBECTL), "lifecycle", "status", "-o", "json"],
        capture_output=True,
        text=True,
        timeout=60,
        env=env,
        check=False,
    )
    assert result.returncode == 0, result.stderr
    assert "preview" in {row["name"] for row in json.loads(result.stdout)}


@pytest.mark.usefixtures("objects")
def test_explain_shows_meanings_decision_schedule_and_catch_up(
    control_plane: ControlPlane, namespace: str, tmp_path: Path
) -> None:
    config = kubeconfig_for(control_plane, tmp_path, namespace)
    result = kubectl("explain", "deployment/nightly", kubeconfig=config)
    assert result.returncode == 0, result.stderr
    text = result.stdout
    assert f"Deployment {namespace}/nightly (apps/v1" in text
    assert "Watched:      yes: deployments.apps is watched" in text
    assert "restart-cron" in text
    assert "cron '30 2 * * *'" in text
    assert "time zone Europe/Warsaw" in text
    assert "Decision:" in text
    assert "Due:" in text
    assert "Catch-up:     always (default of --restart-catch-up)" in text

    data = json.loads(kubectl("explain", "deploy/nightly", "-o", "json", kubeconfig=config).stdout)
    assert data["action"] == "restart"
    assert data["due"] is not None
    assert data["due_relative"] is not None
    assert {line["key"] for line in data["annotations"]} == {
        "restart-cron",
        "cron-timezone",
        "last-restart-timestamp",
    }
    assert data["why_nothing_happened"] is None


@pytest.mark.usefixtures("objects")
def test_explain_says_why_nothing_happens(
    control_plane: ControlPlane, namespace: str, tmp_path: Path
) -> None:
    config = kubeconfig_for(control_plane, tmp_path, namespace)
    broken = json.loads(kubectl("explain", "cm/broken", "-o", "json", kubeconfig=config).stdout)
    assert broken["annotations"][0]["meaning"] == 'invalid: invalid duration format: "2x"'
    assert broken["why_nothing_happened"].startswith("a problem blocks it: InvalidAnnotation")
    scoped = kubectl(
        "explain",
        "configmaps/preview",
        "--watch-namespace",
        "elsewhere",
        "-o",
        "json",
        kubeconfig=config,
    )
    data = json.loads(scoped.stdout)
    assert data["watched"] is False
    assert data["why_nothing_happened"].startswith("this controller would not look at it")
    missing = kubectl("explain", "cm/nope", kubeconfig=config)
    assert missing.returncode == 1
    assert missing.stderr.strip() == (
        f'kubectl lifecycle: configmaps "nope" not found in namespace {namespace}'
    )
    assert kubectl("explain", "no-slash", kubeconfig=config).returncode == 2  # a wrong call
    assert kubectl("explain", "cm/x", "--dry-run", "maybe", kubeconfig=config).returncode == 2


async def test_explain_lists_the_controllers_events(
    start_controller: StartController,
    control_plane: ControlPlane,
    kube: KubeClient,
    namespace: str,
    tmp_path: Path,
) -> None:
    await start_for(start_controller, namespace)
    await kube.create(CONFIGMAPS, namespace, configmap("broken", **{DELETE_AFTER: "2x"}))
    await wait_for_event(kube, namespace, "broken", "InvalidAnnotation")
    config = kubeconfig_for(control_plane, tmp_path, namespace)
    data = json.loads(kubectl("explain", "cm/broken", "-o", "json", kubeconfig=config).stdout)
    assert [(e["type"], e["reason"], e["by"]) for e in data["events"]] == [
        ("Warning", "InvalidAnnotation", "lifecycle-controller")
    ]


def test_status_watch_redraws_when_something_changes(
    control_plane: ControlPlane, namespace: str, tmp_path: Path
) -> None:
    config = kubeconfig_for(control_plane, tmp_path, namespace)
    env = {**os.environ, "PATH": f"{BIN}{os.pathsep}{os.environ.get('PATH', '')}"}
    with subprocess.Popen(
        [
            str(KUBECTL),
            "lifecycle",
            "status",
            "-w",
            "--interval",
            "0.3",
            "--kubeconfig",
            str(config),
        ],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        env=env,
    ) as watching:
        assert watching.stdout is not None
        first = watching.stdout.readline()
        assert first.strip() == "No objects with lifecycle annotations."
        created = control_plane.request(
            "POST",
            CONFIGMAPS.collection_path(namespace),
            configmap("fresh", **{DELETE_AFTER: "1h"}),
        )
        assert created.status == 201, created.body
        deadline = time.monotonic() + 30
        seen = ""
        while "fresh" not in seen and time.monotonic() < deadline:
            seen += watching.stdout.readline()
        watching.terminate()
    assert "fresh" in seen
    assert seen.splitlines()[0].split()[:3] == ["KIND", "NAMESPACE", "NAME"]
