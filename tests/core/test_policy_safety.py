"""The safety rules of lifecycle policies (docs/policies.md#safety-rules), one table each:
precedence per action family, caution composes, ``*-at`` covers what existed before it,
protected namespaces and objects, invalid fails closed, and enforced cluster policies."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st

from lifecycle_controller.core import DecisionSettings, Ledger
from lifecycle_controller.core.decision.namespace_defaults import (
    NamespaceDefaults,
    parse_namespace_defaults,
)
from lifecycle_controller.core.decision.outcomes import (
    Action,
    Decision,
    Delete,
    DryRun,
    Idle,
    Invalid,
    ObjectFacts,
    Patch,
    Wait,
)
from lifecycle_controller.core.objects import keys
from lifecycle_controller.core.objects.resources import ObjectKey, ResourceType
from lifecycle_controller.core.policy.decide import PolicyDecision, decide_with_policies
from lifecycle_controller.core.policy.in_force import (
    POLICY_API_VERSION,
    PolicySet,
    object_view,
    policy_from_manifest,
)
from lifecycle_controller.core.policy.match import MatchReason, ObjectView, Protection, match
from lifecycle_controller.core.policy.model import Policy, PolicyInvalid, PolicyKind
from lifecycle_controller.core.policy.precedence import Resolution, UnjudgedReason
from lifecycle_controller.core.text.timestamps import format_rfc3339_nano, parse_rfc3339

CONFIGMAPS = ResourceType("", "v1", "configmaps", "ConfigMap", namespaced=True)
DEPLOYMENTS = ResourceType("apps", "v1", "deployments", "Deployment", namespaced=True)
NAMESPACES = ResourceType("", "v1", "namespaces", "Namespace", namespaced=False)
PVS = ResourceType("", "v1", "persistentvolumes", "PersistentVolume", namespaced=False)
LEASES = ResourceType("coordination.k8s.io", "v1", "leases", "Lease", namespaced=True)
CRDS = ResourceType(
    "apiextensions.k8s.io",
    "v1",
    "customresourcedefinitions",
    "CustomResourceDefinition",
    namespaced=False,
)
POLICIES = ResourceType(
    "lifecycle.cezary.dev", "v1alpha1", "lifecyclepolicies", "LifecyclePolicy", namespaced=True
)
NOW = parse_rfc3339("2026-12-02T10:00:00Z")
HOUR = 3600 * 10**9
CREATED = NOW - 72 * HOUR  # three days old: due under every "delete-after: 48h"


def cluster(name: str, spec: dict[str, Any]) -> dict[str, Any]:
    return {
        "apiVersion": POLICY_API_VERSION,
        "kind": "ClusterLifecyclePolicy",
        "metadata": {"name": name, "generation": 1},
        "spec": spec,
    }


def namespaced(name: str, namespace: str, spec: dict[str, Any]) -> dict[str, Any]:
    doc = cluster(name, spec)
    doc["kind"] = "LifecyclePolicy"
    doc["metadata"]["namespace"] = namespace
    return doc


def policies(*docs: dict[str, Any], protection: Protection | None = None) -> PolicySet:
    parsed = [policy_from_manifest(doc) for doc in docs]
    return PolicySet.of(parsed, protection or Protection())


def metadata(
    name: str = "obj",
    namespace: str | None = "team-a",
    *,
    created_ns: int = CREATED,
    labels: Mapping[str, str] | None = None,
    annotations: Mapping[str, str] | None = None,
) -> dict[str, Any]:
    out: dict[str, Any] = {
        "name": name,
        "labels": dict(labels or {}),
        "annotations": dict(annotations or {}),
        "creationTimestamp": format_rfc3339_nano(created_ns),
    }
    if namespace is not None:
        out["namespace"] = namespace
    return out


def judge(
    policy_set: PolicySet,
    resource: ResourceType,
    meta: dict[str, Any],
    *,
    settings: DecisionSettings | None = None,
    namespace_annotations: Mapping[str, str] | None = None,
) -> tuple[Resolution, PolicyDecision]:
    view = object_view(resource, meta)
    defaults = None
    if namespace_annotations is not None:
        defaults = parse_namespace_defaults(view.namespace or "", namespace_annotations)
    return decide_view(policy_set, meta, view, settings=settings, defaults=defaults)


def decide_view(
    policy_set: PolicySet,
    meta: dict[str, Any],
    view: ObjectView,
    *,
    settings: DecisionSettings | None = None,
    defaults: NamespaceDefaults | None = None,
) -> tuple[Resolution, PolicyDecision]:
    """The object (``meta``, seen as ``view``) resolved and decided as the controller does."""
    resource = view.resource
    annotations = {k: v for k, v in meta["annotations"].items() if k.startswith(keys.PREFIX)}
    resolution = policy_set.resolve(annotations, view, restart_marker=None, now_ns=NOW)
    facts = ObjectFacts(
        key=ObjectKey(resource, view.namespace, view.name),
        uid="uid-1",
        resource_version="1",
        creation_ns=view.creation_ns,
        has_pod_template=resource.restartable,
    )
    decided = decide_with_policies(
        inputs=resolution,
        facts=facts,
        now_ns=NOW,
        settings=settings or DecisionSettings(),
        ledger=Ledger(),
        defaults=defaults,
    )
    return resolution, decided


def deciders(resolution: Resolution) -> set[str]:
    return {str(ref) for ref in resolution.deciders}


PREVIEW_DELETE = cluster(
    "preview-delete",
    {"resources": ["deployments.apps"], "lifecycle": {"delete-after": "48h"}},
)
NIGHTLY_RESTART = cluster(
    "nightly-restart",
    {"resources": ["deployments.apps"], "priority": 10, "lifecycle": {"restart-every": "24h"}},
)


# ---------------------------------------------------------------- 1. per action family


def test_a_restart_policy_never_shadows_a_deletion_policy() -> None:
    """Caught: the priority-10 restart policy counted the deletion policy as overlapped."""
    resolution, decided = judge(policies(PREVIEW_DELETE, NIGHTLY_RESTART), DEPLOYMENTS, metadata())
    assert deciders(resolution) == {
        "ClusterLifecyclePolicy/preview-delete",
        "ClusterLifecyclePolicy/nightly-restart",
    }
    assert resolution.overlapped == ()
    assert isinstance(decided.decision, Delete)
    assert decided.decision.policy == "ClusterLifecyclePolicy/preview-delete"


@pytest.mark.parametrize(
    ("own", "deletes_by", "restart_by_policy"),
    [
        # An object's own restart-cron does not shield it from a deletion policy.
        ({keys.RESTART_CRON: "0 3 * * *"}, "ClusterLifecyclePolicy/preview-delete", False),
        # Its own delete-after replaces only the deletion family.
        ({keys.DELETE_AFTER: "1h"}, None, True),
        # Nothing of its own: both policies decide.
        ({}, "ClusterLifecyclePolicy/preview-delete", True),
    ],
)
def test_own_annotations_replace_their_own_family_only(
    own: dict[str, str], deletes_by: str | None, restart_by_policy: bool
) -> None:
    resolution, _ = judge(
        policies(PREVIEW_DELETE, NIGHTLY_RESTART), DEPLOYMENTS, metadata(annotations=own)
    )
    by_family = {f.family: f for f in resolution.families}
    assert len(by_family) == 2
    delete = next(f for f in resolution.families if f.family and f.family.value == "delete")
    restart = next(f for f in resolution.families if f.family and f.family.value == "restart")
    assert (None if delete.decided_by is None else str(delete.decided_by.ref)) == deletes_by
    assert (restart.decided_by is not None) is restart_by_policy


def test_both_own_families_stay_the_reference_conflict() -> None:
    own = {keys.DELETE_AFTER: "1h", keys.RESTART_EVERY: "24h"}
    resolution, decided = judge(
        policies(PREVIEW_DELETE, NIGHTLY_RESTART), DEPLOYMENTS, metadata(annotations=own)
    )
    assert resolution.deciders == ()
    assert resolution.annotation_driven
    assert len(resolution.families) == 1
    assert resolution.families[0].family is None
    assert isinstance(decided.decision, Invalid)


def test_an_invalid_own_restart_annotation_does_not_leave_every_policy() -> None:
    """Caught: ``restart-at: garbage`` on a ConfigMap took it out of every policy."""
    stale = cluster("stale", {"resources": ["configmaps"], "lifecycle": {"delete-after": "48h"}})
    resolution, decided = judge(
        policies(stale), CONFIGMAPS, metadata(annotations={keys.RESTART_AT: "garbage"})
    )
    assert deciders(resolution) == {"ClusterLifecyclePolicy/stale"}
    assert isinstance(decided.decision, Delete)
    assert any(isinstance(d, Invalid) for d in decided.decisions)


# ---------------------------------------------------------------- 2. caution composes


@pytest.mark.parametrize(
    ("policy_dry_run", "own_dry_run", "namespace_dry_run", "flag", "dry"),
    [
        (None, None, None, False, False),
        ("true", "false", None, False, True),  # caught: the object's "false" cancelled it
        ("true", None, None, False, True),
        (None, "true", None, False, True),
        ("false", "true", None, False, True),
        ("false", None, "true", False, True),  # the policy's "false" does not beat the namespace
        ("false", "false", "true", False, True),
        ("false", "false", None, True, True),
        ("false", "false", "false", False, False),
    ],
)
def test_dry_run_is_true_when_any_layer_says_true(
    policy_dry_run: str | None,
    own_dry_run: str | None,
    namespace_dry_run: str | None,
    flag: bool,
    dry: bool,
) -> None:
    lifecycle = {"delete-after": "48h"}
    if policy_dry_run is not None:
        lifecycle["dry-run"] = policy_dry_run
    own = {} if own_dry_run is None else {keys.DRY_RUN: own_dry_run}
    ns = None if namespace_dry_run is None else {keys.DRY_RUN: namespace_dry_run}
    _, decided = judge(
        policies(cluster("p", {"resources": ["configmaps"], "lifecycle": lifecycle})),
        CONFIGMAPS,
        metadata(annotations=own),
        settings=DecisionSettings(dry_run=flag),
        namespace_annotations=ns,
    )
    assert isinstance(decided.decision, DryRun if dry else Delete)


@given(
    policy_says=st.sampled_from([None, "true", "false", "1", "0"]),
    object_says=st.sampled_from([None, "true", "false", "True", "f"]),
)
def test_a_policy_rehearsal_is_never_turned_into_a_deletion(
    policy_says: str | None, object_says: str | None
) -> None:
    lifecycle = {"delete-after": "48h"}
    if policy_says is not None:
        lifecycle["dry-run"] = policy_says
    own = {} if object_says is None else {keys.DRY_RUN: object_says}
    _, decided = judge(
        policies(cluster("p", {"resources": ["configmaps"], "lifecycle": lifecycle})),
        CONFIGMAPS,
        metadata(annotations=own),
    )
    says_true = {"true", "1", "True"}
    if policy_says in says_true or object_says in says_true:
        assert not isinstance(decided.decision, Delete)
    else:
        assert isinstance(decided.decision, Delete)


# ---------------------------------------------------------------- 3. *-at covers what existed


END_OF_SPRINT = "2026-12-01T00:00:00Z"


@pytest.mark.parametrize(
    ("created", "deleted"),
    [
        (parse_rfc3339(END_OF_SPRINT) - HOUR, True),
        (parse_rfc3339(END_OF_SPRINT), False),
        (parse_rfc3339(END_OF_SPRINT) + HOUR, False),  # caught: deleted the moment it appeared
    ],
)
def test_a_delete_at_policy_covers_objects_created_before_it(created: int, deleted: bool) -> None:
    sprint = cluster(
        "sprint", {"resources": ["configmaps"], "lifecycle": {"delete-at": END_OF_SPRINT}}
    )
    resolution, decided = judge(policies(sprint), CONFIGMAPS, metadata(created_ns=created))
    assert isinstance(decided.decision, Delete) is deleted
    if not deleted:
        assert isinstance(decided.decision, Idle)
        assert not resolution.deciders
        assert not resolution.overlapped
        (spent,) = resolution.left_alone
        assert spent.describe().startswith("left alone by ClusterLifecyclePolicy/sprint: created")
        assert spent.describe().endswith(f"at or after its delete-at {END_OF_SPRINT}")


@pytest.mark.parametrize("offset", [-HOUR, 0, HOUR])
def test_restart_at_follows_the_same_rule(offset: int) -> None:
    at = parse_rfc3339(END_OF_SPRINT)
    once = cluster(
        "once", {"resources": ["deployments.apps"], "lifecycle": {"restart-at": END_OF_SPRINT}}
    )
    _, decided = judge(policies(once), DEPLOYMENTS, metadata(created_ns=at + offset))
    assert isinstance(decided.decision, Patch) is (offset < 0)


# ---------------------------------------------------------------- 4. protected


CATCH_ALL = cluster("everything", {"resources": ["*"], "lifecycle": {"delete-after": "48h"}})
OWN = Protection(own_namespace="lifecycle", lease="lease-1", breaker="lease-1-breaker")


@pytest.mark.parametrize(
    ("resource", "meta", "spec_namespaces", "matched"),
    [
        (CONFIGMAPS, metadata(namespace="kube-system"), None, False),  # caught
        (CONFIGMAPS, metadata(namespace="kube-public"), None, False),
        (CONFIGMAPS, metadata(namespace="kube-node-lease"), None, False),
        (CONFIGMAPS, metadata(namespace="lifecycle"), None, False),  # the controller's own
        (CONFIGMAPS, metadata(namespace="team-a"), None, True),
        (CONFIGMAPS, metadata(namespace="kube-system"), ["kube-system"], True),  # literally
        (CONFIGMAPS, metadata(namespace="kube-system"), ["kube-*"], False),  # not by a glob
        (
            NAMESPACES,
            metadata("kube-system", None),
            ["kube-system"],
            False,
        ),  # "*": no cluster types
        (PVS, metadata("pv-1", None), None, False),  # caught: "*" reached PersistentVolumes
        (CRDS, metadata("x.example.com", None), None, False),
        (POLICIES, metadata("keep"), None, False),
        (LEASES, metadata("lease-1", "lifecycle"), ["lifecycle"], False),  # its own Lease
        (CONFIGMAPS, metadata("lease-1-breaker", "lifecycle"), ["lifecycle"], False),
        (
            DEPLOYMENTS,
            metadata(
                "lifecycle-controller",
                "lifecycle",
                labels={"app.kubernetes.io/component": "controller-manager"},
            ),
            ["lifecycle"],
            False,
        ),
        (CONFIGMAPS, metadata("other", "lifecycle"), ["lifecycle"], True),
    ],
)
def test_protected_namespaces_and_objects(
    resource: ResourceType, meta: dict[str, Any], spec_namespaces: list[str] | None, matched: bool
) -> None:
    spec: dict[str, Any] = {"resources": ["*"], "lifecycle": {"delete-after": "48h"}}
    if spec_namespaces is not None:
        spec["namespaces"] = spec_namespaces
    policy_set = policies(cluster("p", spec), protection=OWN)
    resolution, decided = judge(policy_set, resource, meta)
    assert bool(resolution.deciders) is matched
    assert isinstance(decided.decision, Delete) is matched


def test_cluster_scoped_types_are_matched_when_named_exactly() -> None:
    spec = {"resources": ["persistentvolumes", "namespaces"], "lifecycle": {"delete-after": "48h"}}
    policy_set = policies(cluster("p", spec))
    for resource, meta in ((PVS, metadata("pv-1", None)), (NAMESPACES, metadata("pr-1", None))):
        resolution, _ = judge(policy_set, resource, meta)
        assert deciders(resolution) == {"ClusterLifecyclePolicy/p"}


def test_protection_is_reported_and_a_namespace_policy_works_in_its_own_namespace() -> None:
    policy_set = policies(
        CATCH_ALL,
        namespaced(
            "local",
            "kube-system",
            {"resources": ["configmaps"], "lifecycle": {"delete-after": "48h"}},
        ),
    )
    resolution, decided = judge(policy_set, CONFIGMAPS, metadata(namespace="kube-system"))
    assert deciders(resolution) == {"LifecyclePolicy/kube-system/local"}
    assert [str(r) for r in resolution.protected] == ["ClusterLifecyclePolicy/everything"]
    view = object_view(CONFIGMAPS, metadata(namespace="kube-system"))
    catch_all = policy_set.valid[0]
    assert match(catch_all, view, policy_set.protection).reason is MatchReason.PROTECTED
    assert isinstance(decided.decision, Delete)


def test_own_annotations_keep_working_in_protected_namespaces() -> None:
    meta = metadata(namespace="kube-system", annotations={keys.DELETE_AFTER: "1h"})
    _, decided = judge(policies(CATCH_ALL), CONFIGMAPS, meta)
    assert not isinstance(decided.decision, Idle)


# ---------------------------------------------------------------- 5. invalid fails closed


KEEP_BROKEN = namespaced(
    "keep",
    "team-a",
    {
        "resources": ["configmaps"],
        "selector": {"matchLabels": {"keep": "yes"}},
        "lifecycle": {"delete-after": "forever"},  # invalid duration
    },
)
CLEANUP = cluster("cleanup", {"resources": ["configmaps"], "lifecycle": {"delete-after": "48h"}})


def test_an_invalid_policy_holds_what_it_would_match() -> None:
    """Caught: the team's broken "keep" policy dropped out and the cluster cleanup deleted."""
    policy_set = policies(KEEP_BROKEN, CLEANUP)
    assert isinstance(policy_set.invalid[0], PolicyInvalid)
    resolution, decided = judge(policy_set, CONFIGMAPS, metadata(labels={"keep": "yes"}))
    assert resolution.held is not None
    assert resolution.held.describe() == "held: LifecyclePolicy/team-a/keep is invalid"
    assert resolution.held.reason is UnjudgedReason.INVALID
    assert isinstance(decided.decision, Idle)
    assert decided.decision.log == "held: LifecyclePolicy/team-a/keep is invalid"
    # What its selector does not select is not held.
    resolution, decided = judge(policy_set, CONFIGMAPS, metadata(labels={"keep": "no"}))
    assert resolution.held is None
    assert isinstance(decided.decision, Delete)


