"""``lifecycle-controller breaker status|reset`` where no breaker state exists.

A mistyped ``--leader-election-id`` must not look like a closed breaker, and ``reset`` must
not create a ConfigMap for a breaker nobody uses: both say so and exit 1. With the state
present, ``reset`` closes it in place.
"""

from __future__ import annotations

import json
import subprocess
import sys

import pytest

from lifecycle_controller.core.decision.breaker import BreakerState
from lifecycle_controller.devcluster import ControlPlane
from lifecycle_controller.kube import KubeClient, NotFound
from lifecycle_controller.kube.breaker_store import write_breaker
from lifecycle_controller.kube.resources import CONFIGMAPS
from tests.integration.processes import clean_environment

pytestmark = pytest.mark.integration


def breaker(
    control_plane: ControlPlane, namespace: str, *args: str
) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [
            sys.executable, "-m", "lifecycle_controller", "breaker", *args,
            "--kubeconfig", str(control_plane.admin_kubeconfig),
            "--leader-election-namespace", namespace,
        ],
        capture_output=True, text=True, timeout=60, env=clean_environment(), check=False,
    )  # fmt: skip


@pytest.mark.parametrize("verb", ["status", "reset"])
async def test_no_breaker_state_is_an_error_and_creates_nothing(
    control_plane: ControlPlane, kube: KubeClient, namespace: str, verb: str
) -> None:
    result = breaker(control_plane, namespace, verb, "--leader-election-id", "typo-id")
    assert result.returncode == 1, result.stdout
    assert "no circuit breaker state exists in ConfigMap" in result.stderr
    assert f"{namespace}/typo-id-breaker" in result.stderr
    assert "closed" not in result.stdout
    with pytest.raises(NotFound):
        await kube.get(CONFIGMAPS, namespace, "typo-id-breaker")


async def test_reset_closes_an_existing_breaker(
    control_plane: ControlPlane, kube: KubeClient, namespace: str
) -> None:
    tripped = BreakerState.from_data(
        {"state": "open", "trippedAt": "2026-12-01T00:00:00Z", "actions": "5", "window": "10m0s",
         "trips": "1"}
    )  # fmt: skip
    await write_breaker(kube, namespace, "mine-breaker", tripped)
    assert (
        "OPEN" in breaker(control_plane, namespace, "status", "--leader-election-id", "mine").stdout
    )
    reset = breaker(control_plane, namespace, "reset", "--leader-election-id", "mine", "-o", "json")
    assert reset.returncode == 0, reset.stderr
    assert json.loads(reset.stdout)["state"] == "closed"
