"""parse_policy(): the typed model, its defaults, and every problem with its exact message."""

from __future__ import annotations

from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st

from lifecycle_controller.core.decision.outcomes import Action
from lifecycle_controller.core.objects import keys
from lifecycle_controller.core.objects.resources import resource_key
from lifecycle_controller.core.policy.model import (
    LIFECYCLE_KEYS,
    MAX_GLOB_LENGTH,
    MAX_GLOBS,
    RESTARTABLE_RESOURCES,
    Policy,
    PolicyInvalid,
    PolicyKind,
    PolicyRef,
    parse_policy,
)
from lifecycle_controller.core.text.globs import BadPatternError, filepath_match

CLUSTER = PolicyKind.CLUSTER
NAMESPACED = PolicyKind.NAMESPACED


def spec(**fields: Any) -> dict[str, Any]:
    base: dict[str, Any] = {"resources": ["configmaps"], "lifecycle": {"delete-after": "48h"}}
    base.update(fields)
    return {key: value for key, value in base.items() if value is not None}


def valid(kind: PolicyKind = CLUSTER, **fields: Any) -> Policy:
    namespace = "team-a" if kind is NAMESPACED else None
    policy = parse_policy(kind, namespace, "p", 3, spec(**fields))
    assert isinstance(policy, Policy), policy
    return policy


def problems(kind: PolicyKind = CLUSTER, **fields: Any) -> tuple[str, ...]:
    namespace = "team-a" if kind is NAMESPACED else None
    policy = parse_policy(kind, namespace, "p", 3, spec(**fields))
    assert isinstance(policy, PolicyInvalid), policy
    return policy.problems


def test_the_issue_example_parses_with_its_values() -> None:
    policy = parse_policy(
        CLUSTER,
        None,
        "preview-namespaces",
        3,
        {
            "resources": ["namespaces"],
            "namespaces": ["pr-*"],
            "selector": {"matchLabels": {"env": "preview"}},
            "names": ["*"],
            "condition": 'object.metadata.labels["team"] != "core"',
            "includeOwned": False,
            "priority": 0,
            "lifecycle": {
                "delete-after": "48h",
                "catch-up": "1h",
                "warn-before": "1h",
                "maintenance-window": "Mon-Fri 01:00-05:00 Europe/Warsaw",
                "dry-run": "false",
            },
        },
    )
    assert isinstance(policy, Policy)
    assert str(policy.ref) == "ClusterLifecyclePolicy/preview-namespaces"
    assert policy.generation == 3
    assert policy.resources == ("namespaces",)
    assert policy.namespaces == ("pr-*",)
    assert policy.names == ("*",)
    assert policy.selector is not None
    assert policy.selector.query() == "env=preview"
    assert policy.condition is not None
    assert policy.condition.source == 'object.metadata.labels["team"] != "core"'
    assert policy.action is Action.DELETE
    assert policy.annotations[keys.DELETE_AFTER] == "48h"
    assert policy.annotations[keys.MAINTENANCE_WINDOW] == "Mon-Fri 01:00-05:00 Europe/Warsaw"


def test_defaults() -> None:
    policy = valid()
    assert (policy.include_owned, policy.priority, policy.namespaces, policy.names) == (
        False,
        0,
        (),
        (),
    )
    assert policy.selector is None
    assert policy.condition is None


def test_refs_name_the_kind_and_namespace() -> None:
    assert str(valid(NAMESPACED).ref) == "LifecyclePolicy/team-a/p"
    # A cluster policy has no namespace, whatever the caller passes.
    policy = parse_policy(CLUSTER, "ignored", "p", 1, spec())
    assert isinstance(policy, Policy)
    assert policy.ref == PolicyRef(CLUSTER, None, "p")


@pytest.mark.parametrize(
    ("lifecycle", "action"),
    [
        ({"delete-after": "1h"}, Action.DELETE),
        ({"delete-at": "2026-12-24T18:00:00Z"}, Action.DELETE),
        ({"restart-at": "2026-12-24T18:00:00+01:00"}, Action.RESTART),
        ({"restart-every": "24h"}, Action.RESTART),
        ({"restart-cron": "0 3 * * *", "cron-timezone": "Europe/Warsaw"}, Action.RESTART),
    ],
)
def test_each_action(lifecycle: dict[str, str], action: Action) -> None:
    resources = ["deployments.apps"] if action is Action.RESTART else ["configmaps"]
    assert valid(resources=resources, lifecycle=lifecycle).action is action


