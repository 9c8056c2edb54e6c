"""``python -m lifecycle_controller.devcluster build``: build and cache every pinned binary.

CI runs it as its own step (``tox -e controlplane``) so the one-off compile is not charged to
the first test that needs a control plane.
"""

from __future__ import annotations

import sys
import time

from lifecycle_controller.devcluster.binaries import BuildError, ensure_binaries, ensure_helm


def main(argv: list[str]) -> int:
    if argv != ["build"]:
        print("usage: python -m lifecycle_controller.devcluster build", file=sys.stderr)
        return 2
    started = time.monotonic()
    try:
        binaries = ensure_binaries()
        helm = ensure_helm()
    except BuildError as error:
        print(f"devcluster: {error}", file=sys.stderr)
        return 1
    for path in (binaries.etcd, binaries.kube_apiserver, binaries.kube_controller_manager, helm):
        print(path)
    print(f"binaries ready in {time.monotonic() - started:.0f}s")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
