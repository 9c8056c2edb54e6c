"""A policy's limit in the controller (controller/policy/limits.py, docs/policies.md#limit):
only what was done counts, and a deleted policy's window goes with it.

On the in-memory API server with the fake clock: a DELETE that fails gives its place back
(the next due object goes, and the first one waiting is queued again); a policy deleted
leaves no window behind, so one applied again under its name starts with an empty window,
even when the controller never saw the deletion (the window belongs to the policy's UID).
"""

from __future__ import annotations

from dataclasses import replace
from typing import Any

import pytest

from lifecycle_controller.controller.events.recorder import KubeEventRecorder
from lifecycle_controller.controller.policy.limits import PolicyLimits
from lifecycle_controller.controller.policy.store import PolicyStore
from lifecycle_controller.controller.reconcile.assembly import build_reconciler
from lifecycle_controller.controller.watch.cache import MetadataCache
from lifecycle_controller.controller.work.result import Result
from lifecycle_controller.core import DecisionSettings, Ledger
from lifecycle_controller.core.decision.events import DELETION_FAILURE
from lifecycle_controller.core.decision.guardrails import Hold, HoldReason
from lifecycle_controller.core.decision.outcomes import Action, Delete, Wait
from lifecycle_controller.core.objects.resources import ObjectKey
from lifecycle_controller.core.policy.limit import PolicyLimit
from lifecycle_controller.core.policy.model import Policy, PolicyKind, parse_policy
from lifecycle_controller.core.text.timestamps import format_rfc3339_seconds
from lifecycle_controller.kube import KubeClient, KubeError
from lifecycle_controller.kube.resources import CLUSTER_POLICIES, CONFIGMAPS, POLICIES
from tests.doubles.fakeapi import FakeApiServer
from tests.doubles.fakeclock import FakeClock
from tests.unit.support import limit_pass

S = 1_000_000_000
T0 = 1_800_000_000 * S
POLICY = "LifecyclePolicy/team/capped"


def capped() -> dict[str, Any]:
    return {
        "apiVersion": "lifecycle.cezary.dev/v1alpha1",
        "kind": "LifecyclePolicy",
        "metadata": {"name": "capped"},
        "spec": {
            "resources": ["configmaps"],
            "limit": {"actions": 1, "window": "1h"},
            "lifecycle": {"delete-after": "1s"},
        },
    }


def _policy() -> Policy:
    parsed = parse_policy(PolicyKind.NAMESPACED, "team", "capped", 1, capped()["spec"])
    assert isinstance(parsed, Policy)
    return parsed


def _delete(name: str, due_ns: int) -> Delete:
    return Delete(
        uid=name,
        resource_version="1",
        failure=DELETION_FAILURE,
        action=Action.DELETE,
        policy=POLICY,
        due_ns=due_ns,
    )


def _key(name: str) -> ObjectKey:
    return ObjectKey(CONFIGMAPS, "team", name)


def test_a_place_given_back_is_free_again_and_wakes_the_first_waiting() -> None:
    policy = _policy()
    woken: list[ObjectKey] = []
    limits = PolicyLimits(None, policy_of=lambda name: (policy, {}, "uid-1"))
    limits.on_freed = woken.append
    assert limit_pass(limits, _key("a"), _delete("a", T0), T0) == _delete("a", T0)
    held = limit_pass(limits, _key("b"), _delete("b", T0 + S), T0 + S)
    assert held != _delete("b", T0 + S)  # the window is full: b waits
    limits.give_back(_key("a"))  # a's DELETE failed
    assert woken == [_key("b")]
    state = limits.state(policy.ref, T0 + S)
    assert state is not None
    assert state.used == 0
    assert limit_pass(limits, _key("b"), _delete("b", T0 + S), T0 + S) == _delete("b", T0 + S)
    limits.give_back(_key("zz"))  # nothing admitted for it: nothing changes
    assert woken == [_key("b")]


def _named(name: str, namespace: str = "team", generation: int = 1) -> Policy:
    spec = capped()["spec"]
    parsed = parse_policy(PolicyKind.NAMESPACED, namespace, name, generation, spec)
    assert isinstance(parsed, Policy)
    return parsed


