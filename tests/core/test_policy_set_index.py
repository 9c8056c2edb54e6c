"""The per-namespace index of :class:`PolicySet` (``for_object``) leaves out only policies
that cannot match there: asking it gives what asking every policy of the type gives."""

from __future__ import annotations

from typing import Any

from hypothesis import given, settings
from hypothesis import strategies as st

from lifecycle_controller.core.objects.resources import ResourceType
from lifecycle_controller.core.policy.in_force import PolicySet, object_view
from lifecycle_controller.core.policy.match import matches_statically
from lifecycle_controller.core.policy.model import Policy, PolicyKind, parse_policy

CONFIGMAPS = ResourceType("", "v1", "configmaps", "ConfigMap", namespaced=True)
NAMESPACES = ResourceType("", "v1", "namespaces", "Namespace", namespaced=False)
NS = ["a", "b", "c"]

namespace_patterns = st.lists(st.sampled_from([*NS, "a*", "[bc]", "*"]), max_size=2)


@st.composite
def policies(draw: st.DrawFn) -> Policy:
    index = draw(st.integers(0, 10_000))
    spec: dict[str, Any] = {
        "resources": ["configmaps", "namespaces"],
        "lifecycle": {"delete-after": "1h"},
    }
    names = draw(st.lists(st.sampled_from([*NS, "x", "x*", "?"]), max_size=2))
    if names:
        spec["names"] = names
    if draw(st.booleans()):
        policy = parse_policy(PolicyKind.NAMESPACED, draw(st.sampled_from(NS)), f"p{index}", 1, {
            **spec, "resources": ["configmaps"]})  # fmt: skip
    else:
        patterns = draw(namespace_patterns)
        if patterns:
            spec["namespaces"] = patterns
        policy = parse_policy(PolicyKind.CLUSTER, None, f"c{index}", 1, spec)
    assert isinstance(policy, Policy)
    return policy


@settings(max_examples=200, deadline=None)
@given(
    found=st.lists(policies(), max_size=8),
    namespace=st.sampled_from([*NS, None]),
    name=st.sampled_from([*NS, "x"]),
)
def test_the_index_loses_no_policy_that_matches(
    found: list[Policy], namespace: str | None, name: str
) -> None:
    policy_set = PolicySet.of(found)
    resource = CONFIGMAPS if namespace is not None else NAMESPACES
    metadata: dict[str, Any] = {
        "name": name,
        "uid": "u",
        "creationTimestamp": "2026-01-01T00:00:00Z",
    }
    if namespace is not None:
        metadata["namespace"] = namespace
    view = object_view(resource, metadata)
    every = {p.ref for p in policy_set.for_resource(resource) if matches_statically(p, view)}
    indexed = {
        p.ref for p in policy_set.for_object(resource, namespace) if matches_statically(p, view)
    }
    assert indexed == every
    assert policy_set.candidate(view) == bool(every)
    # what lets a frame be dropped undecoded never refuses a candidate
    assert policy_set.may_keep(resource, namespace, name) or not every
    if policy_set.may_keep_every(resource):  # then no name is read: none may be refused
        assert policy_set.may_keep(resource, namespace, name)


def test_an_invalid_policy_may_keep_any_object_of_a_type_a_valid_one_selects() -> None:
    spec: dict[str, Any] = {"resources": ["configmaps"], "lifecycle": {"delete-after": "1h"}}
    named = parse_policy(PolicyKind.CLUSTER, None, "named", 1, {**spec, "names": ["x"]})
    broken = parse_policy(
        PolicyKind.CLUSTER, None, "broken", 1, {**spec, "lifecycle": {"delete-after": "soon"}}
    )
    assert isinstance(named, Policy)
    assert PolicySet.of([named]).may_keep(CONFIGMAPS, "a", "x")
    assert not PolicySet.of([named]).may_keep(CONFIGMAPS, "a", "y")
    assert not PolicySet.of([named]).may_keep(NAMESPACES, None, "x")  # not its type
    assert PolicySet.of([named, broken]).may_keep(CONFIGMAPS, "a", "y")
    assert not PolicySet.of([broken]).may_keep(CONFIGMAPS, "a", "y")  # as view(): no policy
    assert not PolicySet.of([named]).may_keep_every(CONFIGMAPS)
    assert PolicySet.of([named, broken]).may_keep_every(CONFIGMAPS)


def test_the_paths_conditions_read_are_worked_out_once_per_type() -> None:
    spec: dict[str, Any] = {
        "resources": ["configmaps"],
        "condition": "has(object.data.k)",
        "lifecycle": {"delete-after": "1h"},
    }
    policy = parse_policy(PolicyKind.CLUSTER, None, "reads-data", 1, spec)
    assert isinstance(policy, Policy)
    policy_set = PolicySet.of([policy])
    first = policy_set.reads(CONFIGMAPS)
    assert first == frozenset({("data", "k")})
    assert policy_set.reads(CONFIGMAPS) is first  # asked for every object listed
    assert policy_set.reads(NAMESPACES) == frozenset()