def test_an_unreadable_selector_holds_every_object_of_its_resources() -> None:
    broken = namespaced(
        "keep",
        "team-a",
        {
            "resources": ["configmaps"],
            "selector": {"matchLabels": {"bad key!": "x"}},
            "lifecycle": {"delete-after": "1h"},
        },
    )
    policy_set = policies(broken, CLEANUP)
    resolution, _ = judge(policy_set, CONFIGMAPS, metadata(labels={"keep": "no"}))
    assert resolution.held is not None
    # Other namespaces are not the namespaced policy's to hold.
    resolution, decided = judge(policy_set, CONFIGMAPS, metadata(namespace="team-b"))
    assert resolution.held is None
    assert isinstance(decided.decision, Delete)


def test_an_invalid_policy_below_the_winner_holds_nothing() -> None:
    low = cluster(
        "low", {"resources": ["configmaps"], "priority": -5, "lifecycle": {"delete-after": "x"}}
    )
    resolution, decided = judge(policies(low, CLEANUP), CONFIGMAPS, metadata())
    assert deciders(resolution) == {"ClusterLifecyclePolicy/cleanup"}
    assert isinstance(decided.decision, Delete)


def test_a_condition_error_holds_the_object_instead_of_falling_through() -> None:
    """Caught: the docs' own example erred on objects without a ``team`` label, which then
    fell through to the policy below."""
    spec = {
        "resources": ["configmaps"],
        "priority": 10,
        "condition": 'object.metadata.labels["team"] != "core"',
        "lifecycle": {"delete-after": "1h", "dry-run": "true"},
    }
    policy_set = policies(cluster("by-team", spec), CLEANUP)
    resolution, decided = judge(policy_set, CONFIGMAPS, metadata())
    assert resolution.held is not None
    assert resolution.held.reason is UnjudgedReason.CONDITION_ERROR
    assert str(resolution.held.ref) == "ClusterLifecyclePolicy/by-team"
    assert isinstance(decided.decision, Idle)
    # The documented form with has() matches instead.
    spec["condition"] = '!has(object.metadata.labels.team) || object.metadata.labels.team != "core"'
    resolution, _ = judge(policies(cluster("by-team", spec), CLEANUP), CONFIGMAPS, metadata())
    assert deciders(resolution) == {"ClusterLifecyclePolicy/by-team"}


