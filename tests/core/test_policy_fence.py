"""The policy fence's comparison (core/policy/fence.py), through the one pure verdict: a
policy deletion decided on the controller's view goes only when the API server's view, read
again and resolved with the same code, decides the same deletion by the same policy object
at the same generation (docs/reliability.md#policy-fence). The comparison is a fact the
verdict hands to the guardrails; the hold it gives is theirs (its rows are in the one table of
tests/core/test_guardrail_decisions.py), and here it is seen through the whole verdict.

Caught: the fence compared the deciding policy's generation alone, so a Namespace relabelled
out of a ``namespaceSelector``, a new policy that outranks the decider, or a new invalid
policy that holds the object did not stop a deletion decided behind a lagging watch.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import replace
from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st

from lifecycle_controller.core import DecisionSettings, Ledger
from lifecycle_controller.core.decision.guardrails import GuardrailState, Hold, HoldReason
from lifecycle_controller.core.decision.outcomes import Delete, ObjectFacts, Wait
from lifecycle_controller.core.objects.resources import ObjectKey, ResourceType
from lifecycle_controller.core.policy.decide import (
    PassInputs,
    PolicyConfirmation,
    Verdict,
    decide_pass,
)
from lifecycle_controller.core.policy.fence import deciding_policy, describe, unconfirmed
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
NOW = parse_rfc3339("2026-12-02T10:00:00Z")
CREATED = NOW - 3600 * 10**9
RETRY = 10**9
PREVIEW = {"env": "preview"}
SWEEP = "ClusterLifecyclePolicy/sweep"
HIGHER_REF = "ClusterLifecyclePolicy/higher"

Manifest = dict[str, Any]


def cluster(name: str, uid: str = "u-sweep", generation: int = 1, **spec: Any) -> Manifest:
    return {
        "apiVersion": POLICY_API_VERSION,
        "kind": "ClusterLifecyclePolicy",
        "metadata": {"name": name, "uid": uid, "generation": generation},
        "spec": {"resources": ["configmaps"], **spec},
    }


def namespaced(name: str, **spec: Any) -> Manifest:
    return {
        "apiVersion": POLICY_API_VERSION,
        "kind": "LifecyclePolicy",
        "metadata": {"name": name, "namespace": "team", "uid": f"u-{name}", "generation": 1},
        "spec": {"resources": ["configmaps"], **spec},
    }


#: ``sweep``: ConfigMaps named tmp-* in Namespaces labelled env=preview, after 1s.
BASE = cluster(
    "sweep",
    names=["tmp-*"],
    namespaceSelector={"matchLabels": PREVIEW},
    lifecycle={"delete-after": "1s"},
)


def edited(**spec: Any) -> Manifest:
    """``sweep`` at generation 2 with ``spec`` changed."""
    return cluster("sweep", generation=2, **{**BASE["spec"], **spec})


KEEP = namespaced("keep", names=["tmp-*"], lifecycle={"delete-after": "1000h"})
BROKEN = namespaced("broken", names=["tmp-*"], lifecycle={"delete-after": "soon"})
LOWER = cluster("lower", uid="u-lower", priority=-1, lifecycle={"delete-after": "1s"})
HIGHER = cluster("higher", uid="u-higher", priority=5, lifecycle={"delete-after": "1000h"})


def resolved(
    manifests: tuple[Manifest, ...], labels: Mapping[str, str] | None = PREVIEW
) -> Resolution:
    """The object ``team/tmp-1`` resolved on ``manifests`` and its Namespace's ``labels``."""
    policies = PolicySet.of([policy_from_manifest(m) for m in manifests], Protection())
    meta = {"name": "tmp-1", "namespace": "team", "creationTimestamp": format_rfc3339_nano(CREATED)}
    view = replace(object_view(CONFIGMAPS, meta), namespace_labels=labels)
    return policies.resolve({}, view, restart_marker=None, now_ns=NOW)


def inputs(resolution: Resolution, confirmation: PolicyConfirmation | None = None) -> PassInputs:
    return PassInputs(
        annotations={},
        facts=ObjectFacts(
            key=ObjectKey(CONFIGMAPS, "team", "tmp-1"),
            uid="uid-1",
            resource_version="7",
            creation_ns=CREATED,
        ),
        now_ns=NOW,
        settings=DecisionSettings(),
        ledger=Ledger(),
        resolution=resolution,
        fenced=True,
        confirmation=confirmation,
        guardrails=GuardrailState(now_ns=NOW),
    )


def fenced(decided_on: Resolution, fresh: Resolution | None, problem: str | None = None) -> Verdict:
    confirmation = PolicyConfirmation(fresh, RETRY, problem=problem)
    return decide_pass(inputs(decided_on, confirmation))


def test_the_base_view_decides_a_fenced_deletion() -> None:
    verdict = decide_pass(inputs(resolved((BASE,))))
    assert isinstance(verdict.decision, Delete)
    assert verdict.decision.policy == SWEEP
    assert verdict.missing is not None


