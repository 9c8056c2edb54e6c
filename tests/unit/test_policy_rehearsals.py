"""A rehearsal is counted once (controller/policy/limits.py, docs/reliability.md#policy-audit).

A dry-run report decided again (a policy edit re-queues everything) adds no audit entry and
takes no place in the limit's window; a controller that starts treats what the policy's
``status.actions.dryRunThrough`` covers as reported already, for the generation it found,
while an object an edit seen later brings under the policy is reported; the instant the
writer may record stays before every occurrence due and not reported yet.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import pytest

from lifecycle_controller.controller.act.writes import ObjectWriter
from lifecycle_controller.controller.events.recorder import KubeEventRecorder
from lifecycle_controller.controller.policy.decisions import PolicyDecisions, Tally
from lifecycle_controller.controller.policy.limits import PolicyLimits
from lifecycle_controller.controller.policy.status import PolicyStatusWriter
from lifecycle_controller.controller.policy.store import PolicyDoc, PolicyStore
from lifecycle_controller.controller.watch.cache import MetadataCache
from lifecycle_controller.core.decision.outcomes import Action, DryRun, Operation, Wait
from lifecycle_controller.core.objects.resources import ObjectKey
from lifecycle_controller.core.policy.audit import THROUGH
from lifecycle_controller.core.policy.model import Policy, PolicyKind, parse_policy
from lifecycle_controller.core.text.timestamps import format_rfc3339_nano
from lifecycle_controller.kube import KubeClient, ResourceType
from lifecycle_controller.kube.resources import CLUSTER_POLICIES, CONFIGMAPS, POLICIES
from tests.doubles.fakeapi import FakeApiServer
from tests.doubles.fakeclock import FakeClock
from tests.unit.support import limit_pass

S = 1_000_000_000
T0 = 1_800_000_000 * S
POLICY = "LifecyclePolicy/team/rehearsal"


def _policy_spec(actions: int = 3) -> dict[str, Any]:
    return {
        "resources": ["configmaps"],
        "limit": {"actions": actions, "window": "1h"},
        "lifecycle": {"delete-after": "1s", "dry-run": "true"},
    }


def _policy(generation: int = 1, actions: int = 3) -> Policy:
    spec = _policy_spec(actions)
    parsed = parse_policy(PolicyKind.NAMESPACED, "team", "rehearsal", generation, spec)
    assert isinstance(parsed, Policy)
    return parsed


def _dry(due_ns: int) -> DryRun:
    return DryRun(operation=Operation.DELETE, action=Action.DELETE, policy=POLICY, due_ns=due_ns)


def _key(name: str) -> ObjectKey:
    return ObjectKey(CONFIGMAPS, "team", name)


def _limits(policy: list[Policy], status: dict[str, Any] | None = None) -> PolicyLimits:
    return PolicyLimits(None, policy_of=lambda name: (policy[0], dict(status or {}), "uid-1"))


def _report(limits: PolicyLimits, name: str, due_ns: int, now_ns: int) -> bool:
    """Decide and report one dry run as the reconciler does; True if it went."""
    decision = limit_pass(limits, _key(name), _dry(due_ns), now_ns)
    if isinstance(decision, Wait):
        return False
    limits.done(_key(name), name, decision, now_ns)
    return True


def _entries(limits: PolicyLimits) -> list[str]:
    return [entry.name for entries in limits.pending.values() for entry in entries]


def _used(limits: PolicyLimits, policy: Policy, now_ns: int) -> int:
    state = limits.state(policy.ref, now_ns)
    assert state is not None
    return state.used


def test_a_dry_run_decided_again_is_counted_once_and_takes_one_place() -> None:
    policy = [_policy()]
    limits = _limits(policy)
    assert _report(limits, "a", T0, T0 + S)
    limits.pending.clear()  # written
    # A policy edit that moves no due time re-queues everything: a is decided again.
    policy[0] = _policy(generation=2)
    assert _report(limits, "a", T0, T0 + 2 * S)
    assert _entries(limits) == []
    assert _used(limits, policy[0], T0 + 2 * S) == 1
    # A new due time is a new occurrence: counted.
    assert _report(limits, "a", T0 + 10 * S, T0 + 11 * S)
    assert _entries(limits) == ["a"]


def test_a_restarted_controller_counts_nothing_the_status_covers() -> None:
    """The status says every occurrence due through T0 + 2 s was reported: a, b and c are
    not counted again and take no place (the limit of 3 is not reached by them); d, due
    after it, is counted."""
    policy = [_policy()]
    status = {"actions": {THROUGH: format_rfc3339_nano(T0 + 2 * S)}}
    limits = _limits(policy, status)
    now = T0 + 10 * S
    for index, name in enumerate("abc"):
        assert _report(limits, name, T0 + index * S, now)
    assert _entries(limits) == []
    assert _used(limits, policy[0], now) == 0
    assert _report(limits, "d", T0 + 3 * S, now)
    assert _entries(limits) == ["d"]
    assert _used(limits, policy[0], now) == 1
    assert limits.lagging() == {policy[0].ref}


def test_the_status_holds_for_the_generation_found_edits_seen_later_count() -> None:
    """Before the controller has decided every object once, an edit it sees is what it found
    (an earlier controller may have reported under it); after, an object the edit brings
    under the policy is reported, however old its due time."""
    policy = [_policy()]
    status = {"actions": {THROUGH: format_rfc3339_nano(T0 + 5 * S)}}
    limits = _limits(policy, status)
    now = T0 + 10 * S
    assert _report(limits, "a", T0, now)
    policy[0] = _policy(generation=2)  # edited while the first objects were decided
    assert _report(limits, "b", T0 + S, now)
    assert _entries(limits) == []
    limits.settled = True
    policy[0] = _policy(generation=3)  # edited since: "c" is new to the policy
    assert _report(limits, "c", T0 + 2 * S, now)
    assert _report(limits, "a", T0, now)  # still reported already
    assert _entries(limits) == ["c"]


def test_the_instant_to_record_stays_before_what_the_limit_holds() -> None:
    policy = [_policy(actions=2)]
    limits = _limits(policy)
    now = T0 + 10 * S
    assert _report(limits, "a", T0, now)
    assert _report(limits, "b", T0 + S, now)
    assert not _report(limits, "c", T0 + 2 * S, now)  # held by the limit
    matched = {
        _key("a"): (T0, Action.DELETE),
        _key("b"): (T0 + S, Action.DELETE),
        _key("c"): (T0 + 2 * S, Action.DELETE),
        _key("later"): (T0 + 60 * S, Action.DELETE),  # not due yet
        _key("refused"): None,
    }
    assert limits.next_through(policy[0].ref, matched, now) == T0 + S
    limits.through_written(policy[0].ref, T0 + S)
    assert limits.written_through(policy[0].ref) == T0 + S
    assert limits.lagging() == set()
    assert limits.next_through(policy[0].ref, matched, now) is None
    # An object gone is forgotten: decided again under its key, it is a new one.
    limits.gone(_key("a"))
    assert limit_pass(limits, _key("a"), _dry(T0), now) != _dry(T0)  # the window is full: held


def test_a_deleted_policy_forgets_its_reports() -> None:
    policy = [_policy()]
    limits = _limits(policy)
    assert _report(limits, "a", T0, T0 + S)
    limits.drop([policy[0].ref])
    assert limits.lagging() == set()
    assert limits.next_through(policy[0].ref, {}, T0 + S) is None
    assert _report(limits, "a", T0, T0 + 2 * S)  # applied again: a new audit
    assert _entries(limits) == ["a"]


def test_a_dry_run_without_a_due_time_counts_as_before() -> None:
    policy = [_policy()]
    limits = _limits(policy, {"actions": {THROUGH: format_rfc3339_nano(T0)}})
    undated = DryRun(operation=Operation.DELETE, action=Action.DELETE, policy=POLICY)
    assert limit_pass(limits, _key("a"), undated, T0) == undated
    limits.done(_key("a"), "a", undated, T0)
    assert _entries(limits) == ["a"]


# ------------------------------------------------------------------ the status writer


class StatusApi:
    """The writer's API over one policy: its status merged as a merge patch merges it."""

    def __init__(self, doc: PolicyDoc) -> None:
        self.uid = doc.uid
        self.status: dict[str, Any] = {}
        self.patches = 0

    async def merge_patch(
        self,
        resource: ResourceType,
        namespace: str | None,
        name: str,
        patch: Mapping[str, Any],
        *,
        field_manager: str = "",
        subresource: str = "",
    ) -> dict[str, Any]:
        assert subresource == "status"
        self.patches += 1
        for field, value in patch["status"].items():
            old = self.status.get(field)
            merged = (
                {**old, **value} if isinstance(old, dict) and isinstance(value, dict) else value
            )
            self.status[field] = merged
        return {}

    async def get(self, resource: ResourceType, namespace: str | None, name: str) -> dict[str, Any]:
        metadata = {"uid": self.uid, "resourceVersion": str(self.patches)}
        return {"metadata": metadata, "status": dict(self.status)}