# ---------------------------------------------------------------- 6. enforce


def test_a_namespaced_policy_may_not_enforce() -> None:
    parsed = policy_from_manifest(
        namespaced(
            "x",
            "team-a",
            {"resources": ["configmaps"], "enforce": True, "lifecycle": {"delete-after": "1h"}},
        )
    )
    assert isinstance(parsed, PolicyInvalid)
    assert any(p.startswith("spec.enforce:") for p in parsed.problems)


ENFORCED = cluster(
    "deadline",
    {"resources": ["configmaps"], "enforce": True, "lifecycle": {"delete-after": "48h"}},
)


@pytest.mark.parametrize(
    ("own", "namespaced_at", "winner"),
    [
        # Caught: a namespaced delete-at far away beat a priority-1000 cluster policy.
        ({}, "2999-01-01T00:00:00Z", "ClusterLifecyclePolicy/deadline"),
        ({keys.EXEMPT: "true"}, None, "ClusterLifecyclePolicy/deadline"),
        ({keys.DELETE_AT: "2999-01-01T00:00:00Z"}, None, "ClusterLifecyclePolicy/deadline"),
    ],
)
def test_an_enforced_policy_wins(
    own: dict[str, str], namespaced_at: str | None, winner: str
) -> None:
    docs = [ENFORCED]
    if namespaced_at is not None:
        docs.append(
            namespaced(
                "late",
                "team-a",
                {"resources": ["configmaps"], "lifecycle": {"delete-at": namespaced_at}},
            )
        )
    resolution, decided = judge(policies(*docs), CONFIGMAPS, metadata(annotations=own))
    assert str(resolution.primary.decided_by.ref if resolution.primary.decided_by else "") == winner
    assert isinstance(decided.decision, Delete)
    assert decided.decision.policy == winner
    assert decided.decision.on_success.events[0].message.endswith("delete-after 48h, enforced)")


