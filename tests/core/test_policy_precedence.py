"""Precedence and merging: own annotations > LifecyclePolicy > ClusterLifecyclePolicy >
namespace defaults > flags, actions replace, modifiers override per key, and the anchors."""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping
from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st

from lifecycle_controller.core import (
    DecisionSettings,
    Delete,
    DryRun,
    Idle,
    Invalid,
    Ledger,
    ObjectFacts,
    Patch,
    Wait,
)
from lifecycle_controller.core.decision.events import DELETE_TTL_EXCEEDED
from lifecycle_controller.core.decision.namespace_defaults import (
    NamespaceSource,
    decide_in_namespace,
    parse_namespace_defaults,
    resolve_inputs,
)
from lifecycle_controller.core.decision.outcomes import Decision
from lifecycle_controller.core.objects import keys
from lifecycle_controller.core.policy.model import Policy, PolicyKind, PolicyRef, parse_policy
from lifecycle_controller.core.policy.precedence import (
    InputSource,
    Resolution,
    best_policy,
    recurring_anchor,
    resolve_policies,
)
from lifecycle_controller.core.text.timestamps import format_rfc3339_nano

from .support import CONFIGMAP, DAY, DEPLOYMENT, HOUR, MINUTE, NOW, ts

CLUSTER = PolicyKind.CLUSTER
NAMESPACED = PolicyKind.NAMESPACED
OLD_CONFIGMAP = dataclasses.replace(CONFIGMAP, creation_ns=NOW - 2 * DAY)


def policy(
    name: str = "p",
    kind: PolicyKind = CLUSTER,
    priority: int = 0,
    resources: tuple[str, ...] = ("configmaps",),
    **lifecycle: str,
) -> Policy:
    spec: dict[str, Any] = {
        "resources": list(resources),
        "priority": priority,
        "lifecycle": {key.replace("_", "-"): value for key, value in lifecycle.items()}
        or {"delete-after": "1h"},
    }
    namespace = "team-a" if kind is NAMESPACED else None
    parsed = parse_policy(kind, namespace, name, 1, spec)
    assert isinstance(parsed, Policy), parsed
    return parsed


def resolve(
    annotations: Mapping[str, str],
    *policies: Policy,
    facts: ObjectFacts = OLD_CONFIGMAP,
    **kwargs: Any,
) -> Resolution:
    return resolve_policies(
        annotations,
        policies,
        creation_ns=facts.creation_ns,
        restart_marker=facts.restart_marker,
        now_ns=NOW,
        **kwargs,
    )


def decide_for(
    annotations: Mapping[str, str],
    *policies: Policy,
    facts: ObjectFacts = OLD_CONFIGMAP,
    settings: DecisionSettings | None = None,
    namespace: Mapping[str, str] | None = None,
    **kwargs: Any,
) -> Decision:
    inputs = resolve(annotations, *policies, facts=facts, **kwargs)
    return decide_in_namespace(
        annotations=inputs.annotations,
        facts=facts,
        now_ns=NOW,
        settings=settings or DecisionSettings(),
        ledger=Ledger(),
        defaults=None if namespace is None else parse_namespace_defaults("team-a", namespace),
    )


# --- who decides ------------------------------------------------------------------------


def test_no_policy_leaves_the_annotations_as_they_are() -> None:
    annotations = {keys.DELETE_AFTER: "1h", "other": "x"}
    inputs = resolve(annotations)
    assert inputs.annotations is annotations
    assert (inputs.decided_by, inputs.overlapped, inputs.exempt) == (None, (), False)


def test_a_cluster_policy_decides() -> None:
    p = policy("preview")
    inputs = resolve({"other": "x"}, p)
    assert inputs.decided_by is p
    assert inputs.overlapped == ()
    assert dict(inputs.annotations) == {
        "other": "x",
        keys.DELETE_AT: format_rfc3339_nano(OLD_CONFIGMAP.creation_ns + HOUR),  # type: ignore[operator]
    }
    assert dict(inputs.sources) == {keys.DELETE_AT: InputSource.POLICY}


