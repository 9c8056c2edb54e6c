"""A limit's places recorded before they are used (core/policy/places.py, the verdict's part).

docs/policies.md#limit, docs/reliability.md#policy-sigkill. The record (``status.limit``)
round-trips and tolerates garbage; the window it seeds counts every place used or reserved,
a batch's at its ``until``; its groups stay bounded; a stopped leader's batch is counted in
the audit for what was done. In the verdict: a place free but not recorded asks for its
record once (``MissingFact.LIMIT_PLACE``), a recorded one goes, a failed record holds.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import replace
from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st

from lifecycle_controller.core import DecisionSettings, Ledger
from lifecycle_controller.core.decision.events import DELETION_FAILURE
from lifecycle_controller.core.decision.guardrails import (
    RECORD_RETRY_NS,
    GuardrailFacts,
    GuardrailState,
    Hold,
    HoldReason,
    check,
)
from lifecycle_controller.core.decision.limit_line import LimitFacts, occurrence_due
from lifecycle_controller.core.decision.outcomes import Action, Delete, DryRun, ObjectFacts, Wait
from lifecycle_controller.core.objects.resources import ObjectKey, ResourceType
from lifecycle_controller.core.policy.decide import MissingFact, PassInputs, decide_pass
from lifecycle_controller.core.policy.in_force import (
    POLICY_API_VERSION,
    PolicySet,
    object_view,
    policy_from_manifest,
)
from lifecycle_controller.core.policy.match import Protection
from lifecycle_controller.core.policy.places import (
    BATCH_LIFETIME_NS,
    MAX_PLACE_GROUPS,
    USE_MARGIN_NS,
    Batch,
    Place,
    PlaceRecord,
    batch_lifetime,
    parse_record,
    settled_entries,
)
from lifecycle_controller.core.text.timestamps import format_rfc3339_nano

S = 10**9
T0 = 1_800_000_000 * S
CONFIGMAPS = ResourceType("", "v1", "configmaps", "ConfigMap", namespaced=True)
CAPPED = "LifecyclePolicy/team-a/capped"


def _place(name: str, due: int = T0, action: str = "delete") -> Place:
    return Place(
        resource="configmaps",
        kind="ConfigMap",
        namespace="team-a",
        name=name,
        uid=f"uid-{name}",
        action=action,
        due_ns=due,
    )


def _batch(holder: str, at: int, count: int, *names: str) -> Batch:
    places = tuple(_place(n) for n in names)
    return Batch(holder=holder, at_ns=at, until_ns=at + 10 * S, count=count, places=places)


# ------------------------------------------------------------------ the record


def test_the_record_round_trips_through_the_status() -> None:
    record = PlaceRecord(
        groups=((T0, 3), (T0 + 2 * S, 1)),
        batches=(_batch("a", T0 + 3 * S, 2, "x", "y"), _batch("b", T0 + 4 * S, 1)),
    )
    assert parse_record({"limit": record.document()}) == record
    assert parse_record({}) is None


def test_the_seed_counts_groups_at_their_instant_and_batches_at_their_until() -> None:
    record = PlaceRecord(groups=((T0, 2),), batches=(_batch("a", T0 + S, 3, "x"),))
    assert record.instants() == [T0, T0, T0 + 11 * S, T0 + 11 * S, T0 + 11 * S]


@pytest.mark.parametrize(
    "raw",
    [
        "garbage",
        {"groups": "no", "batches": 3},
        {"groups": [{"at": "no", "count": 1}, {"at": "2027-01-15T08:00:00Z", "count": -1}, 5]},
        {"groups": [{"at": "2027-01-15T08:00:00Z", "count": True}]},
        {"batches": [{"holder": "a", "at": "x", "until": "y", "count": 1}, "z"]},
        {"batches": [{"holder": 5, "at": "2027-01-15T08:00:00Z", "until": "2027-01-15T08:00:10Z"}]},
    ],
)
def test_a_garbled_record_is_left_out_never_a_crash(raw: object) -> None:
    record = parse_record({"limit": raw})
    assert record is None or record.instants() == []


def test_a_garbled_place_is_left_out_of_its_batch() -> None:
    batch = _batch("a", T0, 2, "x").document()
    batch["places"].append({"name": "y"})
    batch["places"].append("z")
    batch["places"].append({**batch["places"][0], "due": "never"})
    [parsed] = parse_record({"limit": {"batches": [batch]}}).batches  # type: ignore[union-attr]
    assert [p.name for p in parsed.places] == ["x"]
    assert parsed.count == 2  # the count stands: the window counts what was reserved


def test_groups_out_of_the_window_go_and_the_rest_stay_bounded() -> None:
    record = PlaceRecord(groups=tuple((T0 + i * S, 1) for i in range(MAX_PLACE_GROUPS + 10)))
    groups = record.with_groups(
        [(T0 + 500 * S, 2), (T0, 0)], now_ns=T0 + 600 * S, window_ns=600 * S
    )
    assert len(groups) == MAX_PLACE_GROUPS
    assert sum(count for _, count in groups) == MAX_PLACE_GROUPS + 10 - 1 + 2  # T0 itself is out
    assert groups[-1] == (T0 + 500 * S, 2)


@given(st.lists(st.tuples(st.integers(0, 10_000), st.integers(1, 5)), max_size=200))
def test_merging_groups_never_frees_a_place_sooner(raw: list[tuple[int, int]]) -> None:
    """Every place counts at its own instant or later, and none is lost."""
    record = PlaceRecord(groups=tuple((T0 + at * S, n) for at, n in sorted(raw)))
    groups = record.with_groups((), now_ns=T0 + 10_000 * S, window_ns=20_000 * S)
    assert len(groups) <= MAX_PLACE_GROUPS
    before, after = record.instants(), PlaceRecord(groups).instants()
    assert len(before) == len(after)
    assert all(a >= b for a, b in zip(after, before, strict=True))


def test_a_batch_hands_names_over_and_keeps_its_count() -> None:
    batch = _batch("a", T0, 3, "x", "y", "z").without({_place("y").occurrence})
    assert [p.name for p in batch.places] == ["x", "z"]
    assert batch.count == 3


@pytest.mark.parametrize(
    ("window_ns", "lifetime"),
    [(3600 * S, BATCH_LIFETIME_NS), (4 * S, 4 * S), (S, 2 * USE_MARGIN_NS)],
)
def test_a_batch_lives_at_most_a_window(window_ns: int, lifetime: int) -> None:
    assert batch_lifetime(window_ns) == lifetime


def test_a_stopped_leaders_batch_counts_what_was_done_at_its_until() -> None:
    batch = _batch("a", T0, 3, "gone", "kept", "mine")
    entries = settled_entries(
        batch, lambda place: place.name != "kept", skip={_place("mine").occurrence}
    )
    assert [(e.name, e.at_ns, e.dry_run, e.occurrence) for e in entries] == [
        ("gone", T0 + 10 * S, False, f"uid-gone/delete/{T0}")
    ]


# ------------------------------------------------------------------ the guardrail


def _facts(**changes: Any) -> LimitFacts:
    base = LimitFacts(
        policy=CAPPED, actions=2, window_ns=60 * S, text="2/1m", now_ns=T0, key_id="obj"
    )
    return replace(base, **changes)


def _delete(due: int | None = T0) -> Delete:
    return Delete(
        uid="uid-obj",
        resource_version="7",
        failure=DELETION_FAILURE,
        action=Action.DELETE,
        due_ns=due,
        policy=CAPPED,
    )


@pytest.mark.parametrize(
    ("facts", "held"),
    [
        (_facts(), None),  # not recording (the tools): a free place goes
        (_facts(recording=True, recorded=frozenset({T0})), None),  # recorded: goes
        (_facts(recording=True), HoldReason.POLICY_LIMIT_UNRECORDED),
        (_facts(recording=True, recorded=frozenset({T0 - S})), HoldReason.POLICY_LIMIT_UNRECORDED),
        # full: the limit's own hold, whatever is recorded
        (_facts(recording=True, stamps=(T0 - S, T0 - S)), HoldReason.POLICY_LIMIT),
        (_facts(recording=True, admitted_due=T0), None),  # let go already: needs no place
    ],
)
def test_a_free_place_goes_only_once_recorded(facts: LimitFacts, held: HoldReason | None) -> None:
    hold = check(_delete(), GuardrailFacts(now_ns=T0, limit=facts))
    assert (hold.reason if isinstance(hold, Hold) else None) is held


def test_a_failed_record_holds_and_says_why() -> None:
    facts = _facts(recording=True, record_problem="the API server said 403")
    hold = check(_delete(), GuardrailFacts(now_ns=T0, limit=facts))
    assert isinstance(hold, Hold)
    assert hold.requeue_after_ns == RECORD_RETRY_NS
    assert hold.policy == CAPPED
    assert "(the API server said 403)" in hold.log


def test_an_action_with_no_due_time_is_recorded_as_due_at_zero() -> None:
    assert occurrence_due(_delete(None)) == 0
    facts = _facts(recording=True, recorded=frozenset({0}))
    assert check(_delete(None), GuardrailFacts(now_ns=T0, limit=facts)) is None


# ------------------------------------------------------------------ the verdict


def _manifest(lifecycle: Mapping[str, str]) -> dict[str, Any]:
    metadata = {"name": "capped", "namespace": "team-a", "generation": 1, "uid": "uid-capped"}
    spec = {"resources": ["configmaps"], "limit": {"actions": 2, "window": "1m"}}
    return {
        "apiVersion": POLICY_API_VERSION,
        "kind": "LifecyclePolicy",
        "metadata": metadata,
        "spec": {**spec, "lifecycle": dict(lifecycle)},
    }


def _inputs(lifecycle: Mapping[str, str], limit: LimitFacts, *, asked: bool) -> PassInputs:
    policies = PolicySet.of([policy_from_manifest(_manifest(lifecycle))], Protection())
    created = T0 - 2 * S
    meta = {"name": "obj", "namespace": "team-a", "creationTimestamp": format_rfc3339_nano(created)}
    resolution = policies.resolve({}, object_view(CONFIGMAPS, meta), restart_marker=None, now_ns=T0)
    return PassInputs(
        annotations={},
        facts=ObjectFacts(
            key=ObjectKey(CONFIGMAPS, "team-a", "obj"),
            uid="uid-obj",
            resource_version="7",
            creation_ns=created,
        ),
        now_ns=T0,
        settings=DecisionSettings(),
        ledger=Ledger(),
        resolution=resolution,
        place_asked=asked,
        guardrails=GuardrailState(now_ns=T0, limits={CAPPED: limit}),
    )


DELETE_1S = {"delete-after": "1s"}
REHEARSE_1S = {"delete-after": "1s", "dry-run": "true"}
DUE = T0 - S


@pytest.mark.parametrize(
    ("lifecycle", "limit", "asked", "missing", "final"),
    [
        (DELETE_1S, _facts(recording=True), False, MissingFact.LIMIT_PLACE, Delete),
        (DELETE_1S, _facts(recording=True), True, None, Hold),
        (DELETE_1S, _facts(recording=True, recorded=frozenset({DUE})), False, None, Delete),
        (DELETE_1S, _facts(recording=True, stamps=(DUE, DUE)), False, None, Hold),
        (REHEARSE_1S, _facts(recording=True), False, MissingFact.LIMIT_PLACE, DryRun),
        (REHEARSE_1S, _facts(recording=True), True, None, Wait),
        (REHEARSE_1S, _facts(recording=True, recorded=frozenset({DUE})), False, None, DryRun),
        (REHEARSE_1S, _facts(recording=True, reported_due=DUE), False, None, DryRun),
    ],
)
def test_the_verdict_asks_for_its_place_once(
    lifecycle: Mapping[str, str],
    limit: LimitFacts,
    asked: bool,
    missing: MissingFact | None,
    final: type,
) -> None:
    verdict = decide_pass(_inputs(lifecycle, limit, asked=asked))
    assert verdict.missing is missing
    assert type(verdict.final) is final
    if isinstance(verdict.final, Hold):
        assert verdict.final.reason in (
            HoldReason.POLICY_LIMIT,
            HoldReason.POLICY_LIMIT_UNRECORDED,
        )
