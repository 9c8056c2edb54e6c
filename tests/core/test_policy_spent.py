"""A policy that leaves an object alone for its own reasons is no contender for it
(docs/policies.md#precedence): a ``delete-at`` or ``restart-at`` covers only what existed
before that time, a ``restart-at`` is done once the workload was restarted at or after it,
and the next contender decides in its place: its ``dry-run``, its condition's failure and
an enforced one's deadline do not reach the object either."""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping
from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st

from lifecycle_controller.core import (
    DecisionSettings,
    Delete,
    DryRun,
    Idle,
    Ledger,
    ObjectFacts,
    Patch,
    Wait,
)
from lifecycle_controller.core.decision.outcomes import Decision
from lifecycle_controller.core.objects import keys
from lifecycle_controller.core.policy.coverage import LeftAlone, leaves_alone
from lifecycle_controller.core.policy.decide import decide_with_policies
from lifecycle_controller.core.policy.model import Policy, PolicyKind, parse_policy
from lifecycle_controller.core.policy.precedence import Resolution, UnjudgedPolicy, resolve_policies
from lifecycle_controller.core.text.timestamps import format_rfc3339_nano

from .support import CONFIGMAP, DAY, DEPLOYMENT, HOUR, NOW, ts

CLUSTER, NAMESPACED = PolicyKind.CLUSTER, PolicyKind.NAMESPACED
#: The end of the sprint a one-off policy was written for: yesterday.
SPRINT_END = "2026-10-04T00:00:00Z"
BEFORE = ts(SPRINT_END) - DAY
AFTER = ts(SPRINT_END) + HOUR
DEPLOYMENTS = ("deployments.apps",)


def policy(
    name: str,
    kind: PolicyKind = CLUSTER,
    *,
    resources: tuple[str, ...] = ("configmaps",),
    priority: int = 0,
    enforce: bool = False,
    condition: str | None = None,
    **lifecycle: str,
) -> Policy:
    spec: dict[str, Any] = {
        "resources": list(resources),
        "priority": priority,
        "lifecycle": {key.replace("_", "-"): value for key, value in lifecycle.items()},
    }
    if enforce:
        spec["enforce"] = True
    if condition is not None:
        spec["condition"] = condition
    parsed = parse_policy(kind, "team-a" if kind is NAMESPACED else None, name, 1, spec)
    assert isinstance(parsed, Policy), parsed
    return parsed


SPENT_DELETE = policy("sprint", NAMESPACED, delete_at=SPRINT_END)
SPENT_RESTART = policy("once", NAMESPACED, resources=DEPLOYMENTS, restart_at=SPRINT_END)
PREVIEWS = policy("previews", delete_after="72h")
NIGHTLY = policy("nightly", resources=DEPLOYMENTS, restart_cron="0 3 * * *")


def resolve(
    *contenders: Policy | UnjudgedPolicy,
    annotations: Mapping[str, str] | None = None,
    created: int | None = AFTER,
    marker: str | None = None,
) -> Resolution:
    return resolve_policies(
        annotations or {}, contenders, creation_ns=created, restart_marker=marker, now_ns=NOW
    )


def decide(resolution: Resolution, facts: ObjectFacts = CONFIGMAP) -> Decision:
    return decide_with_policies(
        inputs=resolution,
        facts=facts,
        now_ns=NOW,
        settings=DecisionSettings(),
        ledger=Ledger(),
        defaults=None,
    ).decision


def names(refs: tuple[Any, ...]) -> list[str]:
    return [str(ref) for ref in refs]


# --- leaves_alone ---------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("subject", "created", "marker", "why"),
    [
        (SPENT_DELETE, BEFORE, None, None),
        (SPENT_DELETE, ts(SPRINT_END), None,
         f"created {SPRINT_END}, at or after its delete-at {SPRINT_END}"),
        (SPENT_DELETE, AFTER, None,
         f"created 2026-10-04T01:00:00Z, at or after its delete-at {SPRINT_END}"),
        # A marker does not concern a deletion.
        (SPENT_DELETE, BEFORE, "2026-10-04T12:00:00Z", None),
        (SPENT_DELETE, None, None, None),  # creation unknown: it contends
        (SPENT_RESTART, BEFORE, None, None),
        (SPENT_RESTART, BEFORE, "2026-10-03T12:00:00Z", None),  # restarted before: not done
        (SPENT_RESTART, BEFORE, "2026-10-04T00:00:00.5Z",
         f"restarted 2026-10-04T00:00:00.5Z, at or after its restart-at {SPRINT_END}: done"),
        (SPENT_RESTART, BEFORE, "not a time", None),
        (SPENT_RESTART, AFTER, None,
         f"created 2026-10-04T01:00:00Z, at or after its restart-at {SPRINT_END}"),
        (PREVIEWS, AFTER, None, None),  # a relative action covers every object
        (NIGHTLY, AFTER, "2026-10-04T12:00:00Z", None),
    ],
)  # fmt: skip
def test_leaves_alone(subject: Policy, created: int | None, marker: str | None, why: str) -> None:
    assert leaves_alone(subject, created, marker) == why


