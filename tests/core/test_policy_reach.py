"""The index of one type's policies by the namespaces and names they may reach (``Reach``):
each answer is what filtering every policy, in order, by the rule it stands for gives."""

from __future__ import annotations

from typing import Any

from hypothesis import given, settings
from hypothesis import strategies as st

from lifecycle_controller.core.policy.model import Policy, PolicyKind, parse_policy
from lifecycle_controller.core.policy.reach import Reach
from lifecycle_controller.core.text.globs import has_glob_meta

NS = ["a", "b", "c"]
NAMES = ["x", "y", "z"]


def policy(
    name: str,
    *,
    namespace: str | None = None,
    namespaces: list[str] | None = None,
    names: list[str] | None = None,
) -> Policy:
    spec: dict[str, Any] = {"resources": ["configmaps"], "lifecycle": {"delete-after": "1h"}}
    if namespaces:
        spec["namespaces"] = namespaces
    if names:
        spec["names"] = names
    kind = PolicyKind.NAMESPACED if namespace is not None else PolicyKind.CLUSTER
    parsed = parse_policy(kind, namespace, name, 1, spec)
    assert isinstance(parsed, Policy), parsed
    return parsed


def reaches_namespace(p: Policy, namespace: str | None) -> bool:
    """The rule, said plainly: a LifecyclePolicy acts in its own namespace; a cluster policy
    everywhere, unless its namespaces are literal names (then there, and on cluster-scoped
    objects)."""
    if p.ref.kind is PolicyKind.NAMESPACED:
        return p.ref.namespace == namespace
    literal = bool(p.namespaces) and not any(map(has_glob_meta, p.namespaces))
    return namespace is None or not literal or namespace in p.namespaces


def reaches_name(p: Policy, name: str) -> bool:
    literal = bool(p.names) and not any(map(has_glob_meta, p.names))
    return not literal or name in p.names


def test_a_namespaced_policy_reaches_its_own_namespace_only() -> None:
    mine, cluster = policy("mine", namespace="a"), policy("all")
    reach = Reach.of((mine, cluster))
    assert reach.in_namespace("a") == (mine, cluster)
    assert reach.in_namespace("b") == (cluster,)
    assert reach.in_namespace(None) == (cluster,)


def test_a_cluster_policy_with_literal_namespaces_reaches_those_and_cluster_scope() -> None:
    literal = policy("literal", namespaces=["a", "b", "a"])
    globbed = policy("globbed", namespaces=["a", "c*"])
    reach = Reach.of((literal, globbed))
    assert reach.in_namespace("a") == (literal, globbed)
    assert reach.in_namespace("b") == (literal, globbed)
    assert reach.in_namespace("d") == (globbed,)  # a glob: judged by matching, not here
    assert reach.in_namespace(None) == (literal, globbed)


def test_literal_names_reach_those_names_only_and_the_order_is_kept() -> None:
    first = policy("first", names=["x*"])
    named = policy("named", names=["x", "y", "x"])
    last = policy("last")
    reach = Reach.of((first, named, last))
    assert reach.named("a", "x") == (first, named, last)
    assert reach.named("a", "y") == (first, named, last)
    assert reach.named("a", "z") == (first, last)
    assert Reach.of((named,)).named("a", "z") == ()


def test_only_a_cluster_policy_without_literal_namespaces_or_names_reaches_everything() -> None:
    assert Reach.of((policy("all"),)).everything
    assert Reach.of((policy("globbed", namespaces=["a*"], names=["x*"]),)).everything
    assert not Reach.of((policy("mine", namespace="a"),)).everything
    assert not Reach.of((policy("there", namespaces=["a"]),)).everything
    assert not Reach.of((policy("named", names=["x"]),)).everything
    assert not Reach.of(()).everything


def test_an_empty_index_answers_nothing() -> None:
    reach = Reach.of(())
    assert reach.in_namespace("a") == ()
    assert reach.named(None, "x") == ()


@st.composite
def policies(draw: st.DrawFn) -> list[Policy]:
    out = []
    for i in range(draw(st.integers(0, 8))):
        names = draw(st.lists(st.sampled_from([*NAMES, "x*", "?"]), max_size=2)) or None
        if draw(st.booleans()):
            out.append(policy(f"p{i}", namespace=draw(st.sampled_from(NS)), names=names))
        else:
            patterns = draw(st.lists(st.sampled_from([*NS, "a*", "[bc]"]), max_size=2))
            out.append(policy(f"c{i}", namespaces=patterns or None, names=names))
    return out


@settings(max_examples=300, deadline=None)
@given(
    found=policies(),
    namespace=st.sampled_from([*NS, "d", None]),
    name=st.sampled_from([*NAMES, "w"]),
)
def test_every_answer_is_the_rule_applied_to_every_policy_in_order(
    found: list[Policy], namespace: str | None, name: str
) -> None:
    reach = Reach.of(tuple(found))
    in_namespace = tuple(p for p in found if reaches_namespace(p, namespace))
    assert reach.in_namespace(namespace) == in_namespace
    assert reach.named(namespace, name) == tuple(p for p in in_namespace if reaches_name(p, name))
    assert reach.in_namespace(namespace) == in_namespace  # asked again: the memo agrees
    if reach.everything:
        assert reach.named(namespace, name)
