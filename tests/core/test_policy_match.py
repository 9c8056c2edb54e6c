"""Matching: resources, namespace scope, names, selector, exempt, owned, condition."""

from __future__ import annotations

from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st

from lifecycle_controller.core.objects import keys
from lifecycle_controller.core.objects.resources import ResourceType
from lifecycle_controller.core.policy.condition import OwnerReference
from lifecycle_controller.core.policy.match import (
    MatchReason,
    ObjectView,
    is_exempt,
    match,
    matches,
    unwatched_resources,
)
from lifecycle_controller.core.policy.model import Policy, PolicyKind, parse_policy

CONFIGMAPS = ResourceType("", "v1", "configmaps", "ConfigMap", True)
NAMESPACES = ResourceType("", "v1", "namespaces", "Namespace", False)
NODES = ResourceType("", "v1", "nodes", "Node", False)
DEPLOYMENTS = ResourceType("apps", "v1", "deployments", "Deployment", True)
REPLICASETS = ResourceType("apps", "v1", "replicasets", "ReplicaSet", True)
CUSTOM_NAMESPACES = ResourceType("example.com", "v1", "namespaces", "Namespace", False)

OWNER = OwnerReference("apps/v1", "Deployment", "web", "uid-d", controller=True)
NOT_CONTROLLER = OwnerReference("v1", "ConfigMap", "cfg", "uid-c", controller=False)


def policy(kind: PolicyKind = PolicyKind.CLUSTER, **fields: Any) -> Policy:
    spec: dict[str, Any] = {"resources": ["configmaps"], "lifecycle": {"delete-after": "1h"}}
    spec.update(fields)
    parsed = parse_policy(kind, "team-a" if kind is PolicyKind.NAMESPACED else None, "p", 1, spec)
    assert isinstance(parsed, Policy), parsed
    return parsed


def view(**fields: Any) -> ObjectView:
    base: dict[str, Any] = {"resource": CONFIGMAPS, "namespace": "team-a", "name": "cfg"}
    base.update(fields)
    return ObjectView(**base)


@pytest.mark.parametrize(
    ("resources", "resource", "expected"),
    [
        (["configmaps"], CONFIGMAPS, True),
        (["configmaps"], DEPLOYMENTS, False),
        (["*"], CONFIGMAPS, True),
        (["*"], DEPLOYMENTS, True),  # * matches dots, as --watch-resource
        (["*.apps"], DEPLOYMENTS, True),
        (["*.apps"], CONFIGMAPS, False),
        (["deployments.apps", "replicasets.apps"], REPLICASETS, True),
        (["config?aps"], CONFIGMAPS, True),
        (["[cd]*"], CONFIGMAPS, True),
        (["[^c]*"], CONFIGMAPS, False),
        (["deployments"], DEPLOYMENTS, False),  # the key carries the group
    ],
)
def test_resource_globs(resources: list[str], resource: ResourceType, expected: bool) -> None:
    result = match(policy(resources=resources), view(resource=resource))
    assert result.matched is expected
    if not expected:
        assert result.reason is MatchReason.RESOURCE


@pytest.mark.parametrize(
    ("namespaces", "obj", "expected"),
    [
        ([], view(namespace="anything"), True),
        (["pr-*"], view(namespace="pr-12"), True),
        (["pr-*"], view(namespace="team-a"), False),
        (["pr-*"], view(resource=NAMESPACES, namespace=None, name="pr-12"), True),  # own name
        (["pr-*"], view(resource=NAMESPACES, namespace=None, name="prod"), False),
        ([], view(resource=NAMESPACES, namespace=None, name="prod"), True),
        (["*"], view(resource=NODES, namespace=None, name="node-1"), False),  # no namespace
        ([], view(resource=NODES, namespace=None, name="node-1"), True),
        (["pr-*"], view(resource=CUSTOM_NAMESPACES, namespace=None, name="pr-1"), False),
    ],
)
def test_cluster_policy_namespaces(namespaces: list[str], obj: ObjectView, expected: bool) -> None:
    # A glob selects namespaced types only: cluster-scoped ones are named exactly.
    p = policy(resources=["*", obj.resource.key], namespaces=namespaces)
    result = match(p, obj)
    assert result.matched is expected
    if not expected:
        assert result.reason is MatchReason.NAMESPACE


@pytest.mark.parametrize(
    ("obj", "expected"),
    [
        (view(namespace="team-a"), True),
        (view(namespace="team-b"), False),
        (view(resource=NAMESPACES, namespace=None, name="team-a"), False),
    ],
)
def test_a_namespaced_policy_matches_only_its_own_namespace(
    obj: ObjectView, expected: bool
) -> None:
    p = policy(PolicyKind.NAMESPACED, resources=["configmaps", "namespaces"])
    assert matches(p, obj) is expected


@pytest.mark.parametrize(
    ("names", "name", "expected"),
    [
        ([], "anything", True),
        (["*"], "cfg", True),
        (["stale-*", "old-?"], "old-1", True),
        (["stale-*", "old-?"], "old-12", False),
        (["cfg"], "cfg", True),
    ],
)
def test_name_globs(names: list[str], name: str, expected: bool) -> None:
    result = match(policy(names=names), view(name=name))
    assert result.matched is expected
    if not expected:
        assert result.reason is MatchReason.NAME


