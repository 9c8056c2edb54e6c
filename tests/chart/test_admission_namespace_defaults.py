"""The admission policy on Namespace defaults (docs/annotations.md#namespace-defaults).

Namespaces are checked like any other object: ``catch-up``, ``dry-run``, ``warn-before`` and
``maintenance-window`` with their grammars, and ``max-delete-ttl`` (a duration, or zero for
no namespace cap), which is refused on anything but a Namespace. The vectors are checked
against the core too, so the policy and the controller cannot drift apart.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest

from lifecycle_controller.core.decision.namespace_defaults import parse_namespace_defaults
from tests.chart.support import Identity
from tests.chart.test_admission_policy import PolicyEnv, configmap, create, env, unique
from tests.integration.keys import P

__all__ = ["env"]

NAMESPACE_VECTORS = [
    (P + "max-delete-ttl", "7d", True),
    (P + "max-delete-ttl", "90s", True),
    (P + "max-delete-ttl", "0", True),
    (P + "max-delete-ttl", "0s", True),
    (P + "max-delete-ttl", "", False),
    (P + "max-delete-ttl", "-1h", False),
    (P + "max-delete-ttl", "1h30m", False),
    (P + "max-delete-ttl", "106752d", False),
    (P + "dry-run", "true", True),
    (P + "dry-run", "maybe", False),
    (P + "catch-up", "15m", True),
    (P + "catch-up", "sometimes", False),
    (P + "warn-before", "1h", True),
    (P + "warn-before", "soon", False),
    (P + "maintenance-window", "Mon-Fri 01:00-05:00 Europe/Warsaw", True),
    (P + "maintenance-window", "whenever", False),
]


@pytest.mark.parametrize(("key", "value", "accepted"), NAMESPACE_VECTORS)
def test_vectors_match_the_core(key: str, value: str, accepted: bool) -> None:
    assert (parse_namespace_defaults("ns", {key: value}).problems == ()) is accepted


@pytest.fixture(scope="module")
def dave(env: PolicyEnv) -> Iterator[Identity]:
    """May create Namespaces, and is not exempt from the policy."""
    rules = [{"apiGroups": [""], "resources": ["namespaces"], "verbs": ["create"]}]
    identity = Identity(env.plane.user_kubeconfig(f"dave-{env.tag}", cluster_rules=rules))
    yield identity
    identity.close()


def namespace(env: PolicyEnv, annotations: dict[str, str]) -> dict[str, Any]:
    return {
        "apiVersion": "v1",
        "kind": "Namespace",
        "metadata": {
            "name": unique("nsdefaults"),
            "labels": {"lifecycle-test/validate": env.tag},  # a Namespace is matched by its own
            "annotations": annotations,
        },
    }


@pytest.mark.integration
def test_policy_checks_namespace_defaults(env: PolicyEnv, dave: Identity) -> None:
    for key, value, accepted in NAMESPACE_VECTORS:
        manifest = namespace(env, {key: value})
        response = dave.request("POST", "/api/v1/namespaces?dryRun=All", manifest)
        assert response.status in (201, 422), response.body
        assert (response.status == 201) is accepted, (key, value, response.body.get("message"))


@pytest.mark.integration
def test_max_delete_ttl_is_refused_on_other_objects(env: PolicyEnv) -> None:
    response = create(
        env.alice, configmap(unique("cap"), {P + "max-delete-ttl": "7d"}), env.validated
    )
    assert response.status == 422, response.body
    assert "applies only to Namespaces" in str(response.body.get("message"))
