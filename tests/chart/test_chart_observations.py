"""The chart and persisted observations: the ``persistObservations`` value and the policy.

docs/behaviour.md#persisted-observations: the value turns on ``--persist-observations``;
the admission policy knows the ``observed`` key, so neither the controller's record nor a
manifest that carries one (a copy of a live object) is refused as a typo.
"""

from __future__ import annotations

import pytest

from tests.chart.support import Helm, args_of, of_kind, parse_run_args
from tests.chart.test_admission_policy import PolicyEnv, configmap, create, env, unique
from tests.integration.keys import P

__all__ = ["env"]

RECORD = "2026-10-05T03:10:00Z;v1-0123456789abcdef"


def test_persist_observations_value_becomes_the_flag(helm: Helm) -> None:
    args = args_of(helm.render({"controllerManager": {"persistObservations": True}}))
    assert "--persist-observations=true" in args
    assert parse_run_args(args)["persist_observations"] == "true"
    default = args_of(helm.render())
    assert not [a for a in default if a.startswith("--persist-observations")]
    assert parse_run_args(default)["persist_observations"] in (None, "false")


def test_schema_rejects_a_non_boolean(helm: Helm) -> None:
    error = helm.render_failure({"controllerManager": {"persistObservations": "yes"}})
    assert "persistObservations" in error


def test_policy_knows_the_observed_key(helm: Helm) -> None:
    text = helm.template_text({"admissionPolicy": {"enabled": True}})
    assert f"{P}observed" in text


@pytest.mark.integration
def test_policy_accepts_the_observed_annotation(env: PolicyEnv) -> None:
    for value in (RECORD, "edited by hand"):  # the controller ignores a garbled record
        manifest = configmap(
            unique("observed"), {P + "delete-at": "2030-01-01T00:00:00Z", P + "observed": value}
        )
        response = create(env.alice, manifest, env.validated)
        assert response.status == 201, response.body
    typo = configmap(unique("observed"), {P + "observd": RECORD})
    assert create(env.alice, typo, env.validated).status == 422


def test_persisting_observations_grants_the_matched_at_configmaps(helm: Helm) -> None:
    """docs/reliability.md#matchedat-store: the records beside the Lease, nowhere else."""
    roles = [
        role
        for role in of_kind(
            helm.render({"controllerManager": {"persistObservations": True}}), "Role"
        )
        if role["metadata"]["name"].endswith("-matched-at-role")
    ]
    assert len(roles) == 1
    assert roles[0]["rules"] == [
        {
            "apiGroups": [""],
            "resources": ["configmaps"],
            "verbs": ["get", "create", "patch", "delete"],
        }
    ]
    assert not [r for r in of_kind(helm.render(), "Role") if "matched-at" in r["metadata"]["name"]]
