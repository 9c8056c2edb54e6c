"""The paths a condition reads beyond metadata, and cutting an object down to them."""

from __future__ import annotations

from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st

from lifecycle_controller.core.objects.resources import ResourceType
from lifecycle_controller.core.policy.condition import ConditionError, Subject, compile_condition
from lifecycle_controller.core.policy.condition_cost import analyse
from lifecycle_controller.core.policy.field_paths import (
    READ_KEY,
    FieldInterner,
    fields_of,
    pick,
    read_values,
    split_read,
    unread,
)
from lifecycle_controller.core.policy.in_force import (
    POLICY_API_VERSION,
    object_view,
    policy_from_manifest,
)
from lifecycle_controller.core.policy.match import MatchReason, match
from lifecycle_controller.core.policy.model import Policy

DEPLOYMENTS = ResourceType("apps", "v1", "deployments", "Deployment", namespaced=True)

DEPLOYMENT: dict[str, Any] = {
    "apiVersion": "apps/v1",
    "kind": "Deployment",
    "metadata": {"name": "web", "labels": {"app": "web"}},
    "spec": {"replicas": 0, "template": {"spec": {"containers": [{"image": "x"}]}}},
    "status": {"phase": "Pending", "readyReplicas": 0},
}


@pytest.mark.parametrize(
    ("condition", "reads"),
    [
        ('object.metadata.labels["a"] == "b"', set()),
        ("object.spec.replicas == 0", {("spec", "replicas")}),
        ('has(object.status.phase) && object.status.phase == "Pending"', {("status", "phase")}),
        ('object.spec.containers.all(c, c.image != "")', {("spec", "containers", "[*]", "image")}),
        ("timestamp(object.status.containerStatuses[0].state.terminated.finishedAt)",
         {("status", "containerStatuses", "[0]", "state", "terminated", "finishedAt")}),
        ("object.spec.l[1].a == object.spec.l[3u].b",
         {("spec", "l", "[1]", "a"), ("spec", "l", "[3]", "b")}),
        ("object.spec.l[0] == {}", {("spec", "l", "[0]")}),
        ("size(object.spec.l) > 0 && object.spec.l[0].a",
         {("spec", "l"), ("spec", "l", "[0]", "a")}),
        ("object.spec.l[-1].a", {("spec", "l")}),  # negative: the list whole
        ("object.spec.l[1 - 1].a", {("spec", "l")}),  # computed
        ("object.spec.l[0x0].a", {("spec", "l")}),
        ('object.spec.l[0]["a"]', {("spec", "l", "[0]")}),  # a key ends the chain at the element
        ("object.spec.l.exists(c, c.x[2].y)", {("spec", "l", "[*]", "x", "[2]", "y")}),
        ("object.spec.l.exists(c, has(c.a) || c.b.size() > 0)",
         {("spec", "l", "[*]", "a"), ("spec", "l", "[*]", "b")}),
        ("object.spec.l.exists(c, c == 1)", {("spec", "l", "[*]")}),
        ("object.spec.l.map(c, c.a > 0, c.b)",
         {("spec", "l", "[*]", "a"), ("spec", "l", "[*]", "b")}),
        ("object.spec.l.filter(c, c.a).map(d, d.b)", {("spec", "l")}),  # filter yields elements
        ("object.spec.l.all(i, v, v.a)", {("spec", "l")}),  # two variables: not followed
        ("object.spec.l.map(c, c.a)[0] == 1", {("spec", "l", "[*]", "a")}),
        ('object.data["a.b"] == "x"', {("data",)}),
        ("object.spec[string(1)] == 1", {("spec",)}),
        ("// object.spec.x\nobject.metadata.name == 'object.status'", set()),
        ("object.spec.replicas == 0 || object.status.readyReplicas == 0",
         {("spec", "replicas"), ("status", "readyReplicas")}),
        ('object.kind == "Deployment" && object.apiVersion.startsWith("apps/")', set()),
    ],
)  # fmt: skip
def test_the_paths_a_condition_reads(condition: str, reads: set[tuple[str, ...]]) -> None:
    assert compile_condition(condition).reads == reads


@pytest.mark.parametrize(
    ("condition", "reads"),
    [
        ('object["spec"] == {}', {()}),
        ("size(object) > 1", {()}),
        ("object.metadata.exists(k, k == 'uid')", {("metadata",)}),
        ("object.metadata[0] == {}", {("metadata",)}),
        ("object[0] == {}", {()}),
        ("has(object.metadata.finalizers)", {("metadata", "finalizers")}),
    ],
)
def test_the_analysis_finds_whole_reads_which_compiling_refuses(
    condition: str, reads: set[tuple[str, ...]]
) -> None:
    """The analysis says the whole object (``()``) or all of metadata is read; a condition
    so reading is refused (tests/core/test_condition_reads.py)."""
    assert analyse(condition).reads == reads
    with pytest.raises(ConditionError):
        compile_condition(condition)


@pytest.mark.parametrize(
    ("paths", "picked"),
    [
        ({("spec", "replicas")}, {"spec": {"replicas": 0}}),
        ({("spec", "missing")}, {"spec": {}}),
        ({("data", "x")}, {}),
        ({("spec", "replicas", "deeper")}, {"spec": {"replicas": 0}}),
        ({("status",), ("status", "phase")}, {"status": DEPLOYMENT["status"]}),
        ({()}, fields_of(DEPLOYMENT)),
    ],
)
def test_pick_keeps_the_paths_alone(paths: set[tuple[str, ...]], picked: dict[str, Any]) -> None:
    assert pick(fields_of(DEPLOYMENT), paths) == picked


