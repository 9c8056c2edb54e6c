"""Namespace-wide defaults (docs/annotations.md#namespace-defaults), as pure functions.

A Namespace may carry ``catch-up``, ``dry-run``, ``warn-before`` and ``maintenance-window`` as
defaults for every object in it, and ``max-delete-ttl`` as a cap on its deletions. This
module is the one place that merges them into an object's effective inputs:

* **precedence**: the object's own annotation, else the namespace's, else the flag;
* **dry-run**: ``--dry-run`` still forces dry-run everywhere; otherwise the object's value,
  else the namespace's;
* **the cap**: the tighter of the namespace's ``max-delete-ttl`` and ``--max-delete-ttl``.

Invalid namespace values never raise. :func:`parse_namespace_defaults` turns each into a
:class:`NamespaceProblem`: the Warning to record once on the Namespace, and the actions it
holds back in the objects that would inherit it. ``maintenance-window``, ``dry-run`` and
``catch-up`` are safety settings: an invalid one blocks every action of those objects, since
acting without the safety would be worse than waiting. An invalid ``max-delete-ttl`` blocks
their deletions (it guards nothing else). An invalid ``warn-before`` only turns the warning off.

``exempt`` on a Namespace is not a default either: it exempts every object in it from the
lifecycle policies that are not enforced (``NamespaceDefaults.exempt``, which policy matching
reads), as an object's own ``exempt`` does; the objects' own annotations still act.

Action annotations on a Namespace are not defaults: they act on the Namespace itself, which
is cluster-scoped and so has no namespace defaults of its own.
"""

from __future__ import annotations

import enum
from collections.abc import Collection, Mapping
from dataclasses import dataclass, field, replace
from types import MappingProxyType

from lifecycle_controller.core.decision import events
from lifecycle_controller.core.decision.decide import decide
from lifecycle_controller.core.decision.events import Event
from lifecycle_controller.core.decision.outcomes import (
    Action,
    Decision,
    DecisionSettings,
    Idle,
    Invalid,
    ObjectFacts,
)
from lifecycle_controller.core.decision.warnings import parse_warn_before
from lifecycle_controller.core.objects import keys
from lifecycle_controller.core.schedule.catchup import (
    CatchUpError,
    CatchUpRule,
    Forget,
    LedgerView,
    parse_catch_up_rule,
)
from lifecycle_controller.core.schedule.windows import (
    MaintenanceWindows,
    WindowError,
    parse_windows,
)
from lifecycle_controller.core.text.durations import DurationError, parse_max_delete_ttl
from lifecycle_controller.core.text.gotext import go_parse_bool

__all__ = [
    "NamespaceDefaults",
    "NamespaceProblem",
    "NamespaceSource",
    "ResolvedInputs",
    "decide_in_namespace",
    "ignoring",
    "namespace_default_annotations",
    "namespace_defaults_changed",
    "parse_namespace_defaults",
    "resolve_inputs",
]

_BOTH = frozenset({Action.DELETE, Action.RESTART})
#: The keys a Namespace carries for the objects in it: the defaults, the cap and ``exempt``.
_NAMESPACE_WIDE = (*keys.NAMESPACE_DEFAULT_KEYS, keys.EXEMPT)
#: Each default's parsed field of :class:`NamespaceDefaults`.
_FIELDS = {
    keys.CATCH_UP: "catch_up",
    keys.DRY_RUN: "dry_run",
    keys.WARN_BEFORE: "warn_before_ns",
    keys.MAINTENANCE_WINDOW: "windows",
    keys.MAX_DELETE_TTL: "max_delete_ttl_ns",
}
_BLOCKS_ALL = "objects here without their own value take no action until it is fixed"
_BLOCKS_DELETES = "objects here are not deleted until it is fixed"
_BLOCKS_WARNING = "objects here without their own value get no warning before actions"


class NamespaceSource(enum.StrEnum):
    """Where an effective value came from (``status`` and ``explain`` show it)."""

    OBJECT = "object"
    NAMESPACE = "namespace"
    FLAG = "flag"


@dataclass(frozen=True, slots=True)
class NamespaceProblem:
    """An invalid namespace default: what it says and which actions it blocks."""

    key: str
    value: str
    error: str
    #: The actions it holds back in objects without their own value; empty: only the warning.
    blocks: frozenset[Action]

    def event(self, namespace_uid: str) -> Event:
        """The ``InvalidAnnotation`` Warning to record on the Namespace (deduplicated per value)."""
        if not self.blocks:
            blocks = _BLOCKS_WARNING
        elif self.blocks == _BOTH:
            blocks = _BLOCKS_ALL
        else:
            blocks = _BLOCKS_DELETES
        return events.invalid_namespace_default(
            uid=namespace_uid, key=self.key, value=self.value, error=self.error, blocks=blocks
        )


