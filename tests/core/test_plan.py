"""explain(): what `plan` and `status` print, derived from decide() alone."""

from __future__ import annotations

from lifecycle_controller.core import DecisionSettings, ObjectFacts, ObjectKey
from lifecycle_controller.core.decision.guardrails import BreakerFacts
from lifecycle_controller.core.objects import keys
from lifecycle_controller.core.policy.in_force import PolicySet
from lifecycle_controller.core.policy.match import ObjectView
from lifecycle_controller.core.policy.model import PolicyKind, parse_policy
from lifecycle_controller.core.policy.precedence import Resolution
from lifecycle_controller.core.text.timestamps import format_rfc3339_nano, parse_rfc3339
from lifecycle_controller.core.tooling.plan import GuardrailView, explain

NOW = parse_rfc3339("2027-03-27T12:00:00Z")


def facts(kind: str = "ConfigMap", group: str = "") -> ObjectFacts:
    return ObjectFacts(
        key=ObjectKey.for_kind(
            group=group,
            version="v1",
            kind=kind,
            namespace="ns",
            name="obj",
        ),
        uid="uid-1",
        resource_version="1",
        has_pod_template=group == "apps",
    )


def times(instants: tuple[int, ...]) -> list[str]:
    return [format_rfc3339_nano(i) for i in instants]


def test_delete_after_is_converted_then_scheduled() -> None:
    result = explain(
        annotations={keys.DELETE_AFTER: "2h"},
        facts=facts(),
        now_ns=NOW,
        settings=DecisionSettings(),
    )
    assert result.action == "delete"
    assert result.due_ns == parse_rfc3339("2027-03-27T14:00:00Z")
    assert len(result.steps) == 1
    assert "delete-at=2027-03-27T14:00:00Z" in result.steps[0]
    assert times(result.upcoming) == ["2027-03-27T14:00:00Z"]
    assert result.problems == ()


def test_past_delete_at_is_due_now() -> None:
    result = explain(
        annotations={keys.DELETE_AT: "2020-01-01T00:00:00Z"},
        facts=facts(),
        now_ns=NOW,
        settings=DecisionSettings(),
    )
    assert (result.action, result.summary) == ("delete", "delete now")


def test_cron_in_warsaw_shows_the_spring_forward_policy() -> None:
    # 02:30 does not exist in Warsaw on 2027-03-28: our policy runs it at 03:00 CEST (01:00Z).
    result = explain(
        annotations={keys.RESTART_CRON: "30 2 * * *", keys.CRON_TIMEZONE: "Europe/Warsaw"},
        facts=facts("Deployment", "apps"),
        now_ns=NOW,
        settings=DecisionSettings(),
        occurrences=3,
    )
    assert result.action == "restart"
    assert times(result.upcoming) == [
        "2027-03-28T01:00:00Z",
        "2027-03-29T00:30:00Z",
        "2027-03-30T00:30:00Z",
    ]
    assert "last-restart-timestamp" in result.steps[0]


def test_interval_lists_following_occurrences_from_the_anchor() -> None:
    result = explain(
        annotations={
            keys.RESTART_EVERY: "6h",
            keys.LAST_RESTART_TIMESTAMP: "2027-03-27T10:00:00Z",
        },
        facts=facts("Deployment", "apps"),
        now_ns=NOW,
        settings=DecisionSettings(),
    )
    assert times(result.upcoming) == [
        "2027-03-27T16:00:00Z",
        "2027-03-27T22:00:00Z",
        "2027-03-28T04:00:00Z",
    ]
    assert result.steps == ()


def test_problems_are_reported_and_nothing_scheduled() -> None:
    result = explain(
        annotations={keys.DELETE_AFTER: "2x"},
        facts=facts(),
        now_ns=NOW,
        settings=DecisionSettings(),
    )
    assert result.action is None
    assert result.due_ns is None
    assert result.problems == (
        "InvalidAnnotation: Invalid format for delete-after annotation: "
        'invalid duration format: "2x"',
    )


