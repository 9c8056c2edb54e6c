"""The executor alone: one guarded write, its accounting, and the reservation it settles.

Decisions are built by hand (core decides elsewhere), the API is the in-memory fake, time is
the fake clock. Each case checks the one request sent, what the cache holds afterwards, the
Events and counters, and what the reservation gave back.
"""

from __future__ import annotations

import dataclasses
from typing import Any

import pytest
from structlog.testing import capture_logs

from lifecycle_controller.controller.act.accounting import Accounting
from lifecycle_controller.controller.act.execution import Executor, WriteOutcome
from lifecycle_controller.controller.act.writes import ObjectWriter
from lifecycle_controller.controller.events.recorder import KubeEventRecorder
from lifecycle_controller.controller.guardrails.breaker import CircuitBreaker
from lifecycle_controller.controller.guardrails.state import Reservation
from lifecycle_controller.controller.rollout.tracker import RolloutTracker
from lifecycle_controller.controller.watch.cache import CachedObject, MetadataCache
from lifecycle_controller.controller.work.result import NotLeading
from lifecycle_controller.core import Action, Delete, Ledger, ObjectKey, Operation, Patch
from lifecycle_controller.core.decision import events as catalogue
from lifecycle_controller.core.decision.outcomes import Outcome
from lifecycle_controller.core.objects import keys
from lifecycle_controller.kube import EVENTS, Conflict, KubeClient, ServerError
from tests.doubles.fakeapi import CONFIGMAPS, DEPLOYMENTS, FakeApiServer
from tests.doubles.fakeclock import FakeClock
from tests.unit.support import annotated

S = 1_000_000_000


class Counters:
    def __init__(self) -> None:
        self.actions: list[tuple[str, str, str]] = []
        self.lateness: list[float] = []
        self.open: list[bool] = []

    def count_action_source(self, action: str, source: str, result: str) -> None:
        pass

    def count_action(self, action: str, kind: str, result: str) -> None:
        self.actions.append((action, kind, result))

    def count_misconfiguration(self, kind: str, reason: str) -> None: ...

    def observe_lateness(self, seconds: float) -> None:
        self.lateness.append(seconds)

    def set_next_action(self, *args: Any) -> None: ...
    def drop_object_series(self, key_id: str) -> None: ...
    def set_ledger_arms(self, n: int) -> None: ...
    def set_breaker_open(self, open_: bool) -> None: ...
    def count_breaker_trip(self) -> None: ...
    def observe_rollout(self, kind: str, result: str, seconds: float) -> None: ...
    def set_rollouts_in_progress(self, count: int) -> None: ...
    def count_rollout_state(self, source: str) -> None: ...


class Rig:
    def __init__(self, api: FakeApiServer, kube: KubeClient, clock: FakeClock) -> None:
        self.api = api
        self.cache = MetadataCache()
        self.counters = Counters()
        self.leading = True
        recorder = KubeEventRecorder(kube, clock=clock, reporting_instance="test")
        self.writer = ObjectWriter(kube, self.cache, clock, may_write=lambda: self.leading)
        self.rollouts = RolloutTracker(kube, recorder, clock, self.counters, limit=1)
        self.breaker = CircuitBreaker(
            kube,
            namespace="ops",
            name="b",
            limit=5,
            window=600,
            clock=clock,
            metrics=self.counters,
        )
        self.executor = Executor(
            self.writer,
            Accounting(recorder, Ledger(), clock.now_ns, self.counters),
            recorder,
            self.rollouts,
        )
        self.clock = clock

    def cached(self, resource: Any, body: dict[str, Any]) -> tuple[ObjectKey, CachedObject]:
        created = self.api.store.create(resource, "team", body)
        key = ObjectKey(resource, "team", created["metadata"]["name"])
        obj = CachedObject.from_metadata(created["metadata"])
        self.cache.put(key, obj)
        return key, obj

    def reservation(self, key: ObjectKey, *, restart: bool = False) -> Reservation:
        counted = self.breaker.reserve(key)
        if restart:
            self.rollouts.reserve(key)
        return Reservation(
            key,
            breaker=self.breaker,
            breaker_counted=counted,
            rollouts=self.rollouts if restart else None,
        )

    def reasons(self, name: str) -> list[str]:
        return [
            e["reason"] for e in self.api.store.objects(EVENTS) if e["regarding"]["name"] == name
        ]

    def in_window(self, key: ObjectKey) -> int:
        facts = self.breaker.facts(key)
        assert facts is not None
        return facts.in_window


@pytest.fixture
def rig(api: FakeApiServer, kube: KubeClient, clock: FakeClock) -> Rig:
    return Rig(api, kube, clock)


def deletion(obj: CachedObject, due_ns: int) -> Delete:
    return Delete(
        uid=obj.uid,
        resource_version=obj.resource_version,
        action=Action.DELETE,
        due_ns=due_ns,
        on_success=Outcome(events=(catalogue.deleted("now"),)),
        failure=catalogue.DELETION_FAILURE,
    )


