"""Integration tests: everything here runs against the real control plane (tests/conftest.py).

Every test in this folder is marked ``integration``; ``start_controller`` runs the real
controller in-process (tests/integration/controller.py).
"""

from __future__ import annotations

import pytest

from tests.integration.controller import start_controller

__all__ = ["start_controller"]


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    for item in items:
        if "tests/integration/" in str(item.path).replace("\\", "/"):
            item.add_marker(pytest.mark.integration)