def test_a_namespaced_policy_beats_every_cluster_policy() -> None:
    namespaced = policy("team", NAMESPACED, priority=-5, delete_after="3h")
    cluster = policy("all", CLUSTER, priority=100, delete_after="2h")
    inputs = resolve({}, cluster, namespaced)
    assert inputs.decided_by is namespaced
    assert inputs.overlapped == (cluster.ref,)


def test_the_highest_priority_wins_then_the_name() -> None:
    low, high, tie_b, tie_a = (
        policy("low", priority=1),
        policy("high", priority=10),
        policy("b", priority=5),
        policy("a", priority=5),
    )
    assert best_policy([low, tie_b, high, tie_a]) is high
    assert best_policy([low, tie_b, tie_a]) is tie_a
    inputs = resolve({}, low, tie_b, tie_a)
    assert inputs.decided_by is tie_a
    assert inputs.overlapped == (tie_b.ref, low.ref)  # best first
    assert best_policy([]) is None


def test_namespaced_ties_fall_back_to_the_name() -> None:
    a = policy("a", NAMESPACED)
    b = policy("b", NAMESPACED)
    assert best_policy([b, a]) is a


def test_own_action_annotations_replace_the_policies_of_their_family() -> None:
    annotations = {keys.DELETE_AFTER: "10m", keys.DRY_RUN: "false"}
    p, q = policy("p", NAMESPACED), policy("q")
    inputs = resolve(annotations, q, p)
    assert inputs.annotations is annotations
    assert inputs.decided_by is None
    assert inputs.overlapped == (p.ref, q.ref)
    assert inputs.annotation_driven
    assert not resolve(annotations).annotation_driven  # nothing matched: nothing replaced
    assert not resolve({}, p).annotation_driven
    # A restart policy is another family: the object's own deletion does not replace it.
    r = policy("r", resources=("deployments.apps",), restart_every="1h")
    assert resolve(annotations, r).decided_by is r


def test_an_empty_action_annotation_is_not_an_action() -> None:
    inputs = resolve({keys.DELETE_AT: ""}, policy())
    assert inputs.decided_by is not None
    assert keys.DELETE_AT in inputs.annotations


def test_own_modifiers_override_the_policy_key_by_key() -> None:
    p = policy(
        delete_after="1h",
        dry_run="false",
        warn_before="30m",
        catch_up="1h",
        maintenance_window="Mon-Fri 01:00-05:00 UTC",
    )
    inputs = resolve({keys.DRY_RUN: "true", keys.CATCH_UP: "never"}, p)
    assert inputs.annotations[keys.DRY_RUN] == "true"
    assert inputs.annotations[keys.CATCH_UP] == "never"
    assert inputs.annotations[keys.WARN_BEFORE] == "30m"
    assert inputs.annotations[keys.MAINTENANCE_WINDOW] == "Mon-Fri 01:00-05:00 UTC"
    assert dict(inputs.sources) == {
        keys.DRY_RUN: InputSource.OBJECT,
        keys.CATCH_UP: InputSource.OBJECT,
        keys.WARN_BEFORE: InputSource.POLICY,
        keys.MAINTENANCE_WINDOW: InputSource.POLICY,
        keys.DELETE_AT: InputSource.POLICY,
    }


def test_the_objects_annotation_only_keys_are_left_out() -> None:
    annotations = {
        keys.CRON_TIMEZONE: "Europe/Warsaw",
        keys.REFERENCE_POINT: "creationTimestamp",
        keys.LAST_RESTART_TIMESTAMP: "2020-01-01T00:00:00Z",
        keys.MANAGED_BY: keys.MANAGED_BY_VALUE,
        keys.OBSERVED: "kept",
        "app.kubernetes.io/name": "web",
    }
    inputs = resolve(annotations, policy())
    assert set(inputs.annotations) == {keys.OBSERVED, "app.kubernetes.io/name", keys.DELETE_AT}


