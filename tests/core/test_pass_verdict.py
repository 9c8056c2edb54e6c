"""The one pure call of a reconcile pass (core/policy/decide.py): the final decision,
a guardrail's hold included, or the one fact it still lacks; never a read."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import pytest

from lifecycle_controller.core import DecisionSettings, Ledger
from lifecycle_controller.core.decision.guardrails import (
    GuardrailState,
    Hold,
    HoldReason,
    RolloutQueue,
)
from lifecycle_controller.core.decision.outcomes import (
    Action,
    Delete,
    Idle,
    ObjectFacts,
    Patch,
    Wait,
)
from lifecycle_controller.core.objects import keys
from lifecycle_controller.core.objects.resources import ObjectKey, ResourceType
from lifecycle_controller.core.policy.decide import (
    MissingFact,
    PassInputs,
    PolicyConfirmation,
    Verdict,
    decide_pass,
)
from lifecycle_controller.core.policy.in_force import (
    POLICY_API_VERSION,
    PolicySet,
    object_view,
    policy_from_manifest,
)
from lifecycle_controller.core.policy.match import Protection
from lifecycle_controller.core.policy.precedence import Resolution
from lifecycle_controller.core.text.timestamps import format_rfc3339_nano, parse_rfc3339

CONFIGMAPS = ResourceType("", "v1", "configmaps", "ConfigMap", namespaced=True)
DEPLOYMENTS = ResourceType("apps", "v1", "deployments", "Deployment", namespaced=True)
NOW = parse_rfc3339("2026-12-02T10:00:00Z")
HOUR = 3600 * 10**9
CREATED = NOW - 72 * HOUR
PAST = format_rfc3339_nano(NOW - HOUR)


THROTTLED = GuardrailState(now_ns=NOW, budget_wait_ns={Action.DELETE: 5 * 10**9})


def _policy(name: str, resources: list[str], lifecycle: Mapping[str, str]) -> PolicySet:
    doc: dict[str, Any] = {
        "apiVersion": POLICY_API_VERSION,
        "kind": "ClusterLifecyclePolicy",
        "metadata": {"name": name, "generation": 1},
        "spec": {"resources": resources, "lifecycle": dict(lifecycle)},
    }
    return PolicySet.of([policy_from_manifest(doc)], Protection())


def _inputs(
    resource: ResourceType,
    annotations: Mapping[str, str],
    *,
    policies: PolicySet | None = None,
    marker_known: bool = True,
    fenced: bool = False,
    confirmation: PolicyConfirmation | None = None,
    guardrails: GuardrailState | None = None,
) -> PassInputs:
    meta = {
        "name": "obj",
        "namespace": "team-a",
        "annotations": dict(annotations),
        "creationTimestamp": format_rfc3339_nano(CREATED),
    }
    resolution: Resolution | None = None
    if policies is not None:
        resolution = policies.resolve(
            annotations, object_view(resource, meta), restart_marker=None, now_ns=NOW
        )
    return PassInputs(
        annotations=annotations,
        facts=ObjectFacts(
            key=ObjectKey(resource, "team-a", "obj"),
            uid="uid-1",
            resource_version="7",
            creation_ns=CREATED,
            has_pod_template=resource.restartable,
        ),
        now_ns=NOW,
        settings=DecisionSettings(),
        ledger=Ledger(),
        resolution=resolution,
        marker_known=marker_known,
        fenced=fenced,
        confirmation=confirmation,
        guardrails=guardrails or GuardrailState(now_ns=NOW),
    )


def test_a_due_annotation_deletion_goes_when_the_guardrails_let_it() -> None:
    verdict = decide_pass(_inputs(CONFIGMAPS, {keys.DELETE_AT: PAST}))
    assert isinstance(verdict.final, Delete)
    assert verdict.final is verdict.decision
    assert verdict.missing is None


def test_a_hold_of_the_guardrails_is_the_final_decision() -> None:
    verdict = decide_pass(_inputs(CONFIGMAPS, {keys.DELETE_AT: PAST}, guardrails=THROTTLED))
    assert isinstance(verdict.decision, Delete)
    assert isinstance(verdict.final, Hold)
    assert verdict.final.reason is HoldReason.BUDGET


def test_nothing_due_is_never_held() -> None:
    later = format_rfc3339_nano(NOW + HOUR)
    verdict = decide_pass(_inputs(CONFIGMAPS, {keys.DELETE_AT: later}, guardrails=THROTTLED))
    assert isinstance(verdict.final, Wait)


@pytest.mark.parametrize(
    ("interval_ns", "missing"), [(0, None), (HOUR, MissingFact.TEMPLATE_MARKER)]
)
def test_the_restart_guard_asks_for_the_marker_only_when_it_measures(
    interval_ns: int, missing: MissingFact | None
) -> None:
    state = GuardrailState(now_ns=NOW, min_restart_interval_ns=interval_ns)
    inputs = _inputs(DEPLOYMENTS, {keys.RESTART_AT: PAST}, marker_known=False, guardrails=state)
    verdict = decide_pass(inputs)
    assert verdict.missing is missing
    if missing is None:
        assert isinstance(verdict.final, Patch)


def test_a_restart_waits_for_its_turn_in_the_rollout_queue() -> None:
    ahead = RolloutQueue(limit=1, free=1, key_id="z", others=((NOW - 2 * HOUR, "a"),))
    state = GuardrailState(now_ns=NOW, rollouts=ahead)
    verdict = decide_pass(_inputs(DEPLOYMENTS, {keys.RESTART_AT: PAST}, guardrails=state))
    assert isinstance(verdict.final, Hold)
    assert verdict.final.reason is HoldReason.ROLLOUT_SLOT
    first = RolloutQueue(limit=1, free=1, key_id="z", others=((NOW, "a"),))
    state = GuardrailState(now_ns=NOW, rollouts=first)
    assert isinstance(
        decide_pass(_inputs(DEPLOYMENTS, {keys.RESTART_AT: PAST}, guardrails=state)).final, Patch
    )


def test_a_policy_restart_asks_for_the_marker_before_deciding() -> None:
    policies = _policy("nightly", ["deployments.apps"], {"restart-cron": "0 3 * * *"})
    unknown = decide_pass(_inputs(DEPLOYMENTS, {}, policies=policies, marker_known=False))
    assert unknown.missing is MissingFact.TEMPLATE_MARKER
    assert isinstance(unknown.final, Idle)
    known = decide_pass(_inputs(DEPLOYMENTS, {}, policies=policies))
    assert known.missing is None
    assert known.final.policy == "ClusterLifecyclePolicy/nightly"


def test_a_policy_deletion_waits_for_the_fence_and_takes_its_answer() -> None:
    policies = _policy("tmp", ["configmaps"], {"delete-after": "1h"})
    asked = decide_pass(
        _inputs(CONFIGMAPS, {}, policies=policies, fenced=True, guardrails=THROTTLED)
    )
    assert asked.missing is MissingFact.POLICY_CONFIRMATION
    assert isinstance(asked.final, Delete)  # not held by the budget before it is confirmed
    assert asked.decision.policy == "ClusterLifecyclePolicy/tmp"
    resolution = _inputs(CONFIGMAPS, {}, policies=policies).resolution
    confirmed = PolicyConfirmation(resolution, 10**9)  # the API server has the same view
    goes = decide_pass(
        _inputs(CONFIGMAPS, {}, policies=policies, fenced=True, confirmation=confirmed)
    )
    assert isinstance(goes.final, Delete)
    assert goes.missing is None
    narrowed = _policy("tmp", ["secrets"], {"delete-after": "1h"})
    changed = PolicyConfirmation(_inputs(CONFIGMAPS, {}, policies=narrowed).resolution, 10**9)
    held = decide_pass(
        _inputs(CONFIGMAPS, {}, policies=policies, fenced=True, confirmation=changed)
    )
    assert isinstance(held.final, Hold)
    assert held.final.reason is HoldReason.POLICY_UNCONFIRMED
    assert held.final.held == goes.final
    assert held.missing is None


def test_an_unfenced_or_annotation_deletion_needs_no_confirmation() -> None:
    policies = _policy("tmp", ["configmaps"], {"delete-after": "1h"})
    unfenced = decide_pass(_inputs(CONFIGMAPS, {}, policies=policies))
    assert isinstance(unfenced.final, Delete)
    own = decide_pass(_inputs(CONFIGMAPS, {keys.DELETE_AT: PAST}, fenced=True))
    assert isinstance(own.final, Delete)


def test_a_deletion_leaves_the_other_family_nothing_to_do() -> None:
    policies = _policy("nightly", ["deployments.apps"], {"restart-cron": "0 3 * * *"})
    verdict = decide_pass(_inputs(DEPLOYMENTS, {keys.DELETE_AT: PAST}, policies=policies))
    assert isinstance(verdict.final, Delete)
    assert verdict.others == ()


def test_a_verdict_is_a_value_of_its_inputs() -> None:
    """Asked twice with the same facts, the same verdict: nothing is read or kept between."""
    inputs = _inputs(CONFIGMAPS, {keys.DELETE_AT: PAST})
    first: Verdict = decide_pass(inputs)
    assert decide_pass(inputs) == first