def restart() -> Patch:
    body = {
        "metadata": {"annotations": {keys.RESTART_AT: None}},
        "spec": {"template": {"metadata": {"annotations": {keys.RESTARTED_AT: "m1"}}}},
    }
    return Patch(
        operation=Operation.RESTART,
        body=body,
        action=Action.RESTART,
        on_success=Outcome(events=(catalogue.restart_triggered(),)),
        failure=catalogue.RESTART_FAILURE,
    )


async def test_a_delete_sends_one_preconditioned_request_and_accounts_for_it(rig: Rig) -> None:
    key, obj = rig.cached(CONFIGMAPS, annotated("cm", {keys.DELETE_AT: "x"}))
    due = rig.clock.now_ns() - 30 * S
    done = await rig.executor.carry_out(
        key, obj, deletion(obj, due), rig.reservation(key), quiet_conflict=False
    )
    assert done.outcome is WriteOutcome.DONE
    (sent,) = rig.api.requests_to("DELETE")
    assert sent.body["preconditions"] == {"uid": obj.uid, "resourceVersion": obj.resource_version}
    assert rig.cache.get(key) is None  # written back before the watch event
    assert rig.reasons("cm") == ["Deleted"]
    assert rig.counters.actions == [("delete", "ConfigMap", "success")]
    assert rig.counters.lateness == [pytest.approx(30.0)]
    assert rig.in_window(key) == 1  # carried out: its place in the window stays taken


async def test_a_policy_deletion_sends_its_propagation_policy(rig: Rig) -> None:
    key, obj = rig.cached(CONFIGMAPS, annotated("cm", {keys.DELETE_AT: "x"}))
    orphan = dataclasses.replace(deletion(obj, rig.clock.now_ns()), propagation="Orphan")
    await rig.executor.carry_out(key, obj, orphan, rig.reservation(key), quiet_conflict=False)
    (sent,) = rig.api.requests_to("DELETE")
    assert sent.body["propagationPolicy"] == "Orphan"
    assert sent.body["preconditions"] == {"uid": obj.uid, "resourceVersion": obj.resource_version}


async def test_a_deletion_without_propagation_leaves_it_to_the_server(rig: Rig) -> None:
    key, obj = rig.cached(CONFIGMAPS, annotated("cm", {keys.DELETE_AT: "x"}))
    due = rig.clock.now_ns()
    await rig.executor.carry_out(
        key, obj, deletion(obj, due), rig.reservation(key), quiet_conflict=False
    )
    (sent,) = rig.api.requests_to("DELETE")
    assert "propagationPolicy" not in sent.body


async def test_a_delete_that_finds_the_object_gone_counts_as_done(rig: Rig) -> None:
    key, obj = rig.cached(CONFIGMAPS, annotated("cm", {keys.DELETE_AT: "x"}))
    rig.api.store.delete(CONFIGMAPS, "team", "cm")
    done = await rig.executor.carry_out(
        key, obj, deletion(obj, rig.clock.now_ns()), rig.reservation(key), quiet_conflict=False
    )
    assert done.outcome is WriteOutcome.DONE
    assert [q.status for q in rig.api.requests_to("DELETE")] == [404]
    assert rig.cache.get(key) is None
    assert rig.counters.actions == [("delete", "ConfigMap", "success")]


async def test_a_restart_remembers_its_marker_follows_the_rollout_and_warns_if_paused(
    rig: Rig,
) -> None:
    body = annotated("web", {keys.RESTART_AT: "x"})
    body["spec"] = {"paused": True, "replicas": 0, "template": {"metadata": {}, "spec": {}}}
    key, obj = rig.cached(DEPLOYMENTS, body)
    done = await rig.executor.carry_out(
        key, obj, restart(), rig.reservation(key, restart=True), quiet_conflict=False
    )
    assert done.outcome is WriteOutcome.DONE
    assert done.fresh is not None
    (sent,) = rig.api.requests_to("PATCH")
    assert sent.body["metadata"]["resourceVersion"] == obj.resource_version
    fact = rig.cache.restart_fact(obj.uid)
    assert fact is not None
    assert fact.marker == "m1"
    assert fact.at_ns == rig.clock.now_ns()
    assert rig.reasons("web") == ["RestartTriggered", "RolloutBlocked"]
    assert rig.rollouts.in_progress == 1  # followed; its slot stays taken
    assert not rig.rollouts.has_turn(ObjectKey(DEPLOYMENTS, "team", "other"), None)
    await rig.rollouts.aclose()


