"""A policy's ``condition``: a CEL expression over the object, compiled once.

CEL is the language of Kubernetes' validation rules and admission policies, so users already
know it. The expression sees one variable, ``object``: the object as the API serves it, as
far as the controller keeps it. ``object.metadata`` holds ``name``, ``namespace``,
``labels``, ``annotations`` (maps, empty when absent), ``creationTimestamp`` (a CEL
timestamp; absent from a manifest that has none, so ``has(object.metadata.creationTimestamp)``
tells) and ``ownerReferences`` (a list of maps with ``apiVersion``, ``kind``, ``name``,
``uid`` and ``controller``); ``object.kind`` and ``object.apiVersion`` are those of the
object's resource type. The other fields (``object.spec``, ``object.status``,
``object.data``...) are given as far as the condition reads them: :attr:`Condition.reads`
says which paths, worked out from the parsed expression, so the controller's cache keeps
only those (docs/policies.md#what-a-condition-reads). A condition reading what the
controller does not keep (another metadata field, ``object.metadata`` or the object as a
whole) is refused when compiled (:mod:`lifecycle_controller.core.policy.condition_reads`).

The implementation is ``common-expression-language`` (Rust, package ``cel``): it compiled the
issue's example about 20 times faster and evaluated it about 7 times faster per object than
the pure-Python ``cel-python``. It is loaded lazily, by the first :func:`compile_condition`,
so a controller without conditions never loads it; and only its compiled extension is loaded
(about 3 MB and 10 ms), not the package, whose ``__init__`` also imports a command-line
interface (typer, rich: about 25 MB and 0.3 s). Should the package's layout change, the
whole package is imported instead.

Cost is bounded on the parsed expression (:mod:`lifecycle_controller.core.policy.condition_cost`),
never on its text: an expression longer than :data:`MAX_CONDITION_LENGTH` characters (the
CRD's ``maxLength`` too), with a comprehension macro (``all``, ``exists``, ``exists_one``,
``map``, ``filter``) inside another one's body, calling ``matches()`` with a pattern that is
not a string literal, or whose estimated cost over metadata of :data:`COMPILE_SIZES` exceeds
:data:`MAX_EVALUATION_COST` is refused; so is a pattern the library's regex engine refuses
(each is compiled once here, as a check: the library compiles it again on every call, which
the estimate counts). Before each evaluation over larger metadata (or a longer
``referencedBy``), the estimate is taken again for that object's sizes, and an evaluation
over the budget is not run: it is an evaluation problem.

The estimate is a model; time is the fact. The library holds the interpreter lock for a whole
evaluation and honours no interrupt, so an evaluation cannot be stopped once started, nor
moved off the event loop by a thread (docs/architecture.md#condition-time-budget). Given a
:data:`Stopwatch` (the calling thread's CPU time), :meth:`Condition.evaluate` measures each
evaluation, and one that took more than :data:`EVALUATION_TIME_BUDGET_NS` fails and marks
the condition: it is not evaluated again (every later evaluation fails at once with the same
problem) for as long as this compiled condition is in force, that is its policy's generation.
A hole in the estimate then costs one evaluation, not one per object and change.

Evaluation never raises: an error (a missing map key, a type mismatch, the budget...) or a
result that is not a boolean means "does not match", with the problem in
:attr:`ConditionResult.problem` for the policy's status.
"""

from __future__ import annotations

import functools
import importlib.machinery
import importlib.util
import re
import sys
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path
from types import ModuleType
from typing import TYPE_CHECKING, Any, Final, Protocol, cast

from lifecycle_controller.core.policy.condition_cost import (
    REFERENCES_VARIABLE,
    CostError,
    CostModel,
    NestedMacroError,
    PatternError,
    Sizes,
    analyse,
    identifiers,
)
from lifecycle_controller.core.policy.condition_reads import projected, unkept_refusal
from lifecycle_controller.core.policy.condition_regex import regex_cost
from lifecycle_controller.core.text.gotext import go_quote
from lifecycle_controller.core.text.units import NS_PER_SECOND

if TYPE_CHECKING:
    import cel

__all__ = [
    "COMPILE_SIZES",
    "EVALUATION_TIME_BUDGET_NS",
    "MAX_CONDITION_LENGTH",
    "MAX_EVALUATION_COST",
    "REFERENCES_VARIABLE",
    "Condition",
    "ConditionError",
    "ConditionResult",
    "Evaluation",
    "OwnerReference",
    "Stopwatch",
    "Subject",
    "cel_timestamp",
    "compile_condition",
    "field_size",
]