def test_every_lifecycle_key_is_an_annotation_the_controller_reads() -> None:
    assert {keys.PREFIX + key for key in LIFECYCLE_KEYS} <= set(keys.KNOWN_KEYS)
    assert {k.removeprefix(keys.PREFIX) for k in keys.ACTION_KEYS} - set(LIFECYCLE_KEYS) == {
        "restart-after"
    }


def test_restartable_resources_are_the_restartable_kinds() -> None:
    expected = {resource_key(kind.lower() + "s", "apps") for kind in keys.RESTARTABLE_KINDS}
    assert set(RESTARTABLE_RESOURCES) == expected


@pytest.mark.parametrize(
    ("lifecycle", "expected"),
    [
        (
            {"restart-after": "1h"},
            (
                "spec.lifecycle.restart-after: not allowed in a policy: it counts from when an "
                "annotation was applied, which a rule does not have; use restart-at, "
                "restart-every or restart-cron",
                "spec.lifecycle: sets no action; a policy sets exactly one of delete-after, "
                "delete-at, restart-at, restart-every, restart-cron",
            ),
        ),
        (
            {"delete-after": "1h", "reference-point": "creationTimestamp"},
            (
                "spec.lifecycle.reference-point: not allowed in a policy: a policy's "
                "delete-after counts from the object's creationTimestamp, or from what "
                "spec.since yields",
            ),
        ),
        (
            {"delete-afer": "1h"},
            (
                "spec.lifecycle.delete-afer: unknown key; did you mean delete-after?",
                "spec.lifecycle: sets no action; a policy sets exactly one of delete-after, "
                "delete-at, restart-at, restart-every, restart-cron",
            ),
        ),
        (
            {"delete-after": "1h", "colour": "blue"},
            ("spec.lifecycle.colour: unknown key",),
        ),
        (
            {"lifecycle.cezary.dev/delete-after": "1h", "delete-after": "1h"},
            (
                "spec.lifecycle.lifecycle.cezary.dev/delete-after: write the key without the "
                "lifecycle.cezary.dev/ prefix (delete-after)",
            ),
        ),
        (
            {"delete-after": "4x"},
            ('spec.lifecycle.delete-after: invalid duration format: "4x"',),
        ),
        (
            {"delete-after": "-1h"},
            ("spec.lifecycle.delete-after: duration must be positive and unsigned",),
        ),
        (
            {"delete-at": "tomorrow"},
            (
                'spec.lifecycle.delete-at: parsing time "tomorrow" as '
                '"2006-01-02T15:04:05Z07:00": cannot parse "tomorrow" as "2006"',
            ),
        ),
        (
            {"delete-after": "1h", "dry-run": "yes"},
            ("spec.lifecycle.dry-run: expected a boolean",),
        ),
        (
            {"delete-after": "1h", "dry-run": True},
            ('spec.lifecycle.dry-run: must be a string (quote it: "True")',),
        ),
        (
            {"delete-after": "1h", "catch-up": "sometimes"},
            (
                'spec.lifecycle.catch-up: invalid catch-up policy "sometimes": expected always, '
                'never, or a positive duration: invalid duration format: "sometimes"',
            ),
        ),
        (
            {"delete-after": "1h", "warn-before": "soon"},
            ('spec.lifecycle.warn-before: invalid duration format: "soon"',),
        ),
        (
            {"delete-after": "1h", "maintenance-window": "Mon-Fri 01:00-05:00 Mars/Olympus"},
            (
                'spec.lifecycle.maintenance-window: unknown time zone "Mars/Olympus": '
                "expected an IANA name",
            ),
        ),
        (
            {"delete-after": "1h", "restart-every": "1h"},
            (
                "spec.lifecycle: sets delete-after and restart-every; "
                "a policy sets exactly one action",
            ),
        ),
        (
            {"delete-after": "1h", "cron-timezone": "UTC"},
            ("spec.lifecycle.cron-timezone: only meaningful with restart-cron",),
        ),
        (
            {},
            (
                "spec.lifecycle: sets no action; a policy sets exactly one of delete-after, "
                "delete-at, restart-at, restart-every, restart-cron",
            ),
        ),
        (
            ["delete-after"],
            ("spec.lifecycle: must be a map of strings",),
        ),
        (
            {"delete-after": "1h", 3: "x"},
            ("spec.lifecycle: keys must be strings, got 3",),
        ),
    ],
)
def test_invalid_lifecycles(lifecycle: object, expected: tuple[str, ...]) -> None:
    assert problems(lifecycle=lifecycle) == expected


