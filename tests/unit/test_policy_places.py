"""A limit's places recorded before they are used (controller/policy/places.py).

docs/policies.md#limit, docs/reliability.md#policy-sigkill. Against a status store that
checks resourceVersions like the API server (a Conflict on a stale one) and can refuse: one
write records a batch of places (the asker's and the other due objects', as many as the
window has free); a pass whose place that write recorded writes nothing; the next batch
settles the places used (one group, their audit entries counted in the same write) and
carries the ones in flight; a failed write records nothing; a new holder seeds its window
with every place used or reserved, takes over the names it acts on, and settles a stopped
holder's batch for what was done. Through :class:`PolicyLimits`, an action whose batch ran
out while its pass read other facts does not go.
"""

from __future__ import annotations

import asyncio
import copy
from collections.abc import Mapping
from typing import Any

import pytest

from lifecycle_controller.controller.policy.limits import PolicyLimits
from lifecycle_controller.controller.policy.places import PolicyPlaces
from lifecycle_controller.core.decision.events import DELETION_FAILURE
from lifecycle_controller.core.decision.outcomes import Action, Delete
from lifecycle_controller.core.objects.resources import ObjectKey
from lifecycle_controller.core.policy.limit import LimitWindow, PolicyLimit
from lifecycle_controller.core.policy.model import Policy, PolicyKind, PolicyRef, parse_policy
from lifecycle_controller.core.policy.places import USE_MARGIN_NS, Place, parse_record
from lifecycle_controller.kube import Conflict, Forbidden
from lifecycle_controller.kube.resources import CONFIGMAPS
from tests.doubles.fakeclock import FakeClock

S = 1_000_000_000
T0 = 1_800_000_000 * S
REF = PolicyRef(PolicyKind.NAMESPACED, "team", "capped")
UID = "uid-capped"


class StatusStore:
    """One policy object's status, written by merge patches guarded by resourceVersion."""

    def __init__(self) -> None:
        self.version = 1
        self.uid = UID
        self.status: dict[str, Any] = {}
        self.patches = 0
        #: Errors the next patches raise, in order.
        self.failures: list[Exception] = []

    async def get(self, resource: Any, namespace: str | None, name: str) -> dict[str, Any]:
        await asyncio.sleep(0)
        metadata = {"uid": self.uid, "resourceVersion": str(self.version)}
        return {"metadata": metadata, "status": copy.deepcopy(self.status)}

    async def merge_patch(
        self,
        resource: Any,
        namespace: str | None,
        name: str,
        patch: Mapping[str, Any],
        *,
        field_manager: str = "",
        subresource: str = "",
    ) -> dict[str, Any]:
        await asyncio.sleep(0)
        assert subresource == "status"
        if self.failures:
            raise self.failures.pop(0)
        if patch["metadata"]["resourceVersion"] != str(self.version):
            raise Conflict(409)
        for key, value in patch["status"].items():
            if isinstance(value, Mapping) and isinstance(self.status.get(key), Mapping):
                self.status[key] = {**self.status[key], **value}
            else:
                self.status[key] = copy.deepcopy(value)
        self.version += 1
        self.patches += 1
        return {}

    def touch(self) -> None:
        """Someone else wrote the policy meanwhile."""
        self.version += 1


def _place(name: str, due: int = T0) -> Place:
    return Place(
        resource="configmaps",
        kind="ConfigMap",
        namespace="team",
        name=name,
        uid=f"uid-{name}",
        action="delete",
        due_ns=due,
    )


def _id(name: str) -> str:
    return f"configmaps/team/{name}"


def _window(actions: int = 3, seconds: int = 60) -> LimitWindow:
    return LimitWindow(PolicyLimit(actions, seconds * S, f"{seconds}s"))


def _places(store: StatusStore, clock: FakeClock, holder: str, **kwargs: Any) -> PolicyPlaces:
    places = PolicyPlaces(store, clock, holder=holder, **kwargs)
    places.seed(REF, UID, store.status)
    return places


async def test_one_write_records_the_askers_place_and_the_others_due() -> None:
    store, clock = StatusStore(), FakeClock(start_ns=T0)
    places, window = _places(store, clock, "a"), _window(actions=3)
    want = [_place(n) for n in ("asker", "b", "c", "d")]
    await places.reserve(REF, UID, want, window)
    assert store.patches == 1
    assert places.problem(REF) is None
    record = parse_record(store.status)
    assert record is not None
    [batch] = record.batches
    assert [p.name for p in batch.places] == ["asker", "b", "c"]  # three free places
    assert (batch.holder, batch.count) == ("a", 3)
    assert places.recorded(REF, _id("b"), T0) == frozenset({T0})
    assert places.recorded(REF, _id("d"), T0) == frozenset()
    # b's pass asks too: its place is recorded, nothing is written
    await places.reserve(REF, UID, [_place("b")], window)
    assert store.patches == 1
    # past its batch's last usable instant, no place is usable any more
    late = batch.until_ns - USE_MARGIN_NS
    assert places.recorded(REF, _id("b"), late) == frozenset()