@pytest.mark.parametrize(
    ("case", "manifests", "labels", "why"),
    [
        ("unchanged", (BASE,), PREVIEW, None),
        ("a relabel that keeps the match", (BASE,), {**PREVIEW, "team": "a"}, None),
        ("a new policy below it", (BASE, LOWER), PREVIEW, None),
        ("a relabel that ends the match", (BASE,), {"env": "prod"}, "Idle"),
        ("the Namespace's labels unknown", (BASE,), None, "selects namespaces by label"),
        ("a LifecyclePolicy over it", (BASE, KEEP), PREVIEW, "Wait (due "),
        ("a cluster policy of higher priority", (BASE, HIGHER), PREVIEW, "by " + HIGHER_REF),
        ("an invalid policy that holds it", (BASE, BROKEN), PREVIEW, "broken is invalid"),
        ("narrowed", (edited(names=["tmp-go-*"]),), PREVIEW, "no longer decides"),
        ("deleted", (), PREVIEW, "no longer decides"),
        ("edited, still deciding", (edited(lifecycle={"delete-after": "2s"}),), PREVIEW, "gen"),
        (
            "recreated",
            ({**BASE, "metadata": {**BASE["metadata"], "uid": "u-new"}},),
            PREVIEW,
            "again",
        ),
    ],
)
def test_a_policy_deletion_goes_only_when_the_fresh_view_decides_it(
    case: str,
    manifests: tuple[Manifest, ...],
    labels: Mapping[str, str] | None,
    why: str | None,
) -> None:
    verdict = fenced(resolved((BASE,)), resolved(manifests, labels))
    assert verdict.missing is None
    if why is None:
        assert isinstance(verdict.final, Delete), case
        assert verdict.final is verdict.decision
        return
    hold = verdict.final
    assert isinstance(hold, Hold), case
    assert hold.reason is HoldReason.POLICY_UNCONFIRMED
    assert hold.held is verdict.decision
    assert hold.requeue_after_ns == RETRY
    assert hold.policy == SWEEP
    assert why in hold.log, hold.log


def test_an_unreadable_view_holds_the_deletion() -> None:
    verdict = fenced(resolved((BASE,)), None, problem="500 Internal Server Error")
    assert isinstance(verdict.final, Hold)
    assert verdict.final.reason is HoldReason.POLICY_UNCONFIRMED
    assert verdict.final.log.endswith("could not be read: 500 Internal Server Error")


def test_a_deletion_that_the_fresh_view_schedules_otherwise_does_not_go() -> None:
    on = resolved((BASE,))
    decided = decide_pass(inputs(on)).decision
    assert isinstance(decided, Delete)
    later = replace(decided, due_ns=(decided.due_ns or 0) + 1)
    assert "another deletion" in (unconfirmed(decided, on, later, on) or "")
    waits = Wait(requeue_after_ns=1, policy=SWEEP, due_ns=decided.due_ns)
    assert "decides Wait (due " in (unconfirmed(decided, on, waits, on) or "")
    assert unconfirmed(decided, on, decided, on) is None
    unknown = replace(decided, policy="ClusterLifecyclePolicy/other")
    other = resolved((cluster("other", uid="u-other", lifecycle={"delete-after": "1s"}),))
    assert "decides nothing in the inputs" in (unconfirmed(unknown, on, unknown, other) or "")


def test_the_deciding_policy_is_found_under_an_enforced_deadline() -> None:
    enforced = cluster(
        "deadline", uid="u-deadline", enforce=True, lifecycle={"delete-after": "1000h"}
    )
    on = resolved((BASE, enforced))
    verdict = fenced(on, resolved((BASE, enforced)))
    assert isinstance(verdict.final, Delete)  # the sooner contender's deletion, confirmed
    assert verdict.final.policy == SWEEP
    found = deciding_policy(on, SWEEP)
    assert found is not None
    assert found.uid == "u-sweep"
    assert deciding_policy(on, "ClusterLifecyclePolicy/nobody") is None


def test_describe_says_what_was_decided_and_by_whom() -> None:
    assert describe(Wait(requeue_after_ns=1, due_ns=NOW, policy=SWEEP)) == (
        f"Wait (due 2026-12-02T10:00:00Z) by {SWEEP}"
    )
    assert describe(Wait(requeue_after_ns=1, log="why")) == (
        "Wait by the object's own annotations: why"
    )


#: Each policy's possible states on either side (None: absent).
_STATES: tuple[tuple[Manifest | None, ...], ...] = (
    (BASE, edited(names=["tmp-go-*"]), edited(lifecycle={"delete-after": "2s"}), None),
    (KEEP, None),
    (BROKEN, None),
    (LOWER, None),
    (HIGHER, None),
)
_views = st.tuples(
    st.tuples(*(st.sampled_from(states) for states in _STATES)),
    st.sampled_from([PREVIEW, {"env": "prod"}, None]),
)


def _resolved(view: tuple[tuple[Manifest | None, ...], Mapping[str, str] | None]) -> Resolution:
    return resolved(tuple(m for m in view[0] if m is not None), view[1])


@given(decided_on=_views, fresh=_views)
def test_what_the_fence_lets_go_is_what_the_fresh_view_alone_decides(
    decided_on: tuple[tuple[Manifest | None, ...], Mapping[str, str] | None],
    fresh: tuple[tuple[Manifest | None, ...], Mapping[str, str] | None],
) -> None:
    verdict = fenced(_resolved(decided_on), _resolved(fresh))
    if isinstance(verdict.final, Delete):
        alone = decide_pass(replace(inputs(_resolved(fresh)), fenced=False)).final
        assert isinstance(alone, Delete)
        assert (alone.policy, alone.due_ns) == (verdict.final.policy, verdict.final.due_ns)
    if decided_on == fresh and isinstance(verdict.decision, Delete):
        assert verdict.final is verdict.decision  # an unchanged view never holds
