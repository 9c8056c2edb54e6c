"""The max-delete-ttl refusal never expires (docs/behaviour.md#max-delete-ttl).

A ``delete-at`` refused by the cap stays refused at any later pass: after its deadline, after
a restart (a fresh ledger), whether the cap comes from ``--max-delete-ttl`` or from the
Namespace's annotation, and in ``explain()`` (what ``status`` and ``plan`` show). Before the
fix the TTL was measured from the pass, so the same value was deleted once its deadline had
come within the cap.
"""

from __future__ import annotations

import dataclasses

import pytest
from hypothesis import given
from hypothesis import strategies as st

from lifecycle_controller.core import (
    DecisionSettings,
    Delete,
    Invalid,
    Ledger,
    Patch,
    Wait,
    format_rfc3339_nano,
    format_rfc3339_seconds,
)
from lifecycle_controller.core.decision.namespace_defaults import (
    decide_in_namespace,
    parse_namespace_defaults,
)
from lifecycle_controller.core.decision.outcomes import Decision, ObjectFacts
from lifecycle_controller.core.objects import keys
from lifecycle_controller.core.tooling.plan import explain

from .support import CONFIGMAP, DAY, HOUR, SECOND, ts

CREATED = ts("2026-12-01T10:00:00Z")
FACTS = dataclasses.replace(CONFIGMAP, creation_ns=CREATED)
NS = "team-a"
assert FACTS.key.namespace == NS
FLAG_30S = DecisionSettings(max_delete_ttl_ns=30 * SECOND)
CAP_30S = {keys.MAX_DELETE_TTL: "30s"}
#: The operator's case: created with a deadline 45 s away, under a 30 s cap.
OVER = {keys.DELETE_AT: format_rfc3339_seconds(CREATED + 45 * SECOND)}
MANAGED = {keys.MANAGED_BY: keys.MANAGED_BY_VALUE}


def decide_at(
    annotations: dict[str, str],
    now: int,
    *,
    namespace: dict[str, str] | None = None,
    settings: DecisionSettings | None = None,
    facts: ObjectFacts = FACTS,
) -> Decision:
    return decide_in_namespace(
        annotations=annotations,
        facts=facts,
        now_ns=now,
        settings=settings or DecisionSettings(),
        ledger=Ledger(),  # a fresh ledger: what a restarted controller has
        defaults=None if namespace is None else parse_namespace_defaults(NS, namespace),
    )


SOURCES = [
    pytest.param(None, FLAG_30S, "exceeds maximum 30s.", "--max-delete-ttl", id="flag"),
    pytest.param(
        CAP_30S,
        None,
        f"exceeds maximum 30s set by the max-delete-ttl annotation of Namespace {NS}.",
        f"the max-delete-ttl annotation of Namespace {NS}",
        id="namespace",
    ),
]


@pytest.mark.parametrize(("namespace", "settings", "message_end", "log_source"), SOURCES)
@pytest.mark.parametrize(
    "later",
    [0, 10 * SECOND, 15 * SECOND, 45 * SECOND, 46 * SECOND, HOUR, 400 * DAY],
    ids=["at-creation", "before-window", "cap-reached", "deadline", "past", "hour", "year"],
)
def test_a_refused_delete_at_stays_refused_at_every_later_pass(
    namespace: dict[str, str] | None,
    settings: DecisionSettings | None,
    message_end: str,
    log_source: str,
    later: int,
) -> None:
    decision = decide_at(OVER, CREATED + later, namespace=namespace, settings=settings)
    assert isinstance(decision, Invalid)
    assert decision.reason == "DeleteTTLExceeded"
    (event,) = decision.events
    assert event.message == (
        f'Ignoring lifecycle.cezary.dev/delete-at="{OVER[keys.DELETE_AT]}" because TTL 45s '
        + message_end
    )
    assert decision.log == f"delete-at exceeds {log_source}: TTL 45s > maximum 30s"


