"""A policy's ``since`` (docs/policies.md#since): its ``delete-after`` counts from what the
expression yields for the object; no value leaves the object alone (the next contender
decides), an evaluation error holds it; ``matchedAt`` is given by the caller (its first
sight: the pass's time); ``max-delete-ttl`` measures the deletion from the same instant."""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st

from lifecycle_controller.core import (
    DecisionSettings,
    Delete,
    Invalid,
    Ledger,
    ObjectFacts,
    ObjectKey,
    Wait,
)
from lifecycle_controller.core.objects.resources import ResourceType
from lifecycle_controller.core.policy.decide import decide_with_policies
from lifecycle_controller.core.policy.in_force import PolicySet, object_view
from lifecycle_controller.core.policy.match import ObjectView, since_of
from lifecycle_controller.core.policy.model import Policy, PolicyInvalid, PolicyKind, parse_policy
from lifecycle_controller.core.policy.precedence import Resolution, UnjudgedReason
from lifecycle_controller.core.policy.since import Since, SinceValue, compile_since
from lifecycle_controller.core.text.timestamps import format_rfc3339_nano, parse_rfc3339

from .support import DAY, HOUR, SECOND

PODS = ResourceType("", "v1", "pods", "Pod", namespaced=True)
CONFIGMAPS = ResourceType("", "v1", "configmaps", "ConfigMap", namespaced=True)
NOW = parse_rfc3339("2026-12-02T10:00:00Z")
CREATED = NOW - 30 * DAY
FINISHED = "2026-12-02T09:30:00Z"
FAILED_PODS = "timestamp(object.status.containerStatuses[0].state.terminated.finishedAt)"
#: What it reads: element 0's path alone, not the whole list.
FINISHED_AT = ("status", "containerStatuses", "[0]", "state", "terminated", "finishedAt")


def spec(**fields: Any) -> dict[str, Any]:
    base: dict[str, Any] = {"resources": ["pods"], "lifecycle": {"delete-after": "1h"}}
    return base | fields


def policy(name: str = "failed-pods", **fields: Any) -> Policy:
    parsed = parse_policy(PolicyKind.CLUSTER, None, name, 1, spec(**fields))
    assert isinstance(parsed, Policy), parsed
    return parsed


def pod(status: dict[str, Any] | None = None, **annotations: str) -> ObjectView:
    metadata = {
        "name": "job-1",
        "namespace": "team-a",
        "creationTimestamp": format_rfc3339_nano(CREATED),
        "annotations": annotations,
    }
    return object_view(PODS, metadata, {"status": status} if status is not None else {})


def terminated(finished: object) -> dict[str, Any]:
    return {
        "phase": "Failed",
        "containerStatuses": [{"state": {"terminated": {"finishedAt": finished}}}],
    }


def value(source: str, view: ObjectView, matched_at: int | None = None) -> SinceValue:
    return since_of(compile_since(source), view, matched_at)


# --- what since yields ----------------------------------------------------------------------


@pytest.mark.parametrize(
    ("source", "status", "expected"),
    [
        (FAILED_PODS, terminated(FINISHED), SinceValue(parse_rfc3339(FINISHED))),
        # A string in RFC 3339 is a time too, to the nanosecond.
        (
            "object.status.containerStatuses[0].state.terminated.finishedAt",
            terminated("2026-12-02T09:30:00.123456789Z"),
            SinceValue(parse_rfc3339("2026-12-02T09:30:00.123456789Z")),
        ),
        (
            "timestamp(object.status.startTime) + duration('1h')",
            {"startTime": "2026-12-02T08:00:00Z"},
            SinceValue(parse_rfc3339("2026-12-02T09:00:00Z")),
        ),
    ],
)
def test_a_time_or_an_rfc3339_string_is_the_instant(
    source: str, status: dict[str, Any], expected: SinceValue
) -> None:
    assert value(source, pod(status)) == expected


@pytest.mark.parametrize(
    ("source", "status", "why"),
    [
        (
            FAILED_PODS,
            {"phase": "Failed"},
            "a field since reads is absent (no key 'containerStatuses')",
        ),
        (
            FAILED_PODS,
            {"containerStatuses": []},
            "a field since reads is absent (index out of bounds: 0)",
        ),
        (FAILED_PODS, terminated("not a time"), "since reads a string that is not a time"),
        ("null", {}, "since yields null"),
        (
            "object.status.phase",
            {"phase": "Failed"},
            'since yields the string "Failed", not a time',
        ),
        ("object.status.restarts", {"restarts": 3}, "since yields int 3, not a time"),
    ],
)
def test_no_value_says_why(source: str, status: dict[str, Any], why: str) -> None:
    assert value(source, pod(status)) == SinceValue(missing=why)


