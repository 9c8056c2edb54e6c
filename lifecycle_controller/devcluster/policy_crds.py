"""The Helm chart's lifecycle policy CRDs, installed on a local control plane.

The chart's ``crds/`` files are the only definitions of ``ClusterLifecyclePolicy`` and
``LifecyclePolicy``. The ``demo`` command and the tests install exactly them (server-side
apply as the admin, so a changed file replaces an older definition) and wait until both
kinds are served. The package carries byte-for-byte copies of them (``devcluster/crds/``,
package data), because an installed wheel does not carry the chart and ``demo`` runs from
one; the chart stays the one source, and a test fails the day a copy differs
(tests/machinery/test_policy_crds_copies.py).
"""

from __future__ import annotations

import time
from pathlib import Path
from typing import Any

import yaml

from lifecycle_controller.devcluster.controlplane import ControlPlane
from lifecycle_controller.kube.resources import CLUSTER_POLICIES, POLICIES

__all__ = ["CRD_DIR", "install_policy_crds", "policy_crd_manifests"]

CRD_DIR = Path(__file__).resolve().parent / "crds"
_CRDS_PATH = "/apis/apiextensions.k8s.io/v1/customresourcedefinitions"


def policy_crd_manifests() -> dict[str, dict[str, Any]]:
    """Every CRD of the chart by kind, from the package's copies (empty only if they were
    left out of an install)."""
    manifests: dict[str, dict[str, Any]] = {}
    for path in sorted(CRD_DIR.glob("*.yaml")):
        manifest = yaml.safe_load(path.read_text())
        manifests[manifest["spec"]["names"]["kind"]] = manifest
    return manifests


def _established(plane: ControlPlane, name: str) -> bool:
    response = plane.request("GET", f"{_CRDS_PATH}/{name}")
    conditions = (response.body.get("status") or {}).get("conditions") or []
    return any(c.get("type") == "Established" and c.get("status") == "True" for c in conditions)


def install_policy_crds(plane: ControlPlane, *, within: float = 30.0) -> bool:
    """Apply the chart's CRDs and wait until both policy kinds are established and served;
    False when the chart's CRDs are not found (nothing is applied)."""
    manifests = policy_crd_manifests()
    if len(manifests) < 2:
        return False
    names = []
    for manifest in manifests.values():
        name = manifest["metadata"]["name"]
        plane.apply(manifest, path=f"{_CRDS_PATH}/{name}")
        names.append(name)
    deadline = time.monotonic() + within
    paths = [kind.collection_path() + "?limit=1" for kind in (CLUSTER_POLICIES, POLICIES)]
    while not (
        all(_established(plane, name) for name in names)
        and all(plane.request("GET", path).status == 200 for path in paths)
    ):
        if time.monotonic() > deadline:
            raise TimeoutError(f"the policy CRDs were not served within {within:.0f}s")
        time.sleep(0.2)
    return True