def test_a_waiter_decided_by_another_policy_leaves_the_line_at_once() -> None:
    """The ghost waiter: an object the limit of A holds is next decided by B (a new policy
    of higher rank, an edit). It leaves A's line then, not never: A stops saying it holds
    it, and A's next place goes to the next object due, not to a ghost."""
    a, b = _named("capped"), _named("rehearsal")
    policies = {str(a.ref): a, str(b.ref): b}
    woken: list[ObjectKey] = []
    limits = PolicyLimits(None, policy_of=lambda name: (policies[name], {}, name))
    limits.on_freed = woken.append
    assert limit_pass(limits, _key("x"), _delete("x", T0), T0) == _delete("x", T0)
    assert isinstance(limit_pass(limits, _key("ghost"), _delete("ghost", T0), T0), Hold)
    assert limits.holding() == {a.ref}
    by_b = replace(_delete("ghost", T0), policy=str(b.ref))
    assert limit_pass(limits, _key("ghost"), by_b, T0 + S) == by_b  # B's own window
    state = limits.state(a.ref, T0 + S)
    assert state is not None
    assert state.held == 0
    assert limits.holding() == set()
    # A's window frees: the next object due goes (nothing waits ahead of it).
    hour = 3600 * S
    later = _delete("y", T0 + hour)
    assert limit_pass(limits, _key("y"), later, T0 + hour + S) == later


@pytest.mark.parametrize(
    "leave",
    [
        "nothing due any more",
        "gone",
        "policy edited",
    ],
)
def test_a_waiter_leaves_the_line_when_its_object_or_its_policy_changes(leave: str) -> None:
    policy = [_policy()]
    limits = PolicyLimits(None, policy_of=lambda name: (policy[0], {}, "uid-1"))
    limit_pass(limits, _key("a"), _delete("a", T0), T0)
    limit_pass(limits, _key("b"), _delete("b", T0), T0)
    assert limits.holding() == {policy[0].ref}
    if leave == "nothing due any more":  # it stopped matching, or its due time moved
        limit_pass(limits, _key("b"), Wait(requeue_after_ns=S, policy=POLICY), T0 + S)
    elif leave == "gone":
        limits.gone(_key("b"))
    else:
        policy[0] = replace(policy[0], generation=2)
    assert limits.holding() == set()
    state = limits.state(policy[0].ref, T0 + S)
    assert state is not None
    assert (state.used, state.held) == (1, 0)


def test_a_waiter_held_by_another_guardrail_keeps_its_place() -> None:
    limits = PolicyLimits(None, policy_of=lambda name: (_policy(), {}, "uid-1"))
    limit_pass(limits, _key("a"), _delete("a", T0), T0)
    limit_pass(limits, _key("b"), _delete("b", T0), T0)
    budget = Hold(
        reason=HoldReason.BUDGET,
        held=_delete("b", T0),
        requeue_after_ns=S,
        action=Action.DELETE,
        due_ns=T0,
    )
    limits.record(_key("b"), _delete("b", T0), budget, T0 + S)
    assert limits.holding() == {_policy().ref}


def test_a_place_free_wakes_the_first_waiter_only() -> None:
    """Three places free at once after a failed write and two departures: each admission
    wakes the next waiter while a place is free, one at a time."""
    two = replace(_policy(), limit=PolicyLimit(2, 3600 * S, "1h"))
    woken: list[ObjectKey] = []
    limits = PolicyLimits(None, policy_of=lambda name: (two, {}, "uid-1"))
    limits.on_freed = woken.append
    for name in ("a", "b", "c", "d", "e"):
        limit_pass(limits, _key(name), _delete(name, T0), T0)
    assert woken == []
    limits.give_back(_key("a"))  # a's DELETE failed: c is first
    assert woken == [_key("c")]
    limit_pass(limits, _key("c"), _delete("c", T0), T0 + S)  # c takes it: the window is full
    assert woken == [_key("c")]
    limits.gone(_key("d"))  # no place free: nobody to wake
    assert woken == [_key("c")]


def test_the_hold_begins_with_the_first_waiter_and_survives_a_restart() -> None:
    """``held_since``: when the first object was held; a new controller takes it from the
    Limited condition the status shows, until it has decided every object once; an edit
    that empties the line does not end the hold."""
    status: dict[str, object] = {
        "conditions": [
            {
                "type": "Limited",
                "status": "True",
                "lastTransitionTime": format_rfc3339_seconds(T0 - 3600 * S),
            }
        ]
    }
    policy = [_policy()]
    limits = PolicyLimits(None, policy_of=lambda name: (policy[0], status, "uid-1"))

    def since(now_ns: int) -> int | None:
        return limits.facts(_key("c"), [policy[0].ref], now_ns)[POLICY].held_since_ns

    assert since(T0) == T0 - 3600 * S
    limits.quiet()  # every object decided: none of them rejoined the line
    assert since(T0) is None
    limit_pass(limits, _key("a"), _delete("a", T0), T0)
    limit_pass(limits, _key("b"), _delete("b", T0), T0 + S)
    assert since(T0 + S) == T0 + S
    policy[0] = replace(policy[0], generation=2)  # edited: its objects are decided again
    assert since(T0 + 2 * S) == T0 + S
    assert limits.holding() == set()  # the line is empty until they rejoin
    limit_pass(limits, _key("b"), _delete("b", T0), T0 + 2 * S)
    assert since(T0 + 2 * S) == T0 + S