def test_an_enforced_deletion_is_a_deadline_an_earlier_one_beats() -> None:
    young = NOW - HOUR  # the enforced 48h deadline is far; the namespace's 30m one is past
    docs = [
        ENFORCED,
        namespaced(
            "soon", "team-a", {"resources": ["configmaps"], "lifecycle": {"delete-after": "30m"}}
        ),
    ]
    _, decided = judge(policies(*docs), CONFIGMAPS, metadata(created_ns=young))
    assert isinstance(decided.decision, Delete)
    assert decided.decision.policy == "LifecyclePolicy/team-a/soon"
    # A later one does not postpone it.
    docs[1] = namespaced(
        "late", "team-a", {"resources": ["configmaps"], "lifecycle": {"delete-after": "100h"}}
    )
    _, decided = judge(policies(*docs), CONFIGMAPS, metadata(created_ns=young))
    assert isinstance(decided.decision, Wait)
    assert decided.decision.due_ns == young + 48 * HOUR


def test_an_enforced_policy_ignores_the_objects_own_modifiers() -> None:
    own = {keys.DRY_RUN: "true", keys.CATCH_UP: "never"}
    _, decided = judge(policies(ENFORCED), CONFIGMAPS, metadata(annotations=own))
    assert isinstance(decided.decision, Delete)


