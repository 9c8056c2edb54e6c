"""``python -m lifecycle_controller.devcluster build``: build and cache every pinned binary.

That is the control plane (etcd, kube-apiserver, kube-controller-manager), kube-scheduler and
kwok for a control plane with fake nodes (the real-rollout tests), helm for the chart tests
and promtool for the unit tests of the chart's alerting rules (optional: when it cannot
be built, the command says so and still succeeds, and those tests skip).

CI runs it as its own step (``tox -e controlplane``) so the one-off compile is not charged to
the first test that needs a control plane.
"""

from __future__ import annotations

import sys
import time

from lifecycle_controller.devcluster.binaries import (
    BuildError,
    ensure_binaries,
    ensure_helm,
    ensure_node_binaries,
    ensure_promtool,
)


def main(argv: list[str]) -> int:
    if argv != ["build"]:
        print("usage: python -m lifecycle_controller.devcluster build", file=sys.stderr)
        return 2
    started = time.monotonic()
    try:
        binaries = ensure_binaries()
        nodes = ensure_node_binaries()
        helm = ensure_helm()
    except BuildError as error:
        print(f"devcluster: {error}", file=sys.stderr)
        return 1
    paths = [
        binaries.etcd,
        binaries.kube_apiserver,
        binaries.kube_controller_manager,
        nodes.kube_scheduler,
        nodes.kwok,
        helm,
    ]
    try:
        paths.append(ensure_promtool())
    except BuildError as error:  # only the alert-rule tests need it; they skip without it
        print(f"devcluster: {error}\nthe alert-rule tests will be skipped", file=sys.stderr)
    for path in paths:
        print(path)
    print(f"binaries ready in {time.monotonic() - started:.0f}s")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
