"""A real, local Kubernetes control plane for the test suite and the ``demo`` command.

:mod:`.binaries` builds and caches etcd, kube-apiserver and kube-controller-manager (and
kube-scheduler and kwok for fake nodes) from pinned Go modules (:mod:`.versions`; one
Kubernetes release by default, any of the compatibility matrix on request);
:mod:`.controlplane` runs them on loopback and hands out kubeconfigs for the admin and for
least-privilege identities; :mod:`.nodes` has what a control plane with fake nodes adds.
"""

from lifecycle_controller.devcluster.admin import ApiResponse, ControlPlaneError
from lifecycle_controller.devcluster.binaries import (
    BuildError,
    ControlPlaneBinaries,
    ensure_binaries,
)
from lifecycle_controller.devcluster.controlplane import ControlPlane
from lifecycle_controller.devcluster.versions import (
    ETCD_VERSION,
    KUBERNETES_VERSION,
    KUBERNETES_VERSIONS,
)

__all__ = [
    "ETCD_VERSION",
    "KUBERNETES_VERSION",
    "KUBERNETES_VERSIONS",
    "ApiResponse",
    "BuildError",
    "ControlPlane",
    "ControlPlaneBinaries",
    "ControlPlaneError",
    "ensure_binaries",
]