# --- the next contender decides ---------------------------------------------------------------


def test_a_spent_delete_at_gives_way_to_a_cluster_delete_after() -> None:
    resolution = resolve(SPENT_DELETE, PREVIEWS)
    assert names(resolution.deciders) == ["ClusterLifecyclePolicy/previews"]
    assert resolution.overlapped == ()  # it is no contender: not overlapped either
    (spent,) = resolution.left_alone
    assert spent == LeftAlone(
        SPENT_DELETE.ref,
        f"created 2026-10-04T01:00:00Z, at or after its delete-at {SPRINT_END}",
    )
    assert spent.describe().startswith("left alone by LifecyclePolicy/team-a/sprint: created")
    fresh = dataclasses.replace(CONFIGMAP, creation_ns=AFTER)
    waiting = decide(resolution, fresh)
    assert isinstance(waiting, Wait)
    assert waiting.due_ns == AFTER + 72 * HOUR
    assert waiting.policy == "ClusterLifecyclePolicy/previews"


def test_an_object_from_before_the_time_is_still_the_one_off_policys() -> None:
    resolution = resolve(SPENT_DELETE, PREVIEWS, created=BEFORE)
    assert names(resolution.deciders) == ["LifecyclePolicy/team-a/sprint"]
    assert names(resolution.overlapped) == ["ClusterLifecyclePolicy/previews"]
    assert resolution.left_alone == ()
    decided = decide(resolution, dataclasses.replace(CONFIGMAP, creation_ns=BEFORE))
    assert isinstance(decided, Delete)


@pytest.mark.parametrize(
    ("created", "marker"),
    [
        (BEFORE, "2026-10-04T00:00:07Z"),  # the restart-at restarted it: done
        (AFTER, None),  # created after it: nothing to restart for
    ],
)
def test_a_spent_restart_at_gives_way_to_a_nightly_cluster_restart(
    created: int, marker: str | None
) -> None:
    resolution = resolve(SPENT_RESTART, NIGHTLY, created=created, marker=marker)
    assert names(resolution.deciders) == ["ClusterLifecyclePolicy/nightly"]
    assert [spent.ref for spent in resolution.left_alone] == [SPENT_RESTART.ref]
    facts = dataclasses.replace(DEPLOYMENT, creation_ns=created, restart_marker=marker)
    # Last restarted (or created) yesterday: tonight's 03:00, now, is due.
    restart = decide(resolution, facts)
    assert isinstance(restart, Patch)
    assert restart.policy == "ClusterLifecyclePolicy/nightly"


def test_a_restart_at_not_done_yet_still_decides() -> None:
    resolution = resolve(SPENT_RESTART, NIGHTLY, created=BEFORE, marker="2026-10-03T03:00:00Z")
    assert names(resolution.deciders) == ["LifecyclePolicy/team-a/once"]
    assert names(resolution.overlapped) == ["ClusterLifecyclePolicy/nightly"]


def test_only_spent_policies_leave_the_object_to_its_annotations() -> None:
    resolution = resolve(SPENT_DELETE)
    assert resolution.deciders == ()
    assert resolution.overlapped == ()
    assert resolution.holds == ()
    assert resolution.primary.own
    assert isinstance(decide(resolution), Idle)
    own = resolve(SPENT_DELETE, annotations={keys.DELETE_AFTER: "1h"})
    converting = decide(own)  # the annotation's own path: converted to a delete-at first
    assert isinstance(converting, Patch)
    assert converting.policy is None
    assert [spent.ref for spent in own.left_alone] == [SPENT_DELETE.ref]


def test_a_spent_policys_dry_run_and_limit_do_not_reach_the_next_contender() -> None:
    rehearsal = policy("sprint", NAMESPACED, delete_at=SPRINT_END, dry_run="true")
    hourly = policy("hourly", delete_after="1h")
    covered = resolve(rehearsal, hourly, created=BEFORE)
    assert isinstance(decide(covered, dataclasses.replace(CONFIGMAP, creation_ns=BEFORE)), DryRun)
    spent_for_it = resolve(rehearsal, hourly, created=AFTER)
    assert keys.DRY_RUN not in spent_for_it.primary.annotations
    deleted = decide(spent_for_it, dataclasses.replace(CONFIGMAP, creation_ns=AFTER))
    assert isinstance(deleted, Delete)
    # The deletion is the cluster policy's: its limit gates it, the spent one's does not.
    assert deleted.policy == "ClusterLifecyclePolicy/hourly"


