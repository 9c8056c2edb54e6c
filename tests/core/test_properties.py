"""Properties of decide() over arbitrary annotations, objects, times and ledgers."""

from __future__ import annotations

import dataclasses

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from lifecycle_controller.core import (
    ALWAYS,
    NEVER,
    CatchUpMode,
    CatchUpRule,
    Decision,
    DecisionSettings,
    Delete,
    DryRun,
    Forget,
    Identity,
    Idle,
    Invalid,
    Ledger,
    Patch,
    Wait,
    decide,
    format_rfc3339_seconds,
    parse_rfc3339,
)
from lifecycle_controller.core.objects import keys

from .support import CONFIGMAP, DAY, DEPLOYMENT, MINUTE, NOW, merge_annotations

INPUT_KEYS = [
    keys.DELETE_AFTER,
    keys.DELETE_AT,
    keys.RESTART_AFTER,
    keys.RESTART_AT,
    keys.RESTART_EVERY,
    keys.RESTART_CRON,
    keys.CRON_TIMEZONE,
    keys.REFERENCE_POINT,
    keys.CATCH_UP,
    keys.DRY_RUN,
    keys.LAST_RESTART_TIMESTAMP,
    keys.MANAGED_BY,
]

# Plausible values (so that deep branches are reached) mixed with arbitrary text.
PLAUSIBLE = st.sampled_from(
    [
        "",
        "1h",
        "30m",
        "1m",
        "59s",
        "31d",
        "106752d",
        "2026-10-05T02:00:00Z",
        "2026-10-05T03:00:00Z",
        "2026-10-05T04:00:00.5+02:00",
        "2027-01-01T00:00:00Z",
        "0001-01-01T00:00:00Z",
        "9999-12-31T23:59:59Z",
        "0 3 * * *",
        "*/15 * * * *",
        "0 0 31 2 *",
        "30 2 * * *",
        "@daily",
        "? ? ? ? ?",
        "Europe/Warsaw",
        "America/New_York",
        "Local",
        "Invalid/Zone",
        "creationTimestamp",
        "applyTimestamp",
        "always",
        "never",
        "15m",
        "true",
        "false",
        "maybe",
    ]
)
VALUES = st.one_of(PLAUSIBLE, st.text(max_size=30))
ANNOTATIONS = st.dictionaries(
    st.one_of(st.sampled_from(INPUT_KEYS), st.text(max_size=20)), VALUES, max_size=7
)
POLICIES = st.sampled_from([ALWAYS, NEVER, CatchUpRule(CatchUpMode.WINDOW, 15 * MINUTE)])
SETTINGS = st.builds(
    DecisionSettings,
    dry_run=st.booleans(),
    delete_catch_up=POLICIES,
    restart_catch_up=POLICIES,
    max_delete_ttl_ns=st.one_of(st.none(), st.just(30 * DAY)),
)
FACTS = st.builds(
    lambda base, terminating, marker: dataclasses.replace(
        base, terminating=terminating, restart_marker=marker
    ),
    st.sampled_from([DEPLOYMENT, CONFIGMAP, dataclasses.replace(DEPLOYMENT, creation_ns=None)]),
    st.booleans(),
    st.one_of(st.none(), PLAUSIBLE),
)
NOWS = st.one_of(
    st.just(NOW), st.integers(parse_rfc3339("1970-01-01T00:00:00Z"), NOW + 100 * 365 * DAY)
)


def ledger_with(arm_due: int | None) -> Ledger:
    ledger = Ledger()
    if arm_due is not None:
        identity = Identity("uid-1", "delete", NEVER, (keys.DELETE_AT, "2026-10-05T03:00:00Z"))
        ledger.observe(DEPLOYMENT.key, identity, arm_due, arm_due - 1)
    return ledger


