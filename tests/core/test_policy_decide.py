"""Policy-driven decisions write no annotations, name the policy, and leave annotation-driven
decisions exactly as they were."""

from __future__ import annotations

import dataclasses
from typing import Any

from lifecycle_controller.core import DecisionSettings, Delete, DryRun, Ledger, Patch, Wait
from lifecycle_controller.core.decision.outcomes import Operation
from lifecycle_controller.core.objects import keys
from lifecycle_controller.core.policy.decide import (
    PolicyDecision,
    attribution,
    decide_with_policies,
)
from lifecycle_controller.core.policy.model import Policy, PolicyKind, parse_policy
from lifecycle_controller.core.policy.precedence import resolve_policies
from lifecycle_controller.core.text.timestamps import format_rfc3339_nano

from .support import CONFIGMAP, DAY, DEPLOYMENT, HOUR, MINUTE, NOW

OLD_CONFIGMAP = dataclasses.replace(CONFIGMAP, creation_ns=NOW - 2 * DAY)


def policy(name: str, resources: list[str], **lifecycle: str) -> Policy:
    spec: dict[str, Any] = {
        "resources": resources,
        "lifecycle": {key.replace("_", "-"): value for key, value in lifecycle.items()},
    }
    parsed = parse_policy(PolicyKind.CLUSTER, None, name, 1, spec)
    assert isinstance(parsed, Policy), parsed
    return parsed


def decide(
    annotations: dict[str, str],
    *policies: Policy,
    facts: Any = OLD_CONFIGMAP,
    settings: DecisionSettings | None = None,
    schedule_since_ns: int | None = None,
) -> PolicyDecision:
    since = {p.ref: schedule_since_ns for p in policies} if schedule_since_ns else None
    inputs = resolve_policies(
        annotations,
        policies,
        creation_ns=facts.creation_ns,
        restart_marker=facts.restart_marker,
        now_ns=NOW,
        schedule_since_ns=since,
    )
    return decide_with_policies(
        inputs=inputs,
        facts=facts,
        now_ns=NOW,
        settings=settings or DecisionSettings(),
        ledger=Ledger(),
        defaults=None,
    )


def test_attribution_names_the_kind_the_policy_and_its_action() -> None:
    stale = policy("stale", ["configmaps"], delete_after="48h", catch_up="1h")
    assert attribution(stale) == "based on ClusterLifecyclePolicy/stale: delete-after 48h"


def test_a_policy_deletion_names_the_policy_in_every_event() -> None:
    result = decide({}, policy("stale", ["configmaps"], delete_after="1h"))
    decision = result.decision
    assert isinstance(decision, Delete)
    messages = [e.message for e in (*decision.events, *decision.on_success.events)]
    assert messages
    assert all(
        m.endswith("(based on ClusterLifecyclePolicy/stale: delete-after 1h)") for m in messages
    )
    assert decision.failure.message_prefix.endswith(
        "(based on ClusterLifecyclePolicy/stale: delete-after 1h): "
    )


def test_annotation_driven_decisions_are_untouched() -> None:
    own = {keys.DELETE_AFTER: "1h"}
    with_policy = decide(own, policy("stale", ["configmaps"], delete_after="5m"))
    alone = decide(own)
    assert with_policy.inputs.decided_by is None
    assert with_policy.decision == alone.decision
    assert "based on" not in " ".join(e.message for e in alone.decision.events)


def test_a_policy_restart_patches_only_the_pod_template() -> None:
    nightly = policy("nightly", ["deployments.apps"], restart_every="1h")
    facts = dataclasses.replace(DEPLOYMENT, creation_ns=NOW - 3 * HOUR)
    result = decide({}, nightly, facts=facts)
    decision = result.decision
    assert isinstance(decision, Patch)
    assert decision.operation in (Operation.RESTART, Operation.SKIP)
    assert "annotations" not in decision.body.get("metadata", {})
    if decision.operation is Operation.RESTART:
        template = decision.body["spec"]["template"]["metadata"]["annotations"]
        assert keys.RESTARTED_AT in template


def test_a_skipped_occurrence_is_acknowledged_in_memory_not_on_the_object() -> None:
    nightly = policy("nightly", ["deployments.apps"], restart_every="1h", catch_up="1m")
    # Created 3 h ago: the 1 h occurrences are long past, beyond the 1 m catch-up.
    created = NOW - 3 * HOUR - 30 * MINUTE
    facts = dataclasses.replace(DEPLOYMENT, creation_ns=created)
    result = decide({}, nightly, facts=facts)
    decision = result.decision
    assert isinstance(decision, Patch)
    assert decision.operation is Operation.SKIP
    assert decision.body == {}
    assert result.acknowledged is not None
    assert result.acknowledged > format_rfc3339_nano(created)


def test_a_policy_dry_run_says_what_it_would_do_and_names_the_policy() -> None:
    result = decide({}, policy("stale", ["configmaps"], delete_after="1h", dry_run="true"))
    assert isinstance(result.decision, DryRun)
    assert all("ClusterLifecyclePolicy/stale" in e.message for e in result.decision.events)


def test_a_waiting_policy_action_persists_no_record_on_the_object() -> None:
    settings = DecisionSettings(persist_observations=True)
    facts = dataclasses.replace(CONFIGMAP, creation_ns=NOW - 10 * MINUTE)
    result = decide(
        {},
        policy("p", ["configmaps"], delete_after="1h", catch_up="never"),
        facts=facts,
        settings=settings,
    )
    assert isinstance(result.decision, Wait)
    assert result.decision.record is None