@pytest.mark.parametrize(
    ("annotations", "now", "expected"),
    [
        # Measured from creation: equal to the cap is allowed, one second more is not.
        ({keys.DELETE_AT: format_rfc3339_seconds(CREATED + 30 * SECOND)}, CREATED, Wait),
        ({keys.DELETE_AT: format_rfc3339_seconds(CREATED + 31 * SECOND)}, CREATED, Invalid),
        # A deadline before the object's creation (an old date) is deleted at once.
        ({keys.DELETE_AT: "2020-01-01T00:00:00Z"}, CREATED + HOUR, Delete),
        # Within the cap of creation and past: deleted.
        ({keys.DELETE_AT: format_rfc3339_seconds(CREATED + 20 * SECOND)}, CREATED + HOUR, Delete),
        # The controller's own conversion result (managed-by) is measured from the pass.
        ({**MANAGED, keys.DELETE_AT: format_rfc3339_seconds(CREATED + DAY)}, CREATED + DAY, Delete),
        ({**MANAGED, keys.DELETE_AT: format_rfc3339_seconds(CREATED + 2 * DAY)}, CREATED, Invalid),
        # delete-after: its duration.
        ({keys.DELETE_AFTER: "30s"}, CREATED + DAY, Patch),
        ({keys.DELETE_AFTER: "31s"}, CREATED + DAY, Invalid),
    ],
)
def test_how_the_ttl_is_measured(
    annotations: dict[str, str], now: int, expected: type[Decision]
) -> None:
    assert type(decide_at(annotations, now, settings=FLAG_30S)) is expected


def test_a_converted_delete_after_is_deleted_when_due_even_long_after_creation() -> None:
    # delete-after 30s on a day-old object: converted (its duration is within the cap), and
    # the delete-at written by the conversion is not refused afterwards.
    now = CREATED + DAY
    converted = decide_at({keys.DELETE_AFTER: "30s"}, now, namespace=CAP_30S)
    assert isinstance(converted, Patch)
    body = converted.body["metadata"]
    assert isinstance(body, dict)
    annotations = {k: v for k, v in body["annotations"].items() if v is not None}
    assert isinstance(decide_at(annotations, now + SECOND, namespace=CAP_30S), Wait)
    assert isinstance(decide_at(annotations, now + 30 * SECOND, namespace=CAP_30S), Delete)


def test_a_manifest_without_creation_counts_as_created_at_the_pass() -> None:
    facts = dataclasses.replace(FACTS, creation_ns=None)
    due = CREATED + 45 * SECOND
    assert isinstance(decide_at(OVER, CREATED, settings=FLAG_30S, facts=facts), Invalid)
    assert isinstance(decide_at(OVER, due - 30 * SECOND, settings=FLAG_30S, facts=facts), Wait)


def test_fractional_ttls_are_shown_rounded_up_to_whole_seconds() -> None:
    value = format_rfc3339_nano(CREATED + 3538 * SECOND + 519_653_397)
    decision = decide_at({keys.DELETE_AT: value}, CREATED, namespace={keys.MAX_DELETE_TTL: "1m"})
    assert isinstance(decision, Invalid)
    assert "because TTL 58m59s exceeds maximum 1m0s" in decision.events[0].message


@pytest.mark.parametrize(("namespace", "settings", "message_end", "log_source"), SOURCES)
def test_explain_says_refused_after_the_deadline(
    namespace: dict[str, str] | None,
    settings: DecisionSettings | None,
    message_end: str,
    log_source: str,
) -> None:
    explanation = explain(
        annotations=OVER,
        facts=FACTS,
        now_ns=CREATED + HOUR,
        settings=settings or DecisionSettings(),
        namespace_defaults=None if namespace is None else parse_namespace_defaults(NS, namespace),
    )
    assert explanation.due_ns is None
    assert [p.split(":", 1)[0] for p in explanation.problems] == ["DeleteTTLExceeded"]
    assert explanation.problems[0].endswith(message_end)


@given(
    ttl_s=st.integers(min_value=1, max_value=400 * 86_400),
    cap_s=st.integers(min_value=1, max_value=400 * 86_400),
    first=st.integers(min_value=0, max_value=400 * 86_400 * SECOND),
    later=st.integers(min_value=0, max_value=800 * 86_400 * SECOND),
    from_namespace=st.booleans(),
)
def test_evaluated_at_any_later_now_the_answer_is_the_same_refusal(
    ttl_s: int, cap_s: int, first: int, later: int, from_namespace: bool
) -> None:
    annotations = {keys.DELETE_AT: format_rfc3339_seconds(CREATED + ttl_s * SECOND)}
    if from_namespace:
        kwargs: dict[str, object] = {"namespace": {keys.MAX_DELETE_TTL: f"{cap_s}s"}}
    else:
        kwargs = {"settings": DecisionSettings(max_delete_ttl_ns=cap_s * SECOND)}
    one = decide_at(annotations, CREATED + first, **kwargs)  # type: ignore[arg-type]
    two = decide_at(annotations, CREATED + first + later, **kwargs)  # type: ignore[arg-type]
    assert isinstance(one, Invalid) == (ttl_s > cap_s)
    if isinstance(one, Invalid):
        assert two == one
    else:
        assert not isinstance(two, Invalid)