def test_no_policy_key_leaks_from_an_overlapped_policy() -> None:
    winner = policy("a", delete_after="1h")
    other = policy("b", delete_after="2h", maintenance_window="Sat-Sun 00:00-01:00 UTC")
    inputs = resolve({}, winner, other)
    assert keys.MAINTENANCE_WINDOW not in inputs.annotations


def test_exempt_is_reported() -> None:
    assert resolve({keys.EXEMPT: "true"}).exempt is True
    assert resolve({keys.EXEMPT: "false"}, policy()).exempt is False


# --- the five layers, end to end through decide_in_namespace ----------------------------


@pytest.mark.parametrize(
    ("own", "lifecycle_policy", "cluster_policy", "namespace", "flag", "expected"),
    [
        ("true", "false", "false", "false", False, DryRun),
        ("false", "true", "true", "true", False, DryRun),  # caution composes: any "true"
        (None, "true", "false", "false", False, DryRun),
        (None, "false", "true", "true", False, DryRun),
        (None, None, "true", "false", False, DryRun),
        (None, None, "false", "true", False, DryRun),
        ("false", "false", "false", "false", False, Delete),
        (None, None, None, "true", False, DryRun),
        (None, None, None, None, True, DryRun),
        (None, None, None, None, False, Delete),
        (None, "false", None, None, True, DryRun),  # --dry-run still forces it everywhere
    ],
)
def test_dry_run_through_the_five_layers(
    own: str | None,
    lifecycle_policy: str | None,
    cluster_policy: str | None,
    namespace: str | None,
    flag: bool,
    expected: type[Decision],
) -> None:
    def with_dry_run(name: str, kind: PolicyKind, value: str | None) -> Policy:
        if value is None:
            return policy(name, kind, delete_after="1h")
        return policy(name, kind, delete_after="1h", dry_run=value)

    policies = [with_dry_run("cluster", CLUSTER, cluster_policy)]
    if lifecycle_policy is not None:
        policies.append(with_dry_run("team", NAMESPACED, lifecycle_policy))
    decision = decide_for(
        {} if own is None else {keys.DRY_RUN: own},
        *policies,
        settings=DecisionSettings(dry_run=flag),
        namespace={} if namespace is None else {keys.DRY_RUN: namespace},
    )
    assert type(decision) is expected


_LAYERS = ("object", "LifecyclePolicy", "ClusterLifecyclePolicy", "namespace", "flag")


@given(present=st.lists(st.booleans(), min_size=5, max_size=5))
def test_warn_before_comes_from_the_first_layer_that_sets_it(present: list[bool]) -> None:
    minutes = {layer: str(index + 1) + "m" for index, layer in enumerate(_LAYERS)}
    own = {keys.WARN_BEFORE: minutes["object"]} if present[0] else {}
    cluster_minutes = minutes["ClusterLifecyclePolicy"]
    policies = [
        policy("c", CLUSTER, delete_after="1h", warn_before=cluster_minutes)
        if present[2]
        else policy("c", CLUSTER, delete_after="1h")
    ]
    if present[1]:
        policies.append(
            policy("t", NAMESPACED, warn_before=minutes["LifecyclePolicy"], delete_after="1h")
        )
    defaults = parse_namespace_defaults(
        "team-a", {keys.WARN_BEFORE: minutes["namespace"]} if present[3] else {}
    )
    settings = DecisionSettings(warn_before_ns=5 * MINUTE if present[4] else 0)
    inputs = resolve(own, *policies)
    resolved = resolve_inputs(inputs.annotations, defaults, settings)
    if keys.WARN_BEFORE in inputs.annotations:  # decide() reads the object's key first
        effective = int(inputs.annotations[keys.WARN_BEFORE].removesuffix("m")) * MINUTE
    else:
        effective = resolved.settings.warn_before_ns
    first = next((index for index, on in enumerate(present) if on), None)
    expected = 0 if first is None else (first + 1) * MINUTE
    assert effective == expected
    layer = None if first is None else _LAYERS[first]
    if layer in ("LifecyclePolicy", "ClusterLifecyclePolicy"):
        assert inputs.sources[keys.WARN_BEFORE] is InputSource.POLICY
    if layer == "namespace":
        assert resolved.sources[keys.WARN_BEFORE] is NamespaceSource.NAMESPACE


