"""The one place that pins the versions of the local control plane.

Everything that builds, caches or names the control-plane binaries reads these constants, so a
version bump is a one-line change here plus regenerated wrapper modules under ``gomod/``.
"""

from __future__ import annotations

from typing import Final

KUBERNETES_VERSION: Final = "v1.36.3"
"""kube-apiserver, kube-controller-manager and kube-scheduler; matches kubernetes-asyncio 36.x.
The default everywhere: the test suite, ``demo`` and ``devcluster build``."""

KUBERNETES_VERSIONS: Final = (
    "v1.30.14",
    "v1.31.14",
    "v1.32.13",
    "v1.33.13",
    "v1.34.4",
    "v1.35.4",
    KUBERNETES_VERSION,
)
"""The compatibility matrix, oldest first: the newest patch the Go module proxy holds of each
minor the major managed offerings still support. Each has a wrapper module
``gomod/kubernetes-v1.Y/`` (``python -m lifecycle_controller.devcluster gomod VERSION``).
1.29 is not here: its newest release on the proxy (v1.29.6) needs
``k8s.io/legacy-cloud-providers`` v0.29.x, which the proxy does not hold, so no wrapper
resolves."""

KWOK_VERSION: Final = "v0.8.0"
"""kwok, built from ``sigs.k8s.io/kwok/cmd/kwok``: the fake kubelet of a control plane with
nodes (the newest release), built from the default Kubernetes release's wrapper module with Go
1.26 (``python -m lifecycle_controller.devcluster gomod`` adds it there)."""

ETCD_VERSION: Final = "v3.6.16"
"""The etcd release line that Kubernetes 1.36 is tested with."""

HELM_VERSION: Final = "v4.3.2"
"""helm, built from ``helm.sh/helm/v4/cmd/helm``; used to lint, render and install the chart."""

PROMETHEUS_VERSION: Final = "v0.316.0"
"""promtool, built from ``github.com/prometheus/prometheus/cmd/promtool`` (Prometheus 3.16's
Go module tag); runs the unit tests of the chart's alerting rules."""
