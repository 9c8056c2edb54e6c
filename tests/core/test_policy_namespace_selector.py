"""A ClusterLifecyclePolicy's ``namespaceSelector``: parsed, matched over the labels of the
object's Namespace, ANDed with ``namespaces``, held while the Namespace is unknown, refused on
a LifecyclePolicy, and never a way past protection."""

from __future__ import annotations

from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st

from lifecycle_controller.core.objects.resources import ResourceType
from lifecycle_controller.core.policy.in_force import PolicySet
from lifecycle_controller.core.policy.match import (
    DEFAULT_PROTECTION,
    MatchReason,
    ObjectView,
    holds,
    match,
    matches_statically,
    static_filters,
)
from lifecycle_controller.core.policy.model import Policy, PolicyInvalid, PolicyKind, parse_policy
from lifecycle_controller.core.policy.precedence import UnjudgedPolicy, UnjudgedReason

CONFIGMAPS = ResourceType("", "v1", "configmaps", "ConfigMap", True)
NAMESPACES = ResourceType("", "v1", "namespaces", "Namespace", False)
NODES = ResourceType("", "v1", "nodes", "Node", False)
PREVIEW = {"matchLabels": {"env": "preview"}}


def parsed(kind: PolicyKind = PolicyKind.CLUSTER, **fields: Any) -> Policy | PolicyInvalid:
    spec: dict[str, Any] = {"resources": ["configmaps"], "lifecycle": {"delete-after": "1h"}}
    spec.update(fields)
    namespace = "team-a" if kind is PolicyKind.NAMESPACED else None
    return parse_policy(kind, namespace, "p", 1, spec)


def policy(**fields: Any) -> Policy:
    found = parsed(**fields)
    assert isinstance(found, Policy), found
    return found


def view(ns_labels: dict[str, str] | None, **fields: Any) -> ObjectView:
    base: dict[str, Any] = {
        "resource": CONFIGMAPS,
        "namespace": "team-a",
        "name": "cfg",
        "namespace_labels": ns_labels,
    }
    base.update(fields)
    return ObjectView(**base)


@pytest.mark.parametrize(
    ("selector", "labels", "reason"),
    [
        (PREVIEW, {"env": "preview"}, MatchReason.MATCHED),
        (PREVIEW, {"env": "preview", "team": "a"}, MatchReason.MATCHED),
        (PREVIEW, {"env": "prod"}, MatchReason.NAMESPACE_SELECTOR),
        (PREVIEW, {}, MatchReason.NAMESPACE_SELECTOR),
        (PREVIEW, None, MatchReason.NAMESPACE_UNKNOWN),
        ({}, {}, MatchReason.MATCHED),  # empty: every known namespace
        ({}, None, MatchReason.NAMESPACE_UNKNOWN),
        (
            {"matchExpressions": [{"key": "env", "operator": "In", "values": ["a", "b"]}]},
            {"env": "b"},
            MatchReason.MATCHED,
        ),
        (
            {"matchExpressions": [{"key": "env", "operator": "NotIn", "values": ["prod"]}]},
            {},
            MatchReason.MATCHED,
        ),
        (
            {"matchExpressions": [{"key": "keep", "operator": "DoesNotExist"}]},
            {"keep": ""},
            MatchReason.NAMESPACE_SELECTOR,
        ),
        (
            {"matchExpressions": [{"key": "env", "operator": "Exists"}]},
            {"env": ""},
            MatchReason.MATCHED,
        ),
    ],
)
def test_the_namespace_labels_decide(
    selector: dict[str, Any], labels: dict[str, str] | None, reason: MatchReason
) -> None:
    assert match(policy(namespaceSelector=selector), view(labels)).reason is reason


def test_the_object_labels_are_not_the_namespace_labels() -> None:
    p = policy(namespaceSelector=PREVIEW)
    result = match(p, view({}, labels={"env": "preview"}))
    assert result.reason is MatchReason.NAMESPACE_SELECTOR


@pytest.mark.parametrize(
    ("namespaces", "namespace", "labels", "reason"),
    [
        (["pr-*"], "pr-1", {"env": "preview"}, MatchReason.MATCHED),
        (["pr-*"], "team-a", {"env": "preview"}, MatchReason.NAMESPACE),
        (["pr-*"], "pr-1", {"env": "prod"}, MatchReason.NAMESPACE_SELECTOR),
    ],
)
def test_anded_with_namespaces(
    namespaces: list[str], namespace: str, labels: dict[str, str], reason: MatchReason
) -> None:
    p = policy(namespaces=namespaces, namespaceSelector=PREVIEW)
    assert match(p, view(labels, namespace=namespace)).reason is reason


@pytest.mark.parametrize("resource", [NAMESPACES, NODES])
def test_a_cluster_scoped_object_never_matches(resource: ResourceType) -> None:
    p = policy(resources=[resource.key], namespaceSelector={})
    obj = view({"env": "preview"}, resource=resource, namespace=None, name="pr-1")
    assert match(p, obj).reason is MatchReason.NAMESPACE_SELECTOR
    assert not matches_statically(p, obj)  # not even kept


def test_a_namespaced_object_stays_a_candidate_whatever_its_namespace_labels() -> None:
    """Labels change without the object changing: the informers keep it either way."""
    p = policy(namespaceSelector=PREVIEW)
    assert matches_statically(p, view({}))
    assert matches_statically(p, view(None))
    assert static_filters(p) != static_filters(policy())


