"""Fixtures of the chart tests: the pinned helm (the control plane comes from tests/conftest.py)."""

from __future__ import annotations

import pytest

from lifecycle_controller.devcluster.binaries import ensure_helm
from tests.chart.support import Helm
from tests.integration.controller import start_controller

__all__ = ["helm", "start_controller"]


@pytest.fixture(scope="session")
def helm() -> Helm:
    """helm built from its Go module (first use on a machine compiles it, then it is cached)."""
    return Helm(binary=ensure_helm(log=lambda line: print(f"[helm] {line}", flush=True)))