# --- anchors: a policy writes nothing to schedule an action ------------------------------


def test_delete_after_counts_from_the_creation_and_never_converts() -> None:
    due_later = decide_for({}, policy(delete_after="48h"), facts=CONFIGMAP)
    assert isinstance(due_later, Wait)
    assert due_later.due_ns == CONFIGMAP.creation_ns + 48 * HOUR  # type: ignore[operator]
    overdue = decide_for({}, policy(delete_after="1h"), facts=OLD_CONFIGMAP)
    assert isinstance(overdue, Delete)


def test_a_manifest_without_creation_counts_from_the_pass() -> None:
    inputs = resolve_policies({}, [policy(delete_after="1h")], creation_ns=None,
                              restart_marker=None, now_ns=NOW)  # fmt: skip
    assert inputs.annotations[keys.DELETE_AT] == format_rfc3339_nano(NOW + HOUR)


@pytest.mark.parametrize("managed", [False, True])
def test_the_delete_ttl_caps_apply_to_policy_deletions(managed: bool) -> None:
    annotations = {keys.MANAGED_BY: keys.MANAGED_BY_VALUE} if managed else {}
    capped = decide_for(
        annotations,
        policy(delete_after="72h"),
        facts=CONFIGMAP,
        settings=DecisionSettings(max_delete_ttl_ns=DAY),
    )
    assert isinstance(capped, Invalid)
    assert capped.reason == DELETE_TTL_EXCEEDED
    in_namespace = decide_for(
        annotations,
        policy(delete_after="72h"),
        facts=CONFIGMAP,
        namespace={keys.MAX_DELETE_TTL: "1d"},
    )
    assert isinstance(in_namespace, Invalid)
    assert in_namespace.reason == DELETE_TTL_EXCEEDED


@pytest.mark.parametrize(
    ("marker", "creation", "since", "expected"),
    [
        ("2026-10-04T03:00:00Z", ts("2026-10-01T00:00:00Z"), None, ts("2026-10-04T03:00:00Z")),
        ("2026-10-04T03:00:00.123456789Z", None, None, ts("2026-10-04T03:00:00.123456789Z")),
        (None, ts("2026-10-01T00:00:00Z"), None, ts("2026-10-01T00:00:00Z")),
        ("not a time", ts("2026-10-01T00:00:00Z"), None, ts("2026-10-01T00:00:00Z")),
        ("", ts("2026-10-01T00:00:00Z"), None, ts("2026-10-01T00:00:00Z")),
        # A policy accepted after the last restart: nothing before it is "missed".
        ("2026-10-02T03:00:00Z", ts("2026-10-01T00:00:00Z"), ts("2026-10-04T12:00:00Z"),
         ts("2026-10-04T12:00:00Z")),
        # An object created after the policy: its own creation.
        (None, ts("2026-10-04T20:00:00Z"), ts("2026-10-04T12:00:00Z"), ts("2026-10-04T20:00:00Z")),
        (None, None, None, NOW),
    ],
)  # fmt: skip
def test_recurring_anchor(
    marker: str | None, creation: int | None, since: int | None, expected: int
) -> None:
    anchor = recurring_anchor(
        restart_marker=marker, creation_ns=creation, schedule_since_ns=since, now_ns=NOW
    )
    assert anchor == expected


RESTARTS = ("deployments.apps",)


def test_a_recurring_policy_restart_never_initializes_the_schedule() -> None:
    p = policy(resources=RESTARTS, restart_every="24h")
    fresh = decide_for({}, p, facts=DEPLOYMENT)  # created an hour ago
    assert isinstance(fresh, Wait)
    assert fresh.due_ns == DEPLOYMENT.creation_ns + DAY  # type: ignore[operator]
    # Without the policy layer, the same annotation initializes (a write).
    own = decide_for({keys.RESTART_EVERY: "24h"}, facts=DEPLOYMENT)
    assert isinstance(own, Patch)


