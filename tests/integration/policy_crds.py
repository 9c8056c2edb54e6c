"""The Helm chart's lifecycle policy CRDs, installed on the test control plane: the package's
own installer (lifecycle_controller/devcluster/policy_crds.py, which the ``demo`` uses too),
failing when the chart's files are missing."""

from __future__ import annotations

from lifecycle_controller.devcluster import ControlPlane
from lifecycle_controller.devcluster.policy_crds import CRD_DIR, policy_crd_manifests
from lifecycle_controller.devcluster.policy_crds import install_policy_crds as _install

__all__ = ["CRD_DIR", "install_policy_crds", "policy_crd_manifests"]


def install_policy_crds(plane: ControlPlane, *, within: float = 30.0) -> None:
    """Apply the chart's CRDs and wait until both policy kinds are established and served."""
    assert _install(plane, within=within), f"no policy CRDs in {CRD_DIR}"