@given(
    priorities=st.lists(st.integers(-5, 5), min_size=1, max_size=4),
    enforced=st.lists(st.booleans(), min_size=4, max_size=4),
)
def test_the_winner_of_a_family_is_the_best_ranked_contender(
    priorities: list[int], enforced: list[bool]
) -> None:
    docs = [
        cluster(
            f"p{i}",
            {
                "resources": ["configmaps"],
                "priority": priority,
                "enforce": enforced[i],
                "lifecycle": {"delete-after": "48h"},
            },
        )
        for i, priority in enumerate(priorities)
    ]
    policy_set = policies(*docs)
    resolution, _ = judge(policy_set, CONFIGMAPS, metadata())
    valid = [p for p in policy_set.valid if isinstance(p, Policy)]
    best = min(valid, key=lambda p: (not p.enforce, -p.priority, p.ref.name))
    assert resolution.decided_by is best
    assert best.kind is PolicyKind.CLUSTER
    assert best.action is Action.DELETE


def _decision_kinds(decisions: tuple[Decision, ...]) -> list[str]:
    return [type(d).__name__ for d in decisions]


def test_every_family_gets_its_decision_the_acting_one_first() -> None:
    _, decided = judge(policies(PREVIEW_DELETE, NIGHTLY_RESTART), DEPLOYMENTS, metadata())
    assert _decision_kinds(decided.decisions)[0] == "Delete"
    assert len(decided.decisions) == 2


