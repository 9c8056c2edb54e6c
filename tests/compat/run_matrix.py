"""``python -m tests.compat.run_matrix``: the compatibility suite against each release in turn.

One pytest session per release (``LIFECYCLE_COMPAT_KUBERNETES``), oldest first, each writing
its ``docs/compat/results-<version>.json``; then the README table and the chart's
``kubeVersion`` are regenerated from the results (:mod:`tests.compat.matrix`). ``--edges``
runs the oldest and the newest release only (what CI runs); naming releases runs those.
A release that fails does not stop the next one; the exit status says whether any failed.
"""

from __future__ import annotations

import argparse
import os
import subprocess
import sys
import time

from lifecycle_controller.devcluster.versions import KUBERNETES_VERSIONS
from tests.compat import matrix
from tests.compat.matrix import VERSION_ENV


def selected(edges: bool, named: list[str]) -> list[str]:
    """The releases to run, in matrix order."""
    unknown = sorted(set(named) - set(KUBERNETES_VERSIONS))
    if unknown:
        raise SystemExit(f"not pinned: {', '.join(unknown)}; pinned: {KUBERNETES_VERSIONS}")
    if named:
        return [version for version in KUBERNETES_VERSIONS if version in named]
    if edges:
        return [KUBERNETES_VERSIONS[0], KUBERNETES_VERSIONS[-1]]
    return list(KUBERNETES_VERSIONS)


def main(argv: list[str]) -> int:
    parser = argparse.ArgumentParser(prog="python -m tests.compat.run_matrix")
    parser.add_argument("--edges", action="store_true", help="the oldest and newest only")
    parser.add_argument("--junit-dir", help="write junit-<version>.xml reports there")
    parser.add_argument("versions", nargs="*", help="pinned releases (default: all)")
    arguments = parser.parse_args(argv)
    failed: list[str] = []
    for version in selected(arguments.edges, arguments.versions):
        started = time.monotonic()
        print(f"=== compat: Kubernetes {version}", flush=True)
        command = [
            sys.executable, "-m", "pytest", "-m", "compat", "tests/compat",
            "-q", "-p", "no:cacheprovider", "--timeout=600", "-rs",
        ]  # fmt: skip
        if arguments.junit_dir:
            command.append(f"--junitxml={arguments.junit_dir}/junit-{version}.xml")
        code = subprocess.run(command, env={**os.environ, VERSION_ENV: version}, check=False)
        elapsed = time.monotonic() - started
        print(f"=== compat: Kubernetes {version}: exit {code.returncode} in {elapsed:.0f}s")
        if code.returncode != 0:
            failed.append(version)
    matrix.main([])
    if failed:
        print(f"compat: failed on {', '.join(failed)}", file=sys.stderr)
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