#: The longest condition accepted, in characters (a selector does the heavy lifting). The
#: CRDs' ``spec.condition`` has the same ``maxLength`` (a chart test compares them).
MAX_CONDITION_LENGTH: Final = 1024
#: The most estimated steps one evaluation may take (tens of milliseconds at most).
MAX_EVALUATION_COST: Final = 1_000_000
#: The metadata a condition must fit the budget for to be accepted at all: a long name, 32
#: labels, annotations of 8 KiB (a kubectl last-applied-configuration), 4 owners, 64 users
#: (``referencedBy``). Larger metadata is estimated again, object by object, before each
#: evaluation.
COMPILE_SIZES: Final = Sizes(
    name=253,
    namespace=63,
    labels_entries=32,
    labels_bytes=32 * 128,
    annotations_entries=32,
    annotations_bytes=8192,
    owner_entries=4,
    owner_bytes=4 * 256,
    references_entries=64,
    references_bytes=64 * 64,
)
#: The CPU time one evaluation may take (the estimate's budget is a few milliseconds): one
#: that takes longer marks its condition, which is not evaluated again.
EVALUATION_TIME_BUDGET_NS: Final = 100_000_000
_NS_PER_MICROSECOND: Final = 1000
_NS_PER_MILLISECOND: Final = 1_000_000
#: The library's wrapping of a regex engine error, around the engine's own words.
_REGEX_WORDING: Final = re.compile(
    r"^.*?not a valid regex: (regex parse error: )?|\s*Check function arguments.*$"
)

#: The calling thread's CPU time in nanoseconds (``time.thread_time_ns``; core reads no clock,
#: the caller hands it in).
Stopwatch = Callable[[], int]


class ConditionError(ValueError):
    """A condition that is refused before it runs; ``str()`` is the exact problem."""


@dataclass(frozen=True, slots=True)
class OwnerReference:
    """One ``metadata.ownerReferences`` entry, as much of it as matching needs."""

    api_version: str
    kind: str
    name: str
    uid: str = ""
    controller: bool = False


@dataclass(frozen=True, slots=True)
class ConditionResult:
    """Whether the condition holds; ``problem`` says why it could not be evaluated."""

    matched: bool
    problem: str | None = None


@dataclass(frozen=True, slots=True)
class Evaluation:
    """An expression's value over one object, or ``problem``: why it has none."""

    result: Any = None
    problem: str | None = None
    #: It failed on a field, a key or an element the object does not have.
    absent: bool = False
    error: BaseException | None = field(default=None, compare=False)


@dataclass(frozen=True, slots=True)
class Subject:
    """The one object an expression is evaluated over: its metadata and ``fields`` (its
    other top-level fields, as far as kept). ``kind`` and ``api_version`` are its resource
    type's (an object's own, if ``fields`` has them, is not read: a listed object lacks them,
    a watched one has them). One value for a condition and a ``since`` alike, so the two read
    an object the same way."""

    kind: str
    api_version: str
    name: str
    namespace: str | None
    labels: Mapping[str, str]
    annotations: Mapping[str, str]
    creation_ns: int | None
    owner_references: Sequence[OwnerReference]
    fields: Mapping[str, Any] | None = None
    #: The uses of the object, read as ``referencedBy`` (only by an expression that reads it).
    referenced_by: Sequence[str] = ()


def _check_cost(source: str) -> CostModel:
    if len(source) > MAX_CONDITION_LENGTH:
        raise ConditionError(
            f"is {len(source)} characters long; at most {MAX_CONDITION_LENGTH} are allowed"
        )
    try:
        model = analyse(source)
    except NestedMacroError as nested:
        raise ConditionError(
            f"nests the {nested.macro}() macro inside another comprehension; "
            "at most one level is allowed, to bound its cost"
        ) from None
    except PatternError:
        raise ConditionError(
            "calls matches() with a pattern that is not a string literal; write the "
            "pattern out, so that its cost is known when the policy is read"
        ) from None
    except CostError as error:
        _compiler().compile(source)  # a syntax error: the compiler's message says it best
        raise ConditionError(f"cannot be analysed for its cost: {error}") from None
    cost = model.cost(COMPILE_SIZES)
    if cost > MAX_EVALUATION_COST:
        hint = ""
        if model.patterns:
            dearest = max(model.patterns, key=lambda p: regex_cost(p).compile)
            hint = (
                f" (matches() compiles its pattern again on every call: "
                f"{go_quote(dearest)} costs {regex_cost(dearest).compile} steps each time; "
                r"\w, \W, \d and \p{...} are Unicode tables, [a-z0-9_] is not)"
            )
        raise ConditionError(
            f"has an estimated cost of {cost} steps over typical metadata; "
            f"at most {MAX_EVALUATION_COST} are allowed{hint}"
        )
    return model