async def test_concurrent_askers_share_one_write() -> None:
    store, clock = StatusStore(), FakeClock(start_ns=T0)
    places, window = _places(store, clock, "a"), _window(actions=5)
    everyone = [_place(n) for n in ("a", "b", "c")]
    await asyncio.gather(*(places.reserve(REF, UID, [p, *everyone], window) for p in everyone))
    assert store.patches == 1
    assert all(places.recorded(REF, _id(p.name), T0) for p in everyone)


async def test_the_next_batch_settles_what_was_done_and_carries_what_is_in_flight() -> None:
    store, clock = StatusStore(), FakeClock(start_ns=T0)
    places, window = _places(store, clock, "a"), _window(actions=5)
    await places.reserve(REF, UID, [_place(n) for n in ("done", "flight", "failed")], window)
    for name in ("done", "flight", "failed"):
        assert places.use(REF, _id(name), T0)
        window.admit(name, clock.now_ns())
    places.finish(REF, _id("done"), T0)
    places.unuse(REF, _id("failed"), T0)  # its DELETE failed: the place is free again
    window.give_back(clock.now_ns())
    await clock.advance(2)
    await places.reserve(REF, UID, [_place("next")], window)
    record = parse_record(store.status)
    assert record is not None
    assert record.groups == ((T0, 1),)  # "done", at the instant it took its place
    [batch] = record.batches
    assert sorted(p.name for p in batch.places) == ["failed", "flight", "next"]
    # its audit entry is counted in the same write
    assert store.status["actions"]["deleted"] == 1
    assert [e["name"] for e in store.status["lastActions"]] == ["done"]
    # the one in flight keeps its state: it is done later, and settled by the next batch
    places.finish(REF, _id("flight"), T0)
    assert places.recorded(REF, _id("flight"), clock.now_ns()) == frozenset()
    await places.reserve(REF, UID, [_place("last")], window)
    assert store.status["actions"]["deleted"] == 2


async def test_a_conflict_is_read_again_and_a_refusal_records_nothing() -> None:
    store, clock = StatusStore(), FakeClock(start_ns=T0)
    places, window = _places(store, clock, "a"), _window()
    store.failures = [Conflict(409)]
    await places.reserve(REF, UID, [_place("x")], window)
    assert places.problem(REF) is None
    assert places.recorded(REF, _id("x"), T0) == frozenset({T0})
    store.failures = [Forbidden(403, {"message": "status is forbidden"})]
    await places.reserve(REF, UID, [_place("y")], window)
    assert places.problem(REF) == "status is forbidden"
    assert places.recorded(REF, _id("y"), T0) == frozenset()
    store.failures = [Conflict(409)] * 3
    await places.reserve(REF, UID, [_place("y")], window)
    assert "conflict" in (places.problem(REF) or "")
    store.uid = "another"
    await places.reserve(REF, UID, [_place("y")], window)
    assert places.problem(REF) == "the policy was deleted"


async def test_a_full_window_records_no_place() -> None:
    store, clock = StatusStore(), FakeClock(start_ns=T0)
    places, window = _places(store, clock, "a"), _window(actions=1)
    window.admit("earlier", T0 - S)
    await places.reserve(REF, UID, [_place("x")], window)
    assert "no place free" in (places.problem(REF) or "")
    assert store.patches == 0  # a write would have recorded nothing for it
    assert places.recorded(REF, _id("x"), T0) == frozenset()


async def test_a_new_holder_counts_every_place_and_settles_what_was_done() -> None:
    store, clock = StatusStore(), FakeClock(start_ns=T0)
    first, window = _places(store, clock, "first"), _window(actions=4)
    await first.reserve(REF, UID, [_place(n) for n in ("gone", "kept", "taken")], window)
    assert first.use(REF, _id("gone"), T0)
    first.finish(REF, _id("gone"), T0)  # then the process is killed: nothing settled
    [batch] = parse_record(store.status).batches  # type: ignore[union-attr]

    deleted = {"uid-gone"}
    second = PolicyPlaces(
        store, clock, holder="second", done=lambda place, since: place.uid in deleted
    )
    seeded = second.seed(REF, UID, store.status)
    assert seeded == [batch.until_ns] * 3  # the whole batch, at its until
    fresh = _window(actions=4)
    fresh.seed(seeded)
    # the successor acts on "taken" itself: it names it in its own batch first
    await second.reserve(REF, UID, [_place("taken")], fresh)
    record = parse_record(store.status)
    assert record is not None
    foreign, own = record.batches
    assert sorted(p.name for p in foreign.places) == ["gone", "kept"]
    assert foreign.count == 3
    assert [p.name for p in own.places] == ["taken"]
    assert second.settleable(clock.now_ns()) == []  # not before its until
    await clock.advance(11)
    assert second.settleable(clock.now_ns()) == [REF]
    await second.settle(REF, 60 * S)
    record = parse_record(store.status)
    assert record is not None
    assert record.groups == ((batch.until_ns, 3),)
    assert [b.holder for b in record.batches] == ["second"]
    assert store.status["actions"]["deleted"] == 1  # "gone": done; "kept" was not
    assert [e["name"] for e in store.status["lastActions"]] == ["gone"]
    assert second.writes == {"reserve": 1, "settle": 1}


