"""Where a policy change makes the controller read again, and where the reference index
watches: a LifecyclePolicy costs its own namespace, a ClusterLifecyclePolicy the cluster."""

from __future__ import annotations

from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st

from lifecycle_controller.core.policy.in_force import PolicySet, policy_from_manifest
from lifecycle_controller.core.policy.read_scope import (
    KeptChange,
    decided_change,
    kept_change,
    reference_scope,
)
from tests.core.test_policy_set import CONFIGMAPS, NAMESPACES, SECRETS, manifest

DELETE = {"delete-after": "1h"}


def spec(**extra: Any) -> dict[str, Any]:
    return {"resources": ["configmaps"], "lifecycle": DELETE, **extra}


def policies(*docs: dict[str, Any]) -> PolicySet:
    return PolicySet.of(policy_from_manifest(doc) for doc in docs)


def local(name: str, namespace: str, generation: int = 1, **extra: Any) -> dict[str, Any]:
    return manifest(name, spec(**extra), namespace=namespace, generation=generation)


def cluster(name: str, generation: int = 1, **extra: Any) -> dict[str, Any]:
    return manifest(name, spec(**extra), generation=generation)


NOTHING = KeptChange()
EVERYWHERE = KeptChange(everywhere=True)


def only(*namespaces: str) -> KeptChange:
    return KeptChange(namespaces=frozenset(namespaces))


@pytest.mark.parametrize(
    ("old", "new", "change"),
    [
        # A LifecyclePolicy added, removed or narrowed: its namespace only.
        ((), (local("p", "a"),), only("a")),
        ((local("p", "a"),), (), only("a")),
        ((local("p", "a"),), (local("p", "a", 2, names=["x"]),), only("a")),
        # Several namespaces at once: each of them, no other.
        ((local("p", "a"),), (local("q", "b"), local("r", "c")), only("a", "b", "c")),
        # Beside a cluster policy that stays as it was: still the namespace only.
        ((cluster("c"),), (cluster("c"), local("p", "a")), only("a")),
        # A new action or priority keeps the same objects: nothing is read again.
        ((local("p", "a"),), (local("p", "a", 2, lifecycle={"delete-after": "2h"}),), NOTHING),
        ((local("p", "a"),), (local("p", "a", 2, priority=5),), NOTHING),
        # A condition reading the same paths (metadata only): nothing.
        (
            (local("p", "a"),),
            (local("p", "a", 2, condition="object.metadata.name != 'x'"),),
            NOTHING,
        ),
        # A cluster policy added or changed: the cluster.
        ((), (cluster("c"),), EVERYWHERE),
        ((cluster("c"),), (cluster("c", 2, names=["x"]),), EVERYWHERE),
        ((cluster("c"), local("p", "a")), (local("p", "a"),), EVERYWHERE),
        # A condition reading beyond metadata changes the informers' projection: the cluster.
        ((), (local("p", "a", condition="object.data.x == 'y'"),), EVERYWHERE),
        # A policy of another type changes nothing of this one.
        (
            (),
            (manifest("s", {"resources": ["secrets"], "lifecycle": DELETE}, namespace="a"),),
            NOTHING,
        ),
    ],
)
def test_kept_change(
    old: tuple[dict[str, Any], ...], new: tuple[dict[str, Any], ...], change: KeptChange
) -> None:
    assert kept_change(policies(*old), policies(*new), CONFIGMAPS) == change
    assert bool(change) == (change != NOTHING)


def test_a_cluster_scoped_type_is_read_again_whole() -> None:
    """No namespace bounds a Namespace: a LifecyclePolicy selecting it lists it again whole."""
    namespaced = manifest("p", {"resources": ["namespaces"], "lifecycle": DELETE}, namespace="a")
    assert kept_change(PolicySet(), policies(namespaced), NAMESPACES) == EVERYWHERE
    assert kept_change(PolicySet(), policies(namespaced), SECRETS) == NOTHING


@given(
    st.lists(st.tuples(st.sampled_from("abc"), st.sampled_from("pq"), st.integers(1, 3))),
    st.lists(st.tuples(st.sampled_from("abc"), st.sampled_from("pq"), st.integers(1, 3))),
)
def test_only_namespaces_whose_policies_changed_are_read_again(
    old: list[tuple[str, str, int]], new: list[tuple[str, str, int]]
) -> None:
    """With LifecyclePolicies alone, a namespace is read again exactly when the filters of
    its policies differ (a generation with other names), never everywhere."""

    def made(rows: list[tuple[str, str, int]]) -> PolicySet:
        unique = {(ns, name): gen for ns, name, gen in rows}
        return policies(
            *(local(name, ns, gen, names=[f"n{gen}"]) for (ns, name), gen in unique.items())
        )

    before, after = made(old), made(new)
    change = kept_change(before, after, CONFIGMAPS)
    assert not change.everywhere

    def of(found: PolicySet, ns: str) -> set[tuple[str, int]]:
        return {(p.ref.name, p.generation) for p in found.valid if p.ref.namespace == ns}

    assert change.namespaces == {ns for ns in "abc" if of(before, ns) != of(after, ns)}