def test_dry_run_is_flagged() -> None:
    result = explain(
        annotations={keys.DELETE_AT: "2020-01-01T00:00:00Z"},
        facts=facts(),
        now_ns=NOW,
        settings=DecisionSettings(dry_run=True),
    )
    assert result.dry_run
    assert result.summary == "Dry-run: Resource would be deleted now."


def test_restart_on_unsupported_kind_is_a_problem() -> None:
    result = explain(
        annotations={keys.RESTART_AFTER: "1h"},
        facts=facts(),
        now_ns=NOW,
        settings=DecisionSettings(),
    )
    assert result.action is None
    assert result.problems[0].startswith("UnsupportedRestartKind: ")


def test_due_restart_at_restarts_now_without_a_schedule() -> None:
    result = explain(
        annotations={keys.RESTART_AT: "2027-03-27T11:00:00Z"},
        facts=facts("Deployment", "apps"),
        now_ns=NOW,
        settings=DecisionSettings(),
    )
    assert (result.action, result.summary, result.upcoming) == ("restart", "restart now", ())


def test_pending_restart_at_hides_the_recurring_schedule() -> None:
    result = explain(
        annotations={keys.RESTART_AT: "2027-03-27T13:00:00Z", keys.RESTART_EVERY: "1h"},
        facts=facts("Deployment", "apps"),
        now_ns=NOW,
        settings=DecisionSettings(),
    )
    assert times(result.upcoming) == ["2027-03-27T13:00:00Z"]


def test_due_interval_lists_what_follows_the_coalesced_anchor() -> None:
    result = explain(
        annotations={
            keys.RESTART_EVERY: "6h",
            keys.LAST_RESTART_TIMESTAMP: "2027-03-26T10:00:00Z",
        },
        facts=facts("Deployment", "apps"),
        now_ns=NOW,
        settings=DecisionSettings(),
        occurrences=2,
    )
    assert result.summary == "restart now"
    # Anchor moves to the last grid point <= now (10:00); the next runs follow it.
    assert times(result.upcoming) == ["2027-03-27T16:00:00Z", "2027-03-27T22:00:00Z"]


def test_skip_under_catch_up_never_is_explained() -> None:
    result = explain(
        annotations={keys.DELETE_AT: "2027-03-27T11:00:00Z", keys.CATCH_UP: "never"},
        facts=facts(),
        now_ns=NOW,
        settings=DecisionSettings(),
    )
    assert result.action == "delete"
    assert "skip" in result.summary.lower()


def test_invalid_schedule_and_anchor_list_nothing() -> None:
    for given in (
        {keys.RESTART_CRON: "not a cron"},
        {keys.RESTART_EVERY: "1h", keys.LAST_RESTART_TIMESTAMP: "yesterday"},
    ):
        result = explain(
            annotations=given,
            facts=facts("Deployment", "apps"),
            now_ns=NOW,
            settings=DecisionSettings(),
        )
        assert result.upcoming == ()
        assert result.summary.startswith("blocked: ")
        assert result.problems


def test_no_lifecycle_action_is_idle() -> None:
    result = explain(
        annotations={keys.CATCH_UP: "always"},
        facts=facts(),
        now_ns=NOW,
        settings=DecisionSettings(),
    )
    assert (result.action, result.due_ns, result.upcoming) == (None, None, ())


def test_objects_that_will_never_act_show_their_problem_and_no_occurrences() -> None:
    cron = {keys.RESTART_CRON: "0 3 * * *", keys.LAST_RESTART_TIMESTAMP: "2027-03-27T00:00:00Z"}
    cases = {
        "unsupported kind": (cron, facts("ConfigMap")),
        "conflicting families": ({**cron, keys.DELETE_AFTER: "1h"}, facts("Deployment", "apps")),
        "invalid zone": ({**cron, keys.CRON_TIMEZONE: "Mars/Olympus"}, facts("Deployment", "apps")),
    }
    for name, (given, subject) in cases.items():
        result = explain(annotations=given, facts=subject, now_ns=NOW, settings=DecisionSettings())
        assert result.problems, name
        assert result.upcoming == (), name
        assert result.action is None, name


