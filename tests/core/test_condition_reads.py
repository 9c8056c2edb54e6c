"""What a condition may read: only the fields the controller keeps, never a Secret's data."""

from __future__ import annotations

from typing import Any

import pytest

from lifecycle_controller.core.decision.outcomes import Action
from lifecycle_controller.core.objects.resources import ResourceType
from lifecycle_controller.core.policy.condition import (
    ConditionError,
    Subject,
    compile_condition,
)
from lifecycle_controller.core.policy.condition_reads import (
    KEPT_METADATA,
    projected,
    secret_refusal,
    unkept_refusal,
)
from lifecycle_controller.core.policy.in_force import PolicySet, object_view
from lifecycle_controller.core.policy.match import MatchReason, match
from lifecycle_controller.core.policy.model import (
    Policy,
    PolicyInvalid,
    PolicyKind,
    PolicyRef,
    parse_policy,
    selects_key,
)

from .support import ts

_KEPT = (
    "a condition may read object.metadata.name, namespace, labels, annotations, "
    "creationTimestamp and ownerReferences"
)
SECRETS = ResourceType("", "v1", "secrets", "Secret", namespaced=True)
CONFIGMAPS = ResourceType("", "v1", "configmaps", "ConfigMap", namespaced=True)


@pytest.mark.parametrize(
    ("source", "problem"),
    [
        ("!has(object.metadata.finalizers)",
         f"reads object.metadata.finalizers, which the controller does not keep; {_KEPT}"),
        ("has(object.metadata.deletionTimestamp)",
         f"reads object.metadata.deletionTimestamp, which the controller does not keep; {_KEPT}"),
        ("object.metadata.generation > 1",
         f"reads object.metadata.generation, which the controller does not keep; {_KEPT}"),
        ('object.metadata.uid == "x"',
         f"reads object.metadata.uid, which the controller does not keep; {_KEPT}"),
        ('object.metadata.finalizers.exists(f, f == "x")',
         f"reads object.metadata.finalizers, which the controller does not keep; {_KEPT}"),
        ("object.metadata.managedFields[0].manager == 'kubectl'",
         f"reads object.metadata.managedFields, which the controller does not keep; {_KEPT}"),
        ("has(object.metadata.finalizers) || has(object.metadata.deletionTimestamp)",
         "reads object.metadata.deletionTimestamp and object.metadata.finalizers, which the "
         f"controller does not keep; {_KEPT}"),
        ('object.metadata["name"] == "x"',
         "reads object.metadata as a whole, which the controller does not keep; name its "
         f"fields, such as object.metadata.labels: {_KEPT}"),
        ("size(object.metadata) > 1", "reads object.metadata as a whole"),
        ("object.metadata == {}", "reads object.metadata as a whole"),
        ("size(object) > 1",
         "reads the whole object (object alone, object[key] or size(object)), which the "
         "controller does not keep; name the fields it needs, such as object.spec.replicas"),
        ('object["spec"] == {}', "reads the whole object"),
        ('object.exists(k, k == "spec")', "reads the whole object"),
        ("object == {} || object.metadata.uid == ''",
         "reads the whole object (object alone, object[key] or size(object)), which the "
         "controller does not keep; name the fields it needs, such as object.spec.replicas; "
         f"reads object.metadata.uid, which the controller does not keep; {_KEPT}"),
    ],
)  # fmt: skip
def test_a_condition_reading_what_is_not_kept_is_refused(source: str, problem: str) -> None:
    with pytest.raises(ConditionError) as raised:
        compile_condition(source)
    assert str(raised.value).startswith(problem)


@pytest.mark.parametrize(
    ("source", "reads"),
    [
        ('object.kind == "Deployment"', set()),
        ('object.apiVersion.startsWith("apps/")', set()),
        ("has(object.metadata.labels.team)", set()),
        ('object.metadata.ownerReferences.exists(r, r.kind == "Job")', set()),
        ('object.metadata.creationTimestamp < timestamp("2020-01-01T00:00:00Z")', set()),
        ('object.metadata.annotations["a.b"] == "c"', set()),
        ('object.metadata.name.startsWith("pr-") && object.metadata.namespace != ""', set()),
        ('object.spec.replicas == 0 && object.kind == "Deployment"', {("spec", "replicas")}),
    ],
)
def test_kept_metadata_and_the_type_fields_are_read_without_a_projection(
    source: str, reads: set[tuple[str, ...]]
) -> None:
    assert compile_condition(source).reads == reads


def test_projected_leaves_out_metadata_and_the_type_fields() -> None:
    reads = {("metadata", "labels"), ("kind",), ("apiVersion",), ("spec", "x"), ()}
    assert projected(reads) == {("spec", "x"), ()}
    assert unkept_refusal({("metadata", "labels"), ("kind",), ("spec",)}) is None


_EVALUATED: dict[str, Any] = {
    "name": "web",
    "namespace": "a",
    "labels": {},
    "annotations": {},
    "creation_ns": ts("2026-01-01T00:00:00Z"),
    "owner_references": (),
}


@pytest.mark.parametrize(
    "fields",
    [
        {},  # as listed: the items of a list have no kind or apiVersion
        {"kind": "Deployment", "apiVersion": "apps/v1"},  # as watched
        {"kind": "Other", "apiVersion": "x/v9"},  # never read from the object
    ],
)
def test_kind_and_api_version_come_from_the_type_however_the_object_arrived(
    fields: dict[str, Any],
) -> None:
    condition = compile_condition('object.kind == "Deployment" && object.apiVersion == "apps/v1"')
    result = condition.evaluate(
        Subject(kind="Deployment", api_version="apps/v1", fields=fields, **_EVALUATED)
    )
    assert result.matched, result


