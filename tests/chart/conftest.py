"""Fixtures of the chart tests: the pinned helm and promtool (the control plane comes from
tests/conftest.py)."""

from __future__ import annotations

from pathlib import Path

import pytest

from lifecycle_controller.devcluster.binaries import BuildError, ensure_helm, ensure_promtool
from tests.chart.support import Helm
from tests.integration.controller import start_controller

__all__ = ["helm", "promtool", "start_controller"]


@pytest.fixture(scope="session")
def helm() -> Helm:
    """helm built from its Go module (first use on a machine compiles it, then it is cached)."""
    return Helm(binary=ensure_helm(log=lambda line: print(f"[helm] {line}", flush=True)))


@pytest.fixture(scope="session")
def promtool() -> Path:
    """promtool built from its Go module, cached like helm; the tests that evaluate the alert
    rules skip, saying why, when it cannot be built here."""
    try:
        return ensure_promtool(log=lambda line: print(f"[promtool] {line}", flush=True))
    except BuildError as error:
        first = str(error).splitlines()[0] if str(error) else type(error).__name__
        pytest.skip(f"promtool could not be built, so the alert rules are not evaluated: {first}")