def _check_patterns(patterns: frozenset[str]) -> None:
    """Compile each ``matches()`` pattern once, with the library's engine, so that one it
    refuses (a syntax error, over the engine's size limit) is refused with the policy."""
    if not patterns:
        return
    probe = _compiler().compile("text.matches(pattern)")
    for pattern in sorted(patterns):
        try:
            probe.execute({"text": "", "pattern": pattern})
        except Exception as error:
            detail = _REGEX_WORDING.sub("", " ".join(str(error).split()))
            raise ConditionError(
                f"matches() pattern {go_quote(pattern)} is not a valid regular expression: {detail}"
            ) from None


def _within(sizes: Sizes, bound: Sizes) -> bool:
    return (
        sizes.name <= bound.name
        and sizes.namespace <= bound.namespace
        and sizes.labels_entries <= bound.labels_entries
        and sizes.labels_bytes <= bound.labels_bytes
        and sizes.annotations_entries <= bound.annotations_entries
        and sizes.annotations_bytes <= bound.annotations_bytes
        and sizes.owner_entries <= bound.owner_entries
        and sizes.owner_bytes <= bound.owner_bytes
        and sizes.fields <= bound.fields
        and sizes.references_entries <= bound.references_entries
        and sizes.references_bytes <= bound.references_bytes
    )


def field_size(value: object) -> int:
    """Scalars, entries and characters of a decoded JSON value (the cost model's size)."""
    if isinstance(value, Mapping):
        return sum(1 + len(str(k)) + field_size(v) for k, v in value.items())
    if isinstance(value, list | tuple):
        return sum(1 + field_size(v) for v in value)
    if isinstance(value, str | bytes):
        return len(value)
    return 1


def _map_bytes(entries: Mapping[str, str]) -> int:
    return sum(len(key) + len(value) for key, value in entries.items())


class _Compiler(Protocol):
    def compile(self, expression: str) -> cel.Program: ...


def _extension() -> ModuleType | None:
    """The library's compiled ``cel.cel`` module, loaded without the package's ``__init__``."""
    package = importlib.util.find_spec("cel")  # finds the package; does not run it
    if package is None or not package.submodule_search_locations:
        return None
    for folder in package.submodule_search_locations:
        for suffix in importlib.machinery.EXTENSION_SUFFIXES:
            path = Path(folder) / f"cel{suffix}"
            if not path.is_file():
                continue
            spec = importlib.util.spec_from_file_location("cel.cel", path)
            if spec is None or spec.loader is None:
                return None
            module = importlib.util.module_from_spec(spec)
            spec.loader.exec_module(module)
            # Registered, so that a later ``import cel`` reuses it (an extension loads once).
            sys.modules["cel.cel"] = module
            return module
    return None


@functools.cache
def _compiler() -> _Compiler:
    try:
        module = _extension()
    except ImportError:
        module = None
    if module is None or not callable(getattr(module, "compile", None)):
        import cel as module  # the layout changed: the whole package, CLI and all

    return cast(_Compiler, module)


def _first_line(error: BaseException) -> str:
    text = str(error).strip()
    return text.splitlines()[0] if text else type(error).__name__