@pytest.mark.parametrize(
    ("lifecycle", "expected"),
    [
        (
            {"restart-every": "30s"},
            "spec.lifecycle.restart-every: duration must be at least 1m0s",
        ),
        (
            {"restart-cron": "0 3 * *"},
            "spec.lifecycle.restart-cron: expected exactly 5 fields, found 4: [0 3 * *]",
        ),
        (
            {"restart-cron": "@daily"},
            "spec.lifecycle.restart-cron: parser does not accept descriptors: @daily",
        ),
        (
            {"restart-cron": "0 3 * * *", "cron-timezone": "Europe/Warsow"},
            'spec.lifecycle.cron-timezone: unknown time zone "Europe/Warsow"',
        ),
    ],
)
def test_invalid_restart_values(lifecycle: dict[str, str], expected: str) -> None:
    assert problems(resources=["deployments.apps"], lifecycle=lifecycle) == (expected,)


def test_missing_lifecycle() -> None:
    assert problems(lifecycle=None) == (
        "spec.lifecycle: required: one action (delete-after, delete-at, restart-at, "
        "restart-every, restart-cron) and its modifiers",
    )


@pytest.mark.parametrize(
    ("fields", "expected"),
    [
        (
            {"resources": None},
            (
                'spec.resources: required: the resources to match, such as "configmaps" or '
                '"deployments.apps"',
            ),
        ),
        ({"resources": []}, ("spec.resources: must name at least one resource",)),
        ({"resources": "configmaps"}, ("spec.resources: must be a list of strings",)),
        ({"resources": ["[a-"]}, ('spec.resources[0] "[a-": syntax error in pattern',)),
        ({"namespaces": ["pr-["]}, ('spec.namespaces[0] "pr-[": syntax error in pattern',)),
        ({"names": ["\\"]}, ('spec.names[0] "\\\\": syntax error in pattern',)),
        ({"names": "x"}, ("spec.names: must be a list of strings",)),
        ({"includeOwned": "false"}, ("spec.includeOwned: must be a boolean",)),
        ({"priority": "10"}, ("spec.priority: must be an integer",)),
        ({"priority": True}, ("spec.priority: must be an integer",)),
        ({"schedule": "0 3 * * *"}, ("spec.schedule: unknown field",)),
        ({"condition": 3}, ("spec.condition: must be a string",)),
        ({"condition": ""}, ("spec.condition: is empty",)),
        (
            {"selector": {"matchExpressions": [{"key": "env", "operator": "In"}]}},
            ("spec.selector.matchExpressions[0].values: must be non-empty for operator In",),
        ),
        (
            {"selector": "env=preview"},
            ("spec.selector: must be an object with matchLabels and/or matchExpressions",),
        ),
        (
            {"resources": ["configmaps", "secrets"], "lifecycle": {"restart-every": "1h"}},
            (
                'spec.resources[0] "configmaps": restarts apply only to daemonsets.apps, '
                "deployments.apps, statefulsets.apps",
                'spec.resources[1] "secrets": restarts apply only to daemonsets.apps, '
                "deployments.apps, statefulsets.apps",
            ),
        ),
    ],
)
def test_invalid_fields(fields: dict[str, Any], expected: tuple[str, ...]) -> None:
    assert problems(**fields) == expected


def test_a_condition_that_does_not_compile() -> None:
    (problem,) = problems(condition='object.metadata.labels["team"')
    assert problem.startswith("spec.condition: does not compile: Failed to parse expression")


def test_a_restart_policy_may_glob_its_resources() -> None:
    assert valid(resources=["*.apps"], lifecycle={"restart-every": "1h"}).resources == ("*.apps",)


