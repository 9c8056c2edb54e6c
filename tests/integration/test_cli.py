"""``lifecycle-controller run`` as a real process: configuration errors, environment variables.

docs/behaviour.md#configuration-logging-and-exit-codes: invalid configuration exits 1 with
one clear line; every flag can also be given as ``LIFECYCLE_<FLAG>``. The processes run
``python -m lifecycle_controller`` against the test control plane
(tests/integration/processes.py).
"""

from __future__ import annotations

import json
import signal
import subprocess
from collections.abc import Mapping, Sequence
from typing import Any

import pytest
from click.testing import CliRunner

from lifecycle_controller import cli as cli_module
from lifecycle_controller import config
from lifecycle_controller.config import RUN_FLAGS, ConfigError, Flag, RawFlags
from lifecycle_controller.devcluster import ControlPlane
from lifecycle_controller.kube import KubeClient
from tests.integration.events import list_events
from tests.integration.keys import DELETE_AT
from tests.integration.processes import (
    STARTUP_TIMEOUT,
    ProcessLauncher,
    clean_environment,
    command,
    free_port,
)
from tests.integration.support import CONFIGMAPS, SECRETS, configmap, eventually
from tests.integration.timestamps import PAST

# --------------------------------------------------------------------------- invalid flags


def run_briefly(
    args: Sequence[str], *, env: Mapping[str, str] | None = None
) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        command(*args),
        capture_output=True,
        text=True,
        timeout=STARTUP_TIMEOUT,
        env=clean_environment(env),
        check=False,
    )


@pytest.mark.parametrize(
    ("args", "line"),
    [
        (
            ["--delete-catch-up=bogus"],
            '--delete-catch-up: invalid catch-up policy "bogus": expected always, never, or a '
            'positive duration: invalid duration format: "bogus"',
        ),
        (
            ["--restart-catch-up=0s"],
            '--restart-catch-up: invalid catch-up policy "0s": expected always, never, or a '
            "positive duration: duration must be positive",
        ),
        (["--workers=0"], "--workers: must be at least 1, got 0"),
        (
            ["--watch-namespace=Bad_Name"],
            'invalid namespace watch configuration: invalid namespace name "Bad_Name"',
        ),
        (["--no-such-flag"], "No such option '--no-such-flag'."),
        (
            ["--leader-election-renew-deadline=20s"],
            "--leader-election-lease-duration must be greater than "
            "--leader-election-renew-deadline",
        ),
        (["--dry-run=maybe"], "--dry-run: invalid boolean 'maybe'"),
    ],
)
def test_invalid_flags_exit_1_with_one_clear_line(args: list[str], line: str) -> None:
    result = run_briefly(["--kubeconfig=/nonexistent", "--health-probe-bind-address=0", *args])
    assert result.returncode == 1
    assert result.stdout == ""
    assert result.stderr == f"lifecycle-controller: {line}\n"


def test_invalid_environment_value_exits_1_naming_the_flag() -> None:
    result = run_briefly(["--health-probe-bind-address=0"], env={"LIFECYCLE_WORKERS": "0"})
    assert (result.returncode, result.stderr) == (
        1,
        "lifecycle-controller: --workers: must be at least 1, got 0\n",
    )


def test_explicit_watch_resource_matching_nothing_exits_1(control_plane: ControlPlane) -> None:
    # Discovery fails after connecting: the closing error line is a log line (JSON here).
    result = run_briefly(
        [
            f"--kubeconfig={control_plane.admin_kubeconfig}",
            "--health-probe-bind-address=0",
            "--watch-resource=nosuchthing",
            "--log-format=json",
            "--log-level=error",
        ]
    )
    assert result.returncode == 1, result.stderr
    # Before it, discovery logs each missing pattern ("required resource is missing").
    entry = json.loads(result.stderr.splitlines()[-1])
    assert entry["level"] == "error"
    assert entry["msg"] == "controller cannot run"
    assert entry["error"] == (
        "explicit resource discovery failed: explicit resource coverage incomplete: "
        "missing patterns=[nosuchthing], unwatchable resources=[]"
    )


