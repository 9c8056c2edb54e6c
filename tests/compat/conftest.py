"""Fixtures of the compatibility suite: one control plane of the release under test.

``LIFECYCLE_COMPAT_KUBERNETES`` names the release (one of ``KUBERNETES_VERSIONS``; the
default one when unset). Its control plane runs with the audit log on, for the whole session,
and every test here shares it (``control_plane`` overrides the session fixture of
tests/conftest.py, so ``namespace`` and the controller fixtures use it too). Every test here
is marked ``compat`` and ``integration`` (so the fast tier leaves them out, and the
integration run leaves them to ``tox -e compat``).

At the end of a session that ran any of them, the release's result (counts, the list path the
informers took, notes) goes to ``docs/compat/results-<version>.json``
(``LIFECYCLE_COMPAT_RESULTS`` names another folder), from which the README table is made.
"""

from __future__ import annotations

import os
from collections.abc import AsyncIterator, Iterator
from pathlib import Path

import pytest

from lifecycle_controller.devcluster import BuildError, ControlPlane
from lifecycle_controller.devcluster.versions import KUBERNETES_VERSION
from lifecycle_controller.kube import KubeClient
from tests.chart.conftest import helm
from tests.compat.matrix import RESULTS_DIR, VERSION_ENV, CompatResult, results_path
from tests.integration.controller import start_controller

__all__ = ["helm", "start_controller"]

RESULTS_ENV = "LIFECYCLE_COMPAT_RESULTS"

VERSION = os.environ.get(VERSION_ENV) or KUBERNETES_VERSION
RESULT = CompatResult(VERSION)
_STARTED: list[bool] = []


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    for item in items:
        if "tests/compat/" in str(item.path).replace("\\", "/"):
            item.add_marker(pytest.mark.compat)
            item.add_marker(pytest.mark.integration)


def pytest_runtest_logreport(report: pytest.TestReport) -> None:
    if not report.nodeid.replace("\\", "/").startswith("tests/compat/"):
        return
    if report.when == "call" and report.passed:
        RESULT.passed += 1
    elif report.failed:
        RESULT.failed += 1
    elif report.skipped and not RESULT.build_error:
        RESULT.skipped += 1
        reason = report.longrepr[2] if isinstance(report.longrepr, tuple) else str(report.longrepr)
        note = reason.removeprefix("Skipped: ")
        if note not in RESULT.notes:
            RESULT.notes.append(note)


def pytest_sessionfinish(session: pytest.Session) -> None:
    if not _STARTED:
        return  # no compat test ran in this session
    folder = Path(os.environ.get(RESULTS_ENV) or RESULTS_DIR)
    folder.mkdir(parents=True, exist_ok=True)
    results_path(VERSION, folder).write_text(RESULT.to_json())


@pytest.fixture(scope="session")
def compat_result() -> CompatResult:
    """The release's result being written: tests record the list path and notes in it."""
    return RESULT


@pytest.fixture(scope="session")
def control_plane(request: pytest.FixtureRequest) -> Iterator[ControlPlane]:
    """The release under test, with the audit log on (built on first use, then cached)."""
    _STARTED.append(True)
    plane = ControlPlane(
        kubernetes=VERSION,
        audit_log=True,
        log=lambda line: print(f"[devcluster {VERSION}] {line}", flush=True),
    )
    try:
        plane.start()
    except BuildError as error:
        RESULT.build_error = str(error)[-2000:]
        pytest.skip(f"Kubernetes {VERSION} could not be built here: {str(error)[-300:]}")
    yield plane
    plane.stop(keep_logs=request.session.testsfailed > 0)


@pytest.fixture
async def kube(control_plane: ControlPlane) -> AsyncIterator[KubeClient]:
    """The test's own admin client."""
    async with await KubeClient.connect(str(control_plane.admin_kubeconfig)) as client:
        yield client