def test_namespaced_policies_name_resources_exactly_and_set_no_namespaces() -> None:
    assert problems(NAMESPACED, resources=["config*", "secrets"], namespaces=["a"]) == (
        'spec.resources[0] "config*": a LifecyclePolicy names resources exactly (no globs), '
        "so that its author's rights can be checked",
        "spec.namespaces: only a ClusterLifecyclePolicy may set namespaces; a LifecyclePolicy "
        "matches objects in its own namespace",
    )
    assert valid(NAMESPACED, resources=["configmaps", "secrets"]).resources == (
        "configmaps",
        "secrets",
    )


def test_every_problem_is_reported_at_once_in_field_order() -> None:
    invalid = parse_policy(
        NAMESPACED,
        "team-a",
        "bad",
        7,
        {
            "resources": ["*"],
            "namespaces": [],
            "condition": "1 +",
            "priority": 1.5,
            "lifecycle": {"restart-after": "1h", "dry-run": "maybe"},
            "extra": 1,
        },
    )
    assert isinstance(invalid, PolicyInvalid)
    assert invalid.ref == PolicyRef(NAMESPACED, "team-a", "bad")
    assert invalid.generation == 7
    fields = [problem.split(":")[0].split(" ")[0] for problem in invalid.problems]
    assert fields == [
        "spec.extra",
        "spec.resources[0]",
        "spec.namespaces",
        "spec.condition",
        "spec.priority",
        "spec.lifecycle.dry-run",
        "spec.lifecycle.restart-after",
        "spec.lifecycle",
    ]
    assert invalid.message == "; ".join(invalid.problems)


def test_a_spec_that_is_not_an_object() -> None:
    assert parse_policy(CLUSTER, None, "p", 1, None) == PolicyInvalid(
        PolicyRef(CLUSTER, None, "p"), 1, ("spec: must be an object",)
    )


def test_a_namespaced_policy_needs_its_namespace() -> None:
    invalid = parse_policy(NAMESPACED, None, "p", 1, spec())
    assert isinstance(invalid, PolicyInvalid)
    assert invalid.problems == ("metadata.namespace: a LifecyclePolicy lives in a namespace",)


@given(st.text(alphabet="ab-*?[]^\\/.", max_size=8))
def test_a_name_pattern_is_refused_exactly_when_go_s_match_refuses_it(pattern: str) -> None:
    """Exact names skip the syntax check (they cannot fail it); every other pattern gets it."""
    try:
        filepath_match(pattern, "")
    except BadPatternError:
        bad = True
    else:
        bad = False
    found = parse_policy(CLUSTER, None, "p", 3, spec(names=[pattern]))
    refused = isinstance(found, PolicyInvalid) and any(
        problem.startswith("spec.names[0]") for problem in found.problems
    )
    assert refused == bad


@pytest.mark.parametrize(
    ("fields", "expected"),
    [
        (
            {"names": ["n"] * (MAX_GLOBS + 1)},
            ("spec.names: has 257 entries; at most 256 are allowed",),
        ),
        (
            {"namespaces": ["team-*"] * 40_000},
            ("spec.namespaces: has 40000 entries; at most 256 are allowed",),
        ),
        (
            {"names": ["ok", "x" * (MAX_GLOB_LENGTH + 1)]},
            ("spec.names[1]: is 254 characters long; at most 253 are allowed",),
        ),
        (
            {"selector": {"matchExpressions": [{"key": "k", "operator": "Exists"}] * 65}},
            ("spec.selector.matchExpressions: has 65 entries; at most 64 are allowed",),
        ),
    ],
)
def test_names_and_selectors_over_their_bounds_are_refused(
    fields: dict[str, Any], expected: tuple[str, ...]
) -> None:
    """They are matched against every object: the CRDs' bounds, kept by the controller too."""
    assert problems(**fields) == expected


def test_an_oversized_list_selects_everything_for_what_it_holds() -> None:
    invalid = parse_policy(CLUSTER, None, "p", 3, spec(names=["n"] * (MAX_GLOBS + 1)))
    assert isinstance(invalid, PolicyInvalid)
    assert invalid.scope.names is None


def test_names_at_their_bounds_are_accepted() -> None:
    names = [f"{i}-" + "x" * (MAX_GLOB_LENGTH - 5) for i in range(100, 100 + MAX_GLOBS)]
    assert valid(names=names).names == tuple(names)
