"""`lifecycle-controller run` without usable credentials exits 1 with one clear line."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest


def run(*args: str, env: dict[str, str]) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "lifecycle_controller", "run", "--log-format=json", *args],
        capture_output=True,
        text=True,
        timeout=60,
        env=env,
        check=False,
    )


@pytest.fixture
def clean_env(tmp_path: Path) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith(("KUBE", "LIFECYCLE_"))}
    env["HOME"] = str(tmp_path)  # no ~/.kube/config
    return env


def test_missing_kubeconfig_file(clean_env: dict[str, str], tmp_path: Path) -> None:
    result = run("--kubeconfig", str(tmp_path / "absent"), env=clean_env)
    assert result.returncode == 1
    lines = result.stderr.strip().splitlines()
    assert len(lines) == 1, result.stderr
    assert f"kubeconfig {tmp_path / 'absent'} not found" in lines[0]


def test_no_cluster_configured_at_all(clean_env: dict[str, str]) -> None:
    result = run(env=clean_env)
    assert result.returncode == 1
    lines = result.stderr.strip().splitlines()
    assert len(lines) == 1, result.stderr
    assert "no cluster configured" in lines[0]
