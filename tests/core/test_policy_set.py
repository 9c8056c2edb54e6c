"""The policy snapshot: manifests in, candidates, matching order and resolution out."""

from __future__ import annotations

from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st

from lifecycle_controller.core.objects import keys
from lifecycle_controller.core.objects.resources import ResourceType
from lifecycle_controller.core.policy.in_force import (
    POLICY_API_VERSION,
    PolicySet,
    is_policy_manifest,
    object_view,
    policy_from_manifest,
)
from lifecycle_controller.core.policy.match import static_filters
from lifecycle_controller.core.policy.model import Policy, PolicyInvalid, PolicyKind
from lifecycle_controller.core.policy.precedence import UnjudgedPolicy, UnjudgedReason
from lifecycle_controller.core.text.timestamps import parse_rfc3339

CONFIGMAPS = ResourceType("", "v1", "configmaps", "ConfigMap", namespaced=True)
SECRETS = ResourceType("", "v1", "secrets", "Secret", namespaced=True)
NAMESPACES = ResourceType("", "v1", "namespaces", "Namespace", namespaced=False)
NOW = parse_rfc3339("2026-12-02T10:00:00Z")


def manifest(
    name: str, spec: dict[str, Any], *, namespace: str | None = None, generation: int = 1
) -> dict[str, Any]:
    kind = "LifecyclePolicy" if namespace else "ClusterLifecyclePolicy"
    metadata: dict[str, Any] = {"name": name, "generation": generation}
    if namespace:
        metadata["namespace"] = namespace
    return {"apiVersion": POLICY_API_VERSION, "kind": kind, "metadata": metadata, "spec": spec}


def parsed(*docs: dict[str, Any]) -> PolicySet:
    return PolicySet.of(policy_from_manifest(doc) for doc in docs)


def meta(name: str, namespace: str | None = "apps", **labels: str) -> dict[str, Any]:
    out: dict[str, Any] = {"name": name, "labels": labels}
    if namespace:
        out["namespace"] = namespace
    out["creationTimestamp"] = "2026-12-01T10:00:00Z"
    return out


def test_manifests_are_recognised_and_parsed() -> None:
    doc = manifest("stale", {"resources": ["configmaps"], "lifecycle": {"delete-after": "1h"}})
    assert is_policy_manifest(doc)
    assert not is_policy_manifest({"apiVersion": "v1", "kind": "ConfigMap"})
    policy = policy_from_manifest(doc)
    assert isinstance(policy, Policy)
    assert policy.kind is PolicyKind.CLUSTER
    assert policy.generation == 1


def test_another_version_of_the_group_is_invalid_with_the_served_one_named() -> None:
    doc = manifest("old", {"resources": ["configmaps"], "lifecycle": {"delete-after": "1h"}})
    doc["apiVersion"] = "lifecycle.cezary.dev/v1beta9"
    policy = policy_from_manifest(doc)
    assert isinstance(policy, PolicyInvalid)
    assert POLICY_API_VERSION in policy.message


def test_the_set_splits_valid_from_invalid() -> None:
    policies = parsed(
        manifest("ok", {"resources": ["configmaps"], "lifecycle": {"delete-after": "1h"}}),
        manifest("bad", {"resources": ["configmaps"], "lifecycle": {"restart-after": "1h"}}),
    )
    assert [p.ref.name for p in policies.valid] == ["ok"]
    assert [p.ref.name for p in policies.invalid] == ["bad"]
    assert policies
    assert not PolicySet()


def test_candidates_are_judged_on_resource_scope_names_and_selector() -> None:
    policies = parsed(
        manifest(
            "labelled",
            {
                "resources": ["configmaps"],
                "selector": {"matchLabels": {"tier": "cache"}},
                "names": ["cache-*"],
                "lifecycle": {"delete-after": "1h"},
            },
        )
    )
    assert policies.candidate(object_view(CONFIGMAPS, meta("cache-1", tier="cache")))
    assert not policies.candidate(object_view(CONFIGMAPS, meta("other", tier="cache")))
    assert not policies.candidate(object_view(CONFIGMAPS, meta("cache-1", tier="web")))
    assert not policies.candidate(object_view(SECRETS, meta("cache-1", tier="cache")))
    assert policies.resource_patterns() == ("configmaps",)


def test_an_exempt_object_is_a_candidate_but_matches_nothing() -> None:
    policies = parsed(
        manifest("all", {"resources": ["configmaps"], "lifecycle": {"delete-after": "1h"}})
    )
    metadata = meta("x") | {"annotations": {keys.EXEMPT: "true"}}
    view = object_view(CONFIGMAPS, metadata)
    assert policies.candidate(view)  # kept, so that explain can say why it is left alone
    assert policies.matching(view) == []


def test_namespaced_policies_come_first_then_priority_then_name() -> None:
    spec = {"resources": ["configmaps"], "lifecycle": {"delete-after": "1h"}}
    policies = parsed(
        manifest("b-cluster", {**spec, "priority": 100}),
        manifest("a-cluster", {**spec, "priority": 100}),
        manifest("low", {**spec, "priority": -5}),
        manifest("team", spec, namespace="apps"),
        manifest("elsewhere", spec, namespace="other"),
    )
    view = object_view(CONFIGMAPS, meta("x"))
    assert [p.ref.name for p in policies.matching(view)] == [
        "team",
        "a-cluster",
        "b-cluster",
        "low",
    ]
    inputs = policies.resolve({}, view, restart_marker=None, now_ns=NOW)
    assert inputs.decided_by is not None
    assert inputs.decided_by.ref.name == "team"
    assert [ref.name for ref in inputs.overlapped] == ["a-cluster", "b-cluster", "low"]
    # delete-after counts from the creation: 2026-12-01T10:00Z + 1h.
    assert inputs.annotations[keys.DELETE_AT].startswith("2026-12-01T11:00:00")