def test_a_recurring_policy_restart_counts_from_the_marker() -> None:
    p = policy(resources=RESTARTS, restart_cron="0 3 * * *")
    old = dataclasses.replace(DEPLOYMENT, creation_ns=NOW - 30 * DAY)
    restarted = dataclasses.replace(old, restart_marker=format_rfc3339_nano(NOW))
    waiting = decide_for({}, p, facts=restarted)
    assert isinstance(waiting, Wait)
    assert waiting.due_ns == NOW + DAY
    # Not restarted since before the policy was accepted: the policy's acceptance counts.
    since = {p.ref: NOW}
    assert isinstance(decide_for({}, p, facts=old, schedule_since_ns=since), Wait)
    # Without either, the missed 03:00 occurrence is due (the catch-up policy decides).
    due = decide_for({}, p, facts=old)
    assert isinstance(due, Patch)
    assert due.operation.value == "restart"


def test_a_one_off_policy_restart_is_done_once_the_marker_passes_it() -> None:
    p = policy(resources=RESTARTS, restart_at="2026-10-05T02:30:00Z")
    old = dataclasses.replace(DEPLOYMENT, creation_ns=NOW - DAY)
    assert isinstance(decide_for({}, p, facts=old), Patch)
    marked = dataclasses.replace(old, restart_marker="2026-10-05T02:30:00.5Z")
    assert isinstance(decide_for({}, p, facts=marked), Idle)
    at_the_time = dataclasses.replace(old, restart_marker="2026-10-05T02:30:00Z")
    assert isinstance(decide_for({}, p, facts=at_the_time), Idle)
    before = dataclasses.replace(old, restart_marker="2026-10-05T02:29:59.999999999Z")
    assert isinstance(decide_for({}, p, facts=before), Patch)
    # An object created after the time has nothing to restart for.
    newer = dataclasses.replace(DEPLOYMENT, creation_ns=ts("2026-10-05T02:45:00Z"))
    assert isinstance(decide_for({}, p, facts=newer), Idle)


# --- properties ---------------------------------------------------------------------------

_names = st.sampled_from(["a", "b", "c", "d", "e"])
_kinds = st.sampled_from([CLUSTER, NAMESPACED])
_specs = st.tuples(_names, _kinds, st.integers(-3, 3))


def _build(specs: list[tuple[str, PolicyKind, int]]) -> list[Policy]:
    unique = {(name, kind): priority for name, kind, priority in specs}
    return [policy(name, kind, priority) for (name, kind), priority in unique.items()]


@given(specs=st.lists(_specs, min_size=1, max_size=6), added=_specs, data=st.data())
def test_adding_a_lower_priority_policy_never_changes_the_winner(
    specs: list[tuple[str, PolicyKind, int]],
    added: tuple[str, PolicyKind, int],
    data: st.DataObject,
) -> None:
    policies = _build(specs)
    winner = best_policy(policies)
    assert winner is not None
    name, kind, _ = added
    if (name, kind) in {(p.ref.name, p.kind) for p in policies}:
        return
    if kind is winner.kind:
        lower = policy(name, kind, winner.priority - data.draw(st.integers(1, 5)))
    elif winner.kind is NAMESPACED:
        lower = policy(name, CLUSTER, data.draw(st.integers(-10, 10)))  # any cluster policy
    else:
        return  # a namespaced policy outranks every cluster policy by design
    assert best_policy([*policies, lower]) is winner
    assert resolve({}, *policies, lower).decided_by is winner


@given(specs=st.lists(_specs, min_size=1, max_size=6), seed=st.randoms())
def test_the_winner_does_not_depend_on_the_order(
    specs: list[tuple[str, PolicyKind, int]], seed: Any
) -> None:
    policies = _build(specs)
    shuffled = list(policies)
    seed.shuffle(shuffled)
    assert best_policy(shuffled) is best_policy(policies)
    first, second = resolve({}, *policies), resolve({}, *shuffled)
    assert first.decided_by is second.decided_by
    assert first.overlapped == second.overlapped
    assert len(first.overlapped) == len(policies) - 1
    assert all(isinstance(ref, PolicyRef) for ref in first.overlapped)
