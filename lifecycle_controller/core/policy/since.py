"""A policy's ``since``: the instant its ``delete-after`` counts from, read from the object.

Without ``since`` a policy's ``delete-after`` counts from the object's ``creationTimestamp``
(:mod:`.precedence`). With it, it counts from what the expression yields for the object: a
CEL expression over the same variables as the condition (``object``, ``referencedBy``) and
``matchedAt``, the instant the controller first saw the object match the policy in its
current generation (docs/policies.md#since). It is compiled like a condition
(:func:`~.condition.compile_condition`: the same length and cost bounds, the same refusal of
unkept fields, and of a Secret's fields beyond metadata, :mod:`.condition_reads`), and the
cache keeps the fields it reads as it keeps a condition's.

What it yields for one object (:meth:`Since.evaluate`) is one of three:

* **an instant**: a CEL ``timestamp``, or a string in RFC 3339;
* **no value** (:attr:`SinceValue.missing` says why, in words the tools print): the field it
  reads is absent (a missing key, an index past the end of a list), it yields ``null``, or it
  yields what is not a time (another type, a string ``timestamp()`` cannot read). The policy
  then leaves the object alone: it is no contender for it (:mod:`.coverage`);
* **a problem**: any other evaluation error (a type mismatch, the cost budget), which holds
  the object as a failing condition does.

The literal ``since: matchedAt`` is answered without running CEL (the value is the instant
itself, to the nanosecond).
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Final

from lifecycle_controller.core.policy.condition import (
    Condition,
    Subject,
    cel_timestamp,
    compile_condition,
)
from lifecycle_controller.core.policy.condition_cost import identifiers
from lifecycle_controller.core.text.gotext import go_quote
from lifecycle_controller.core.text.timestamps import TimestampError, parse_rfc3339

__all__ = ["MATCHED_AT_VARIABLE", "Since", "SinceValue", "compile_since"]

#: The variable holding when the controller first saw the object match the policy.
MATCHED_AT_VARIABLE: Final = "matchedAt"
_NS_PER_MICROSECOND: Final = 1000
_EPOCH: Final = datetime(1970, 1, 1, tzinfo=UTC)
#: The library's words when ``timestamp()`` cannot read its string argument.
_UNREADABLE_TIMESTAMP: Final = "Function 'timestamp' error"


@dataclass(frozen=True, slots=True)
class SinceValue:
    """What ``since`` yields for one object: ``instant_ns``, or why it has none
    (``missing``: the object is left alone), or ``problem`` (an evaluation error: held)."""

    instant_ns: int | None = None
    missing: str | None = None
    problem: str | None = None


def _instant(value: datetime) -> int:
    """A CEL timestamp (a datetime, to the microsecond) in ns since the epoch."""
    aware = value if value.tzinfo is not None else value.replace(tzinfo=UTC)
    delta = aware - _EPOCH
    micros = (delta.days * 86_400 + delta.seconds) * 1_000_000 + delta.microseconds
    return micros * _NS_PER_MICROSECOND


def _described(value: object) -> str:
    if isinstance(value, str):
        return f"the string {go_quote(value)}"
    return f"{type(value).__name__} {value!r}"


def _from_result(result: object) -> SinceValue:
    if result is None:
        return SinceValue(missing="since yields null")
    if isinstance(result, datetime):
        return SinceValue(_instant(result))
    if isinstance(result, str):
        try:
            return SinceValue(parse_rfc3339(result))
        except TimestampError:
            pass
    return SinceValue(missing=f"since yields {_described(result)}, not a time")


@dataclass(frozen=True, slots=True, eq=False)
class Since:
    """A compiled ``since``; build it with :func:`compile_since`."""

    expression: Condition
    #: It reads ``matchedAt``: the controller tracks when the policy's objects began to match.
    reads_matched_at: bool
    #: It is ``matchedAt`` alone (answered without CEL).
    only_matched_at: bool

    @property
    def source(self) -> str:
        return self.expression.source

    @property
    def reads(self) -> frozenset[tuple[str, ...]]:
        """The paths under ``object`` beyond metadata it reads (what the cache keeps)."""
        return self.expression.reads

    @property
    def reads_references(self) -> bool:
        return self.expression.reads_references

    def evaluate(self, subject: Subject, *, matched_at_ns: int | None = None) -> SinceValue:
        """What it yields for one object (see the module); never raises. ``matched_at_ns``:
        when the object began to match (None: not known, which ``matchedAt`` yields as no
        value)."""
        if self.reads_matched_at and matched_at_ns is None:
            return SinceValue(missing="since reads matchedAt, which is not known for it")
        if self.only_matched_at:
            return SinceValue(matched_at_ns)
        variables = (
            {MATCHED_AT_VARIABLE: cel_timestamp(matched_at_ns)}
            if matched_at_ns is not None
            else None
        )
        outcome = self.expression.value(subject, variables=variables)
        if outcome.problem is None:
            return _from_result(outcome.result)
        error = outcome.error
        if outcome.absent:
            what = f"no key {error}" if isinstance(error, KeyError) else str(error)
            return SinceValue(missing=f"a field since reads is absent ({what})")
        if str(error).startswith(_UNREADABLE_TIMESTAMP):
            return SinceValue(missing="since reads a string that is not a time")
        return SinceValue(problem=outcome.problem)


def compile_since(source: str) -> Since:
    """Compile ``spec.since``; raise :class:`~.condition.ConditionError` with the problem."""
    expression = compile_condition(source, what="since")
    return Since(
        expression,
        reads_matched_at=MATCHED_AT_VARIABLE in identifiers(source),
        only_matched_at=source.strip() == MATCHED_AT_VARIABLE,
    )