# ------------------------------------------------------------------ through PolicyLimits


def _policy() -> Policy:
    spec = {
        "resources": ["configmaps"],
        "limit": {"actions": 2, "window": "1h"},
        "lifecycle": {"delete-after": "1s"},
    }
    parsed = parse_policy(PolicyKind.NAMESPACED, "team", "capped", 1, spec)
    assert isinstance(parsed, Policy)
    return parsed


def _delete(due: int) -> Delete:
    return Delete(
        uid="uid-x",
        resource_version="1",
        failure=DELETION_FAILURE,
        action=Action.DELETE,
        policy=str(REF),
        due_ns=due,
    )


@pytest.mark.parametrize("late", [False, True])
async def test_an_action_goes_only_with_a_place_usable_when_it_is_taken(late: bool) -> None:
    store, clock = StatusStore(), FakeClock(start_ns=T0)
    policy = _policy()
    limits = PolicyLimits(
        None,
        policy_of=lambda name: (policy, store.status, UID),
        places=PolicyPlaces(store, clock, holder="a"),
    )
    key = ObjectKey(CONFIGMAPS, "team", "x")
    due = T0 - S
    [facts] = limits.facts(key, [REF], T0).values()
    assert facts.recording
    assert facts.recorded == frozenset()
    await limits.reserve(key, "uid-x", _delete(due), T0)
    [facts] = limits.facts(key, [REF], T0).values()
    assert facts.recorded == frozenset({due})
    if late:  # the pass read other facts until its batch's last usable instant
        await clock.advance(10)
    assert limits.take(key, _delete(due), facts, T0) is not late
    assert limits.state(REF, T0).used == (0 if late else 1)  # type: ignore[union-attr]


async def test_a_rehearsals_place_counts_and_its_entry_is_the_reports_own() -> None:
    """A dry-run report takes a place like an action, but its audit entry is counted by the
    rehearsal's own rules (the status writer, dryRunThrough), never as a deletion."""
    store, clock = StatusStore(), FakeClock(start_ns=T0)
    places, window = _places(store, clock, "a"), _window(actions=3)
    await places.reserve(REF, UID, [_place("reported")], window)
    assert places.use(REF, _id("reported"), T0)
    window.admit("reported", clock.now_ns())
    places.finish(REF, _id("reported"), T0, dry_run=True)
    await places.reserve(REF, UID, [_place("next")], window)
    record = parse_record(store.status)
    assert record is not None
    assert record.groups == ((T0, 1),)
    assert "actions" not in store.status


async def test_an_action_the_status_writer_counted_is_named_no_more() -> None:
    """The status writer's audit write takes the names of the actions it counts out of the
    record (their places still counted), so neither the next batch nor a successor counts
    them again, however many entries come between."""
    store, clock = StatusStore(), FakeClock(start_ns=T0)
    places, window = _places(store, clock, "a"), _window(actions=3)
    await places.reserve(REF, UID, [_place("x"), _place("y")], window)
    assert places.use(REF, _id("x"), T0)
    places.finish(REF, _id("x"), T0)
    occurrence = _place("x").occurrence
    assert places.unnamed(REF, store.status, [_place("z").occurrence]) is None
    unnamed = places.unnamed(REF, store.status, [occurrence])
    assert unnamed is not None
    [batch] = parse_record({"limit": unnamed}).batches  # type: ignore[union-attr]
    assert ([p.name for p in batch.places], batch.count) == (["y"], 2)
    places.audited(REF, [occurrence])
    await places.reserve(REF, UID, [_place("next")], window)
    assert "actions" not in store.status  # counted by the status writer, not again
    assert parse_record(store.status).groups == ((T0, 1),)  # type: ignore[union-attr]


async def test_a_place_freeing_within_the_batch_is_recorded_with_it() -> None:
    """Limit 2 per minute, both places taken, one 55 s ago: it frees within the batch's
    life, so the write records it now, and its object goes when the window lets it, with
    no write then. One taken a second ago does not free in time: no place, and no write."""
    store, clock = StatusStore(), FakeClock(start_ns=T0)
    places, window = _places(store, clock, "a"), _window(actions=2)
    window.admit("old", T0 - 55 * S)
    window.admit("new", T0 - S)
    await places.reserve(REF, UID, [_place("x"), _place("y")], window)
    assert places.recorded(REF, _id("x"), T0) == frozenset({T0})
    assert places.recorded(REF, _id("y"), T0) == frozenset()
    assert store.patches == 1
    await places.reserve(REF, UID, [_place("y")], window)
    assert store.patches == 1