def test_a_spent_policy_whose_condition_fails_holds_nothing() -> None:
    checked = policy("sprint", NAMESPACED, delete_at=SPRINT_END, condition="true")
    hold = UnjudgedPolicy.condition_error(checked, "no such key")
    resolution = resolve(hold, PREVIEWS)
    assert resolution.holds == ()
    assert names(resolution.deciders) == ["ClusterLifecyclePolicy/previews"]
    assert [spent.ref for spent in resolution.left_alone] == [checked.ref]
    # For an object it covers, the failure holds as ever.
    assert resolve(hold, PREVIEWS, created=BEFORE).holds == (hold,)


def test_a_spent_enforced_deadline_is_no_deadline_for_newer_objects() -> None:
    deadline = policy("deadline", delete_at=SPRINT_END, enforce=True)
    team = policy("keep-a-week", NAMESPACED, delete_after="168h")
    resolution = resolve(deadline, team)
    assert names(resolution.deciders) == ["LifecyclePolicy/team-a/keep-a-week"]
    assert resolution.primary.sooner is None
    assert [spent.ref for spent in resolution.left_alone] == [deadline.ref]
    # Its own annotations decide too, as if the enforced policy did not exist.
    own = resolve(deadline, annotations={keys.DELETE_AFTER: "1h"})
    assert own.primary.own
    assert own.deciders == ()
    # An object from before the deadline: still enforced.
    covered = resolve(deadline, team, created=BEFORE)
    assert names(covered.deciders) == [
        "ClusterLifecyclePolicy/deadline",
        "LifecyclePolicy/team-a/keep-a-week",
    ]


def test_a_spent_deletion_leaves_the_restart_family_alone() -> None:
    sprint = policy("sprint", NAMESPACED, resources=DEPLOYMENTS, delete_at=SPRINT_END)
    resolution = resolve(sprint, NIGHTLY)
    assert names(resolution.deciders) == ["ClusterLifecyclePolicy/nightly"]
    (spent,) = resolution.left_alone
    assert spent.ref == sprint.ref
    assert spent.reason.endswith(f"at or after its delete-at {SPRINT_END}")


def test_several_spent_policies_are_named_best_first() -> None:
    first = policy("a-sprint", NAMESPACED, priority=5, delete_at=SPRINT_END)
    second = policy("b-sprint", NAMESPACED, delete_at="2026-10-03T00:00:00Z")
    resolution = resolve(second, PREVIEWS, first)
    assert [spent.ref for spent in resolution.left_alone] == [first.ref, second.ref]
    assert names(resolution.deciders) == ["ClusterLifecyclePolicy/previews"]


# --- property -----------------------------------------------------------------------------------

_CREATED = ts(SPRINT_END)
_actions = st.sampled_from(
    [
        {"delete_at": format_rfc3339_nano(_CREATED - DAY)},  # spent for the object
        {"delete_at": format_rfc3339_nano(_CREATED + DAY)},  # covers it
        {"delete_after": "72h"},
        {"restart_at": format_rfc3339_nano(_CREATED - HOUR)},  # spent
        {"restart_at": format_rfc3339_nano(_CREATED + HOUR)},
        {"restart_every": "24h"},
    ]
)
_specs = st.tuples(
    st.sampled_from("abcdef"),
    st.sampled_from([CLUSTER, NAMESPACED]),
    st.integers(-2, 2),
    st.booleans(),
    _actions,
    st.booleans(),  # a hold: its condition failed on the object
)
_own = st.sampled_from([{}, {keys.DELETE_AFTER: "1h"}, {keys.RESTART_EVERY: "1h"}])


def _contenders(specs: list[tuple[Any, ...]]) -> list[Policy | UnjudgedPolicy]:
    found: dict[tuple[str, PolicyKind], Policy | UnjudgedPolicy] = {}
    for name, kind, priority, enforce, action, held in specs:
        made = policy(
            name,
            kind,
            resources=DEPLOYMENTS,
            priority=priority,
            enforce=enforce and kind is CLUSTER,
            **action,
        )
        found.setdefault((name, kind), UnjudgedPolicy.condition_error(made, "x") if held else made)
    return list(found.values())


@given(specs=st.lists(_specs, max_size=7), own=_own)
def test_a_policy_that_leaves_the_object_alone_never_hides_the_next_contender(
    specs: list[tuple[Any, ...]], own: Mapping[str, str]
) -> None:
    contenders = _contenders(specs)
    everything = resolve(*contenders, annotations=own, created=_CREATED)
    spent = {left.ref for left in everything.left_alone}
    rest = [c for c in contenders if c.ref not in spent]
    without = resolve(*rest, annotations=own, created=_CREATED)
    # The same outcome as if the spent policies did not match at all...
    assert everything.families == without.families
    assert without.left_alone == ()
    # ... and a spent policy neither decides, nor holds, nor is overlapped.
    involved = {*everything.deciders, *everything.overlapped, *(h.ref for h in everything.holds)}
    assert not spent & involved
    for left in everything.left_alone:
        assert str(left.ref) in left.describe()