@dataclass(frozen=True, slots=True)
class NamespaceDefaults:
    """A Namespace's parsed defaults; None fields are absent (or invalid, see ``problems``)."""

    namespace: str
    #: The raw annotations present on the Namespace that concern its objects (the five
    #: defaults and ``exempt`` only).
    values: Mapping[str, str] = field(default_factory=lambda: MappingProxyType({}))
    catch_up: CatchUpRule | None = None
    dry_run: bool | None = None
    warn_before_ns: int | None = None
    windows: MaintenanceWindows | None = None
    max_delete_ttl_ns: int | None = None
    problems: tuple[NamespaceProblem, ...] = ()
    #: ``exempt`` (any value but a false one, as on an object): the policies that are not
    #: enforced leave every object in the Namespace alone.
    exempt: bool = False


def namespace_default_annotations(annotations: Mapping[str, str]) -> dict[str, str]:
    """Only the keys a Namespace carries for its objects: the defaults, the cap and
    ``exempt`` (the rest do not concern its objects)."""
    return {key: annotations[key] for key in _NAMESPACE_WIDE if key in annotations}


def namespace_defaults_changed(old: Mapping[str, str], new: Mapping[str, str]) -> bool:
    """Whether a Namespace update changes the defaults or the exemption of its objects
    (re-evaluate them)."""
    return namespace_default_annotations(old) != namespace_default_annotations(new)


def parse_namespace_defaults(namespace: str, annotations: Mapping[str, str]) -> NamespaceDefaults:
    """Parse a Namespace's defaults; never raises (bad values become ``problems``)."""
    values = namespace_default_annotations(annotations)
    problems: list[NamespaceProblem] = []
    parsed: dict[str, object] = {}

    def problem(key: str, error: str, blocks: frozenset[Action]) -> None:
        problems.append(NamespaceProblem(key, values[key], error, blocks))

    if keys.CATCH_UP in values:
        try:
            parsed["catch_up"] = parse_catch_up_rule(values[keys.CATCH_UP])
        except CatchUpError as error:
            problem(keys.CATCH_UP, str(error), _BOTH)
    if keys.DRY_RUN in values:
        flag = go_parse_bool(values[keys.DRY_RUN])
        if flag is None:
            problem(keys.DRY_RUN, "expected a boolean", _BOTH)
        else:
            parsed["dry_run"] = flag
    if keys.WARN_BEFORE in values:
        value = values[keys.WARN_BEFORE]
        try:
            parsed["warn_before_ns"] = parse_warn_before(value)
        except DurationError as error:
            problem(keys.WARN_BEFORE, str(error), frozenset())
    if keys.MAINTENANCE_WINDOW in values:
        try:
            parsed["windows"] = parse_windows(values[keys.MAINTENANCE_WINDOW])
        except WindowError as error:
            problem(keys.MAINTENANCE_WINDOW, str(error), _BOTH)
    if keys.MAX_DELETE_TTL in values:
        value = values[keys.MAX_DELETE_TTL]
        try:
            if not value:
                raise DurationError("an empty value is not a duration")
            parsed["max_delete_ttl_ns"] = parse_max_delete_ttl(value)
        except DurationError as error:
            problem(keys.MAX_DELETE_TTL, str(error), frozenset({Action.DELETE}))
    exempt = keys.EXEMPT in values and go_parse_bool(values[keys.EXEMPT]) is not False
    return NamespaceDefaults(
        namespace,
        MappingProxyType(values),
        problems=tuple(problems),
        exempt=exempt,
        **parsed,  # type: ignore[arg-type]
    )


def ignoring(defaults: NamespaceDefaults, dropped: Collection[str]) -> NamespaceDefaults:
    """``defaults`` as if the Namespace did not carry the default keys ``dropped``: neither
    their values nor their problems (an enforced policy decides without some of them)."""
    changes: dict[str, object] = {_FIELDS[key]: None for key in dropped}
    return replace(
        defaults,
        values=MappingProxyType({k: v for k, v in defaults.values.items() if k not in dropped}),
        problems=tuple(p for p in defaults.problems if p.key not in dropped),
        **changes,  # type: ignore[arg-type]
    )


