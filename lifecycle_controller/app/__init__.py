"""The composition root of ``lifecycle-controller run``: the only package that builds
concrete components and wires them (docs/architecture.md).

``controller.py`` is one controller instance (servers, leadership, the leader's pipeline);
``process.py`` is the process around it (connection, signals, grace period, exit codes).
"""

from lifecycle_controller.app.controller import CONTROLLER_NAME, Controller, controller_metrics
from lifecycle_controller.app.process import (
    EXIT_FAILURE,
    EXIT_OK,
    SHUTDOWN_GRACE_SECONDS,
    run_async,
    run_controller,
)

__all__ = [
    "CONTROLLER_NAME",
    "EXIT_FAILURE",
    "EXIT_OK",
    "SHUTDOWN_GRACE_SECONDS",
    "Controller",
    "controller_metrics",
    "run_async",
    "run_controller",
]