def test_a_namespace_object_is_matched_by_its_own_name() -> None:
    policies = parsed(
        manifest(
            "previews",
            {
                "resources": ["namespaces"],
                "namespaces": ["pr-*"],
                "lifecycle": {"delete-after": "48h"},
            },
        )
    )
    assert policies.candidate(object_view(NAMESPACES, meta("pr-12", namespace=None)))
    assert not policies.candidate(object_view(NAMESPACES, meta("prod", namespace=None)))


def test_object_view_reads_owner_references_and_ignores_bad_timestamps() -> None:
    metadata = meta("rs-1") | {
        "creationTimestamp": "not a time",
        "ownerReferences": [
            {"apiVersion": "apps/v1", "kind": "Deployment", "name": "web", "controller": True},
            "garbage",
        ],
    }
    view = object_view(CONFIGMAPS, metadata)
    assert view.creation_ns is None
    assert view.has_controller
    assert [ref.name for ref in view.owner_references] == ["web"]


@given(
    labels=st.dictionaries(
        st.sampled_from(["tier", "team", "env"]), st.sampled_from(["a", "b"]), max_size=3
    ),
    name=st.sampled_from(["cache-1", "web", "cache-x"]),
)
def test_matching_implies_candidate(labels: dict[str, str], name: str) -> None:
    policies = parsed(
        manifest(
            "p",
            {
                "resources": ["configmaps"],
                "selector": {"matchLabels": {"tier": "a"}},
                "names": ["cache-*"],
                "condition": 'object.metadata.labels["team"] != "b"',
                "lifecycle": {"delete-after": "1h"},
            },
        )
    )
    view = object_view(CONFIGMAPS, meta(name, **labels))
    if policies.matching(view):
        assert policies.candidate(view)


@pytest.mark.parametrize("value", [None, "", 7])
def test_a_manifest_without_usable_metadata_is_invalid_not_a_crash(value: object) -> None:
    doc = manifest("x", {"resources": ["configmaps"], "lifecycle": {"delete-after": "1h"}})
    doc["metadata"] = value
    assert isinstance(policy_from_manifest(doc), Policy | PolicyInvalid)


def test_a_restart_policy_glob_leaves_kinds_that_cannot_restart_alone() -> None:
    deployments = ResourceType("apps", "v1", "deployments", "Deployment", namespaced=True)
    replicasets = ResourceType("apps", "v1", "replicasets", "ReplicaSet", namespaced=True)
    policies = parsed(
        manifest("apps", {"resources": ["*.apps"], "lifecycle": {"restart-every": "24h"}})
    )
    assert [p.ref.name for p in policies.for_resource(deployments)] == ["apps"]
    assert policies.for_resource(replicasets) == ()


_BASE: dict[str, Any] = {
    "resources": ["configmaps"],
    "names": ["tmp-*"],
    "selector": {"matchLabels": {"tier": "scratch"}},
    "lifecycle": {"delete-after": "1h"},
}


@pytest.mark.parametrize(
    ("change", "same_filters"),
    [
        ({"lifecycle": {"delete-after": "2h"}}, True),
        ({"lifecycle": {"delete-at": "2027-01-01T00:00:00Z"}}, True),
        ({"condition": "object.metadata.name != 'x'"}, True),
        ({"includeOwned": True}, True),
        ({"priority": 5}, True),
        ({"names": ["tmp-*", "old-*"]}, False),
        ({"resources": ["configmaps", "secrets"]}, False),
        ({"selector": {"matchLabels": {"tier": "temp"}}}, False),
        ({"selector": None}, False),
        ({"namespaces": ["ci-*"]}, False),
    ],
)
def test_static_filters_change_only_with_what_the_informers_keep(
    change: dict[str, Any], same_filters: bool
) -> None:
    """A policy change relists a type only when its static filters differ."""
    before = policy_from_manifest(manifest("p", _BASE, generation=1))
    spec = {**_BASE, **change}
    if spec.get("selector") is None:
        spec.pop("selector")
    after = policy_from_manifest(manifest("p", spec, generation=2))
    assert isinstance(before, Policy)
    assert isinstance(after, Policy), after
    assert (static_filters(before) == static_filters(after)) is same_filters


def test_a_condition_over_its_time_budget_holds_what_it_would_decide() -> None:
    """The snapshot times every evaluation with its stopwatch: one that overran holds the
    object, as a failing condition does, and the policy holds its scope from then on."""
    doc = manifest(
        "slow",
        {
            "resources": ["configmaps"],
            "condition": "object.metadata.name.startsWith('a')",
            "lifecycle": {"delete-after": "1h"},
        },
    )
    readings = iter(range(0, 10**12, 300_000_000))
    policies = PolicySet.of([policy_from_manifest(doc)], stopwatch=lambda: next(readings))
    for name in ("a", "b"):
        (hold,) = policies.matching(object_view(CONFIGMAPS, meta(name)))
        assert isinstance(hold, UnjudgedPolicy)
        assert hold.reason is UnjudgedReason.CONDITION_ERROR
        assert "over the budget of 100 ms" in hold.problem
    untimed = PolicySet.of([policy_from_manifest(doc)])
    assert [type(p) for p in untimed.matching(object_view(CONFIGMAPS, meta("a")))] == [Policy]
