"""The one place that pins the versions of the local control plane.

Everything that builds, caches or names the control-plane binaries reads these constants, so a
version bump is a one-line change here plus regenerated wrapper modules under ``gomod/``.
"""

from __future__ import annotations

from typing import Final

KUBERNETES_VERSION: Final = "v1.36.3"
"""kube-apiserver, kube-controller-manager and kube-scheduler; matches kubernetes-asyncio 36.x."""

KWOK_VERSION: Final = "v0.8.0"
"""kwok, built from ``sigs.k8s.io/kwok/cmd/kwok``: the fake kubelet of a control plane with
nodes (the newest release; it is built against the Kubernetes 1.36 modules with Go 1.26)."""

ETCD_VERSION: Final = "v3.6.16"
"""The etcd release line that Kubernetes 1.36 is tested with."""

HELM_VERSION: Final = "v4.3.2"
"""helm, built from ``helm.sh/helm/v4/cmd/helm``; used to lint, render and install the chart."""

PROMETHEUS_VERSION: Final = "v0.316.0"
"""promtool, built from ``github.com/prometheus/prometheus/cmd/promtool`` (Prometheus 3.16's
Go module tag); runs the unit tests of the chart's alerting rules."""
