"""The admission policy's ``warn-before`` check on the real API server."""

from __future__ import annotations

import pytest

from tests.chart.test_admission_policy import PolicyEnv, configmap, create, env, unique
from tests.chart.test_chart_warnings import WARN_BEFORE_VECTORS
from tests.integration.keys import P

__all__ = ["env"]

pytestmark = pytest.mark.integration


def test_policy_checks_the_warn_before_grammar(env: PolicyEnv) -> None:
    for value, accepted in WARN_BEFORE_VECTORS:
        manifest = configmap(unique("warn"), {P + "warn-before": value})
        response = create(env.alice, manifest, env.validated)
        assert response.status in (201, 422), response.body
        assert (response.status == 201) is accepted, (value, response.body.get("message"))
