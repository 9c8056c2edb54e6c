"""``referencedBy``: what a Pod spec or a workload's template uses, the index, matching."""

from __future__ import annotations

import re
from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st

from lifecycle_controller.core.objects.pod_references import (
    ORDINAL_CLAIMS,
    ReferenceIndex,
    Target,
    covers,
    index_manifests,
    object_references,
    ordinal_prefix,
    pod_spec_references,
    targets_of,
    used_kind,
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
from lifecycle_controller.core.policy.precedence import UnjudgedPolicy, UnjudgedReason

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
            "name": "e",
            "csi": {"driver": "secrets-store", "nodePublishSecretRef": {"name": "csi-s"}},
        },
        {"name": "f", "cephfs": {"monitors": ["m"], "secretRef": {"name": "cephfs-s"}}},
        {"name": "g", "rbd": {"image": "i", "secretRef": {"name": "rbd-s"}}},
        {"name": "h", "iscsi": {"iqn": "q", "secretRef": {"name": "iscsi-s"}}},
        {"name": "i", "flexVolume": {"driver": "x/y", "secretRef": {"name": "flex-s"}}},
        {"name": "j", "scaleIO": {"system": "s", "secretRef": {"name": "scaleio-s"}}},
        {"name": "k", "cinder": {"volumeID": "v", "secretRef": {"name": "cinder-s"}}},
        {"name": "l", "storageos": {"volumeName": "v", "secretRef": {"name": "storageos-s"}}},
        {"name": "m", "azureFile": {"shareName": "s", "secretName": "azure-s"}},
        {"name": "n", "ephemeral": {"volumeClaimTemplate": {"spec": {}}}},
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
        ("Secret", "csi-s"),
        ("Secret", "cephfs-s"),
        ("Secret", "rbd-s"),
        ("Secret", "iscsi-s"),
        ("Secret", "flex-s"),
        ("Secret", "scaleio-s"),
        ("Secret", "cinder-s"),
        ("Secret", "storageos-s"),
        ("Secret", "azure-s"),
    }


@pytest.mark.parametrize(
    "volume",
    [
        {"azureFile": {"secretRef": {"name": "s"}}},  # not the API's field: secretName
        {"csi": {"secretRef": {"name": "s"}, "volumeAttributes": {"secretName": "s"}}},
        {"nfs": {"server": "s", "path": "/"}},
        {"hostPath": {"path": "/s"}},
        {"downwardAPI": {"items": [{"path": "s"}]}},
        {"emptyDir": {}},
        {"rbd": {"secretRef": "s"}},
        {"cephfs": "s"},
        {"csi": {"nodePublishSecretRef": {"name": ""}}},
        {"ephemeral": {"volumeClaimTemplate": {}}},  # a Pod spec alone names no claim
    ],
)
def test_what_is_not_a_use(volume: dict[str, Any]) -> None:
    assert pod_spec_references({"volumes": [{"name": "v", **volume}]}) == frozenset()


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
            {"apiVersion": "apps/v1", **_statefulset("db", "data", replicas=0)},
        ]
    )
    assert index.referenced_by("default", "PersistentVolumeClaim", "data-db-0") == (
        "StatefulSet/db",
    )
    assert index.referenced_by("default", "ConfigMap", "vol-cm") == ("Deployment/app",)
    assert index.referenced_by("x", "ConfigMap", "vol-cm") == ("Pod/p",)
    assert index.referenced_by("x", "Service", "vol-cm") == ()


def _statefulset(name: str | None, *templates: object, **spec: Any) -> dict[str, Any]:
    metadata = {} if name is None else {"name": name}
    claims = [t if not isinstance(t, str) else {"metadata": {"name": t}} for t in templates]
    return {
        "kind": "StatefulSet",
        "metadata": metadata,
        "spec": {"volumeClaimTemplates": claims, **_template({})["spec"], **spec},
    }


@pytest.mark.parametrize(
    ("name", "prefix"),
    [
        ("data-db-0", "data-db"),
        ("data-db-7", "data-db"),
        ("data-db-12", "data-db"),
        ("data-db-2147483648", "data-db"),  # no bound: replicas and ordinals.start move them
        ("db-0", "db"),
        ("data-db-01", None),  # the controller writes no leading zero
        ("data-db-00", None),
        ("data-db-", None),
        ("data-db", None),
        ("data-db-x", None),
        ("data-db-+1", None),
        ("data-db-1e3", None),
        ("data-db-\u0663", None),  # an Arabic-Indic three: decimal, not ASCII
        ("data-db-\u00b2", None),  # superscript two
        ("-0", None),
        ("0", None),
        ("", None),
    ],
)
def test_an_ordinal_is_written_as_the_statefulset_controller_writes_it(
    name: str, prefix: str | None
) -> None:
    assert ordinal_prefix(name) == prefix


_prefixes = st.text(alphabet="abz.-09", min_size=1, max_size=12)


@given(_prefixes, st.integers(min_value=0, max_value=2**70))
def test_every_ordinal_of_a_prefix_is_its_claim(prefix: str, ordinal: int) -> None:
    name = f"{prefix}-{ordinal}"
    assert ordinal_prefix(name) == prefix
    assert (ORDINAL_CLAIMS, prefix) in targets_of("PersistentVolumeClaim", name)
    assert covers((ORDINAL_CLAIMS, prefix), name)


