"""Label selectors: every operator as Kubernetes evaluates it, validation, the query form."""

from __future__ import annotations

from collections.abc import Mapping

import pytest
from hypothesis import given
from hypothesis import strategies as st

from lifecycle_controller.core.text.label_selector import (
    MAX_MATCH_EXPRESSIONS,
    MAX_MATCH_LABELS,
    MAX_SELECTOR_VALUES,
    LabelSelector,
    SelectorError,
    parse_label_selector,
)

LABELS = {"env": "preview", "team": "web"}


def expression(operator: str, *values: str) -> dict[str, object]:
    """A selector with one requirement on the ``team`` label."""
    requirement: dict[str, object] = {"key": "team", "operator": operator}
    if values:
        requirement["values"] = list(values)
    return {"matchExpressions": [requirement]}


IN = expression("In", "web", "a")
NOT_IN = expression("NotIn", "core")
EXISTS = expression("Exists")
ABSENT = expression("DoesNotExist")


@pytest.mark.parametrize(
    ("selector", "labels", "expected"),
    [
        ({}, {}, True),  # an empty selector matches everything
        ({}, LABELS, True),
        ({"matchLabels": {"env": "preview"}}, LABELS, True),
        ({"matchLabels": {"env": "prod"}}, LABELS, False),
        ({"matchLabels": {"env": "preview"}}, {}, False),  # missing label
        ({"matchLabels": {"env": ""}}, {}, False),  # an empty value still needs the label
        ({"matchLabels": {"env": ""}}, {"env": ""}, True),
        ({"matchLabels": {"env": "preview", "team": "web"}}, LABELS, True),
        ({"matchLabels": {"env": "preview", "team": "core"}}, LABELS, False),
        (IN, LABELS, True),
        (IN, {"team": "b"}, False),
        (IN, {}, False),  # In: a missing label is not in the set
        (NOT_IN, LABELS, True),
        (NOT_IN, {"team": "core"}, False),
        (NOT_IN, {}, True),  # NotIn: a missing label matches
        (EXISTS, LABELS, True),
        (EXISTS, {"team": ""}, True),
        (EXISTS, {}, False),
        (ABSENT, LABELS, False),
        (ABSENT, {}, True),
        (
            {
                "matchLabels": {"env": "preview"},
                "matchExpressions": [{"key": "team", "operator": "NotIn", "values": ["core"]}],
            },
            {"env": "preview", "team": "core"},
            False,  # every requirement must hold
        ),
    ],
)
def test_matching(selector: Mapping[str, object], labels: dict[str, str], expected: bool) -> None:
    assert parse_label_selector(selector).matches(labels) is expected


@pytest.mark.parametrize(
    ("selector", "problems"),
    [
        ("env=preview", ("must be an object with matchLabels and/or matchExpressions",)),
        ({"matchLabel": {}}, ("matchLabel: unknown field",)),
        ({"matchLabels": ["env"]}, ("matchLabels: must be a map of strings",)),
        (
            {"matchLabels": {"env": 1}},
            ("matchLabels: must be a map of strings, got 'env': 1",),
        ),
        (
            {"matchLabels": {"-env": "x"}},
            (
                'matchLabels key "-env": name part must be at most 63 characters: '
                "alphanumerics, '-', '_' or '.', starting and ending with an alphanumeric",
            ),
        ),
        (
            {"matchLabels": {"Example.com/env": "x"}},
            (
                'matchLabels key "Example.com/env": prefix part must be a lowercase DNS '
                "subdomain of at most 253 characters",
            ),
        ),
        (
            {"matchLabels": {"/env": "x"}},
            ('matchLabels key "/env": prefix part must be non-empty',),
        ),
        (
            {"matchLabels": {"env": "a b"}},
            (
                'matchLabels["env"] "a b": must be empty or at most 63 characters: '
                "alphanumerics, '-', '_' or '.', starting and ending with an alphanumeric",
            ),
        ),
        ({"matchExpressions": {}}, ("matchExpressions: must be a list",)),
        (
            {"matchLabels": {"example.com/": "x"}},
            ('matchLabels key "example.com/": name part must be non-empty',),
        ),
        (
            {"matchExpressions": [{"key": "a b", "operator": "Exists"}]},
            (
                'matchExpressions[0].key "a b": name part must be at most 63 characters: '
                "alphanumerics, '-', '_' or '.', starting and ending with an alphanumeric",
            ),
        ),
        (
            {"matchExpressions": [{"key": "env", "operator": "In", "values": "a"}]},
            (
                "matchExpressions[0].values: must be a list of strings",
                "matchExpressions[0].values: must be non-empty for operator In",
            ),
        ),
        (
            {"matchExpressions": [{"key": "env", "operator": "In", "values": ["a b"]}]},
            (
                'matchExpressions[0].values "a b": must be empty or at most 63 characters: '
                "alphanumerics, '-', '_' or '.', starting and ending with an alphanumeric",
            ),
        ),
        (
            {"matchExpressions": ["env"]},
            ("matchExpressions[0]: must be an object with key, operator and values",),
        ),
        (
            {"matchExpressions": [{"key": "env", "operator": "Equals", "values": ["a"]}]},
            (
                'matchExpressions[0].operator "Equals": must be one of In, NotIn, Exists, '
                "DoesNotExist",
            ),
        ),
        (
            {"matchExpressions": [{"key": "env", "operator": "In"}]},
            ("matchExpressions[0].values: must be non-empty for operator In",),
        ),
        (
            {"matchExpressions": [{"key": "env", "operator": "NotIn", "values": []}]},
            ("matchExpressions[0].values: must be non-empty for operator NotIn",),
        ),
        (
            {"matchExpressions": [{"key": "env", "operator": "Exists", "values": ["a"]}]},
            ("matchExpressions[0].values: must be empty for operator Exists",),
        ),
        (
            {"matchExpressions": [{"key": "env", "operator": "DoesNotExist", "values": ["a"]}]},
            ("matchExpressions[0].values: must be empty for operator DoesNotExist",),
        ),
        (
            {"matchExpressions": [{"operator": "Exists", "value": "a"}]},
            (
                "matchExpressions[0].value: unknown field",
                "matchExpressions[0].key: must be a string",
            ),
        ),
        (
            {
                "matchLabels": {"ok": "yes", "bad key": "x"},
                "matchExpressions": [{"key": "k", "operator": "exists"}],
            },
            (
                'matchLabels key "bad key": name part must be at most 63 characters: '
                "alphanumerics, '-', '_' or '.', starting and ending with an alphanumeric",
                'matchExpressions[0].operator "exists": must be one of In, NotIn, Exists, '
                "DoesNotExist",
            ),
        ),
    ],
)
def test_invalid_selectors_list_every_problem(selector: object, problems: tuple[str, ...]) -> None:
    with pytest.raises(SelectorError) as raised:
        parse_label_selector(selector)
    assert raised.value.problems == problems
    assert str(raised.value) == "; ".join(problems)


