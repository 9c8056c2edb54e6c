"""An enforced policy against the Namespace (docs/policies.md#safety-rules), one table each:
the namespace defaults it acts regardless of (and the one it keeps), what ``explain`` says
of them, and a Namespace's ``exempt``, which keeps every other policy away."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import replace
from typing import Any

import pytest

from lifecycle_controller.core import DecisionSettings
from lifecycle_controller.core.decision.namespace_defaults import (
    NamespaceDefaults,
    parse_namespace_defaults,
)
from lifecycle_controller.core.decision.outcomes import (
    Decision,
    Delete,
    DryRun,
    Invalid,
    ObjectFacts,
    Operation,
    Patch,
    Wait,
)
from lifecycle_controller.core.objects import keys
from lifecycle_controller.core.objects.resources import ObjectKey, ResourceType
from lifecycle_controller.core.policy.enforcement import (
    defaults_for,
    enforced_defaults,
    overrides,
)
from lifecycle_controller.core.policy.in_force import PolicySet, object_view
from lifecycle_controller.core.policy.match import MatchReason, holds, match
from lifecycle_controller.core.policy.model import PolicyInvalid
from lifecycle_controller.core.policy.precedence import Resolution
from lifecycle_controller.core.tooling.plan import explain
from tests.core.test_policy_safety import (
    CONFIGMAPS,
    CREATED,
    DEPLOYMENTS,
    HOUR,
    NOW,
    cluster,
    decide_view,
    metadata,
    namespaced,
    policies,
)

NS = "team-a"
#: NOW is a Wednesday, 10:00 UTC: this window is days away.
FAR_WINDOW = "Sun-Sun 03:00-03:01 UTC"
ENFORCED = cluster(
    "deadline",
    {"resources": ["configmaps"], "enforce": True, "lifecycle": {"delete-after": "48h"}},
)
PLAIN = cluster("plain", {"resources": ["configmaps"], "lifecycle": {"delete-after": "48h"}})
NAMESPACED = namespaced(
    "team", NS, {"resources": ["configmaps"], "lifecycle": {"delete-after": "48h"}}
)


def judge(
    policy_set: PolicySet,
    namespace: Mapping[str, str] | None,
    *,
    meta: dict[str, Any] | None = None,
    resource: ResourceType = CONFIGMAPS,
    settings: DecisionSettings | None = None,
) -> tuple[Resolution, Decision, NamespaceDefaults | None]:
    """The object decided as the controller decides it, its Namespace's annotations read
    (its ``exempt`` by matching, its defaults by the decision)."""
    meta = meta or metadata()
    defaults = None if namespace is None else parse_namespace_defaults(NS, namespace)
    view = object_view(resource, meta)
    if defaults is not None and defaults.exempt:
        view = replace(view, namespace_exempt=True)
    resolution, decided = decide_view(policy_set, meta, view, settings=settings, defaults=defaults)
    return resolution, decided.decision, defaults


# ---------------------------------------------------------------- item: the deadline


@pytest.mark.parametrize(
    ("namespace", "plain"),
    [
        # Caught: the enforced deletion, overdue at first sight, was skipped.
        ({keys.CATCH_UP: "never"}, "skipped"),
        # Caught: it waited for a window days away.
        ({keys.MAINTENANCE_WINDOW: FAR_WINDOW}, Wait),
        # Caught: a cap shorter than the policy's TTL refused it for good.
        ({keys.MAX_DELETE_TTL: "24h"}, "refused"),
        # Caught: an invalid default held it "until it is fixed".
        ({keys.CATCH_UP: "sometimes"}, Invalid),
        ({keys.MAINTENANCE_WINDOW: "Mon-Fri 25:00-26:00 UTC"}, Invalid),
        ({keys.MAX_DELETE_TTL: ""}, Invalid),
    ],
)
def test_an_enforced_deletion_goes_on_time_whatever_the_namespace_defaults(
    namespace: dict[str, str], plain: object
) -> None:
    _, decision, _ = judge(policies(ENFORCED), namespace)
    assert isinstance(decision, Delete)
    assert decision.policy == "ClusterLifecyclePolicy/deadline"
    # A policy that is not enforced still obeys the Namespace.
    for doc in (PLAIN, NAMESPACED):
        _, decision, _ = judge(policies(doc), namespace)
        assert not isinstance(decision, Delete)
        if plain == "skipped":
            assert isinstance(decision, Patch)
            assert decision.operation is Operation.SKIP
        elif plain == "refused":
            assert [e.reason for e in decision.events] == ["DeleteTTLExceeded"]
        else:
            assert isinstance(plain, type)
            assert isinstance(decision, plain)


@pytest.mark.parametrize(
    ("namespace", "expected"),
    [
        # Caution composes: the namespace's dry-run stays.
        ({keys.DRY_RUN: "true"}, DryRun),
        # Not knowing whether it rehearses, it waits rather than deletes.
        ({keys.DRY_RUN: "maybe"}, Invalid),
        # warn-before only announces: it stays, and the deletion is not moved.
        ({keys.WARN_BEFORE: "1h"}, Delete),
        ({keys.WARN_BEFORE: "soon"}, Delete),
    ],
)
def test_an_enforced_policy_keeps_the_namespaces_caution(
    namespace: dict[str, str], expected: type[Decision]
) -> None:
    _, decision, _ = judge(policies(ENFORCED), namespace)
    assert isinstance(decision, expected)


def test_the_flags_still_apply_to_an_enforced_policy() -> None:
    """Only the Namespace's values are overridden: ``--max-delete-ttl`` is the operator's."""
    settings = DecisionSettings(max_delete_ttl_ns=24 * HOUR)
    _, decision, _ = judge(policies(ENFORCED), {}, settings=settings)
    assert [e.reason for e in decision.events] == ["DeleteTTLExceeded"]


def test_the_contender_under_an_enforced_deadline_still_obeys_the_namespace() -> None:
    """The next contender's 30m deletion is due, but the Namespace's window defers it past
    the enforced deadline: the deadline stands."""
    young = NOW - HOUR
    soon = namespaced(
        "soon", NS, {"resources": ["configmaps"], "lifecycle": {"delete-after": "30m"}}
    )
    meta = metadata(created_ns=young)
    _, decision, _ = judge(policies(ENFORCED, soon), {}, meta=meta)
    assert isinstance(decision, Delete)
    assert decision.policy == "LifecyclePolicy/team-a/soon"
    _, decision, _ = judge(
        policies(ENFORCED, soon), {keys.MAINTENANCE_WINDOW: FAR_WINDOW}, meta=meta
    )
    assert isinstance(decision, Wait)
    assert decision.due_ns == young + 48 * HOUR


def test_an_enforced_restart_ignores_the_namespace_window_too() -> None:
    nightly = cluster(
        "nightly",
        {
            "resources": ["deployments.apps"],
            "enforce": True,
            "lifecycle": {"restart-at": "2026-12-02T09:00:00Z"},
        },
    )
    meta = metadata()
    namespace = {keys.MAINTENANCE_WINDOW: FAR_WINDOW}
    _, decision, _ = judge(policies(nightly), namespace, meta=meta, resource=DEPLOYMENTS)
    assert decision.action is not None
    assert decision.action.value == "restart"
    assert not isinstance(decision, (Wait, Invalid))


# ---------------------------------------------------------------- item: what it says


@pytest.mark.parametrize(
    ("namespace", "policy", "settings", "said"),
    [
        ({keys.CATCH_UP: "never"}, ENFORCED, None, ["overrides namespace team-a's catch-up never"]),
        (
            {keys.MAINTENANCE_WINDOW: FAR_WINDOW, keys.DRY_RUN: "true"},
            ENFORCED,
            None,
            [f"overrides namespace team-a's maintenance-window {FAR_WINDOW}"],
        ),
        (
            {keys.MAX_DELETE_TTL: "24h"},
            ENFORCED,
            None,
            ["overrides namespace team-a's max-delete-ttl 24h"],
        ),
        # The flag's cap is tighter: the Namespace's would not apply anyway.
        ({keys.MAX_DELETE_TTL: "24h"}, ENFORCED, DecisionSettings(max_delete_ttl_ns=HOUR), []),
        (
            {keys.CATCH_UP: "sometimes", keys.MAX_DELETE_TTL: ""},
            ENFORCED,
            None,
            [
                "overrides namespace team-a's invalid catch-up 'sometimes'",
                "overrides namespace team-a's invalid max-delete-ttl ''",
            ],
        ),
        # The policy's own catch-up wins over the Namespace's anyway.
        (
            {keys.CATCH_UP: "never"},
            cluster(
                "own",
                {
                    "resources": ["configmaps"],
                    "enforce": True,
                    "lifecycle": {"delete-after": "48h", "catch-up": "always"},
                },
            ),
            None,
            [],
        ),
        ({keys.EXEMPT: "true"}, ENFORCED, None, ["acts although namespace team-a is exempt"]),
        ({keys.CATCH_UP: "never"}, PLAIN, None, []),
        ({}, ENFORCED, None, []),
    ],
)
def test_overrides_name_what_the_enforcement_left_out(
    namespace: dict[str, str],
    policy: dict[str, Any],
    settings: DecisionSettings | None,
    said: list[str],
) -> None:
    resolution, _, defaults = judge(policies(policy), namespace, settings=settings)
    found = overrides(resolution.primary, defaults, settings or DecisionSettings())
    assert [o.describe() for o in found] == said


def test_a_restart_policy_overrides_no_cap() -> None:
    """``max-delete-ttl`` guards deletions only: an enforced restart does not override it."""
    nightly = cluster(
        "nightly",
        {"resources": ["deployments.apps"], "enforce": True, "lifecycle": {"restart-every": "24h"}},
    )
    namespace = {keys.MAX_DELETE_TTL: "24h", keys.CATCH_UP: "never"}
    resolution, _, defaults = judge(policies(nightly), namespace, resource=DEPLOYMENTS)
    found = overrides(resolution.primary, defaults, DecisionSettings())
    assert [o.key for o in found] == ["catch-up"]


def test_defaults_for_an_enforced_family_only() -> None:
    defaults = parse_namespace_defaults(NS, {keys.CATCH_UP: "never", keys.DRY_RUN: "true"})
    enforced, _, _ = judge(policies(ENFORCED), None)
    plain, _, _ = judge(policies(PLAIN), None)
    assert defaults_for(plain.primary, defaults) is defaults
    stripped = defaults_for(enforced.primary, defaults)
    assert stripped == enforced_defaults(defaults)
    assert stripped is not None
    assert stripped.catch_up is None
    assert stripped.dry_run is True
    assert enforced_defaults(None) is None
    assert overrides(enforced.primary, None, DecisionSettings()) == ()


def test_explain_says_what_an_enforced_policy_overrode() -> None:
    namespace = {keys.CATCH_UP: "never", keys.WARN_BEFORE: "1h"}
    resolution, _, defaults = judge(policies(ENFORCED), namespace)
    facts = ObjectFacts(
        key=ObjectKey(CONFIGMAPS, NS, "obj"), uid="uid-1", resource_version="1", creation_ns=CREATED
    )
    explained = explain(
        annotations={},
        facts=facts,
        now_ns=NOW,
        settings=DecisionSettings(),
        namespace_defaults=defaults,
        policy_inputs=resolution,
    )
    assert explained.summary == "delete now"
    assert explained.overrides == ("enforced: overrides namespace team-a's catch-up never",)
    # What it did take from the Namespace is still said; the overridden value is not.
    assert explained.inherited == ("warn-before: 1h (from namespace team-a)",)


# ---------------------------------------------------------------- item: exempt Namespaces


def test_an_exempt_namespace_keeps_every_policy_not_enforced_away() -> None:
    view = replace(object_view(CONFIGMAPS, metadata()), namespace_exempt=True)
    (plain,) = policies(PLAIN).valid
    (enforced,) = policies(ENFORCED).valid
    assert match(plain, view).reason is MatchReason.NAMESPACE_EXEMPT
    assert match(enforced, view).matched
    # Its own exempt is named first: it says the more precise thing.
    own = replace(view, annotations={keys.EXEMPT: "true"})
    assert match(plain, own).reason is MatchReason.EXEMPT


@pytest.mark.parametrize("enforce", [False, True])
def test_an_invalid_policy_holds_nothing_in_an_exempt_namespace_unless_enforced(
    enforce: bool,
) -> None:
    spec = {"resources": ["configmaps"], "enforce": enforce, "lifecycle": {"delete-after": "x"}}
    (invalid,) = policies(cluster("broken", spec)).invalid
    assert isinstance(invalid, PolicyInvalid)
    view = object_view(CONFIGMAPS, metadata())
    assert holds(invalid, view)
    assert holds(invalid, replace(view, namespace_exempt=True)) is enforce


@pytest.mark.parametrize(
    ("namespace", "docs", "decided_by", "exempted"),
    [
        ({keys.EXEMPT: "true"}, [PLAIN, NAMESPACED], None, ["plain", "team"]),
        ({keys.EXEMPT: "false"}, [PLAIN], "ClusterLifecyclePolicy/plain", []),
        ({}, [PLAIN], "ClusterLifecyclePolicy/plain", []),
        # Acted on by an enforced one; the other is still kept away, and counted.
        ({keys.EXEMPT: "true"}, [ENFORCED, PLAIN], "ClusterLifecyclePolicy/deadline", ["plain"]),
    ],
)
def test_an_exempt_namespaces_objects_are_left_alone_and_counted(
    namespace: dict[str, str],
    docs: list[dict[str, Any]],
    decided_by: str | None,
    exempted: list[str],
) -> None:
    resolution, decision, _ = judge(policies(*docs), namespace)
    assert (None if resolution.decided_by is None else str(resolution.decided_by.ref)) == decided_by
    assert [ref.name for ref in resolution.exempted] == exempted
    assert isinstance(decision, Delete) is (decided_by is not None)
    assert resolution.exempt is (namespace.get(keys.EXEMPT) == "true")


def test_an_exempt_namespace_does_not_stop_the_objects_own_annotations() -> None:
    meta = metadata(annotations={keys.DELETE_AFTER: "1s"}, created_ns=NOW - HOUR)
    resolution, decision, _ = judge(policies(PLAIN), {keys.EXEMPT: "true"}, meta=meta)
    assert resolution.deciders == ()
    assert decision.action is not None
    assert decision.action.value == "delete"


def test_only_policies_that_would_match_count_as_exempted() -> None:
    """A policy whose condition is false for the object is not kept away by the exemption:
    it would not match anyway."""
    picky = cluster(
        "picky",
        {
            "resources": ["configmaps"],
            "condition": 'object.metadata.name == "other"',
            "lifecycle": {"delete-after": "48h"},
        },
    )
    resolution, _, _ = judge(policies(picky, PLAIN), {keys.EXEMPT: "true"})
    assert [ref.name for ref in resolution.exempted] == ["plain"]
    own = metadata(annotations={keys.EXEMPT: "true"})
    resolution, _, _ = judge(policies(picky, PLAIN), None, meta=own)
    assert [ref.name for ref in resolution.exempted] == ["plain"]