OPEN = BreakerFacts(
    open=True, limit=5, window_ns=0, tripped_at="2027-03-27T11:00:00Z", tripped_actions=5
)
RESET = "lifecycle-controller breaker reset --leader-election-id x"


def test_an_open_breaker_holds_a_due_deletion_and_the_plan_says_how_to_release_it() -> None:
    result = explain(
        annotations={keys.DELETE_AT: "2020-01-01T00:00:00Z"},
        facts=facts(),
        now_ns=NOW,
        settings=DecisionSettings(),
        guardrails=GuardrailView(breaker=OPEN, reset_command=RESET),
    )
    assert result.action == "delete"
    assert result.summary == (
        f"delete due now; held by the circuit breaker (open since 2027-03-27T11:00:00Z; `{RESET}`)"
    )


def test_an_open_breaker_will_hold_a_future_action_too_but_not_a_dry_run() -> None:
    later = {keys.DELETE_AT: "2027-03-27T14:00:00Z"}
    view = GuardrailView(breaker=OPEN, reset_command=RESET)
    result = explain(
        annotations=later, facts=facts(), now_ns=NOW, settings=DecisionSettings(), guardrails=view
    )
    assert "held by the circuit breaker" in result.summary
    assert result.due_ns is not None
    assert times((result.due_ns,)) == ["2027-03-27T14:00:00Z"]
    dry = explain(
        annotations={**later, keys.DRY_RUN: "true"},
        facts=facts(),
        now_ns=NOW,
        settings=DecisionSettings(),
        guardrails=view,
    )
    assert "circuit breaker" not in dry.summary
    closed = explain(
        annotations=later,
        facts=facts(),
        now_ns=NOW,
        settings=DecisionSettings(),
        guardrails=GuardrailView(reset_command=RESET),
    )
    assert "circuit breaker" not in closed.summary


def _policy(lifecycle: dict[str, str]) -> PolicySet:
    spec = {"resources": ["configmaps"], "lifecycle": lifecycle}
    return PolicySet.of([parse_policy(PolicyKind.CLUSTER, None, "sweep", 1, spec)])


def _inputs(policies: PolicySet, annotations: dict[str, str]) -> Resolution:
    view = ObjectView(resource=facts().key.resource, namespace="ns", name="obj")
    return policies.resolve(annotations, view, restart_marker=None, now_ns=NOW)


def test_a_policy_decides_through_decide_with_policies_and_is_named() -> None:
    inputs = _inputs(_policy({"delete-after": "2h", "dry-run": "true"}), {})
    result = explain(
        annotations={},
        facts=facts(),
        now_ns=NOW,
        settings=DecisionSettings(),
        policy_inputs=inputs,
    )
    assert result.action == "delete"
    assert result.due_ns == NOW + 2 * 3600 * 10**9  # from the pass's time: no creation known
    assert result.steps == ()  # a policy converts nothing
    assert result.dry_run is True  # the policy's own dry-run
    assert result.summary.endswith("(based on ClusterLifecyclePolicy/sweep: delete-after 2h)")


def test_an_object_action_annotation_keeps_its_own_decision_beside_a_policy() -> None:
    own = {keys.DELETE_AFTER: "1h"}
    inputs = _inputs(_policy({"delete-after": "2h"}), own)
    assert inputs.decided_by is None
    result = explain(
        annotations=own,
        facts=facts(),
        now_ns=NOW,
        settings=DecisionSettings(),
        policy_inputs=inputs,
    )
    assert result.due_ns == NOW + 3600 * 10**9
    assert len(result.steps) == 1  # its own delete-after is converted, as without policies
    assert result.summary.startswith("deletion scheduled at ")
    assert "based on" not in result.summary
