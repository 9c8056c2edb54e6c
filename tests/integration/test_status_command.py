"""`lifecycle-controller status` against the real API server."""

from __future__ import annotations

import json
import subprocess
import sys

from lifecycle_controller.devcluster import ControlPlane
from tests.integration.keys import DELETE_AT
from tests.integration.support import configmap


def test_status_lists_annotated_objects_with_next_action(
    control_plane: ControlPlane, namespace: str
) -> None:
    for body in (
        configmap("later", **{DELETE_AT: "2099-01-01T00:00:00Z"}),
        configmap("bad", **{DELETE_AT: "tomorrow"}),
        configmap("plain"),
    ):
        response = control_plane.request("POST", f"/api/v1/namespaces/{namespace}/configmaps", body)
        assert response.status == 201, response.body
    result = subprocess.run(
        [
            sys.executable,
            "-m",
            "lifecycle_controller",
            "status",
            "--kubeconfig",
            str(control_plane.admin_kubeconfig),
            "-n",
            namespace,
            "--watch-resource",
            "configmaps",
            "-o",
            "json",
        ],
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )
    assert result.returncode == 0, result.stderr
    rows = {row["name"]: row for row in json.loads(result.stdout)}
    assert sorted(rows) == ["bad", "later"]
    assert rows["later"]["action"] == "delete"
    assert rows["later"]["next"] == "2099-01-01T00:00:00Z"
    assert rows["bad"]["problems"][0].startswith(
        "InvalidAnnotation: Invalid format for delete-at annotation: "
    )