def test_a_deleted_policy_leaves_no_window_behind() -> None:
    policy = _policy()
    limits = PolicyLimits(None, policy_of=lambda name: (policy, {}, "uid-1"))
    limit_pass(limits, _key("a"), _delete("a", T0), T0)
    limit_pass(limits, _key("b"), _delete("b", T0 + S), T0 + S)  # waits
    limits.done(_key("a"), "a", _delete("a", T0), T0)
    assert limits.holding() == {policy.ref}
    limits.drop([policy.ref])
    assert limits.state(policy.ref, T0 + S) is None
    assert limits.holding() == set()
    assert limits.pending == {}
    assert limits.tripped == set()
    # Applied again under the same name: a fresh window, a's action is not counted in it.
    assert limit_pass(limits, _key("c"), _delete("c", T0 + 2 * S), T0 + 2 * S) == _delete(
        "c", T0 + 2 * S
    )


def test_a_policy_created_again_under_its_name_unseen_gets_a_window_of_its_own() -> None:
    """The controller never saw the deletion (the policy was deleted and applied again
    between two watch events): the new object, with a UID of its own, is not capped by its
    predecessor's actions, and what waited for the old window waits no more."""
    policy = _policy()
    owner = ["uid-1"]
    limits = PolicyLimits(None, policy_of=lambda name: (policy, {}, owner[0]))
    limit_pass(limits, _key("a"), _delete("a", T0), T0)
    assert limit_pass(limits, _key("b"), _delete("b", T0 + S), T0 + S) != _delete("b", T0 + S)
    limits.done(_key("a"), "a", _delete("a", T0), T0)
    owner[0] = "uid-2"
    assert limit_pass(limits, _key("c"), _delete("c", T0 + 2 * S), T0 + 2 * S) == _delete(
        "c", T0 + 2 * S
    )
    state = limits.state(policy.ref, T0 + 2 * S)
    assert state is not None
    assert (state.used, state.held) == (1, 0)
    assert limits.pending == {}  # the old object's audit entry is not written to the new one
    # The same object again keeps its window: d waits behind c.
    assert limit_pass(limits, _key("d"), _delete("d", T0 + 3 * S), T0 + 3 * S) != _delete(
        "d", T0 + 3 * S
    )


@pytest.fixture
async def store(api: FakeApiServer, kube: KubeClient, clock: FakeClock) -> PolicyStore:
    api.serve(CLUSTER_POLICIES)
    api.serve(POLICIES)
    api.store.create(POLICIES, "team", capped())
    loaded = PolicyStore(kube, clock=clock)
    assert await loaded.load()
    return loaded


async def test_a_failed_delete_does_not_count_against_the_limit(
    api: FakeApiServer, kube: KubeClient, clock: FakeClock, store: PolicyStore
) -> None:
    """Limit 1 per hour: the first due object's DELETE fails (a 500), so the second one is
    deleted rather than held for an hour; the audit has the one deletion done."""
    cache = MetadataCache(policy_views=store)
    reconcile = build_reconciler(
        api=kube,
        cache=cache,
        recorder=KubeEventRecorder(kube, clock=clock, reporting_instance="test"),
        clock=clock,
        ledger=Ledger(),
        settings=DecisionSettings(),
        policies=store,
    )
    for name in ("first", "second"):
        created = api.store.create(CONFIGMAPS, "team", {"metadata": {"name": name}})
        cache.put(_key(name), cache.project(CONFIGMAPS, created["metadata"]))
        await clock.advance(1)
    await clock.advance(1)  # both due
    api.fail(500, method="DELETE", path="/configmaps/first")
    with pytest.raises(KubeError):
        await reconcile(_key("first"))
    assert await reconcile(_key("second")) is None  # deleted, not held
    deleted = [request.path.rsplit("/", 1)[-1] for request in api.requests_to("DELETE")]
    assert deleted == ["first", "second"]  # the first one failed
    assert api.store.find(CONFIGMAPS, "team", "second") is None
    decisions = reconcile.policies
    assert decisions is not None
    (entry,) = decisions.limits.pending[store.docs()[0].ref]
    assert entry.name == "second"  # the audit counts what was done
    # The first one, retried, now waits for the place the second one took.
    retried = await reconcile(_key("first"))
    assert isinstance(retried, Result)
    assert retried.requeue_after == pytest.approx(3600, abs=3)