def check_invariants(decision: Decision, facts_uid: str, resource_version: str) -> None:
    assert isinstance(decision, Idle | Invalid | Wait | DryRun | Patch | Delete)
    if isinstance(decision, Wait):
        assert decision.requeue_after_ns >= 1
    if isinstance(decision, Invalid):
        assert decision.events
        assert decision.events[-1].type == "Warning"
        assert decision.events[-1].reason == decision.reason
    if isinstance(decision, Idle | Invalid | DryRun):
        assert decision.ledger_ops[-1] == Forget()  # no requeue: the arm is forgotten
    if isinstance(decision, Patch | Delete) and decision.on_success.requeue_after_ns is None:
        assert decision.on_success.ledger_ops[-1] == Forget()
    if isinstance(decision, Patch):
        annotations = decision.body["metadata"]["annotations"]
        assert annotations[keys.MANAGED_BY] == keys.MANAGED_BY_VALUE
        assert "resourceVersion" not in decision.body["metadata"]
        if decision.on_success.requeue_after_ns is not None:
            assert decision.on_success.requeue_after_ns >= 1
    if isinstance(decision, Delete):
        assert (decision.uid, decision.resource_version) == (facts_uid, resource_version)
    for event in decision.events:
        assert event.type in ("Normal", "Warning")
        assert event.reason
        assert event.message


@settings(max_examples=400, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    ANNOTATIONS,
    FACTS,
    NOWS,
    SETTINGS,
    st.one_of(st.none(), st.integers(NOW - DAY, NOW + DAY)),
)
def test_decide_never_raises_and_keeps_its_invariants(
    annotations: dict[str, str],
    facts: object,
    now: int,
    config: DecisionSettings,
    arm_due: int | None,
) -> None:
    assert isinstance(facts, type(DEPLOYMENT))
    decision = decide(
        annotations=annotations,
        facts=facts,
        now_ns=now,
        settings=config,
        ledger=ledger_with(arm_due),
    )
    check_invariants(decision, facts.uid, facts.resource_version)


WRITTEN_SECONDS = (keys.DELETE_AT, keys.RESTART_AT)


@settings(max_examples=300, deadline=None)
@given(ANNOTATIONS, NOWS, SETTINGS)
def test_every_timestamp_we_write_parses_back_to_the_same_instant(
    annotations: dict[str, str], now: int, config: DecisionSettings
) -> None:
    decision = decide(
        annotations=annotations, facts=DEPLOYMENT, now_ns=now, settings=config, ledger=Ledger()
    )
    if not isinstance(decision, Patch):
        return
    written = decision.body["metadata"]["annotations"]
    for key in WRITTEN_SECONDS:
        if written.get(key) is not None:
            instant = parse_rfc3339(written[key])
            assert format_rfc3339_seconds(instant) == written[key]
            assert decision.due_ns == instant
    anchor = written.get(keys.LAST_RESTART_TIMESTAMP)
    if anchor is not None:
        instant = parse_rfc3339(anchor)
        assert instant <= now
        if decision.operation == "initialize":
            assert instant == now  # nanoseconds survive the round trip
    template = decision.body.get("spec", {}).get("template", {}).get("metadata", {})
    marker = template.get("annotations", {}).get(keys.RESTARTED_AT)
    if marker is not None:
        assert parse_rfc3339(marker) >= now - now % 1_000_000_000


@settings(max_examples=200, deadline=None)
@given(
    st.sampled_from([keys.DELETE_AFTER, keys.RESTART_AFTER]),
    st.sampled_from(["1s", "1h", "30m", "7d", "25h"]),
    st.sampled_from(["", "applyTimestamp", "creationTimestamp", "x"]),
    st.booleans(),
    st.integers(0, 59_999_999_999),
)
def test_conversion_is_idempotent(
    after_key: str, value: str, reference: str, existing_deadline: bool, jitter: int
) -> None:
    annotations = {after_key: value, keys.REFERENCE_POINT: reference}
    if existing_deadline:
        at_key = keys.DELETE_AT if after_key == keys.DELETE_AFTER else keys.RESTART_AT
        annotations[at_key] = "2026-10-05T05:00:00Z"
    now = NOW + jitter
    first = decide(
        annotations=annotations,
        facts=DEPLOYMENT,
        now_ns=now,
        settings=DecisionSettings(),
        ledger=Ledger(),
    )
    assert isinstance(first, Patch)
    assert first.operation in ("convert", "cleanup")
    converted = merge_annotations(annotations, first.body)
    assert after_key not in converted
    for later in (now, now + 1, now + MINUTE):
        again = decide(
            annotations=converted,
            facts=DEPLOYMENT,
            now_ns=later,
            settings=DecisionSettings(),
            ledger=Ledger(),
        )
        assert not (isinstance(again, Patch) and again.operation in ("convert", "cleanup"))
