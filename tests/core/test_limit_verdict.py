"""A policy's limit in the one pure call of a pass (core/policy/decide.py, docs/policies.md#limit).

What the limit's facts change in the verdict, beside the hold itself
(tests/core/test_guardrail_decisions.py): an action held by the limit is late by the hold,
not missed (a catch-up window does not count the time the limit has held), and the next
contender's limit never delays an enforced policy's deadline.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import replace
from typing import Any

import pytest

from lifecycle_controller.core import DecisionSettings, Ledger
from lifecycle_controller.core.decision.guardrails import GuardrailState, Hold, HoldReason
from lifecycle_controller.core.decision.limit_line import LimitFacts
from lifecycle_controller.core.decision.outcomes import (
    Delete,
    DryRun,
    ObjectFacts,
    Operation,
    Patch,
    Wait,
)
from lifecycle_controller.core.objects.resources import ObjectKey, ResourceType
from lifecycle_controller.core.policy.decide import PassInputs, Verdict, decide_pass
from lifecycle_controller.core.policy.in_force import (
    POLICY_API_VERSION,
    PolicySet,
    object_view,
    policy_from_manifest,
)
from lifecycle_controller.core.policy.match import Protection
from lifecycle_controller.core.text.timestamps import format_rfc3339_nano, parse_rfc3339

CONFIGMAPS = ResourceType("", "v1", "configmaps", "ConfigMap", namespaced=True)
DEPLOYMENTS = ResourceType("apps", "v1", "deployments", "Deployment", namespaced=True)
S = 10**9
MINUTE = 60 * S
HOUR = 3600 * S
DAY = 24 * HOUR
#: 04:00:30 UTC: the nightly 03:00 occurrence is an hour and 30 seconds late.
NOW = parse_rfc3339("2026-12-02T04:00:30Z")
NIGHTLY = parse_rfc3339("2026-12-02T03:00:00Z")
CAPPED = "LifecyclePolicy/team-a/capped"
DEADLINE = "ClusterLifecyclePolicy/deadline"


def _manifest(kind: str, name: str, spec: Mapping[str, Any]) -> dict[str, Any]:
    metadata: dict[str, Any] = {"name": name, "generation": 1, "uid": f"uid-{name}"}
    if kind == "LifecyclePolicy":
        metadata["namespace"] = "team-a"
    return {"apiVersion": POLICY_API_VERSION, "kind": kind, "metadata": metadata, "spec": spec}


def _limit(policy: str, *, held_since: int | None = None, full: bool = True) -> LimitFacts:
    """One action per 30 days: taken an hour ago (full), or not."""
    return LimitFacts(
        policy=policy,
        actions=1,
        window_ns=30 * DAY,
        text="1/720h",
        now_ns=NOW,
        key_id="obj",
        stamps=(NOW - HOUR,) if full else (),
        line=((NOW - 2 * HOUR, "first"),) if held_since is not None else (),
        held_since_ns=held_since,
    )


def _verdict(
    resource: ResourceType,
    manifests: list[dict[str, Any]],
    *,
    created: int,
    limits: Mapping[str, LimitFacts],
    restart_marker: str | None = None,
) -> Verdict:
    policies = PolicySet.of([policy_from_manifest(m) for m in manifests], Protection())
    meta = {"name": "obj", "namespace": "team-a", "creationTimestamp": format_rfc3339_nano(created)}
    resolution = policies.resolve(
        {}, object_view(resource, meta), restart_marker=restart_marker, now_ns=NOW
    )
    return decide_pass(
        PassInputs(
            annotations={},
            facts=ObjectFacts(
                key=ObjectKey(resource, "team-a", "obj"),
                uid="uid-1",
                resource_version="7",
                creation_ns=created,
                has_pod_template=resource.restartable,
                restart_marker=restart_marker,
            ),
            now_ns=NOW,
            settings=DecisionSettings(),
            ledger=Ledger(),
            resolution=resolution,
            guardrails=GuardrailState(now_ns=NOW, limits=limits),
        )
    )


# ------------------------------------------------------------------ late by the hold


NIGHTLY_RESTART = _manifest(
    "LifecyclePolicy",
    "capped",
    {
        "resources": ["deployments.apps"],
        "lifecycle": {"restart-cron": "0 3 * * *", "catch-up": "1h"},
    },
)


@pytest.mark.parametrize(
    ("held_since", "restarts"),
    [
        (None, False),  # nothing held it: an hour and a half late is past the catch-up
        (NIGHTLY + 5 * S, True),  # held since 03:00:05: five seconds late, then held
        (NIGHTLY + 59 * MINUTE, True),  # the limit began holding within the catch-up
        (NIGHTLY + 61 * MINUTE, False),  # it was missed before the limit held anything
    ],
)
def test_a_nightly_restart_the_limit_held_runs_instead_of_skipping(
    held_since: int | None, restarts: bool
) -> None:
    """A restart-cron over a fleet larger than the limit: the restarts the limit held to
    04:00 are decided then as restarts, not 'skipping restart under the catch-up policy'."""
    verdict = _verdict(
        DEPLOYMENTS,
        [NIGHTLY_RESTART],
        created=NIGHTLY - 10 * DAY,
        limits={CAPPED: _limit(CAPPED, held_since=held_since, full=False)},
        restart_marker=format_rfc3339_nano(NIGHTLY - DAY),  # last night's restart
    )
    decision = verdict.decision
    assert isinstance(decision, Patch)
    assert decision.operation is (Operation.RESTART if restarts else Operation.SKIP)


@pytest.mark.parametrize(
    ("due_before_hold", "deleted"),
    [
        (2 * HOUR, True),  # due two hours before the hold began: within catch-up 24h
        (3 * DAY, False),  # found three days late: skipped, as the catch-up says
    ],
)
def test_a_held_deletion_under_catch_up_is_late_by_the_hold_not_missed(
    due_before_hold: int, deleted: bool
) -> None:
    """``delete-after`` with ``catch-up: 24h`` held for more than a day by its limit: still
    deleted when its place frees; an object the policy found three days late is not."""
    held_since = NOW - 30 * HOUR
    policy = _manifest(
        "LifecyclePolicy",
        "capped",
        {"resources": ["configmaps"], "lifecycle": {"delete-after": "1h", "catch-up": "24h"}},
    )
    verdict = _verdict(
        CONFIGMAPS,
        [policy],
        created=held_since - due_before_hold - HOUR,
        limits={CAPPED: _limit(CAPPED, held_since=held_since, full=False)},
    )
    assert isinstance(verdict.decision, Delete if deleted else Patch)


# ------------------------------------------------------------------ the enforced deadline


ENFORCED = _manifest(
    "ClusterLifecyclePolicy",
    "deadline",
    {"resources": ["configmaps"], "enforce": True, "lifecycle": {"delete-after": "48h"}},
)
SOONER = _manifest(
    "LifecyclePolicy",
    "capped",
    {
        "resources": ["configmaps"],
        "limit": {"actions": 1, "window": "720h"},
        "lifecycle": {"delete-after": "1h"},
    },
)


def test_past_the_deadline_the_enforced_policy_acts_whatever_the_sooner_ones_limit() -> None:
    verdict = _verdict(
        CONFIGMAPS,
        [ENFORCED, SOONER],
        created=NOW - 72 * HOUR,
        limits={CAPPED: _limit(CAPPED)},
    )
    assert isinstance(verdict.final, Delete)
    assert verdict.final is verdict.decision
    assert verdict.final.policy == DEADLINE
    assert verdict.final.due_ns == NOW - 24 * HOUR


def test_the_enforced_policy_acts_at_its_deadline_under_its_own_limit() -> None:
    verdict = _verdict(
        CONFIGMAPS,
        [ENFORCED, SOONER],
        created=NOW - 72 * HOUR,
        limits={CAPPED: _limit(CAPPED), DEADLINE: _limit(DEADLINE)},
    )
    assert isinstance(verdict.final, Hold)
    assert verdict.final.reason is HoldReason.POLICY_LIMIT
    assert verdict.final.policy == DEADLINE


def test_before_the_deadline_the_sooner_ones_limit_holds_until_the_deadline_at_most() -> None:
    verdict = _verdict(
        CONFIGMAPS,
        [ENFORCED, SOONER],
        created=NOW - 10 * HOUR,  # the sooner one was due 9 hours ago, the deadline in 38
        limits={CAPPED: _limit(CAPPED)},
    )
    assert isinstance(verdict.decision, Delete)
    assert verdict.decision.policy == CAPPED
    hold = verdict.final
    assert isinstance(hold, Hold)
    assert hold.reason is HoldReason.POLICY_LIMIT
    assert hold.requeue_after_ns == 38 * HOUR  # looked at again at the deadline


def test_a_sooner_deletion_its_limit_lets_go_goes_first() -> None:
    verdict = _verdict(
        CONFIGMAPS,
        [ENFORCED, SOONER],
        created=NOW - 72 * HOUR,
        limits={CAPPED: _limit(CAPPED, full=False)},
    )
    assert isinstance(verdict.final, Delete)
    assert verdict.final.policy == CAPPED


def test_a_dry_run_report_past_the_limit_waits() -> None:
    rehearsal = _manifest(
        "LifecyclePolicy",
        "capped",
        {"resources": ["configmaps"], "lifecycle": {"delete-after": "1h", "dry-run": "true"}},
    )
    verdict = _verdict(
        CONFIGMAPS, [rehearsal], created=NOW - 2 * HOUR, limits={CAPPED: _limit(CAPPED)}
    )
    assert isinstance(verdict.decision, DryRun)
    assert isinstance(verdict.final, Wait)
    assert verdict.final.policy == CAPPED
    free = replace(_limit(CAPPED), stamps=())
    verdict = _verdict(CONFIGMAPS, [rehearsal], created=NOW - 2 * HOUR, limits={CAPPED: free})
    assert verdict.final is verdict.decision


def test_matching_says_whether_a_restart_policy_contends() -> None:
    """The pass reads the template marker before resolving when a restart policy contends
    (a recurring one counts from it), so the policies are resolved once."""
    for manifests, restarts in (([NIGHTLY_RESTART], True), ([SOONER], False), ([], False)):
        policies = PolicySet.of([policy_from_manifest(m) for m in manifests], Protection())
        meta = {"name": "obj", "namespace": "team-a", "creationTimestamp": "2026-01-01T00:00:00Z"}
        view = object_view(DEPLOYMENTS if restarts else CONFIGMAPS, meta)
        assert policies.matched(view).restarts is restarts
