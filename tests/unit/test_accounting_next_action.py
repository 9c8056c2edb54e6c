"""The next-action gauge from accounting: published when what is due changes (every action the
first time, then only the actions whose due time changed), not again for a pass that decides
the same, and afresh after the object is gone (its series dropped)."""

from __future__ import annotations

from lifecycle_controller.controller.act.accounting import Accounting, NoActionMetrics
from lifecycle_controller.controller.events.recorder import Recorded
from lifecycle_controller.core import Action, Idle, Ledger, ObjectKey, ObjectRef, Wait
from lifecycle_controller.core.decision.events import Event
from tests.doubles.fakeapi import CONFIGMAPS

S = 1_000_000_000


class _NoEvents:
    async def record(self, ref: ObjectRef, event: Event) -> Recorded | None:
        return None


class _NextActions(NoActionMetrics):
    def __init__(self) -> None:
        self.calls: list[tuple[str, str, float | None]] = []
        self.dropped: list[str] = []

    def set_next_action(
        self, key_id: str, action: str, kind: str, namespace: str, due_ts: float | None
    ) -> None:
        self.calls.append((key_id, action, due_ts))

    def drop_object_series(self, key_id: str) -> None:
        self.dropped.append(key_id)


def _wait(due_s: int) -> Wait:
    return Wait(action=Action.DELETE, due_ns=due_s * S, requeue_after_ns=S)


def _accounting() -> tuple[_NextActions, Accounting, ObjectKey, ObjectRef]:
    metrics = _NextActions()
    key = ObjectKey(CONFIGMAPS, "team", "cm")
    return (
        metrics,
        Accounting(_NoEvents(), Ledger(), lambda: 0, metrics),
        key,
        ObjectRef(key, "uid-1", "1"),
    )


async def test_the_next_action_is_published_only_when_it_changes() -> None:
    metrics, accounting, key, ref = _accounting()
    await accounting.decided(ref, _wait(100), _wait(100))
    first = [(key.id, "delete", 100.0), (key.id, "restart", None)]
    assert metrics.calls == first
    await accounting.decided(ref, _wait(100), _wait(100))  # a requeue deciding the same
    assert metrics.calls == first
    await accounting.decided(ref, _wait(200), _wait(200))  # postponed
    assert metrics.calls[2:] == [(key.id, "delete", 200.0)]  # restart stays unset
    await accounting.decided(ref, Idle(), Idle())  # nothing due any more
    assert metrics.calls[3:] == [(key.id, "delete", None)]
    await accounting.decided(ref, _wait(100), _wait(100))
    assert metrics.calls[4:] == [(key.id, "delete", 100.0)]
    accounting.gone(key)
    assert metrics.dropped == [key.id]
    await accounting.decided(ref, _wait(100), _wait(100))  # the same name again, a new object
    assert metrics.calls[5:] == first


async def test_a_change_of_action_moves_the_due_time_from_one_series_to_the_other() -> None:
    metrics, accounting, key, ref = _accounting()
    await accounting.decided(ref, _wait(100), _wait(100))
    restart = Wait(action=Action.RESTART, due_ns=50 * S, requeue_after_ns=S)
    await accounting.decided(ref, restart, restart)
    assert metrics.calls[2:] == [(key.id, "delete", None), (key.id, "restart", 50.0)]