def test_valid_keys_with_a_prefix_and_long_names() -> None:
    key = "app.kubernetes.io/" + "n" * 63
    assert parse_label_selector({"matchLabels": {key: "v" * 63}}).matches({key: "v" * 63})


def test_query_form_for_the_api_server() -> None:
    selector = parse_label_selector(
        {
            "matchLabels": {"env": "preview"},
            "matchExpressions": [
                {"key": "team", "operator": "NotIn", "values": ["core", "infra"]},
                {"key": "tier", "operator": "In", "values": ["b", "a"]},
                {"key": "owner", "operator": "Exists"},
                {"key": "legacy", "operator": "DoesNotExist"},
            ],
        }
    )
    assert selector.query() == ("env=preview,team notin (core,infra),tier in (a,b),owner,!legacy")
    assert LabelSelector().query() == ""


_keys = st.sampled_from(["a", "b", "c"])
_values = st.sampled_from(["x", "y", ""])
_labels = st.dictionaries(_keys, _values)


@given(labels=_labels, key=_keys, values=st.lists(_values, min_size=1, max_size=3))
def test_not_in_is_the_negation_of_in(labels: dict[str, str], key: str, values: list[str]) -> None:
    def one(operator: str) -> bool:
        expression = {"key": key, "operator": operator, "values": values}
        return parse_label_selector({"matchExpressions": [expression]}).matches(labels)

    assert one("NotIn") is not one("In")


@given(labels=_labels, key=_keys)
def test_does_not_exist_is_the_negation_of_exists(labels: dict[str, str], key: str) -> None:
    def one(operator: str) -> bool:
        expression = {"key": key, "operator": operator}
        return parse_label_selector({"matchExpressions": [expression]}).matches(labels)

    assert one("DoesNotExist") is not one("Exists")


@pytest.mark.parametrize(
    ("selector", "problems"),
    [
        (
            {"matchLabels": {f"k{i}": "v" for i in range(MAX_MATCH_LABELS + 1)}},
            ("matchLabels: has 65 entries; at most 64 are allowed",),
        ),
        (
            {"matchExpressions": [{"key": "k", "operator": "Exists"}] * 40_000},
            ("matchExpressions: has 40000 entries; at most 64 are allowed",),
        ),
        (
            {"matchExpressions": [{"key": "k", "operator": "In", "values": ["v"] * 257}]},
            ("matchExpressions[0].values: has 257 entries; at most 256 are allowed",),
        ),
    ],
)
def test_a_selector_over_its_size_bounds_is_refused_unread(
    selector: dict[str, object], problems: tuple[str, ...]
) -> None:
    """Entries past a bound are not read: 40,000 expressions once took seconds to parse."""
    with pytest.raises(SelectorError) as raised:
        parse_label_selector(selector)
    assert raised.value.problems == problems


def test_a_selector_at_its_size_bounds_is_accepted() -> None:
    values = [f"v{i}" for i in range(MAX_SELECTOR_VALUES)]
    selector = parse_label_selector(
        {
            "matchLabels": {f"l{i}": "v" for i in range(MAX_MATCH_LABELS)},
            "matchExpressions": [
                {"key": f"e{i}", "operator": "In", "values": values}
                for i in range(MAX_MATCH_EXPRESSIONS)
            ],
        }
    )
    assert len(selector.requirements) == MAX_MATCH_LABELS + MAX_MATCH_EXPRESSIONS