@pytest.mark.parametrize("field", KEPT_METADATA)
def test_every_kept_metadata_field_is_given(field: str) -> None:
    condition = compile_condition(f"has(object.metadata.{field})")
    assert condition.evaluate(Subject(kind="ConfigMap", api_version="v1", **_EVALUATED)).matched


def _spec(resources: list[str], condition: str) -> dict[str, Any]:
    return {"resources": resources, "condition": condition, "lifecycle": {"delete-after": "1h"}}


_SECRET_DATA = (
    "a condition never reads Secret data; leave secrets out of spec.resources, or match "
    "Secrets on their metadata (names, labels, annotations) alone"
)
_SECRET_FIELDS = (
    "reading a Secret's fields beyond metadata would list every Secret whole, data included, "
    "which the controller never does"
)


@pytest.mark.parametrize(
    ("resources", "source", "problem"),
    [
        (["secrets"], "has(object.data.k)",
         f'spec.condition: reads object.data.k, and spec.resources[0] "secrets" selects '
         f"secrets: {_SECRET_DATA}"),
        (["*"], 'object.stringData.x == "y"',
         f'spec.condition: reads object.stringData.x, and spec.resources[0] "*" selects '
         f"secrets: {_SECRET_DATA}"),
        (["configmaps", "s*"], "size(object.data) > 0",
         f'spec.condition: reads object.data, and spec.resources[1] "s*" selects secrets: '
         f"{_SECRET_DATA}"),
        (["secret?", "[s]ecrets"], 'object.data["a.b"] == "" || object.type == "Opaque"',
         'spec.condition: reads object.data and object.type, and spec.resources[0] "secret?" '
         f'and spec.resources[1] "[s]ecrets" select secrets: {_SECRET_DATA}'),
        (["secrets"], 'object.type == "kubernetes.io/tls"',
         f'spec.condition: reads object.type, and spec.resources[0] "secrets" selects '
         f"secrets: {_SECRET_FIELDS}"),
        (["*"], "object.spec.replicas == 0 || object.immutable",
         f'spec.condition: reads object.immutable, and spec.resources[0] "*" selects '
         f"secrets: {_SECRET_FIELDS}"),
        (["secrets"], "size(object) > 0", "spec.condition: reads the whole object"),
    ],
)  # fmt: skip
def test_a_condition_over_secrets_reads_their_metadata_only(
    resources: list[str], source: str, problem: str
) -> None:
    policy = parse_policy(PolicyKind.CLUSTER, None, "p", 1, _spec(resources, source))
    assert isinstance(policy, PolicyInvalid), policy
    (found,) = policy.problems
    assert found.startswith(problem), found
    assert policy.scope.resources == tuple(resources)  # it holds what it would select


@pytest.mark.parametrize(
    ("resources", "source"),
    [
        (["secrets"], 'object.metadata.labels.a == "b" && object.kind == "Secret"'),
        (["secrets"], 'object.apiVersion == "v1" && object.metadata.name.startsWith("tls-")'),
        (["configmaps"], "has(object.data.k)"),
        (["*.apps"], "object.spec.replicas == 0"),
        (["secrets.example.com"], "has(object.data.k)"),  # a custom type of that name
        (["*"], "object.spec.replicas == 0"),  # Secrets have no spec: absent on every one
        (["secrets"], "has(object.status.phase)"),
        (["*"], "has(object.metadata.annotations.x)"),
    ],
)
def test_a_condition_not_reading_secret_fields_is_valid(resources: list[str], source: str) -> None:
    policy = parse_policy(PolicyKind.CLUSTER, None, "p", 1, _spec(resources, source))
    assert isinstance(policy, Policy), policy


def test_secret_refusal_needs_a_selecting_entry_and_a_field_beyond_metadata() -> None:
    assert secret_refusal({("data",)}, []) is None
    assert secret_refusal({("metadata", "labels"), ("kind",)}, ["x"]) is None


@pytest.mark.parametrize(
    ("pattern", "key", "namespaced", "selected"),
    [
        ("secrets", "secrets", True, True),
        ("*", "secrets", True, True),
        ("*", "namespaces", False, False),  # a glob never selects a cluster-scoped type
        ("namespaces", "namespaces", False, True),
        ("*.apps", "secrets", True, False),
        ("secrets.*", "secrets", True, False),
    ],
)
def test_selects_key(pattern: str, key: str, namespaced: bool, selected: bool) -> None:
    assert selects_key(pattern, key, namespaced=namespaced) is selected


def test_no_projection_of_secrets_even_for_a_condition_that_slipped_through() -> None:
    """A Policy built by hand (never by parse_policy) reading a Secret's type: the informers
    keep no field of Secrets, and the object is held unread, never judged on a missing
    field."""
    policy = Policy(
        ref=PolicyRef(PolicyKind.CLUSTER, None, "p"),
        generation=1,
        resources=("*",),
        lifecycle={"delete-after": "1h"},
        action=Action.DELETE,
        condition=compile_condition('object.type == "Opaque"'),
    )
    policies = PolicySet(valid=(policy,))
    assert policies.reads(SECRETS) == frozenset()
    assert policies.reads(CONFIGMAPS) == {("type",)}
    view = object_view(SECRETS, {"name": "s", "namespace": "a"}, read=frozenset())
    found = match(policy, view)
    assert found.reason is MatchReason.CONDITION_ERROR
    assert found.problem == "object.type not read yet (listing again)"
