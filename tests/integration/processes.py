"""``lifecycle-controller run`` as real processes against the test control plane.

:class:`ProcessLauncher` starts ``python -m lifecycle_controller run`` subprocesses with a
clean environment (no ``LIFECYCLE_*``, no ``KUBECONFIG``), on free loopback ports, each logging
to its own file; the ``launcher`` fixture (registered in conftest.py) kills whatever is left
at the end of the test. Used by the CLI tests and the leader-election scenarios.
"""

from __future__ import annotations

import asyncio
import os
import socket
import subprocess
import sys
from collections.abc import AsyncIterator, Mapping
from contextlib import asynccontextmanager
from dataclasses import dataclass, field
from pathlib import Path

import aiohttp
import pytest
from prometheus_client.parser import text_string_to_metric_families

from lifecycle_controller.devcluster import ControlPlane
from tests.integration.support import eventually

STARTUP_TIMEOUT = 30.0


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