@pytest.mark.parametrize("namespace", ["kube-system", "kube-public", "kube-node-lease"])
def test_a_protected_namespace_stays_protected_whatever_its_labels(namespace: str) -> None:
    p = policy(namespaceSelector=PREVIEW)
    obj = view({"env": "preview"}, namespace=namespace)
    assert match(p, obj, DEFAULT_PROTECTION).reason is MatchReason.PROTECTED
    named = policy(namespaces=[namespace], namespaceSelector=PREVIEW)
    assert match(named, obj, DEFAULT_PROTECTION).matched  # named literally: reachable


def test_a_namespaced_policy_may_not_select_namespaces() -> None:
    found = parsed(PolicyKind.NAMESPACED, namespaceSelector=PREVIEW)
    assert isinstance(found, PolicyInvalid)
    assert any(
        p.startswith("spec.namespaceSelector: only a ClusterLifecyclePolicy")
        for p in found.problems
    )


@pytest.mark.parametrize(
    ("selector", "problem"),
    [
        ("env=preview", "spec.namespaceSelector: must be an object"),
        ({"matchLabels": {"env": 1}}, "spec.namespaceSelector.matchLabels: must be a map"),
        (
            {"matchExpressions": [{"key": "env", "operator": "In"}]},
            "spec.namespaceSelector.matchExpressions[0].values: must be non-empty",
        ),
        ({"matchLabel": {}}, "spec.namespaceSelector.matchLabel: unknown field"),
    ],
)
def test_an_invalid_selector_makes_the_policy_invalid(selector: object, problem: str) -> None:
    found = parsed(namespaceSelector=selector)
    assert isinstance(found, PolicyInvalid)
    assert any(p.startswith(problem) for p in found.problems), found.problems
    assert found.scope.namespace_selector is None  # unreadable: every namespace


def test_an_invalid_policy_holds_what_its_readable_selector_would_match() -> None:
    found = parsed(namespaceSelector=PREVIEW, lifecycle={"delete-after": "soon"})
    assert isinstance(found, PolicyInvalid)
    assert holds(found, view({"env": "preview"}))
    assert not holds(found, view({"env": "prod"}))
    assert holds(found, view(None))  # unknown namespace: held
    assert not holds(found, view({}, resource=NAMESPACES, namespace=None))


def test_an_invalid_selector_holds_every_namespace() -> None:
    found = parsed(namespaceSelector={"matchLabels": {"env": "a b"}})
    assert isinstance(found, PolicyInvalid)
    assert holds(found, view({}))
    assert holds(found, view(None))


def test_an_unknown_namespace_holds_the_object_in_the_policy_set() -> None:
    p = policy(namespaceSelector=PREVIEW)
    lower = policy(resources=["configmaps"])
    policies = PolicySet.of([p, parse_policy(PolicyKind.CLUSTER, None, "z", 1, _spec())])
    assert policies.selects_namespaces_by_label()
    contenders = policies.matching(view(None))
    assert isinstance(contenders[0], UnjudgedPolicy)
    assert contenders[0].reason is UnjudgedReason.NAMESPACE_UNKNOWN
    assert "selects namespaces by label" in contenders[0].describe()
    assert policies.matching(view({"env": "preview"}))[0] is p
    assert not PolicySet.of([lower]).selects_namespaces_by_label()


def _spec() -> dict[str, Any]:
    return {"resources": ["configmaps"], "lifecycle": {"delete-after": "2h"}, "priority": -1}


_LABEL = st.sampled_from(["env", "team", "tier"])
_VALUE = st.sampled_from(["preview", "prod", "a", ""])
_LABELS = st.dictionaries(_LABEL, _VALUE, max_size=3)


@given(selector_labels=_LABELS, namespace_labels=_LABELS, object_labels=_LABELS)
def test_the_namespace_selector_is_the_label_selector_over_the_namespace(
    selector_labels: dict[str, str],
    namespace_labels: dict[str, str],
    object_labels: dict[str, str],
) -> None:
    """Matching with a namespaceSelector is matching without it, ANDed with the label
    selector over the Namespace's labels (whatever the object's own labels)."""
    with_it = policy(namespaceSelector={"matchLabels": selector_labels})
    without = policy()
    obj = view(namespace_labels, labels=object_labels)
    assert with_it.namespace_selector is not None
    expected = match(without, obj).matched and with_it.namespace_selector.matches(namespace_labels)
    assert match(with_it, obj).matched is expected


@given(
    selector_labels=_LABELS,
    namespace_labels=st.none() | _LABELS,
    namespace=st.sampled_from(["team-a", "kube-system", None]),
)
def test_an_invalid_policy_holds_at_least_what_it_would_match(
    selector_labels: dict[str, str],
    namespace_labels: dict[str, str] | None,
    namespace: str | None,
) -> None:
    """Fail closed: breaking a policy's action never frees an object its namespaceSelector
    selects, and an unknown Namespace is held by both forms."""
    fields: dict[str, Any] = {"namespaceSelector": {"matchLabels": selector_labels}}
    valid = policy(**fields)
    invalid = parsed(**fields, lifecycle={"delete-after": "soon"})
    assert isinstance(invalid, PolicyInvalid)
    obj = view(namespace_labels, namespace=namespace)
    result = match(valid, obj)
    if result.matched or result.reason is MatchReason.NAMESPACE_UNKNOWN:
        assert holds(invalid, obj)
    if result.reason is MatchReason.PROTECTED or namespace is None:
        assert not holds(invalid, obj)
