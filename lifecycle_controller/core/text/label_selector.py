"""Kubernetes label selectors (``metav1.LabelSelector``), parsed and evaluated as the API does.

A lifecycle policy's ``selector`` narrows the objects it matches by their labels, and the
same selector later goes to the API server as a ``labelSelector`` list parameter so that
informers only receive what a policy can match. Both must agree, so this module follows
``metav1.LabelSelectorAsSelector`` and ``labels.Selector.Matches``:

* ``matchLabels`` entries are ``key = value`` requirements (the label is present and equal);
* ``In``: present, value in the set; ``NotIn``: absent, or value not in the set;
  ``Exists``: present; ``DoesNotExist``: absent;
* every requirement must hold (AND); an empty selector (``{}``) matches every object;
* ``In``/``NotIn`` need at least one value, ``Exists``/``DoesNotExist`` none; keys are
  qualified names and values label values, else the selector is invalid;
* at most :data:`MAX_MATCH_LABELS` ``matchLabels`` entries, :data:`MAX_MATCH_EXPRESSIONS`
  ``matchExpressions`` and :data:`MAX_SELECTOR_VALUES` values per expression (the API has no
  such bound; a selector is read once but matched against every object, so its size is
  bounded as the CRDs bound it). A list over its bound is not read further.

An omitted selector is not this module's business: a policy without one matches every
object (the API's nil-selector-matches-nothing rule is for workloads, not for this API).
"""

from __future__ import annotations

import enum
import re
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Final

from lifecycle_controller.core.text.gotext import go_quote

__all__ = [
    "MAX_MATCH_EXPRESSIONS",
    "MAX_MATCH_LABELS",
    "MAX_SELECTOR_VALUES",
    "LabelSelector",
    "Operator",
    "Requirement",
    "SelectorError",
    "parse_label_selector",
]

_NAME: Final = re.compile(r"([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9]")
_LABEL: Final = r"[a-z0-9]([-a-z0-9]*[a-z0-9])?"
_DNS1123_SUBDOMAIN: Final = re.compile(rf"{_LABEL}(\.{_LABEL})*")
_NAME_MAX: Final = 63
_PREFIX_MAX: Final = 253
#: The most ``matchLabels`` entries and ``matchExpressions`` a selector may have, and values
#: an expression may list (the CRDs' ``maxProperties``/``maxItems``, compared by a test).
MAX_MATCH_LABELS: Final = 64
MAX_MATCH_EXPRESSIONS: Final = 64
MAX_SELECTOR_VALUES: Final = 256


class SelectorError(ValueError):
    """An invalid selector: each of ``problems`` says what and where (``matchExpressions[1]``)."""

    def __init__(self, problems: tuple[str, ...]) -> None:
        super().__init__("; ".join(problems))
        self.problems = problems


class Operator(enum.StrEnum):
    IN = "In"
    NOT_IN = "NotIn"
    EXISTS = "Exists"
    DOES_NOT_EXIST = "DoesNotExist"


@dataclass(frozen=True, slots=True)
class Requirement:
    """One requirement on one label key (``values`` sorted, empty for Exists/DoesNotExist)."""

    key: str
    operator: Operator
    values: tuple[str, ...] = ()

    def matches(self, labels: Mapping[str, str]) -> bool:
        present = self.key in labels
        if self.operator is Operator.EXISTS:
            return present
        if self.operator is Operator.DOES_NOT_EXIST:
            return not present
        inside = present and labels[self.key] in self.values
        return inside if self.operator is Operator.IN else not inside

    def query(self) -> str:
        """This requirement in the API's ``labelSelector`` query syntax."""
        if self.operator is Operator.EXISTS:
            return self.key
        if self.operator is Operator.DOES_NOT_EXIST:
            return "!" + self.key
        if self.operator is Operator.IN and len(self.values) == 1:
            return f"{self.key}={self.values[0]}"
        word = "in" if self.operator is Operator.IN else "notin"
        return f"{self.key} {word} ({','.join(self.values)})"


@dataclass(frozen=True, slots=True)
class LabelSelector:
    """A parsed selector: all requirements must hold. No requirement: matches everything."""

    requirements: tuple[Requirement, ...] = ()

    def matches(self, labels: Mapping[str, str]) -> bool:
        return all(requirement.matches(labels) for requirement in self.requirements)

    def query(self) -> str:
        """The ``labelSelector`` list parameter that selects the same objects server-side."""
        return ",".join(requirement.query() for requirement in self.requirements)


def _key_problem(key: str) -> str | None:
    """Why ``key`` is not a qualified name (``[prefix/]name``), or None."""
    prefix, slash, name = key.rpartition("/")
    if slash and not prefix:
        return "prefix part must be non-empty"
    if slash and (len(prefix) > _PREFIX_MAX or not _DNS1123_SUBDOMAIN.fullmatch(prefix)):
        return "prefix part must be a lowercase DNS subdomain of at most 253 characters"
    if not name:
        return "name part must be non-empty"
    if len(name) > _NAME_MAX or not _NAME.fullmatch(name):
        return (
            "name part must be at most 63 characters: alphanumerics, '-', '_' or '.', "
            "starting and ending with an alphanumeric"
        )
    return None