@dataclass(frozen=True, slots=True)
class ResolvedInputs:
    """An object's effective settings, where each came from, and what its namespace blocks."""

    settings: DecisionSettings
    sources: Mapping[str, NamespaceSource]
    blocked: Mapping[Action, NamespaceProblem]


def _tighter(a: int | None, b: int | None) -> int | None:
    if a is None:
        return b
    if b is None:
        return a
    return min(a, b)


def resolve_inputs(
    annotations: Mapping[str, str],
    defaults: NamespaceDefaults | None,
    settings: DecisionSettings,
) -> ResolvedInputs:
    """Merge namespace defaults into an object's inputs (object > namespace > flag).

    decide() already lets the object's own annotation win over the settings, so the
    namespace's values go into the settings the object sees.
    """
    ns = defaults or NamespaceDefaults("")
    own = {key for key in keys.NAMESPACE_DEFAULT_KEYS if key in annotations}
    own.discard(keys.MAX_DELETE_TTL)  # a cap on a Namespace only; ignored on other objects
    sources: dict[str, NamespaceSource] = {}
    changes: dict[str, object] = {}

    def pick(key: str, value: object | None, *names: str) -> None:
        if key in own:
            sources[key] = NamespaceSource.OBJECT
        elif value is not None:
            sources[key] = NamespaceSource.NAMESPACE
            changes.update(dict.fromkeys(names, value))
        else:
            sources[key] = NamespaceSource.FLAG

    pick(keys.CATCH_UP, ns.catch_up, "delete_catch_up", "restart_catch_up")
    pick(keys.WARN_BEFORE, ns.warn_before_ns, "warn_before_ns")
    pick(keys.MAINTENANCE_WINDOW, ns.windows, "maintenance_windows")
    if settings.dry_run:
        sources[keys.DRY_RUN] = NamespaceSource.FLAG  # --dry-run forces it everywhere
    else:
        pick(keys.DRY_RUN, ns.dry_run, "dry_run")
    limit = _tighter(settings.max_delete_ttl_ns, ns.max_delete_ttl_ns)
    from_namespace = ns.max_delete_ttl_ns is not None and limit == ns.max_delete_ttl_ns
    sources[keys.MAX_DELETE_TTL] = (
        NamespaceSource.NAMESPACE if from_namespace else NamespaceSource.FLAG
    )
    changes["max_delete_ttl_ns"] = limit
    # The Event and the log name the source (docs/annotations.md#namespace-defaults).
    changes["max_delete_ttl_namespace"] = ns.namespace if from_namespace else None

    blocked: dict[Action, NamespaceProblem] = {}
    for problem in ns.problems:
        if problem.key in own:
            continue  # the object's own value wins; the namespace's does not matter
        if problem.key == keys.WARN_BEFORE:
            changes["warn_before_ns"] = 0  # blocks only the warning
            sources[keys.WARN_BEFORE] = NamespaceSource.NAMESPACE
        for action in sorted(problem.blocks):
            blocked.setdefault(action, problem)
    return ResolvedInputs(
        replace(settings, **changes),  # type: ignore[arg-type]
        MappingProxyType(sources),
        MappingProxyType(blocked),
    )


def decide_in_namespace(
    *,
    annotations: Mapping[str, str],
    facts: ObjectFacts,
    now_ns: int,
    settings: DecisionSettings,
    ledger: LedgerView,
    defaults: NamespaceDefaults | None,
) -> Decision:
    """:func:`~lifecycle_controller.core.decision.decide.decide` with the namespace's defaults
    applied.

    An action that an invalid namespace default blocks becomes an :class:`Invalid` without an
    Event of its own (the Warning is on the Namespace); the object's own problems come first.
    """
    if defaults is None:
        return decide(
            annotations=annotations, facts=facts, now_ns=now_ns, settings=settings, ledger=ledger
        )
    resolved = resolve_inputs(annotations, defaults, settings)
    decision = decide(
        annotations=annotations,
        facts=facts,
        now_ns=now_ns,
        settings=resolved.settings,
        ledger=ledger,
    )
    if isinstance(decision, (Idle, Invalid)) or decision.action is None:
        return decision
    problem = resolved.blocked.get(decision.action)
    if problem is None:
        return decision
    short = problem.key.removeprefix(keys.PREFIX)
    return Invalid(
        reason=events.INVALID_ANNOTATION,
        ledger_ops=(Forget(),),
        action=decision.action,
        log=f"namespace {facts.namespace} has an invalid {short} default; "
        "taking no action until it is fixed",
    )