# --------------------------------------------------------------------------- environment


def _env_sample(flag: Flag) -> tuple[str, Any]:
    """A value for ``LIFECYCLE_<FLAG>`` and what RawFlags must then hold."""
    if flag.kind == "list":
        return "first,second", ("first", "second")
    if flag.kind == "bool":
        value = "false" if flag.default == "true" else "true"
        return value, value
    return "from-env", "from-env"


@pytest.fixture
def captured_flags(monkeypatch: pytest.MonkeyPatch) -> list[RawFlags]:
    """Stop ``run`` right after parsing and keep the raw flag values it passed on."""
    captured: list[RawFlags] = []

    def capture(raw: RawFlags) -> config.Settings:
        captured.append(dict(raw))
        raise ConfigError("captured")

    monkeypatch.setattr(config, "build_settings", capture)
    return captured


@pytest.mark.parametrize("flag", RUN_FLAGS, ids=lambda flag: flag.name)
def test_every_run_flag_is_read_from_its_environment_variable(
    flag: Flag, captured_flags: list[RawFlags]
) -> None:
    value, expected = _env_sample(flag)
    assert flag.envvar == "LIFECYCLE_" + flag.name.upper().replace("-", "_")
    result = CliRunner().invoke(
        cli_module.cli, ["run"], env={**clean_environment(), flag.envvar: value}
    )
    assert result.exit_code != 0  # stopped by the capture
    assert len(captured_flags) == 1
    assert captured_flags[0][flag.dest] == expected


def test_a_command_line_flag_beats_its_environment_variable(
    captured_flags: list[RawFlags],
) -> None:
    CliRunner().invoke(
        cli_module.cli,
        ["run", "--workers=3"],
        env={**clean_environment(), "LIFECYCLE_WORKERS": "7"},
    )
    assert captured_flags[0]["workers"] == "3"


async def test_environment_alone_configures_a_real_run(
    launcher: ProcessLauncher, control_plane: ControlPlane, namespace: str
) -> None:
    async with await KubeClient.connect(str(control_plane.admin_kubeconfig)) as kube:
        await kube.create(CONFIGMAPS, namespace, configmap("config", **{DELETE_AT: PAST}))
        secret = {
            "apiVersion": "v1",
            "kind": "Secret",
            "metadata": {"name": "secret", "annotations": {DELETE_AT: PAST}},
            "stringData": {"k": "v"},
        }
        await kube.create(SECRETS, namespace, secret)
        port = free_port()
        process = await launcher.start(
            "env-only",
            flags=False,
            env={
                "LIFECYCLE_KUBECONFIG": str(control_plane.admin_kubeconfig),
                "LIFECYCLE_DRY_RUN": "true",
                "LIFECYCLE_WATCH_RESOURCE": "configmaps,secrets",
                "LIFECYCLE_WATCH_NAMESPACE": namespace,
                "LIFECYCLE_HEALTH_PROBE_BIND_ADDRESS": f"127.0.0.1:{port}",
                "LIFECYCLE_LOG_FORMAT": "json",
            },
        )
        process.probe_port = port
        await process.wait_ready()

        async def dry_run_events() -> bool:
            for name in ("config", "secret"):
                if not await list_events(kube, namespace, name):
                    return False
            return True

        await eventually(dry_run_events, within=15, what="DryRunDelete Events")
        for resource, name in ((CONFIGMAPS, "config"), (SECRETS, "secret")):
            events = await list_events(kube, namespace, name)
            assert [(e["type"], e["reason"], e["note"]) for e in events] == [
                ("Normal", "DryRunDelete", "Dry-run: Resource would be deleted now.")
            ]
            assert events[0]["reportingInstance"] == "env-only"
            await kube.get_metadata(resource, namespace, name)  # still there

        process.send(signal.SIGTERM)
        assert await process.wait_exit() == 0
