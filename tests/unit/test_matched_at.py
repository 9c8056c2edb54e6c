"""``matchedAt`` in memory (docs/policies.md#since): the first sight stays, a stop forgets it
(a match again starts again), an unknown match keeps it, a new generation or a gone policy
starts again, a recreated object (another UID) starts again; changes are told per policy."""

from __future__ import annotations

from typing import Any

from lifecycle_controller.controller.policy.matched_at import MatchedAt
from lifecycle_controller.core import ObjectKey
from lifecycle_controller.core.objects.resources import ResourceType
from lifecycle_controller.core.policy.in_force import PolicySet, object_view
from lifecycle_controller.core.policy.model import Policy, PolicyKind, PolicyRef, parse_policy
from lifecycle_controller.core.policy.precedence import Resolution

CONFIGMAPS = ResourceType("", "v1", "configmaps", "ConfigMap", namespaced=True)
KEY = ObjectKey(CONFIGMAPS, "team-a", "settings")
T0 = 1_000_000_000_000


def policy(generation: int = 1, since: str = "matchedAt", **fields: Any) -> Policy:
    spec = {
        "resources": ["configmaps"],
        "since": since,
        "lifecycle": {"delete-after": "168h"},
    } | fields
    parsed = parse_policy(PolicyKind.NAMESPACED, "team-a", "unused", generation, spec)
    assert isinstance(parsed, Policy), parsed
    return parsed


def resolve(
    policies: PolicySet, tracker: MatchedAt, now: int, uid: str = "u1", **labels: str
) -> Resolution:
    tracker.sync(policies)
    view = object_view(CONFIGMAPS, {"name": "settings", "namespace": "team-a", "labels": labels})
    resolution = policies.resolve(
        {}, view, restart_marker=None, now_ns=now, matched_at=tracker.of(KEY, uid)
    )
    tracker.observe(KEY, uid, resolution)
    return resolution


def test_the_first_sight_stays_and_a_stop_forgets_it() -> None:
    policies = PolicySet.of([policy(selector={"matchLabels": {"unused": "yes"}})])
    ref = policies.valid[0].ref
    tracker, changed = MatchedAt(), list[tuple[PolicyRef, bool]]()
    tracker.on_change = lambda ref, removed: changed.append((ref, removed))
    assert resolve(policies, tracker, T0, unused="yes").matched_at == {ref: T0}
    assert resolve(policies, tracker, T0 + 5, unused="yes").matched_at == {ref: T0}
    assert changed == [(ref, False)]
    resolve(policies, tracker, T0 + 10, unused="no")  # stops matching
    assert tracker.of(KEY, "u1") == {}
    assert resolve(policies, tracker, T0 + 20, unused="yes").matched_at == {ref: T0 + 20}
    assert changed == [(ref, False), (ref, True), (ref, False)]


def test_an_unknown_match_keeps_what_was_known() -> None:
    policies = PolicySet.of([policy(condition="size(referencedBy) == 0")])
    ref = policies.valid[0].ref
    tracker = MatchedAt()
    tracker.sync(policies)
    assert tracker.load(ref, 1, {"u1": T0})
    resolution = resolve(policies, tracker, T0 + 10)  # referencedBy not known: held
    assert resolution.holds
    assert tracker.of(KEY, "u1") == {ref: T0}
    assert tracker.tracks[ref].instants() == [("u1", T0)]


def test_another_uid_or_a_new_generation_starts_again() -> None:
    first = PolicySet.of([policy()])
    ref = first.valid[0].ref
    tracker = MatchedAt()
    resolve(first, tracker, T0)
    assert resolve(first, tracker, T0 + 1, uid="u2").matched_at == {ref: T0 + 1}
    second = PolicySet.of([policy(generation=2)])
    assert resolve(second, tracker, T0 + 2, uid="u2").matched_at == {ref: T0 + 2}
    assert not tracker.load(ref, 1, {"u2": T0})  # a store's entries of an old generation
    assert not tracker.load(PolicyRef(ref.kind, None, "other"), 2, {"u2": T0})  # not tracked
    assert tracker.load(ref, 2, {"u2": T0})  # what is known here stays
    assert tracker.of(KEY, "u2") == {ref: T0 + 2}


def test_gone_objects_and_policies_are_forgotten() -> None:
    policies = PolicySet.of([policy()])
    ref = policies.valid[0].ref
    tracker, changed = MatchedAt(), list[tuple[PolicyRef, bool]]()
    tracker.on_change = lambda ref, removed: changed.append((ref, removed))
    resolve(policies, tracker, T0)
    tracker.gone(KEY)
    tracker.gone(KEY)
    assert tracker.of(KEY, "u1") == {}
    resolve(policies, tracker, T0)
    tracker.sync(PolicySet.of([policy(since="timestamp(object.data.when)")]))
    assert tracker.tracks == {}
    assert changed == [(ref, False), (ref, True), (ref, False), (ref, True)]


def test_a_loaded_instant_stands_while_the_object_matches() -> None:
    """After a restart with a store: the first instant, not the first pass, counts."""
    policies = PolicySet.of([policy(selector={"matchLabels": {"unused": "yes"}})])
    ref = policies.valid[0].ref
    tracker, changed = MatchedAt(), list[tuple[PolicyRef, bool]]()
    tracker.sync(policies)
    tracker.on_change = lambda ref, removed: changed.append((ref, removed))
    assert tracker.load(ref, 1, {"u1": T0, "u9": T0})
    assert resolve(policies, tracker, T0 + 50, unused="yes").matched_at == {ref: T0}
    assert tracker.tracks[ref].entries == {KEY: ("u1", T0)}
    assert tracker.tracks[ref].loaded == {"u9": T0}
    assert changed == [(ref, False)]


def test_a_loaded_instant_of_an_object_that_no_longer_matches_is_dropped() -> None:
    policies = PolicySet.of([policy(selector={"matchLabels": {"unused": "yes"}})])
    ref = policies.valid[0].ref
    tracker, changed = MatchedAt(), list[tuple[PolicyRef, bool]]()
    tracker.sync(policies)
    tracker.on_change = lambda ref, removed: changed.append((ref, removed))
    tracker.load(ref, 1, {"u1": T0})
    resolve(policies, tracker, T0 + 50, unused="no")
    assert tracker.tracks[ref].instants() == []
    assert changed == [(ref, True)]
    assert resolve(policies, tracker, T0 + 60, unused="yes").matched_at == {ref: T0 + 60}