_JSON = st.recursive(
    st.none() | st.booleans() | st.integers() | st.text(max_size=3),
    lambda inner: st.lists(inner, max_size=3) | st.dictionaries(st.text(max_size=2), inner),
    max_leaves=12,
)
_PATHS = st.sets(st.lists(st.text(max_size=2), max_size=3).map(tuple), max_size=4)


@given(obj=st.dictionaries(st.text(max_size=2), _JSON), paths=_PATHS)
def test_what_a_path_reads_is_the_same_after_pick(
    obj: dict[str, Any], paths: set[tuple[str, ...]]
) -> None:
    """Reading any chosen path of the cut-down copy gives what reading the whole one gives."""
    assert read_values(paths, pick(obj, paths)) == read_values(paths, obj)


def test_read_values_says_what_was_read() -> None:
    fields = fields_of(DEPLOYMENT)
    assert read_values({("spec", "replicas"), ("spec", "paused")}, fields) == [
        "object.spec.paused is absent",
        "object.spec.replicas = 0",
    ]
    (shown,) = read_values({("spec",)}, {"spec": {"x": "y" * 100}})
    assert shown.endswith("…")


def test_a_condition_sees_the_fields_and_a_missing_one_does_not_match() -> None:
    condition = compile_condition("has(object.spec.replicas) && object.spec.replicas == 0")
    common: dict[str, Any] = {
        "kind": "Deployment",
        "api_version": "apps/v1",
        "name": "web",
        "namespace": "a",
        "labels": {},
        "annotations": {},
        "creation_ns": None,
        "owner_references": (),
    }
    assert condition.evaluate(Subject(**common, fields={"spec": {"replicas": 0}})).matched
    assert not condition.evaluate(Subject(**common, fields={"spec": {"replicas": 1}})).matched
    missing = condition.evaluate(Subject(**common, fields={"spec": {}}))
    assert not missing.matched
    assert missing.problem is None
    unguarded = compile_condition("object.spec.replicas == 0").evaluate(
        Subject(**common, fields={})
    )
    assert unguarded.problem is not None  # an error: the object is held


def test_equal_picked_fields_are_shared() -> None:
    interned = FieldInterner(limit=2)
    first = interned({"spec": {"replicas": 1}})
    assert interned({"spec": {"replicas": 1}}) is first
    assert interned({"spec": {"replicas": 0}}) is not first
    interned({"spec": {"replicas": 2}})  # the table is full: it starts over
    again = interned({"spec": {"replicas": 1}})
    assert again == first
    big = {"data": {"k": "v" * 300}}
    assert interned(big) is big


@pytest.mark.parametrize(
    ("reads", "read", "missing"),
    [
        ({("spec", "replicas")}, None, []),  # the whole object was read
        ({("spec", "replicas")}, frozenset({()}), []),
        ({("spec", "replicas")}, frozenset({("spec",)}), []),
        ({("spec", "replicas")}, frozenset({("spec", "replicas")}), []),
        ({("spec", "replicas")}, frozenset(), [("spec", "replicas")]),  # metadata only
        ({("spec", "replicas")}, frozenset({("status",)}), [("spec", "replicas")]),
        ({("spec",)}, frozenset({("spec", "replicas")}), [("spec",)]),  # a part is not all
        ({("spec", "a"), ("status", "b")}, frozenset({("spec",)}), [("status", "b")]),
        (set(), frozenset(), []),
    ],
)
def test_what_a_condition_reads_that_was_never_fetched(
    reads: set[tuple[str, ...]],
    read: frozenset[tuple[str, ...]] | None,
    missing: list[tuple[str, ...]],
) -> None:
    assert unread(reads, read) == missing


def test_a_projected_object_says_which_paths_it_was_read_with() -> None:
    obj = {"metadata": {"name": "a"}, "spec": {"replicas": 0}, READ_KEY: frozenset({("spec",)})}
    assert split_read(obj) == ({"spec": {"replicas": 0}}, frozenset({("spec",)}))
    assert split_read({"metadata": {}, "spec": {}}) == ({"spec": {}}, None)


def test_a_condition_on_fields_never_fetched_holds_instead_of_judging_them_absent() -> None:
    """A type listed before a policy's condition read ``spec`` (its new projection is being
    listed): ``!has(object.spec.paused)`` must not match an object whose spec was never read."""
    doc = {
        "apiVersion": POLICY_API_VERSION,
        "kind": "ClusterLifecyclePolicy",
        "metadata": {"name": "unpaused", "generation": 1},
        "spec": {
            "resources": ["deployments.apps"],
            "condition": "!has(object.spec.paused)",
            "lifecycle": {"delete-after": "1h"},
        },
    }
    policy = policy_from_manifest(doc)
    assert isinstance(policy, Policy)
    metadata = {"name": "web", "namespace": "a", "creationTimestamp": "2026-01-01T00:00:00Z"}
    unread_view = object_view(DEPLOYMENTS, metadata, {"spec": {}}, read=frozenset())
    held = match(policy, unread_view)
    assert not held.matched
    assert held.reason is MatchReason.CONDITION_ERROR
    assert held.problem == "object.spec.paused not read yet (listing again)"
    read_view = object_view(DEPLOYMENTS, metadata, {"spec": {}}, read=frozenset({("spec",)}))
    assert match(policy, read_view).matched