def test_selector() -> None:
    p = policy(selector={"matchLabels": {"env": "preview"}})
    assert matches(p, view(labels={"env": "preview"}))
    assert match(p, view(labels={"env": "prod"})).reason is MatchReason.SELECTOR
    assert match(p, view()).reason is MatchReason.SELECTOR  # missing label
    assert matches(policy(selector={}), view())  # empty selector: every object


@pytest.mark.parametrize(
    ("value", "exempt"),
    [
        *[("true", True), ("True", True), ("1", True), ("yes", True), ("", True)],
        *[("false", False), ("0", False), ("FALSE", False)],
    ],
)
def test_exempt(value: str, exempt: bool) -> None:
    annotations = {keys.EXEMPT: value}
    assert is_exempt(annotations) is exempt
    result = match(policy(), view(annotations=annotations))
    assert result.matched is not exempt
    if exempt:
        assert result.reason is MatchReason.EXEMPT


def test_not_exempt_without_the_key() -> None:
    assert not is_exempt({})


def test_owned_objects_need_include_owned() -> None:
    owned = view(resource=REPLICASETS, owner_references=(OWNER,))
    assert match(policy(resources=["replicasets.apps"]), owned).reason is MatchReason.OWNED
    assert matches(policy(resources=["replicasets.apps"], includeOwned=True), owned)
    # Only a controller reference makes an object "owned".
    assert matches(policy(), view(owner_references=(NOT_CONTROLLER,)))


def test_condition() -> None:
    p = policy(condition='object.metadata.labels["team"] != "core"')
    assert matches(p, view(labels={"team": "web"}))
    assert match(p, view(labels={"team": "core"})).reason is MatchReason.CONDITION
    missing = match(p, view(labels={}))
    assert missing.reason is MatchReason.CONDITION_ERROR
    assert missing.problem == "condition failed: 'team'"
    not_bool = match(policy(condition="object.metadata.name"), view())
    assert (not_bool.matched, not_bool.reason, not_bool.problem) == (
        False,
        MatchReason.CONDITION_ERROR,
        "condition returned str 'cfg', not a boolean",
    )


def test_condition_sees_owner_references_and_creation() -> None:
    p = policy(
        resources=["replicasets.apps"],
        includeOwned=True,
        condition='object.metadata.ownerReferences.exists(o, o.kind == "Deployment")'
        ' && object.metadata.creationTimestamp < timestamp("2026-01-01T00:00:00Z")',
    )
    old = view(resource=REPLICASETS, owner_references=(OWNER,), creation_ns=0)
    assert matches(p, old)


def test_cheap_filters_come_before_the_condition() -> None:
    # The condition would fail on this object; the selector refuses it first.
    p = policy(
        selector={"matchLabels": {"env": "x"}}, condition='object.metadata.labels["t"] == ""'
    )
    assert match(p, view()).reason is MatchReason.SELECTOR


_policies = st.builds(
    lambda names, selector, owned, condition: policy(
        resources=["*"],
        names=names,
        selector=selector,
        includeOwned=owned,
        **({"condition": condition} if condition else {}),
    ),
    st.lists(st.sampled_from(["*", "a*", "cfg", "?"]), max_size=2),
    st.sampled_from([{}, {"matchLabels": {"env": "x"}}, {"matchExpressions": []}]),
    st.booleans(),
    st.sampled_from([None, "true", '"env" in object.metadata.labels']),
)
_views = st.builds(
    lambda name, labels, owners, kind: view(
        name=name,
        labels=labels,
        owner_references=owners,
        resource=kind,
        namespace=None if kind is NAMESPACES else "team-a",
    ),
    st.sampled_from(["cfg", "a", "abc"]),
    st.dictionaries(st.sampled_from(["env", "team"]), st.sampled_from(["x", "y"])),
    st.sampled_from([(), (OWNER,), (NOT_CONTROLLER,)]),
    st.sampled_from([CONFIGMAPS, NAMESPACES, DEPLOYMENTS]),
)


@given(p=_policies, obj=_views, value=st.sampled_from(["true", "1", "TRUE", "t", "on"]))
def test_a_policy_never_matches_an_exempt_object(p: Policy, obj: ObjectView, value: str) -> None:
    exempt = ObjectView(
        resource=obj.resource,
        namespace=obj.namespace,
        name=obj.name,
        labels=obj.labels,
        annotations={**obj.annotations, keys.EXEMPT: value},
        owner_references=obj.owner_references,
    )
    assert not matches(p, exempt)


def test_unwatched_resources_name_what_selects_nothing_watched() -> None:
    p = policy(resources=["configmaps", "*.apps", "widgets.example.com"])
    watched = ["configmaps", "secrets", "deployments.apps"]
    assert unwatched_resources(p, watched) == ("widgets.example.com",)
    assert unwatched_resources(p, []) == p.resources
    assert unwatched_resources(policy(resources=["*"]), watched) == ()
