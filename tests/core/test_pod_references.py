"""``referencedBy``: what a Pod spec or a workload's template uses, the index, matching."""

from __future__ import annotations

from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st

from lifecycle_controller.core.objects.pod_references import (
    ReferenceIndex,
    index_manifests,
    object_references,
    pod_spec_references,
)
from lifecycle_controller.core.objects.resources import ResourceType
from lifecycle_controller.core.policy.in_force import PolicySet
from lifecycle_controller.core.policy.match import (
    HOLDING,
    REFERENCES_NOT_SYNCED,
    MatchReason,
    ObjectView,
    match,
)
from lifecycle_controller.core.policy.model import Policy, PolicyKind, parse_policy
from lifecycle_controller.core.policy.precedence import PolicyHold, PolicyHoldReason

CONFIGMAPS = ResourceType("", "v1", "configmaps", "ConfigMap", True)
PVCS = ResourceType("", "v1", "persistentvolumeclaims", "PersistentVolumeClaim", True)
SERVICES = ResourceType("", "v1", "services", "Service", True)
CUSTOM_CONFIGMAPS = ResourceType("example.com", "v1", "configmaps", "ConfigMap", True)

FULL_SPEC: dict[str, Any] = {
    "serviceAccountName": "runner",
    "imagePullSecrets": [{"name": "registry"}],
    "volumes": [
        {"name": "a", "configMap": {"name": "vol-cm"}},
        {"name": "b", "secret": {"secretName": "vol-secret"}},
        {"name": "c", "persistentVolumeClaim": {"claimName": "data"}},
        {
            "name": "d",
            "projected": {
                "sources": [
                    {"configMap": {"name": "proj-cm"}},
                    {"secret": {"name": "proj-secret"}},
                    {"serviceAccountToken": {"path": "t"}},
                ]
            },
        },
    ],
    "containers": [
        {
            "name": "app",
            "env": [
                {"name": "X", "valueFrom": {"configMapKeyRef": {"name": "env-cm", "key": "k"}}},
                {"name": "Y", "valueFrom": {"secretKeyRef": {"name": "env-secret", "key": "k"}}},
                {"name": "Z", "value": "plain"},
            ],
            "envFrom": [{"configMapRef": {"name": "from-cm"}}, {"secretRef": {"name": "from-s"}}],
        }
    ],
    "initContainers": [{"name": "init", "envFrom": [{"configMapRef": {"name": "init-cm"}}]}],
    "ephemeralContainers": [{"name": "dbg", "envFrom": [{"secretRef": {"name": "eph-s"}}]}],
}


def test_every_kind_of_use_in_a_pod_spec_is_found() -> None:
    assert pod_spec_references(FULL_SPEC) == {
        ("ServiceAccount", "runner"),
        ("Secret", "registry"),
        ("ConfigMap", "vol-cm"),
        ("Secret", "vol-secret"),
        ("PersistentVolumeClaim", "data"),
        ("ConfigMap", "proj-cm"),
        ("Secret", "proj-secret"),
        ("ConfigMap", "env-cm"),
        ("Secret", "env-secret"),
        ("ConfigMap", "from-cm"),
        ("Secret", "from-s"),
        ("ConfigMap", "init-cm"),
        ("Secret", "eph-s"),
    }


def _template(spec: dict[str, Any]) -> dict[str, Any]:
    return {"spec": {"template": {"spec": spec}}}


@pytest.mark.parametrize(
    ("kind", "obj"),
    [
        ("Pod", {"spec": FULL_SPEC}),
        ("Deployment", _template(FULL_SPEC)),
        ("StatefulSet", _template(FULL_SPEC)),
        ("DaemonSet", _template(FULL_SPEC)),
        ("ReplicaSet", _template(FULL_SPEC)),
        ("Job", _template(FULL_SPEC)),
        ("CronJob", {"spec": {"jobTemplate": _template(FULL_SPEC)}}),
    ],
)
def test_pods_and_every_workload_template_refer(kind: str, obj: dict[str, Any]) -> None:
    assert object_references(kind, obj) == pod_spec_references(FULL_SPEC)


@pytest.mark.parametrize(
    ("kind", "obj"),
    [
        ("Service", {"spec": FULL_SPEC}),
        ("Deployment", {"spec": {"template": "nonsense"}}),
        ("Pod", {"spec": {"volumes": "x", "containers": [1, None, {"env": 3}]}}),
        ("Pod", {}),
        ("Pod", {"spec": {"volumes": [{"configMap": {"name": ""}}], "serviceAccount": 5}}),
    ],
)
def test_other_kinds_and_malformed_input_refer_to_nothing(kind: str, obj: dict[str, Any]) -> None:
    assert object_references(kind, obj) == frozenset()