def invalid(name: str, namespace: str | None, generation: int = 1, **extra: Any) -> dict[str, Any]:
    """A policy with an unreadable ``lifecycle``: it acts on nothing and holds its scope."""
    return manifest(
        name,
        {**spec(**extra), "lifecycle": {"delete-after": "soon"}},
        namespace=namespace,
        generation=generation,
    )


@pytest.mark.parametrize(
    ("old", "new", "change"),
    [
        # An invalid LifecyclePolicy edited, created, fixed or deleted: its namespace only.
        ((invalid("p", "a"),), (invalid("p", "a", 2),), only("a")),
        ((), (invalid("p", "a"),), only("a")),
        ((invalid("p", "a"),), (local("p", "a", 2),), only("a")),
        ((invalid("p", "a"),), (), only("a")),
        # Beside other policies that stay as they were: still its namespace only.
        (
            (cluster("c"), local("q", "b"), invalid("p", "a")),
            (cluster("c"), local("q", "b"), invalid("p", "a", 2)),
            only("a"),
        ),
        # An invalid policy selecting another type: nothing for this one.
        (
            (invalid("p", "a", resources=["secrets"]),),
            (invalid("p", "a", 2, resources=["secrets"]),),
            NOTHING,
        ),
        # Unreadable resources select every type: its namespace is re-evaluated.
        ((), (invalid("p", "a", resources="configmaps"),), only("a")),
        # A valid LifecyclePolicy's edit: its namespace, even a new action (what is decided).
        ((local("p", "a"),), (local("p", "a", 2, priority=5),), only("a")),
        # A cluster policy, valid or invalid, concerning the type: every object.
        ((invalid("c", None),), (invalid("c", None, 2),), EVERYWHERE),
        ((cluster("c"),), (cluster("c", 2, priority=5),), EVERYWHERE),
        # Nothing changed: nothing.
        ((invalid("p", "a"), cluster("c")), (invalid("p", "a"), cluster("c")), NOTHING),
    ],
)
def test_decided_change(
    old: tuple[dict[str, Any], ...], new: tuple[dict[str, Any], ...], change: KeptChange
) -> None:
    """What a policy change re-queues: an invalid LifecyclePolicy's edit costs its own
    namespace, not every policy-kept object of every type."""
    assert decided_change(policies(*old), policies(*new), CONFIGMAPS) == change


def test_decided_change_of_a_cluster_scoped_type_is_whole() -> None:
    """A change that would touch one namespace of a cluster-scoped type re-evaluates it whole
    (no namespace bounds it; a LifecyclePolicy holds none of its objects anyway)."""
    before = policies(invalid("p", "a", resources=["namespaces"]))
    after = policies(invalid("p", "a", 2, resources=["namespaces"]))
    assert decided_change(before, after, NAMESPACES) == EVERYWHERE


@given(
    st.lists(st.tuples(st.sampled_from("abc"), st.sampled_from("pq"), st.integers(1, 3))),
    st.lists(st.tuples(st.sampled_from("abc"), st.sampled_from("pq"), st.integers(1, 3))),
)
def test_only_namespaces_whose_policies_changed_are_re_evaluated(
    old: list[tuple[str, str, int]], new: list[tuple[str, str, int]]
) -> None:
    """With LifecyclePolicies alone (an odd generation valid, an even one invalid), a
    namespace is re-evaluated exactly when its policies or their generations differ."""

    def made(rows: list[tuple[str, str, int]]) -> PolicySet:
        unique = {(ns, name): gen for ns, name, gen in rows}
        return policies(
            *((local if gen % 2 else invalid)(name, ns, gen) for (ns, name), gen in unique.items())
        )

    before, after = made(old), made(new)
    change = decided_change(before, after, CONFIGMAPS)
    assert not change.everywhere

    def of(found: PolicySet, ns: str) -> set[tuple[str, int]]:
        valid = {(p.ref.name, p.generation) for p in found.valid if p.ref.namespace == ns}
        return valid | {(p.ref.name, p.generation) for p in found.invalid if p.ref.namespace == ns}

    assert change.namespaces == {ns for ns in "abc" if of(before, ns) != of(after, ns)}


REFERENCES = "size(referencedBy) == 0"


@pytest.mark.parametrize(
    ("docs", "scope"),
    [
        ((), frozenset()),
        ((local("p", "a"),), frozenset()),
        ((local("p", "a", condition=REFERENCES),), frozenset({"a"})),
        (
            (local("p", "a", condition=REFERENCES), local("q", "b", condition=REFERENCES)),
            frozenset({"a", "b"}),
        ),
        ((local("p", "a", condition=REFERENCES), cluster("c")), frozenset({"a"})),
        ((local("p", "a", condition=REFERENCES), cluster("c", condition=REFERENCES)), None),
        ((cluster("c", condition=REFERENCES),), None),
    ],
)
def test_reference_scope(docs: tuple[dict[str, Any], ...], scope: frozenset[str] | None) -> None:
    assert reference_scope(policies(*docs)) == scope
