"""A policy's deletions that ``max-delete-ttl`` refuses (core/policy/refused.py,
docs/policies.md#status): the refused decision says why in a few words, whether the cap is the
flag's or a Namespace's, and the policy's ``Refused`` and ``Ready`` conditions count them.

Before, a policy ``delete-after: 720h`` under ``--max-delete-ttl 168h`` was refused on every
object while its status said ``Ready=True``, "the policy is in force".
"""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping

import pytest

from lifecycle_controller.core import DecisionSettings, Invalid, Ledger
from lifecycle_controller.core.decision.delete_ttl import compact_duration, refuse_ttl
from lifecycle_controller.core.decision.namespace_defaults import parse_namespace_defaults
from lifecycle_controller.core.decision.outcomes import Action, Decision, Idle, Refusal, Wait
from lifecycle_controller.core.objects import keys
from lifecycle_controller.core.policy.decide import decide_with_policies
from lifecycle_controller.core.policy.model import Policy, PolicyKind, parse_policy
from lifecycle_controller.core.policy.precedence import resolve_policies
from lifecycle_controller.core.policy.refused import (
    REFUSED_REASON,
    cap_refusals,
    readiness,
    refused_condition,
)

from .support import CONFIGMAP, DAY, HOUR, MINUTE, NOW, SECOND

OLD = dataclasses.replace(CONFIGMAP, creation_ns=NOW - 2 * DAY)
FLAG = "delete-after 720h exceeds max-delete-ttl 168h (--max-delete-ttl)"


@pytest.mark.parametrize(
    ("ns", "text"),
    [
        (168 * HOUR, "168h"),
        (90 * MINUTE, "1h30m"),
        (HOUR + 30 * SECOND, "1h0m30s"),
        (10 * MINUTE, "10m"),
        (90 * SECOND, "1m30s"),
        (30 * SECOND, "30s"),
        (0, "0s"),
    ],
)
def test_a_cap_reads_without_its_trailing_zero_units(ns: int, text: str) -> None:
    assert compact_duration(ns) == text


@pytest.mark.parametrize(
    ("settings", "cause"),
    [
        (DecisionSettings(max_delete_ttl_ns=168 * HOUR), FLAG),
        (
            DecisionSettings(max_delete_ttl_ns=DAY, max_delete_ttl_namespace="team-a"),
            "delete-after 720h exceeds max-delete-ttl 24h (Namespace team-a's annotation)",
        ),
    ],
)
def test_a_refusal_names_the_value_the_cap_and_where_it_comes_from(
    settings: DecisionSettings, cause: str
) -> None:
    refusal = refuse_ttl(settings, annotation=keys.DELETE_AFTER, value="720h", ttl_ns=720 * HOUR)
    assert refusal is not None
    assert str(refusal.refusal) == cause


def _policy(**lifecycle: str) -> Policy:
    spec = {"resources": ["configmaps"], "lifecycle": lifecycle}
    parsed = parse_policy(PolicyKind.NAMESPACED, "team-a", "month", 1, spec)
    assert isinstance(parsed, Policy)
    return parsed


def _decide(
    policy: Policy, settings: DecisionSettings, namespace: Mapping[str, str] | None = None
) -> Decision:
    inputs = resolve_policies(
        {}, (policy,), creation_ns=OLD.creation_ns, restart_marker=None, now_ns=NOW
    )
    return decide_with_policies(
        inputs=inputs,
        facts=OLD,
        now_ns=NOW,
        settings=settings,
        ledger=Ledger(),
        defaults=None if namespace is None else parse_namespace_defaults("team-a", namespace),
    ).decision


@pytest.mark.parametrize(
    ("settings", "namespace", "cause"),
    [
        (DecisionSettings(max_delete_ttl_ns=168 * HOUR), None, FLAG),
        (
            DecisionSettings(),
            {keys.MAX_DELETE_TTL: "168h"},
            "delete-after 720h exceeds max-delete-ttl 168h (Namespace team-a's annotation)",
        ),
        # The tighter of the two, and where it comes from.
        (
            DecisionSettings(max_delete_ttl_ns=168 * HOUR),
            {keys.MAX_DELETE_TTL: "1d"},
            "delete-after 720h exceeds max-delete-ttl 24h (Namespace team-a's annotation)",
        ),
    ],
)
def test_a_policy_deletion_the_cap_refuses_carries_its_cause_and_its_policy(
    settings: DecisionSettings, namespace: Mapping[str, str] | None, cause: str
) -> None:
    decision = _decide(_policy(**{"delete-after": "720h"}), settings, namespace)
    assert isinstance(decision, Invalid)
    assert str(decision.refusal) == cause
    assert cap_refusals([decision]) == (("LifecyclePolicy/team-a/month", cause),)


def test_a_deletion_within_the_cap_and_other_problems_are_not_refusals() -> None:
    within = _decide(
        _policy(**{"delete-after": "72h"}), DecisionSettings(max_delete_ttl_ns=DAY * 7)
    )
    assert isinstance(within, Wait)
    cap = Refusal("delete-after 720h", "max-delete-ttl 168h (--max-delete-ttl)")
    own = Invalid(reason="DeleteTTLExceeded", refusal=cap)  # the object's own annotation
    other = Invalid(reason="InvalidTimestamp", policy="LifecyclePolicy/team-a/month")
    assert cap_refusals([within, own, other, Idle(action=Action.DELETE)]) == ()


@pytest.mark.parametrize(
    ("causes", "expected"),
    [
        ({}, (False, "NothingRefused", "")),
        ({FLAG: 0}, (False, "NothingRefused", "")),
        ({FLAG: 1}, (True, REFUSED_REASON, f"1 object: {FLAG}")),
        ({FLAG: 3}, (True, REFUSED_REASON, f"3 objects: {FLAG}")),
        # The commonest cause first; ties by their words.
        (
            {"b": 1, "a": 1, FLAG: 3},
            (True, REFUSED_REASON, f"3 objects: {FLAG}; 1 object: a; 1 object: b"),
        ),
        # At most three causes named (a Namespace each), the rest counted.
        (
            {"a": 4, "b": 3, "c": 2, "d": 1, "e": 1},
            (
                True,
                REFUSED_REASON,
                "4 objects: a; 3 objects: b; 2 objects: c; 2 objects for 2 other causes",
            ),
        ),
    ],
)
def test_the_refused_condition_counts_each_cause(
    causes: dict[str, int], expected: tuple[bool, str, str]
) -> None:
    assert refused_condition(causes) == expected


@pytest.mark.parametrize(
    ("decided", "refused", "expected"),
    [
        (5, 0, None),
        (0, 0, None),
        (
            3,
            3,
            (
                False,
                REFUSED_REASON,
                "max-delete-ttl refuses the deletion of every object it decides (3); see Refused",
            ),
        ),
        (
            5,
            2,
            (
                True,
                "Active",
                "the policy is in force; max-delete-ttl refuses the deletion of 2 of the 5 "
                "objects it decides; see Refused",
            ),
        ),
    ],
)
def test_ready_is_false_when_the_cap_refuses_every_object_the_policy_decides(
    decided: int, refused: int, expected: tuple[bool, str, str] | None
) -> None:
    assert readiness(decided, refused) == expected
