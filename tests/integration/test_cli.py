"""``lifecycle-controller run`` as a real process: configuration errors, environment variables.

SPEC §3: invalid configuration exits 1 with one clear line; every flag can also be given as
``LIFECYCLE_<FLAG>``. The processes run ``python -m lifecycle_controller`` against the test
control plane. :class:`ControllerProcess` is also used by the leader-election scenarios.
"""

from __future__ import annotations

import asyncio
import json
import os
import signal
import socket
import subprocess
import sys
from collections.abc import AsyncIterator, Mapping, Sequence
from contextlib import asynccontextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import aiohttp
import pytest
from click.testing import CliRunner
from prometheus_client.parser import text_string_to_metric_families

from lifecycle_controller import cli as cli_module
from lifecycle_controller import config
from lifecycle_controller.cli import RUN_FLAGS, Flag
from lifecycle_controller.config import ConfigError, RawFlags
from lifecycle_controller.devcluster import ControlPlane
from lifecycle_controller.kube import EVENTS, KubeClient, ResourceType
from tests.integration.support import configmap, eventually

CONFIGMAPS = ResourceType("", "v1", "configmaps", "ConfigMap", namespaced=True)
SECRETS = ResourceType("", "v1", "secrets", "Secret", namespaced=True)
DELETE_AT = "lifecycle.cezary.dev/delete-at"
PAST = "2020-01-01T00:00:00Z"
STARTUP_TIMEOUT = 30.0


# --------------------------------------------------------------------------- processes


def free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return int(probe.getsockname()[1])


def clean_environment(extra: Mapping[str, str] | None = None) -> dict[str, str]:
    """This process's environment without any LIFECYCLE_* or KUBECONFIG, plus ``extra``."""
    env = {
        key: value
        for key, value in os.environ.items()
        if not key.startswith("LIFECYCLE_") and key != "KUBECONFIG"
    }
    env["PYTHONUNBUFFERED"] = "1"
    env.update(extra or {})
    return env


def command(*args: str) -> list[str]:
    return [sys.executable, "-m", "lifecycle_controller", "run", *args]


@dataclass
class ControllerProcess:
    """One ``lifecycle-controller run`` subprocess, its ports and its log file."""

    name: str
    process: asyncio.subprocess.Process
    probe_port: int
    metrics_port: int | None
    log: Path
    http: aiohttp.ClientSession

    async def get(self, path: str, *, port: int | None = None) -> tuple[int, str]:
        """(status, body) of ``GET http://127.0.0.1:<port><path>``; (0, error) if unreachable."""
        url = f"http://127.0.0.1:{port or self.probe_port}{path}"
        try:
            async with self.http.get(url, timeout=aiohttp.ClientTimeout(total=5)) as response:
                return response.status, await response.text()
        except (aiohttp.ClientError, TimeoutError) as error:
            return 0, str(error)

    async def metric(self, name: str, labels: Mapping[str, str]) -> float | None:
        """One sample of the process's plain-HTTP /metrics, or None when absent."""
        assert self.metrics_port is not None
        status, body = await self.get("/metrics", port=self.metrics_port)
        assert status == 200, body
        for family in text_string_to_metric_families(body):
            for sample in family.samples:
                if sample.name == name and dict(sample.labels) == dict(labels):
                    return float(sample.value)
        return None

    async def wait_ready(self, within: float = STARTUP_TIMEOUT) -> None:
        async def ready() -> bool:
            if self.process.returncode is not None:
                raise AssertionError(f"{self.name} exited: {self.log_text()}")
            return (await self.get("/readyz"))[0] == 200

        await eventually(ready, within=within, what=f"{self.name} /readyz 200")

    def send(self, signum: int) -> None:
        if self.process.returncode is None:
            self.process.send_signal(signum)

    async def wait_exit(self, within: float = 15.0) -> int:
        return await asyncio.wait_for(self.process.wait(), within)

    def log_text(self) -> str:
        return self.log.read_text(errors="replace")


