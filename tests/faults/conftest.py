"""Fixtures of the fault scenarios: a control plane with an audit log, and the integration
fixtures (``kube``, ``start_controller``, ``launcher``) reused.

Every test here is marked ``faults`` (run by ``tox -e faults`` only). The control plane is
this folder's own (session-scoped, with ``audit_log=True``), because the scenarios kill and
restart its components and count actions in its audit log; under pytest-xdist (``tox -e
faults`` runs two workers) each worker has its own, so one scenario's kills and counts never
meet another's.
"""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from lifecycle_controller.devcluster import ControlPlane
from lifecycle_controller.machinery.logs import configure_logging
from tests.integration.conftest import http, kube
from tests.integration.controller import start_controller
from tests.integration.processes import launcher

__all__ = ["http", "kube", "launcher", "start_controller"]


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    for item in items:
        soak = item.get_closest_marker("soak") is not None  # tox -e soak only
        if "tests/faults/" in str(item.path).replace("\\", "/") and not soak:
            item.add_marker(pytest.mark.faults)


@pytest.fixture(scope="session")
def control_plane(request: pytest.FixtureRequest) -> Iterator[ControlPlane]:
    plane = ControlPlane(audit_log=True, log=lambda line: print(f"[devcluster] {line}"))
    plane.start()
    yield plane
    plane.stop(keep_logs=request.session.testsfailed > 0)


@pytest.fixture(autouse=True)
def production_logging() -> Iterator[None]:
    """JSON lines at info level, as in a Pod: the console renderer's rich tracebacks for
    hundreds of failing requests would stall the event loop and distort every timing."""
    configure_logging("json", "info", cache_logger_on_first_use=False)
    yield
    configure_logging("console", "debug", cache_logger_on_first_use=False)
