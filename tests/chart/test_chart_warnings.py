"""The chart and warnings before acting: the ``warnBefore`` value and the admission policy.

The policy checks ``warn-before`` with the strict duration grammar, zero allowed
(docs/annotations.md#warnings-before-acting).
"""

from __future__ import annotations

import pytest

from lifecycle_controller.core.decision.warnings import parse_lead_time
from tests.chart.support import Helm, args_of
from tests.integration.keys import P

# (value, accepted by the policy); exactly what the controller accepts.
WARN_BEFORE_VECTORS = [
    ("15m", True),
    ("90s", True),
    ("2d", True),
    ("0015m", True),
    ("0s", True),
    ("00m", True),
    ("106751d", True),
    ("106752d", False),
    ("", False),
    ("1h30m", False),
    ("1.5h", False),
    ("-1h", False),
    ("+1h", False),
    ("500ms", False),
    ("1w", False),
    (" 15m", False),
    ("15", False),
]


def _core_accepts(value: str) -> bool:
    return parse_lead_time({P + "warn-before": value}, 0, "uid").problem is None


@pytest.mark.parametrize(("value", "accepted"), WARN_BEFORE_VECTORS)
def test_vectors_match_the_core(value: str, accepted: bool) -> None:
    assert _core_accepts(value) is accepted


def test_warn_before_value_becomes_the_flag(helm: Helm) -> None:
    args = args_of(helm.render({"controllerManager": {"warnBefore": "15m"}}))
    assert "--warn-before=15m" in args
    assert not [a for a in args_of(helm.render()) if a.startswith("--warn-before")]


def test_schema_rejects_a_malformed_default(helm: Helm) -> None:
    error = helm.render_failure({"controllerManager": {"warnBefore": "15 minutes"}})
    assert "warnBefore" in error
