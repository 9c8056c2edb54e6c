"""The pure rules of the blast-radius controls: the breaker's window and latch, the restart
guard and jitter (core/decision/pacing.py), and rollout completion per kind
(core/objects/rollout_progress.py).

docs/behaviour.md#circuit-breaker, #restart-guard, #restart-jitter, #rollout-verification.
"""

from __future__ import annotations

from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st

from lifecycle_controller.core.decision.breaker import ActionWindow, BreakerState
from lifecycle_controller.core.decision.pacing import (
    last_restart_ns,
    restart_jitter_ns,
    restart_not_before_ns,
)
from lifecycle_controller.core.objects.rollout_progress import rollout_progress

S = 1_000_000_000


# ------------------------------------------------------------------ the window


def test_the_n_plus_first_action_in_a_window_is_refused() -> None:
    window = ActionWindow(3, 10 * S)
    assert [window.admit(t * S) for t in (0, 1, 2, 3)] == [True, True, True, False]
    assert window.count(3 * S) == 3


@pytest.mark.parametrize(
    ("times", "now", "admitted"),
    [
        ((0, 1, 2), 10, True),  # the action at 0 left the window (0 <= 10 - 10)
        ((0, 1, 2), 9, False),
        ((5, 6, 7), 14.5, False),
        ((5, 6, 7), 15, True),  # 5 left the window, 6 and 7 remain
    ],
)
def test_window_edges(times: tuple[int, ...], now: float, admitted: bool) -> None:
    window = ActionWindow(3, 10 * S)
    for t in times:
        assert window.admit(t * S)
    assert window.admit(int(now * S)) is admitted


def test_refund_gives_the_place_back_and_clear_empties() -> None:
    window = ActionWindow(1, 10 * S)
    assert window.admit(0)
    window.refund()
    assert window.admit(1)
    assert not window.admit(2)
    window.clear()
    assert window.admit(3)


def test_a_zero_limit_admits_nothing_and_bad_arguments_fail() -> None:
    assert not ActionWindow(0, S).admit(0)
    with pytest.raises(ValueError, match="window_ns > 0"):
        ActionWindow(1, 0)


@given(
    limit=st.integers(min_value=1, max_value=6),
    window_s=st.integers(min_value=1, max_value=30),
    gaps=st.lists(st.integers(min_value=0, max_value=5 * S), min_size=1, max_size=80),
)
def test_never_more_than_the_limit_within_any_window(
    limit: int, window_s: int, gaps: list[int]
) -> None:
    window = ActionWindow(limit, window_s * S)
    now, admitted = 0, []
    for gap in gaps:
        now += gap
        if window.admit(now):
            admitted.append(now)
    for i, start in enumerate(admitted):
        inside = [t for t in admitted[i:] if t < start + window_s * S]
        assert len(inside) <= limit


def test_breaker_state_round_trips_and_tolerates_garbage() -> None:
    state = BreakerState().tripped(at="2027-01-01T00:00:00Z", actions=5, window="10m0s")
    assert state.open
    assert state.trips == 1
    assert BreakerState.from_data(state.to_data()) == state
    closed = state.reset(at="2027-01-01T01:00:00Z")
    assert not closed.open
    assert closed.trips == 1
    assert closed.tripped_at == state.tripped_at
    assert BreakerState.from_data({"state": "OPEN", "trips": "x"}) == BreakerState(open=True)
    assert BreakerState.from_data(None) == BreakerState()


# ------------------------------------------------------------------ guard and jitter


def test_last_restart_is_the_latest_readable_timestamp() -> None:
    assert last_restart_ns([None, "", "bad", "2027-01-01T00:00:05Z", "2027-01-01T00:00:01Z"]) == (
        last_restart_ns(["2027-01-01T00:00:05Z"])
    )
    assert last_restart_ns([None, "nope"]) is None


@pytest.mark.parametrize(
    ("due", "last", "interval", "jitter", "expected"),
    [
        (100 * S, None, 10 * S, 0, (None, None)),  # never restarted: nothing to wait for
        (100 * S, 95 * S, 10 * S, 0, (None, 105 * S)),
        (100 * S, 95 * S, 0, 0, (None, None)),  # guard off
        (None, 95 * S, 10 * S, 0, (None, 105 * S)),
    ],
)
def test_restart_not_before(
    due: int | None,
    last: int | None,
    interval: int,
    jitter: int,
    expected: tuple[int | None, int | None],
) -> None:
    assert (
        restart_not_before_ns(
            due_ns=due, uid="u", last_restart=last, min_interval_ns=interval, jitter_max_ns=jitter
        )
        == expected
    )


def test_jitter_is_added_to_the_due_time() -> None:
    jittered, guarded = restart_not_before_ns(
        due_ns=100 * S, uid="u", last_restart=None, min_interval_ns=0, jitter_max_ns=30 * S
    )
    assert guarded is None
    assert jittered == 100 * S + restart_jitter_ns("u", 100 * S, 30 * S)