@dataclass(frozen=True, slots=True, eq=False)
class Condition:
    """A compiled condition; build it with :func:`compile_condition`."""

    source: str
    _program: cel.Program = field(repr=False)
    _cost: CostModel = field(repr=False)
    #: The expression reads the ``referencedBy`` variable.
    reads_references: bool = False
    #: What the expression is, in a problem's words (``condition failed: ...``).
    what: str = "condition"
    #: The problem of the evaluation that overran :data:`EVALUATION_TIME_BUDGET_NS`, once one
    #: has (then no evaluation runs again): the one mutable part, shared by every snapshot
    #: holding this generation of the policy.
    _overrun: list[str] = field(default_factory=list, repr=False)

    @property
    def reads(self) -> frozenset[tuple[str, ...]]:
        """The paths under ``object`` outside ``metadata``, ``kind`` and ``apiVersion`` it
        reads (``("spec",)``: all of spec): what the cache must keep for it."""
        return projected(self._cost.reads)

    def evaluate(self, subject: Subject, *, stopwatch: Stopwatch | None = None) -> ConditionResult:
        """Evaluate over one object (:class:`Subject`), within :data:`MAX_EVALUATION_COST`
        and, given a ``stopwatch``, :data:`EVALUATION_TIME_BUDGET_NS`; never raises."""
        outcome = self.value(subject, stopwatch=stopwatch)
        if outcome.problem is not None:
            return ConditionResult(False, outcome.problem)
        result = outcome.result
        if not isinstance(result, bool):
            return ConditionResult(
                False, f"condition returned {type(result).__name__} {result!r}, not a boolean"
            )
        return ConditionResult(result)

    def value(
        self,
        subject: Subject,
        *,
        variables: Mapping[str, Any] | None = None,
        stopwatch: Stopwatch | None = None,
    ) -> Evaluation:
        """The expression's value over one object, whatever its type (:meth:`evaluate` wants
        a boolean, a policy's ``since`` a time), within :data:`MAX_EVALUATION_COST` and,
        given a ``stopwatch``, :data:`EVALUATION_TIME_BUDGET_NS`; never raises.
        ``variables``: more top-level variables (a ``since``'s ``matchedAt``)."""
        if self._overrun:
            return Evaluation(problem=self._overrun[0])
        references = subject.referenced_by if self.reads_references else ()
        sizes = Sizes(
            name=len(subject.name),
            namespace=len(subject.namespace or ""),
            labels_entries=len(subject.labels),
            labels_bytes=_map_bytes(subject.labels),
            annotations_entries=len(subject.annotations),
            annotations_bytes=_map_bytes(subject.annotations),
            owner_entries=len(subject.owner_references),
            owner_bytes=sum(
                len(r.api_version) + len(r.kind) + len(r.name) + len(r.uid) + 1
                for r in subject.owner_references
            ),
            fields=field_size(subject.fields) if subject.fields else 0,
            references_entries=len(references),
            references_bytes=sum(map(len, references)),
        )
        if not _within(sizes, COMPILE_SIZES):  # within them, the compile-time check holds
            cost = self._cost.cost(sizes)
            if cost > MAX_EVALUATION_COST:
                return Evaluation(
                    problem=f"{self.what} failed: estimated cost {cost} over this object's "
                    f"metadata exceeds the budget of {MAX_EVALUATION_COST} steps",
                )
        metadata: dict[str, Any] = {
            "name": subject.name,
            "namespace": subject.namespace or "",
            "labels": dict(subject.labels),
            "annotations": dict(subject.annotations),
            "ownerReferences": [
                {
                    "apiVersion": ref.api_version,
                    "kind": ref.kind,
                    "name": ref.name,
                    "uid": ref.uid,
                    "controller": ref.controller,
                }
                for ref in subject.owner_references
            ],
        }
        if subject.creation_ns is not None:
            metadata["creationTimestamp"] = cel_timestamp(subject.creation_ns)
        given = {"apiVersion": subject.api_version, "kind": subject.kind, "metadata": metadata}
        context: dict[str, Any] = {"object": {**(subject.fields or {}), **given}}
        if self.reads_references:
            context[REFERENCES_VARIABLE] = list(references)
        if variables:
            context.update(variables)
        started = stopwatch() if stopwatch is not None else 0
        try:
            result = self._program.execute(context)
        except Exception as error:  # the library raises several types; none may escape
            result = error
        if stopwatch is not None:
            overrun = self._overran(stopwatch() - started)
            if overrun is not None:
                return overrun
        if isinstance(result, Exception):
            return Evaluation(
                problem=f"{self.what} failed: {_first_line(result)}",
                absent=isinstance(result, KeyError | IndexError),
                error=result,
            )
        return Evaluation(result)

    def _overran(self, elapsed_ns: int) -> Evaluation | None:
        """Mark the condition when one evaluation took more than the time budget."""
        if elapsed_ns <= EVALUATION_TIME_BUDGET_NS:
            return None
        problem = (
            f"{self.what} failed: an evaluation took {elapsed_ns // _NS_PER_MILLISECOND} ms, "
            f"over the budget of {EVALUATION_TIME_BUDGET_NS // _NS_PER_MILLISECOND} ms; "
            "it is not evaluated again until the policy changes"
        )
        self._overrun.append(problem)
        return Evaluation(problem=problem)


def cel_timestamp(instant_ns: int) -> datetime:
    """An instant (ns since the epoch) as the CEL timestamp the library takes (a UTC
    datetime, to the microsecond)."""
    seconds, rest = divmod(instant_ns, NS_PER_SECOND)
    return datetime.fromtimestamp(seconds, UTC).replace(microsecond=rest // _NS_PER_MICROSECOND)


def compile_condition(source: str, *, what: str = "condition") -> Condition:
    """Check the cost bound, compile and check that it reads only what the controller keeps;
    raise :class:`ConditionError` with the problem. ``what`` names the expression in the
    problems of its evaluations (a policy's ``since`` is compiled here too)."""
    if not source.strip():
        raise ConditionError("is empty")
    try:
        model = _check_cost(source)
        program = _compiler().compile(source)
        _check_patterns(model.patterns)
    except ConditionError:
        raise
    except Exception as error:
        raise ConditionError(f"does not compile: {_first_line(error)}") from None
    refusal = unkept_refusal(model.reads)
    if refusal is not None:
        raise ConditionError(refusal)
    return Condition(
        source,
        program,
        model,
        reads_references=REFERENCES_VARIABLE in identifiers(source),
        what=what,
    )
