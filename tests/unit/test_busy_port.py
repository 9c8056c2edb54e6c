"""A probe or metrics address that is already taken: one line naming the flag, exit 1.

The port is held open by the test itself. In process, each server raises
:class:`~lifecycle_controller.serving.server.ListenError`; as a real ``lifecycle-controller
run`` process, start-up logs that one error line (no traceback) and exits 1. The kubeconfig points
at a closed loopback port: the servers start before anything talks to the API.
"""

from __future__ import annotations

import json
import socket
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest
from prometheus_client import CollectorRegistry

from lifecycle_controller.serving.server import ListenError, MetricsServer, ProbeServer

KUBECONFIG = """\
apiVersion: v1
kind: Config
clusters:
- name: nowhere
  cluster: {server: "https://127.0.0.1:1", insecure-skip-tls-verify: true}
users:
- name: nobody
  user: {token: unused}
contexts:
- name: nowhere
  context: {cluster: nowhere, user: nobody, namespace: default}
current-context: nowhere
"""


@pytest.fixture
def taken() -> Iterator[str]:
    """A loopback address another socket is listening on, as ``host:port``."""
    with socket.socket() as holder:
        holder.bind(("127.0.0.1", 0))
        holder.listen()
        yield f"127.0.0.1:{holder.getsockname()[1]}"


async def test_the_probe_server_names_its_flag(taken: str) -> None:
    server = ProbeServer(bind_address=taken, readiness=lambda: None)
    with pytest.raises(ListenError) as raised:
        await server.start()
    assert str(raised.value) == (
        f"--health-probe-bind-address={taken}: cannot listen there: address already in use"
    )
    assert server.port is None


async def test_the_metrics_server_names_its_flag(taken: str) -> None:
    server = MetricsServer(bind_address=taken, registry=CollectorRegistry(), secure=False)
    with pytest.raises(ListenError) as raised:
        await server.start()
    assert (raised.value.flag, raised.value.address) == ("--metrics-bind-address", taken)
    assert raised.value.reason == "address already in use"


@pytest.mark.parametrize(
    ("flag", "other_flags"),
    [
        ("--health-probe-bind-address", ["--metrics-bind-address=0"]),
        ("--metrics-bind-address", ["--health-probe-bind-address=127.0.0.1:0"]),
    ],
)
def test_run_on_a_taken_port_exits_1_with_one_line(
    flag: str, other_flags: list[str], taken: str, tmp_path: Path
) -> None:
    kubeconfig = tmp_path / "kubeconfig"
    kubeconfig.write_text(KUBECONFIG)
    result = subprocess.run(
        [sys.executable, "-m", "lifecycle_controller", "run", f"--kubeconfig={kubeconfig}",
         f"{flag}={taken}", *other_flags, "--log-format=json"],
        capture_output=True, text=True, timeout=60, check=False,
    )  # fmt: skip
    output = result.stdout + result.stderr
    assert result.returncode == 1, output
    lines = [json.loads(line) for line in output.splitlines()]  # log lines only: no traceback
    errors = [line for line in lines if line["level"] == "error"]
    assert [line["error"] for line in errors] == [
        f"{flag}={taken}: cannot listen there: address already in use"
    ], output