@given(_prefixes, st.text(alphabet="0123456789+_ x\u0663\u00b2", max_size=6))
def test_only_go_decimal_ordinals_count(prefix: str, suffix: str) -> None:
    """Oracle: Go's strconv.Itoa of a non-negative int, as a pattern."""
    expected = prefix if re.fullmatch("0|[1-9][0-9]*", suffix) else None
    assert ordinal_prefix(f"{prefix}-{suffix}") == expected


@given(st.sampled_from(["ConfigMap", "Secret", "PersistentVolumeClaim"]), _prefixes)
def test_an_object_is_covered_by_every_target_it_is_looked_up_under(kind: str, name: str) -> None:
    for target in targets_of(kind, name):
        assert used_kind(target[0]) == kind
        assert covers(target, name)


def test_a_statefulset_uses_every_claim_of_its_templates_whatever_its_replicas() -> None:
    found = object_references("StatefulSet", _statefulset("db", "data", "logs", replicas=0))
    assert found == {(ORDINAL_CLAIMS, "data-db"), (ORDINAL_CLAIMS, "logs-db")}
    assert used_kind(ORDINAL_CLAIMS) == "PersistentVolumeClaim"


@pytest.mark.parametrize(
    "obj",
    [
        _statefulset(None, "data"),  # no name: no claim name to make
        _statefulset("db", {"metadata": {}}, {"metadata": "x"}, "", 5),
        {"kind": "StatefulSet", "metadata": {"name": "db"}, "spec": "nonsense"},
        {**_statefulset("db", "data"), "kind": "Deployment"},
    ],
)
def test_a_claim_template_needs_a_named_statefulset_and_a_named_template(
    obj: dict[str, Any],
) -> None:
    assert object_references(str(obj["kind"]), obj) == frozenset()


def test_a_pods_generic_ephemeral_volume_uses_the_claim_named_after_it() -> None:
    spec = {
        "volumes": [
            {"name": "scratch", "ephemeral": {"volumeClaimTemplate": {"spec": {}}}},
            {"name": "no-template", "ephemeral": "nonsense"},
            {"ephemeral": {"volumeClaimTemplate": {}}},
        ]
    }
    pod = {"metadata": {"name": "p"}, "spec": spec}
    assert object_references("Pod", pod) == {("PersistentVolumeClaim", "p-scratch")}
    assert object_references("Pod", {"spec": spec}) == frozenset()  # a manifest's generateName
    # A workload's Pods own their claims and take them along: the template names none.
    assert object_references("Deployment", {"metadata": {"name": "p"}, **_template(spec)}) == (
        frozenset()
    )


def test_a_claim_is_used_by_its_statefulset_for_every_ordinal_and_not_once_deleted() -> None:
    index = ReferenceIndex()
    sts = object_references("StatefulSet", _statefulset("db", "data", replicas=0))
    assert index.put("ns", "StatefulSet/db", sts) == {(ORDINAL_CLAIMS, "data-db")}
    mounted = frozenset({("PersistentVolumeClaim", "data-db-1")})
    index.put("ns", "Pod/db-1", mounted)
    assert index.referenced_by("ns", "PersistentVolumeClaim", "data-db-0") == ("StatefulSet/db",)
    assert index.referenced_by("ns", "PersistentVolumeClaim", "data-db-1") == (
        "Pod/db-1",
        "StatefulSet/db",
    )
    assert index.referenced_by("ns", "PersistentVolumeClaim", "data-db-99") == ("StatefulSet/db",)
    for other in ("data-db-01", "data-db", "data-db-x", "other-db-0", "data-db-0-0"):
        assert index.referenced_by("ns", "PersistentVolumeClaim", other) == (), other
    assert index.referenced_by("other", "PersistentVolumeClaim", "data-db-0") == ()
    assert index.referenced_by("ns", "ConfigMap", "data-db-0") == ()
    assert index.put("ns", "StatefulSet/db", frozenset()) == {(ORDINAL_CLAIMS, "data-db")}
    assert index.referenced_by("ns", "PersistentVolumeClaim", "data-db-0") == ()


_claims = st.frozensets(
    st.one_of(
        st.tuples(st.just("PersistentVolumeClaim"), st.sampled_from(["d-s-0", "d-s-1", "d-s"])),
        st.tuples(st.just(ORDINAL_CLAIMS), st.sampled_from(["d-s", "d", "s"])),
    ),
    max_size=3,
)


@given(st.lists(st.tuples(st.sampled_from(["Pod/p", "StatefulSet/s", "StatefulSet/t"]), _claims)))
def test_a_claim_is_used_by_whoever_names_it_or_its_template(
    updates: list[tuple[str, frozenset[Target]]],
) -> None:
    index = ReferenceIndex()
    latest: dict[str, frozenset[Target]] = {}
    for referrer, targets in updates:
        index.put("ns", referrer, targets)
        latest[referrer] = targets
    for name in ("d-s-0", "d-s-1", "d-s", "d-0", "s-0", "d-s-01"):
        expected = sorted(
            r for r, targets in latest.items() if any(covers(t, name) for t in targets)
        )
        assert list(index.referenced_by("ns", "PersistentVolumeClaim", name)) == expected


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
    assert isinstance(hold, UnjudgedPolicy)
    assert hold.reason is UnjudgedReason.REFERENCES_UNKNOWN
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