@given(
    uid=st.text(min_size=1, max_size=40),
    occurrence=st.integers(min_value=0, max_value=2**62),
    max_ns=st.integers(min_value=1, max_value=3600 * S),
)
def test_jitter_is_deterministic_and_in_range(uid: str, occurrence: int, max_ns: int) -> None:
    value = restart_jitter_ns(uid, occurrence, max_ns)
    assert 0 <= value < max_ns
    assert value == restart_jitter_ns(uid, occurrence, max_ns)


def test_jitter_spreads_objects_and_occurrences() -> None:
    draws = {restart_jitter_ns(f"uid-{i}", 0, 60 * S) // S for i in range(200)}
    assert len(draws) > 40
    assert restart_jitter_ns("u", 0, 60 * S) != restart_jitter_ns("u", S, 60 * S)
    assert restart_jitter_ns("u", 0, 0) == 0


# ------------------------------------------------------------------ rollout completion


def _deployment(generation: int, spec_replicas: int, **status: Any) -> dict[str, Any]:
    return {
        "kind": "Deployment",
        "metadata": {"generation": generation},
        "spec": {"replicas": spec_replicas},
        "status": status,
    }


def _partitioned(
    *, partition: int, ready: int, updated: int, observed: int = 3, strategy: str = "RollingUpdate"
) -> dict[str, Any]:
    """A three-replica StatefulSet at generation 3, restarted with a partition."""
    return {
        "kind": "StatefulSet",
        "metadata": {"generation": 3},
        "spec": {
            "replicas": 3,
            "updateStrategy": {"type": strategy, "rollingUpdate": {"partition": partition}},
        },
        "status": {
            "observedGeneration": observed,
            "readyReplicas": ready,
            "updatedReplicas": updated,
            "currentRevision": "a",
            "updateRevision": "b",
        },
    }


@pytest.mark.parametrize(
    ("obj", "complete"),
    [
        (_deployment(2, 0, observedGeneration=2), True),
        (_deployment(2, 0, observedGeneration=1), False),
        (
            _deployment(
                2, 1, observedGeneration=2, replicas=1, updatedReplicas=1, availableReplicas=1
            ),
            True,
        ),
        (
            _deployment(
                2, 1, observedGeneration=2, replicas=2, updatedReplicas=1, availableReplicas=1
            ),
            False,
        ),
        (_deployment(2, 1, observedGeneration=2, replicas=1, updatedReplicas=1), False),
        (
            {
                "kind": "StatefulSet",
                "metadata": {"generation": 3},
                "spec": {"replicas": 2},
                "status": {
                    "observedGeneration": 3,
                    "readyReplicas": 2,
                    "currentRevision": "a",
                    "updateRevision": "a",
                },
            },
            True,
        ),
        (
            {
                "kind": "StatefulSet",
                "metadata": {"generation": 3},
                "spec": {"replicas": 2},
                "status": {
                    "observedGeneration": 3,
                    "readyReplicas": 2,
                    "currentRevision": "a",
                    "updateRevision": "b",
                },
            },
            False,
        ),
        # A partitioned StatefulSet (a staged rollout): the Pods from the partition's ordinal
        # up are updated and every Pod is Ready; the revisions never meet.
        (_partitioned(partition=1, ready=3, updated=2), True),
        (_partitioned(partition=1, ready=3, updated=1), False),
        (_partitioned(partition=1, ready=2, updated=2), False),
        (_partitioned(partition=1, ready=3, updated=2, observed=2), False),
        (_partitioned(partition=3, ready=3, updated=0), True),  # nothing to replace
        # Only a RollingUpdate strategy has a partition; OnDelete waits for the revisions.
        (_partitioned(partition=1, ready=3, updated=2, strategy="OnDelete"), False),
        (
            {
                "kind": "DaemonSet",
                "metadata": {"generation": 1},
                "status": {"observedGeneration": 1},
            },
            True,
        ),
        (
            {
                "kind": "DaemonSet",
                "metadata": {"generation": 1},
                "status": {
                    "observedGeneration": 1,
                    "desiredNumberScheduled": 3,
                    "updatedNumberScheduled": 3,
                    "numberAvailable": 2,
                },
            },
            False,
        ),
    ],
)
def test_rollout_completion_per_kind(obj: dict[str, Any], complete: bool) -> None:
    assert rollout_progress(obj).complete is complete


def test_the_detail_names_the_status_fields() -> None:
    detail = rollout_progress(
        _deployment(2, 1, observedGeneration=2, replicas=1, updatedReplicas=1)
    ).detail
    assert "updatedReplicas=1" in detail
    assert "availableReplicas=0" in detail
    assert "generation=2" in detail


def test_a_partitioned_detail_names_the_partition_and_the_updated_pods() -> None:
    detail = rollout_progress(_partitioned(partition=1, ready=3, updated=1)).detail
    assert "partition=1, updatedReplicas=1" in detail
    assert "Revision" not in detail
