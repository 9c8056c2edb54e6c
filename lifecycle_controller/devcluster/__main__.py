"""``python -m lifecycle_controller.devcluster``: build and cache the pinned binaries.

``build`` builds the default set: the control plane (etcd, kube-apiserver,
kube-controller-manager), kube-scheduler and kwok for a control plane with fake nodes (the
real-rollout tests), helm for the chart tests and promtool for the unit tests of the chart's
alerting rules (optional: when it cannot be built, the command says so and still succeeds, and
those tests skip). ``build --kubernetes v1.31.14`` (repeatable; ``--oldest``: the oldest
pinned release) also builds the control plane
of other pinned releases, ``build --matrix`` of every one (the compatibility suite's); a
release that fails to build is reported with Go's error and the others go on.

``gomod v1.31.14`` writes the wrapper module of a release (:mod:`.gomod_wrapper`).

CI runs ``build`` as its own step (``tox -e controlplane``) so the one-off compile is not
charged to the first test that needs a control plane.
"""

from __future__ import annotations

import argparse
import sys
import time

from lifecycle_controller.devcluster.binaries import (
    GOMOD_DIR,
    BuildError,
    ensure_binaries,
    ensure_helm,
    ensure_node_binaries,
    ensure_promtool,
)
from lifecycle_controller.devcluster.gomod_wrapper import write_wrapper
from lifecycle_controller.devcluster.versions import (
    KUBERNETES_VERSION,
    KUBERNETES_VERSIONS,
    KWOK_VERSION,
)


def _parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="python -m lifecycle_controller.devcluster")
    commands = parser.add_subparsers(dest="command", required=True)
    build = commands.add_parser("build", help="build and cache the pinned binaries")
    build.add_argument(
        "--kubernetes",
        action="append",
        default=[],
        metavar="VERSION",
        help="also build this pinned release's kube-apiserver and kube-controller-manager",
    )
    build.add_argument(
        "--oldest",
        action="store_true",
        help="also build the oldest pinned release's control plane (what CI's compat run needs)",
    )
    build.add_argument(
        "--matrix", action="store_true", help="also build every pinned release's control plane"
    )
    gomod = commands.add_parser("gomod", help="write the Go wrapper module of a release")
    gomod.add_argument("version", help="a Kubernetes release, e.g. v1.31.14")
    return parser


def _build_default() -> int:
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
    return 0


def _build_releases(versions: list[str]) -> int:
    """Each release's control plane in turn; a failure is reported and the next one built."""
    failed: list[str] = []
    for version in versions:
        started = time.monotonic()
        try:
            binaries = ensure_binaries(kubernetes=version)
        except BuildError as error:
            failed.append(version)
            print(f"devcluster: Kubernetes {version} could not be built: {error}", file=sys.stderr)
            continue
        print(f"{version}: {binaries.kube_apiserver.parent} ({time.monotonic() - started:.0f}s)")
    if failed:
        print(f"devcluster: not built: {', '.join(failed)}", file=sys.stderr)
    return 1 if failed else 0


def main(argv: list[str]) -> int:
    arguments = _parser().parse_args(argv)
    if arguments.command == "gomod":
        try:
            kwok = KWOK_VERSION if arguments.version == KUBERNETES_VERSION else None
            folder = write_wrapper(arguments.version, GOMOD_DIR, kwok=kwok)
        except (ValueError, RuntimeError) as error:
            print(f"devcluster: {error}", file=sys.stderr)
            return 1
        print(folder)
        return 0
    started = time.monotonic()
    status = _build_default()
    extra = list(KUBERNETES_VERSIONS) if arguments.matrix else list(arguments.kubernetes)
    if arguments.oldest:
        extra.insert(0, KUBERNETES_VERSIONS[0])
    extra = [version for version in dict.fromkeys(extra) if version != KUBERNETES_VERSION]
    if status == 0 and extra:
        status = _build_releases(extra)
    if status == 0:
        print(f"binaries ready in {time.monotonic() - started:.0f}s")
    return status


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