# ---------------------------------------------------------------- deletionPropagation


@pytest.mark.parametrize("propagation", ["Background", "Foreground", "Orphan"])
def test_a_policy_deletion_carries_its_propagation(propagation: str) -> None:
    spec = {
        "resources": ["deployments.apps"],
        "deletionPropagation": propagation,
        "lifecycle": {"delete-after": "48h"},
    }
    _, decided = judge(policies(cluster("p", spec)), DEPLOYMENTS, metadata())
    assert isinstance(decided.decision, Delete)
    assert decided.decision.propagation == propagation
    assert decided.decision.log.endswith(f"; propagation {propagation}")


def test_without_deletion_propagation_the_server_decides() -> None:
    _, decided = judge(policies(PREVIEW_DELETE), DEPLOYMENTS, metadata())
    assert isinstance(decided.decision, Delete)
    assert decided.decision.propagation is None
    own = metadata(annotations={keys.DELETE_AFTER: "1s"})
    spec = {
        "resources": ["configmaps"],
        "deletionPropagation": "Orphan",
        "lifecycle": {"delete-after": "48h"},
    }
    _, decided = judge(policies(cluster("p", spec)), CONFIGMAPS, own)
    assert isinstance(decided.decision, Patch | Delete)  # its own annotation decides
    assert getattr(decided.decision, "propagation", None) is None


@pytest.mark.parametrize(
    ("value", "lifecycle", "problem"),
    [
        ("Cascade", {"delete-after": "1h"}, "spec.deletionPropagation: must be one of"),
        ("Orphan", {"restart-every": "24h"}, "spec.deletionPropagation: only for deletions"),
    ],
)
def test_a_wrong_deletion_propagation_is_invalid(
    value: str, lifecycle: dict[str, str], problem: str
) -> None:
    resources = ["deployments.apps"]
    parsed = policy_from_manifest(
        cluster("p", {"resources": resources, "deletionPropagation": value, "lifecycle": lifecycle})
    )
    assert isinstance(parsed, PolicyInvalid)
    assert any(p.startswith(problem) for p in parsed.problems), parsed.problems
