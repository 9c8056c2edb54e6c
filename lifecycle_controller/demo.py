"""``lifecycle-controller demo``: a local control plane to try the controller on.

Starts etcd, kube-apiserver and kube-controller-manager on loopback (building them on first
use), prints how to point kubectl at them, and keeps them up for ``--duration`` seconds or
until interrupted.
"""

from __future__ import annotations

import signal
import threading
from collections.abc import Callable

from lifecycle_controller.devcluster import ControlPlane


def run_demo(*, duration: float | None, echo: Callable[[str], None]) -> None:
    """Run the local control plane until ``duration`` elapses or SIGINT/SIGTERM arrives."""
    stop = threading.Event()
    for signum in (signal.SIGINT, signal.SIGTERM):
        signal.signal(signum, lambda *_: stop.set())
    with ControlPlane(log=echo) as plane:
        echo("")
        echo("A local Kubernetes control plane is running (no kubelet: Pods stay Pending).")
        echo(f"  export KUBECONFIG={plane.admin_kubeconfig}")
        echo("  kubectl get namespaces")
        echo("")
        echo("Press Ctrl-C to stop it." if duration is None else f"Stopping in {duration:g}s.")
        stop.wait(timeout=duration)
    echo("control plane stopped")