@pytest.fixture
async def rehearsing(api: FakeApiServer, kube: KubeClient, clock: FakeClock) -> PolicyStore:
    api.serve(CLUSTER_POLICIES)
    api.serve(POLICIES)
    body = {
        "apiVersion": "lifecycle.cezary.dev/v1alpha1",
        "kind": "LifecyclePolicy",
        "metadata": {"name": "rehearsal"},
        "spec": _policy_spec(),
    }
    api.store.create(POLICIES, "team", body)
    store = PolicyStore(kube, clock=clock)
    assert await store.load()
    return store


async def test_the_writer_records_how_far_the_reports_go_only_when_idle_and_once(
    kube: KubeClient, clock: FakeClock, rehearsing: PolicyStore
) -> None:
    (doc,) = rehearsing.docs()
    cache = MetadataCache(policy_views=rehearsing)
    decisions = PolicyDecisions(rehearsing, cache, ObjectWriter(kube, cache, clock))
    idle = [False]
    api = StatusApi(doc)
    writer = PolicyStatusWriter(
        api,
        rehearsing,
        decisions,
        KubeEventRecorder(kube, clock=clock, reporting_instance="test"),
        clock,
        watched_keys=lambda: ["configmaps"],
        idle=lambda: idle[0],
    )
    now = clock.now_ns()
    due = now - 5 * S
    tally = Tally(decided_by=(doc.ref,), overlapped=(), action=Action.DELETE, due_ns=due)
    decisions.aggregates.update(_key("a"), None, tally)
    dry = DryRun(operation=Operation.DELETE, action=Action.DELETE, policy=str(doc.ref), due_ns=due)
    assert limit_pass(decisions.limits, _key("a"), dry, now) == dry
    decisions.limits.done(_key("a"), "uid-a", dry, now)

    await writer.flush()
    assert api.status["actions"]["dryRun"] == 1
    assert THROUGH not in api.status["actions"]  # objects may still wait to be decided
    assert not decisions.limits.settled

    idle[0] = True
    await writer.flush()
    assert api.status["actions"][THROUGH] == format_rfc3339_nano(due)
    assert api.status["actions"]["dryRun"] == 1
    assert decisions.limits.settled
    assert decisions.limits.lagging() == set()
    patches = api.patches
    await writer.flush()
    assert api.patches == patches  # said once