def test_the_deprecated_service_account_alias_counts_when_the_name_is_absent() -> None:
    assert pod_spec_references({"serviceAccount": "old"}) == {("ServiceAccount", "old")}


_targets = st.frozensets(
    st.tuples(st.sampled_from(["ConfigMap", "Secret"]), st.sampled_from(["a", "b", "c"])),
    max_size=4,
)


@given(st.lists(st.tuples(st.sampled_from(["Pod/p", "Pod/q", "Deployment/d"]), _targets)))
def test_the_index_answers_as_the_latest_uses_say(updates: list[tuple[str, Any]]) -> None:
    index = ReferenceIndex()
    latest: dict[str, frozenset[tuple[str, str]]] = {}
    for referrer, targets in updates:
        before = {t: index.referenced_by("ns", *t) for t in [*targets, *latest.get(referrer, ())]}
        changed = index.put("ns", referrer, targets)
        assert changed == set(latest.get(referrer, frozenset()) ^ targets)
        for target in before:
            if target not in changed:
                assert index.referenced_by("ns", *target) == before[target]
        latest[referrer] = targets
    for kind in ("ConfigMap", "Secret"):
        for name in ("a", "b", "c"):
            expected = sorted(r for r, t in latest.items() if (kind, name) in t)
            assert list(index.referenced_by("ns", kind, name)) == expected
            assert index.referenced_by("other", kind, name) == ()


def test_manifests_are_indexed_in_their_namespace_default_when_absent() -> None:
    index = index_manifests(
        [
            {"kind": "Deployment", "metadata": {"name": "app"}, **_template(FULL_SPEC)},
            {"kind": "Pod", "metadata": {"name": "p", "namespace": "x"}, "spec": FULL_SPEC},
            {"kind": "ConfigMap", "metadata": {"name": "vol-cm"}},
            {"kind": "Pod", "metadata": "broken"},
        ]
    )
    assert index.referenced_by("default", "ConfigMap", "vol-cm") == ("Deployment/app",)
    assert index.referenced_by("x", "ConfigMap", "vol-cm") == ("Pod/p",)
    assert index.referenced_by("x", "Service", "vol-cm") == ()


def _unused_policy() -> Policy:
    spec = {
        "resources": ["configmaps", "services", "persistentvolumeclaims", "configmaps.example.com"],
        "condition": "size(referencedBy) == 0",
        "lifecycle": {"delete-after": "1h"},
    }
    parsed = parse_policy(PolicyKind.CLUSTER, None, "unused", 1, spec)
    assert isinstance(parsed, Policy), parsed
    return parsed


def test_a_condition_reading_references_holds_while_they_are_unknown() -> None:
    policy = _unused_policy()
    assert policy.condition is not None
    assert policy.condition.reads_references
    assert PolicySet.of([policy]).reads_references()
    view = ObjectView(resource=CONFIGMAPS, namespace="a", name="cm")
    unknown = match(policy, view)
    assert unknown.reason is MatchReason.REFERENCES_UNKNOWN  # a hold of its own, not an error
    assert unknown.reason in HOLDING
    assert unknown.problem == REFERENCES_NOT_SYNCED
    (hold,) = PolicySet.of([policy]).matching(view)
    assert isinstance(hold, PolicyHold)
    assert hold.reason is PolicyHoldReason.REFERENCES_UNKNOWN
    assert hold.describe() == (
        "held: the condition of ClusterLifecyclePolicy/unused reads referencedBy: "
        "references not synced yet"
    )
    forbidden = ObjectView(
        resource=PVCS, namespace="a", name="d", references_missing="may not list pods"
    )
    assert match(policy, forbidden).problem == "may not list pods"


@pytest.mark.parametrize(
    ("resource", "referenced_by", "matched"),
    [
        (CONFIGMAPS, (), True),
        (CONFIGMAPS, ("Deployment/app",), False),
        (PVCS, ("Pod/p",), False),
        (SERVICES, None, True),  # not a referenced kind: always an empty list
        (CUSTOM_CONFIGMAPS, None, True),  # another group's ConfigMap neither
    ],
)
def test_references_decide_once_known(
    resource: ResourceType, referenced_by: tuple[str, ...] | None, matched: bool
) -> None:
    view = ObjectView(resource=resource, namespace="a", name="x", referenced_by=referenced_by)
    assert match(_unused_policy(), view).matched is matched


def test_a_policy_not_reading_references_needs_no_index() -> None:
    spec = {
        "resources": ["configmaps"],
        "condition": "object.metadata.name != 'referencedBy'",
        "lifecycle": {"delete-after": "1h"},
    }
    parsed = parse_policy(PolicyKind.CLUSTER, None, "p", 1, spec)
    assert isinstance(parsed, Policy)
    assert not PolicySet.of([parsed]).reads_references()
    assert match(parsed, ObjectView(resource=CONFIGMAPS, namespace="a", name="x")).matched
