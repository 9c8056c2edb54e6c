"""The README's main-job command: `lifecycle-controller demo` shows a deletion and restarts
that replace Pods (on its fake nodes), and a LifecyclePolicy previewed in dry run, then
switched on and deleting what it matches."""

from __future__ import annotations

import re
import subprocess
import sys

import pytest

from lifecycle_controller.devcluster import ControlPlane


@pytest.mark.long  # the demo runs 30 s
def test_demo_shows_a_deletion_a_restart_replacing_pods_and_a_policy(
    kwok_plane: ControlPlane,
) -> None:
    # kwok_plane: builds (or reuses) the cached binaries, fake-node ones included, before the
    # demo needs them.
    result = subprocess.run(
        [sys.executable, "-m", "lifecycle_controller", "demo", "--duration", "30"],
        capture_output=True,
        text=True,
        timeout=150,
        check=False,
    )
    output = result.stdout + result.stderr
    assert result.returncode == 0, output
    assert "Deployment web: RestartTriggered: Updated Pod template for a restart request" in output
    assert "ConfigMap preview-env-config: Deleted: Resource deleted based on delete-at" in output
    assert "ConfigMap preview-env-config: deleted" in output
    # The web Deployment's two Pods, replaced by two others, told live and in the summary.
    pod = r"web-[a-z0-9]+-[a-z0-9]+"
    replaced = re.search(
        rf"Deployment web: restart of (\d\d:\d\d:\d\d) replaced Pods ({pod}), ({pod}) "
        rf"with ({pod}), ({pod})",
        output,
    )
    assert replaced, output
    old, new = set(replaced.group(2, 3)), set(replaced.group(4, 5))
    assert not old & new
    assert f"  {replaced.group(1)}: Pods " in output
    assert "(done)" in output
    assert "get pods -o 'custom-columns=POD:.metadata.name," in output
    # The policy: announced in dry run, switched on, then carried out; its Events name it.
    policy = "LifecyclePolicy/lifecycle-demo/tmp-configmaps"
    assert "applied LifecyclePolicy lifecycle-demo/tmp-configmaps" in output
    for name in ("tmp-build-cache", "tmp-test-report"):
        dry_run = re.search(rf"ConfigMap {name}: DryRunDelete: .*{policy}", output)
        deleted = re.search(rf"ConfigMap {name}: Deleted: .*{policy}", output)
        assert dry_run, output
        assert deleted, output
        assert dry_run.start() < output.index("switching LifecyclePolicy tmp-configmaps on")
        assert output.index("switching LifecyclePolicy tmp-configmaps on") < deleted.start()
        assert f"ConfigMap {name}: deleted by LifecyclePolicy tmp-configmaps" in output
    assert "control plane stopped" in output