async def test_a_patch_that_finds_the_object_gone_gives_everything_back(rig: Rig) -> None:
    key, obj = rig.cached(DEPLOYMENTS, annotated("web", {keys.RESTART_AT: "x"}))
    rig.api.store.delete(DEPLOYMENTS, "team", "web")
    done = await rig.executor.carry_out(
        key, obj, restart(), rig.reservation(key, restart=True), quiet_conflict=False
    )
    assert done.outcome is WriteOutcome.GONE
    assert rig.cache.get(key) is None
    assert rig.reasons("web") == []
    assert rig.counters.actions == []
    assert rig.in_window(key) == 0  # the breaker's place is given back
    assert rig.rollouts.has_turn(ObjectKey(DEPLOYMENTS, "team", "other"), None)


@pytest.mark.parametrize(("quiet", "warned"), [(True, []), (False, ["DeletionFailed"])])
async def test_a_conflict_is_raised_with_the_warning_only_when_not_retried_quietly(
    rig: Rig, quiet: bool, warned: list[str]
) -> None:
    key, obj = rig.cached(CONFIGMAPS, annotated("cm", {keys.DELETE_AT: "x"}))
    rig.api.fail(409, method="DELETE")
    with pytest.raises(Conflict):
        await rig.executor.carry_out(
            key, obj, deletion(obj, rig.clock.now_ns()), rig.reservation(key), quiet_conflict=quiet
        )
    assert rig.reasons("cm") == warned
    assert rig.cache.get(key) is obj  # nothing written back
    assert rig.in_window(key) == 0


@pytest.mark.parametrize("quiet", [True, False])
async def test_a_restart_keeps_its_rollout_slot_only_while_it_decides_again(
    rig: Rig, quiet: bool
) -> None:
    key, obj = rig.cached(DEPLOYMENTS, annotated("web", {keys.RESTART_AT: "x"}))
    later = ObjectKey(DEPLOYMENTS, "team", "later")
    rig.api.fail(409, method="PATCH")
    with pytest.raises(Conflict):
        await rig.executor.carry_out(
            key, obj, restart(), rig.reservation(key, restart=True), quiet_conflict=quiet
        )
    # Retried quietly, the same reconcile decides again at once: its slot is still its own.
    assert rig.rollouts.has_turn(later, None) is not quiet
    assert rig.rollouts.has_turn(key, None)
    rig.rollouts.abandon(key)  # what the reconcile's end does with a slot it did not use
    assert rig.rollouts.has_turn(later, None)


async def test_a_failed_write_warns_counts_the_error_and_refunds_the_window(rig: Rig) -> None:
    key, obj = rig.cached(CONFIGMAPS, annotated("cm", {keys.DELETE_AT: "x"}))
    rig.api.fail(500, method="DELETE")
    with pytest.raises(ServerError):
        await rig.executor.carry_out(
            key, obj, deletion(obj, rig.clock.now_ns()), rig.reservation(key), quiet_conflict=True
        )
    assert rig.reasons("cm") == ["DeletionFailed"]
    assert rig.counters.actions == [("delete", "ConfigMap", "error")]
    assert rig.in_window(key) == 0


async def test_a_replica_that_may_not_write_sends_nothing(rig: Rig) -> None:
    key, obj = rig.cached(CONFIGMAPS, annotated("cm", {keys.DELETE_AT: "x"}))
    rig.leading = False
    with pytest.raises(NotLeading):
        await rig.executor.carry_out(
            key, obj, deletion(obj, rig.clock.now_ns()), rig.reservation(key), quiet_conflict=False
        )
    assert rig.api.requests_to("DELETE") == []
    assert rig.in_window(key) == 0
    assert rig.cache.get(key) is obj


def test_unknown_keys_are_logged_once_per_object_and_set_of_keys(rig: Rig) -> None:
    accounting = rig.executor.accounting
    key = ObjectKey(CONFIGMAPS, "team", "cm")
    typo = {keys.PREFIX + "delete-afer": "1h", keys.DELETE_AT: "x"}
    with capture_logs() as logs:
        accounting.note_unknown_keys(key, "u1", {keys.DELETE_AT: "x"})  # all known: nothing
        accounting.note_unknown_keys(key, "u1", typo)
        accounting.note_unknown_keys(key, "u1", typo)  # the same object, the same keys: once
        accounting.note_unknown_keys(key, "u2", typo)  # another object
        accounting.note_unknown_keys(key, "u1", {**typo, keys.PREFIX + "restart-evry": "1h"})
    warned = [(e["log_level"], e["annotation"], e["did_you_mean"]) for e in logs]
    assert warned == [
        ("warning", keys.PREFIX + "delete-afer", keys.DELETE_AFTER),
        ("warning", keys.PREFIX + "delete-afer", keys.DELETE_AFTER),
        ("warning", keys.PREFIX + "delete-afer", keys.DELETE_AFTER),
        ("warning", keys.PREFIX + "restart-evry", keys.RESTART_EVERY),
    ]
    assert all(e["name"] == "cm" and e["kind"] == "ConfigMap" for e in logs)
