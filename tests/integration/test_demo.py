"""The README's main-job command: `lifecycle-controller demo` shows a deletion and a restart."""

from __future__ import annotations

import subprocess
import sys

from lifecycle_controller.devcluster import ControlPlane


def test_demo_shows_a_deletion_and_a_restart(control_plane: ControlPlane) -> None:
    # control_plane: builds (or reuses) the cached binaries before the demo needs them.
    result = subprocess.run(
        [sys.executable, "-m", "lifecycle_controller", "demo", "--duration", "24"],
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    output = result.stdout + result.stderr
    assert result.returncode == 0, output
    assert "Deployment web: RestartTriggered: Updated Pod template for a restart request" in output
    assert "ConfigMap preview-env-config: Deleted: Resource deleted based on delete-at" in output
    assert "ConfigMap preview-env-config: deleted" in output
    assert "Deployment web: 2 ReplicaSet(s)" in output
    assert "control plane stopped" in output