def _value_problem(value: str) -> str | None:
    if value and (len(value) > _NAME_MAX or not _NAME.fullmatch(value)):
        return (
            "must be empty or at most 63 characters: alphanumerics, '-', '_' or '.', "
            "starting and ending with an alphanumeric"
        )
    return None


def _too_many(where: str, count: int, most: int, problems: list[str]) -> bool:
    if count <= most:
        return False
    problems.append(f"{where}: has {count} entries; at most {most} are allowed")
    return True


def _strings(value: object, where: str, problems: list[str]) -> list[str]:
    if not isinstance(value, list) or not all(isinstance(item, str) for item in value):
        problems.append(f"{where}: must be a list of strings")
        return []
    _too_many(where, len(value), MAX_SELECTOR_VALUES, problems)
    return value[:MAX_SELECTOR_VALUES]  # the rest is not read


def _expression(index: int, entry: object, problems: list[str]) -> Requirement | None:
    where = f"matchExpressions[{index}]"
    if not isinstance(entry, Mapping):
        problems.append(f"{where}: must be an object with key, operator and values")
        return None
    unknown = sorted(set(entry) - {"key", "operator", "values"})
    for field in unknown:
        problems.append(f"{where}.{field}: unknown field")
    key = entry.get("key")
    start = len(problems)
    if not isinstance(key, str):
        problems.append(f"{where}.key: must be a string")
    elif (problem := _key_problem(key)) is not None:
        problems.append(f"{where}.key {go_quote(key)}: {problem}")
    raw_operator = entry.get("operator")
    operators = {operator.value: operator for operator in Operator}
    operator = operators.get(raw_operator) if isinstance(raw_operator, str) else None
    if operator is None:
        shown = go_quote(raw_operator) if isinstance(raw_operator, str) else repr(raw_operator)
        problems.append(f"{where}.operator {shown}: must be one of In, NotIn, Exists, DoesNotExist")
    values = _strings(entry.get("values", []), f"{where}.values", problems)
    if operator in (Operator.IN, Operator.NOT_IN) and not values:
        problems.append(f"{where}.values: must be non-empty for operator {operator}")
    if operator in (Operator.EXISTS, Operator.DOES_NOT_EXIST) and values:
        problems.append(f"{where}.values: must be empty for operator {operator}")
    for value in values:
        if (problem := _value_problem(value)) is not None:
            problems.append(f"{where}.values {go_quote(value)}: {problem}")
    if len(problems) > start or operator is None or not isinstance(key, str):
        return None
    return Requirement(key, operator, tuple(sorted(set(values))))


def parse_label_selector(raw: object) -> LabelSelector:
    """Parse a ``metav1.LabelSelector`` given as decoded JSON; raise :class:`SelectorError`.

    Every problem is reported at once, in field order.
    """
    if not isinstance(raw, Mapping):
        raise SelectorError(("must be an object with matchLabels and/or matchExpressions",))
    problems: list[str] = [
        f"{field}: unknown field"
        for field in sorted(set(raw) - {"matchLabels", "matchExpressions"})
    ]
    requirements: list[Requirement] = []
    labels = raw.get("matchLabels", {})
    if not isinstance(labels, Mapping):
        problems.append("matchLabels: must be a map of strings")
        labels = {}
    elif _too_many("matchLabels", len(labels), MAX_MATCH_LABELS, problems):
        labels = {}
    for key, value in sorted(labels.items(), key=lambda item: str(item[0])):
        if not isinstance(key, str) or not isinstance(value, str):
            problems.append(f"matchLabels: must be a map of strings, got {key!r}: {value!r}")
            continue
        key_problem, value_problem = _key_problem(key), _value_problem(value)
        if key_problem is not None:
            problems.append(f"matchLabels key {go_quote(key)}: {key_problem}")
        if value_problem is not None:
            problems.append(f"matchLabels[{go_quote(key)}] {go_quote(value)}: {value_problem}")
        if key_problem is None and value_problem is None:
            requirements.append(Requirement(key, Operator.IN, (value,)))
    expressions = raw.get("matchExpressions", [])
    if not isinstance(expressions, list):
        problems.append("matchExpressions: must be a list")
        expressions = []
    elif _too_many("matchExpressions", len(expressions), MAX_MATCH_EXPRESSIONS, problems):
        expressions = []
    for index, entry in enumerate(expressions):
        requirement = _expression(index, entry, problems)
        if requirement is not None:
            requirements.append(requirement)
    if problems:
        raise SelectorError(tuple(problems))
    return LabelSelector(tuple(requirements))