def test_an_evaluation_error_is_a_problem() -> None:
    found = value("object.status.phase + 1", pod({"phase": "Failed"}))
    assert found.instant_ns is None
    assert found.missing is None
    assert found.problem is not None
    assert found.problem.startswith("since failed: ")


def test_a_field_not_read_yet_is_a_problem_not_an_absence() -> None:
    view = object_view(PODS, {"name": "p", "namespace": "a"}, {}, read=frozenset())
    found = value(FAILED_PODS, view)
    assert found.problem == (
        "object.status.containerStatuses[0].state.terminated.finishedAt not read yet "
        "(listing again)"
    )


def test_references_not_known_are_a_problem() -> None:
    view = object_view(CONFIGMAPS, {"name": "c", "namespace": "a"})
    found = value("size(referencedBy) == 0 ? matchedAt : null", view, NOW)
    assert found.problem == "since reads referencedBy: references not synced yet"


@given(st.integers(min_value=0, max_value=4_000_000_000 * SECOND))
def test_matched_at_alone_is_the_instant_to_the_nanosecond(instant: int) -> None:
    assert value(" matchedAt ", pod({}), instant) == SinceValue(instant)


@given(st.integers(min_value=0, max_value=4_000_000_000 * SECOND))
def test_matched_at_in_an_expression_is_a_cel_timestamp(instant: int) -> None:
    found = value("matchedAt + duration('1h')", pod({}), instant)
    assert found == SinceValue(instant - instant % 1000 + HOUR)  # CEL keeps microseconds


def test_matched_at_not_known_is_no_value() -> None:
    assert value("matchedAt", pod({}), None).missing == (
        "since reads matchedAt, which is not known for it"
    )


def test_a_naive_datetime_is_read_as_utc() -> None:
    from lifecycle_controller.core.policy.since import _from_result

    assert _from_result(datetime.fromisoformat("2026-12-02T10:00:00")) == SinceValue(NOW)
    assert _from_result(datetime(2026, 12, 2, 10, tzinfo=UTC)) == SinceValue(NOW)


# --- the model ------------------------------------------------------------------------------


def problems(kind: PolicyKind = PolicyKind.CLUSTER, **fields: Any) -> tuple[str, ...]:
    parsed = parse_policy(kind, "team-a", "p", 1, spec(**fields))
    assert isinstance(parsed, PolicyInvalid), parsed
    return parsed.problems


@pytest.mark.parametrize(
    ("fields", "expected"),
    [
        ({"since": 5}, "spec.since: must be a string (a CEL expression, such as matchedAt)"),
        ({"since": ""}, "spec.since: is empty"),
        ({"since": "object.metadata.finalizers"}, "spec.since: reads object.metadata.finalizers"),
        ({"since": "timestamp(object)"}, "spec.since: reads the whole object"),
        (
            {"since": "matchedAt", "lifecycle": {"delete-at": "2027-01-01T00:00:00Z"}},
            "spec.since: only with delete-after, which it moves the start of",
        ),
        (
            {"since": "object.data.when", "resources": ["configmaps", "secrets"]},
            'spec.since: reads object.data.when, and spec.resources[1] "secrets" selects '
            "secrets: a condition never reads Secret data",
        ),
    ],
)
def test_a_since_is_refused_as_a_condition_is(fields: dict[str, Any], expected: str) -> None:
    found = problems(**fields)
    assert any(problem.startswith(expected) for problem in found), found


def test_a_valid_since_is_compiled_with_what_it_reads() -> None:
    parsed = policy(since=FAILED_PODS, condition='object.status.phase == "Failed"')
    assert isinstance(parsed.since, Since)
    assert parsed.since.source == FAILED_PODS
    assert parsed.reads == {("status", "phase"), FINISHED_AT}
    assert not parsed.reads_references
    assert not parsed.since.reads_matched_at
    unused = policy(resources=["configmaps"], since="size(referencedBy) == 0 ? matchedAt : null")
    assert unused.reads_references
    assert unused.since is not None
    assert unused.since.reads_matched_at
    assert policy().reads == frozenset()
    assert not policy().reads_references


def test_the_set_keeps_what_a_since_reads() -> None:
    policies = PolicySet.of([policy(since=FAILED_PODS)])
    assert policies.reads(PODS) == {FINISHED_AT}


# --- resolution and decision ----------------------------------------------------------------


def resolve(policies: list[Policy], view: ObjectView, **kwargs: Any) -> Resolution:
    return PolicySet.of(policies).resolve(
        dict(view.annotations), view, restart_marker=None, now_ns=NOW, **kwargs
    )


def decide(resolution: Resolution, view: ObjectView, **settings: Any) -> Any:
    facts = ObjectFacts(
        key=ObjectKey(view.resource, view.namespace, view.name),
        uid="uid-1",
        resource_version="1",
        creation_ns=view.creation_ns,
    )
    return decide_with_policies(
        inputs=resolution,
        facts=facts,
        now_ns=NOW,
        settings=DecisionSettings(**settings),
        ledger=Ledger(),
        defaults=None,
    ).decision