@dataclass
class ProcessLauncher:
    """Starts controller processes for one test; kills whatever is left at the end."""

    control_plane: ControlPlane
    directory: Path
    http: aiohttp.ClientSession
    started: list[ControllerProcess] = field(default_factory=list)

    async def start(
        self,
        name: str,
        *args: str,
        env: Mapping[str, str] | None = None,
        metrics: bool = False,
        flags: bool = True,
    ) -> ControllerProcess:
        """Start ``run`` with ``args``; with ``flags``, also the kubeconfig, JSON logs and
        loopback probe (and, with ``metrics``, plain-HTTP metrics) addresses on free ports."""
        probe_port = free_port()
        metrics_port = free_port() if metrics else None
        base: list[str] = []
        if flags:
            base = [
                f"--kubeconfig={self.control_plane.admin_kubeconfig}",
                "--log-format=json",
                f"--health-probe-bind-address=127.0.0.1:{probe_port}",
            ]
            if metrics_port is not None:
                base += [
                    f"--metrics-bind-address=127.0.0.1:{metrics_port}",
                    "--metrics-secure=false",
                ]
        log = self.directory / f"{name}.log"
        with log.open("wb") as out:
            process = await asyncio.create_subprocess_exec(
                *command(*base, *args),
                stdin=subprocess.DEVNULL,
                stdout=out,
                stderr=subprocess.STDOUT,
                env=clean_environment({"POD_NAME": name, **(env or {})}),
            )
        running = ControllerProcess(name, process, probe_port, metrics_port, log, self.http)
        self.started.append(running)
        return running

    async def aclose(self) -> None:
        for running in self.started:
            if running.process.returncode is None:
                running.process.kill()
                await running.process.wait()


@asynccontextmanager
async def launching(control_plane: ControlPlane, directory: Path) -> AsyncIterator[ProcessLauncher]:
    """A :class:`ProcessLauncher` whose processes are all killed on exit."""
    async with aiohttp.ClientSession() as http:
        launcher = ProcessLauncher(control_plane, directory, http)
        try:
            yield launcher
        finally:
            await launcher.aclose()


@pytest.fixture
async def launcher(control_plane: ControlPlane, tmp_path: Path) -> AsyncIterator[ProcessLauncher]:
    async with launching(control_plane, tmp_path) as launcher:
        yield launcher


async def lifecycle_events(kube: KubeClient, namespace: str, name: str) -> list[dict[str, Any]]:
    """The controller's events.k8s.io Events about ``name``."""
    listing = await kube.request(
        "GET",
        EVENTS.collection_path(namespace),
        query=[("fieldSelector", f"regarding.name={name}")],
    )
    return [
        event
        for event in listing["items"]
        if event.get("reportingController") == "lifecycle-controller"
    ]


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
    # Before it, discovery logs each missing pattern ("Required resource is missing").
    entry = json.loads(result.stderr.splitlines()[-1])
    assert entry["level"] == "error"
    assert entry["msg"] == (
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
    """Stop ``run`` right after parsing and keep the RawFlags it built."""
    captured: list[RawFlags] = []

    def capture(raw: RawFlags) -> config.Settings:
        captured.append(raw)
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
    assert getattr(captured_flags[0], flag.dest) == expected


def test_a_command_line_flag_beats_its_environment_variable(
    captured_flags: list[RawFlags],
) -> None:
    CliRunner().invoke(
        cli_module.cli,
        ["run", "--workers=3"],
        env={**clean_environment(), "LIFECYCLE_WORKERS": "7"},
    )
    assert captured_flags[0].workers == "3"


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
                if not await lifecycle_events(kube, namespace, name):
                    return False
            return True

        await eventually(dry_run_events, within=15, what="DryRunDelete Events")
        for resource, name in ((CONFIGMAPS, "config"), (SECRETS, "secret")):
            events = await lifecycle_events(kube, namespace, name)
            assert [(e["type"], e["reason"], e["note"]) for e in events] == [
                ("Normal", "DryRunDelete", "Dry-run: Resource would be deleted now.")
            ]
            assert events[0]["reportingInstance"] == "env-only"
            await kube.get_metadata(resource, namespace, name)  # still there

        process.send(signal.SIGTERM)
        assert await process.wait_exit() == 0
