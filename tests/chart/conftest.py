"""Fixtures of the chart tests: the pinned helm, and the real control plane of the integration
tests (re-exported, not duplicated, so both suites share one definition)."""

from __future__ import annotations

import pytest

from lifecycle_controller.devcluster.binaries import ensure_helm
from tests.chart.support import Helm
from tests.integration.conftest import admin_api, control_plane, namespace

__all__ = ["admin_api", "control_plane", "helm", "namespace"]


@pytest.fixture(scope="session")
def helm() -> Helm:
    """helm built from its Go module (first use on a machine compiles it, then it is cached)."""
    return Helm(binary=ensure_helm(log=lambda line: print(f"[helm] {line}", flush=True)))