def test_delete_after_counts_from_since_not_creation() -> None:
    view = pod(terminated(FINISHED))
    resolution = resolve([policy(since=FAILED_PODS)], view)
    assert resolution.annotations["lifecycle.cezary.dev/delete-at"] == "2026-12-02T10:30:00Z"
    assert resolution.primary.since_ns == parse_rfc3339(FINISHED)
    decision = decide(resolution, view)
    assert isinstance(decision, Wait)
    assert decision.due_ns == parse_rfc3339(FINISHED) + HOUR


def test_a_field_that_moves_moves_the_due_time() -> None:
    policies = [policy(since=FAILED_PODS)]
    earlier = decide(resolve(policies, pod(terminated("2026-12-02T08:00:00Z"))), pod())
    assert isinstance(earlier, Delete)  # an hour after 08:00 is past
    later = decide(resolve(policies, pod(terminated(FINISHED))), pod())
    assert isinstance(later, Wait)
    assert later.due_ns == parse_rfc3339(FINISHED) + HOUR


def test_no_value_leaves_the_object_alone_and_the_next_contender_decides() -> None:
    failed = policy(since=FAILED_PODS, priority=10)
    old_pods = policy("old-pods", lifecycle={"delete-after": "720h"})
    resolution = resolve([failed, old_pods], pod({"phase": "Failed"}))
    assert resolution.decided_by is old_pods
    (left,) = resolution.left_alone
    assert left.ref == failed.ref
    assert left.unanchored
    assert left.describe() == (
        "left alone by ClusterLifecyclePolicy/failed-pods: its since has no value: a field "
        "since reads is absent (no key 'containerStatuses')"
    )
    assert resolution.sinces[failed.ref].missing is not None
    alone = resolve([failed], pod({"phase": "Failed"}))
    assert alone.decided_by is None
    assert alone.left_alone[0].ref == failed.ref


def test_an_evaluation_error_holds_the_object() -> None:
    broken = policy(since="object.status.phase + 1", priority=10)
    lower = policy("old-pods", lifecycle={"delete-after": "1h"})
    resolution = resolve([broken, lower], pod({"phase": "Failed"}))
    (hold,) = resolution.holds
    assert hold.reason is UnjudgedReason.SINCE_ERROR
    assert hold.ref == broken.ref
    assert hold.describe().startswith(
        "held: the since of ClusterLifecyclePolicy/failed-pods could not be evaluated: since "
        "failed: "
    )
    assert resolution.decided_by is None
    assert lower.ref in resolution.overlapped


def test_matched_at_is_the_pass_time_at_first_sight_then_what_is_given() -> None:
    unused = policy(resources=["configmaps"], since="matchedAt", lifecycle={"delete-after": "168h"})
    view = object_view(
        CONFIGMAPS, {"name": "c", "namespace": "a", "creationTimestamp": "2020-01-01T00:00:00Z"}
    )
    first = resolve([unused], view)
    assert first.matched_at == {unused.ref: NOW}
    assert first.annotations["lifecycle.cezary.dev/delete-at"] == format_rfc3339_nano(NOW + 7 * DAY)
    known = NOW - 2 * DAY
    again = resolve([unused], view, matched_at={unused.ref: known})
    assert again.matched_at == {unused.ref: known}
    assert again.annotations["lifecycle.cezary.dev/delete-at"] == format_rfc3339_nano(
        known + 7 * DAY
    )


def test_a_held_since_still_says_when_the_object_began_to_match() -> None:
    broken = policy(resources=["configmaps"], since="matchedAt + 1")
    view = object_view(CONFIGMAPS, {"name": "c", "namespace": "a"})
    resolution = resolve([broken], view)
    assert resolution.holds[0].reason is UnjudgedReason.SINCE_ERROR
    assert resolution.matched_at == {broken.ref: NOW}


def test_no_since_leaves_the_resolution_as_it_was() -> None:
    resolution = resolve([policy()], pod({}))
    assert resolution.sinces == {}
    assert resolution.matched_at == {}
    assert resolution.primary.since_ns is None


def test_max_delete_ttl_measures_from_since_so_an_old_object_is_not_refused() -> None:
    view = pod(terminated(FINISHED))
    resolution = resolve([policy(since=FAILED_PODS)], view)
    capped = decide(resolution, view, max_delete_ttl_ns=2 * HOUR)
    assert isinstance(capped, Wait), capped  # 30 days old, but 1h after since
    refused = decide(resolution, view, max_delete_ttl_ns=HOUR // 2)
    assert isinstance(refused, Invalid)
    assert refused.refusal is not None
