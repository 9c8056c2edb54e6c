"""Lifecycle policies: one rule for many objects, as a typed and validated model.

A ``ClusterLifecyclePolicy`` (cluster-scoped) or ``LifecyclePolicy`` (namespaced) says which
objects it matches (``resources``, ``namespaces``, ``selector``, ``names``, ``condition``,
``includeOwned``), how it ranks against others (``priority``) and what it does
(``lifecycle``: the annotation vocabulary without the ``lifecycle.cezary.dev/`` prefix).
:func:`parse_policy` turns a decoded ``spec`` into a :class:`Policy`, or into a
:class:`PolicyInvalid` listing every problem with its field path, using the same parsers as
the annotations so that a value means the same thing in both places. It never raises.

Rules of the model (docs/architecture.md#policy-anchors has how its actions are anchored):

* ``resources`` are ``--watch-resource`` globs (``configmaps``, ``*.apps``); a
  ``LifecyclePolicy`` names them exactly, so that an admission check can ask whether its
  author may delete or patch each of them, and may not set ``namespaces``;
* exactly one action: ``delete-after``, ``delete-at``, ``restart-at``, ``restart-every`` or
  ``restart-cron``; ``restart-after`` and ``reference-point`` count from when an annotation
  was applied, which a rule does not have, so they are refused; ``since`` (:mod:`.since`)
  moves the start of ``delete-after`` from the object's creation to what it yields;
* the condition is compiled here, once per generation (:mod:`.condition`); it may
  read only what the controller keeps, and over ``secrets`` (named, or selected by a glob)
  metadata only, never Secret data (:mod:`.condition_reads`);
* ``namespaceSelector`` (over the labels of the object's Namespace, ANDed with
  ``namespaces``) is a ``ClusterLifecyclePolicy`` field only;
* ``enforce`` is a ``ClusterLifecyclePolicy`` field only (an administrator's rule that wins
  over namespaced policies, the objects' own annotations and ``exempt``);
* an invalid policy still says what it can of its selection (:class:`HeldScope`): it acts on
  nothing but holds the objects it would match, so that no lower policy acts on them while
  it is broken (docs/policies.md#safety-rules).

How a policy's actions are anchored without writing onto the objects is
:mod:`.precedence`'s business.
"""

from __future__ import annotations

import difflib
import enum
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from datetime import UTC
from types import MappingProxyType
from typing import Final

from lifecycle_controller.core.decision.outcomes import Action
from lifecycle_controller.core.decision.warnings import parse_warn_before
from lifecycle_controller.core.objects import keys
from lifecycle_controller.core.policy.condition import (
    Condition,
    ConditionError,
    compile_condition,
)
from lifecycle_controller.core.policy.condition_reads import SECRETS, secret_refusal
from lifecycle_controller.core.policy.limit import PolicyLimit, parse_limit
from lifecycle_controller.core.policy.since import Since, compile_since
from lifecycle_controller.core.schedule.catchup import parse_catch_up_rule
from lifecycle_controller.core.schedule.windows import parse_windows
from lifecycle_controller.core.text.cron import load_zone, parse_cron
from lifecycle_controller.core.text.durations import parse_duration, parse_restart_every
from lifecycle_controller.core.text.globs import (
    BadPatternError,
    filepath_match,
    glob_match,
    has_glob_meta,
)
from lifecycle_controller.core.text.gotext import go_parse_bool, go_quote
from lifecycle_controller.core.text.label_selector import (
    LabelSelector,
    SelectorError,
    parse_label_selector,
)
from lifecycle_controller.core.text.timestamps import parse_rfc3339

__all__ = [
    "LIFECYCLE_KEYS",
    "MAX_GLOBS",
    "MAX_GLOB_LENGTH",
    "PROPAGATIONS",
    "RESTARTABLE_RESOURCES",
    "HeldScope",
    "Policy",
    "PolicyInvalid",
    "PolicyKind",
    "PolicyRef",
    "parse_policy",
    "selects_key",
]


class PolicyKind(enum.StrEnum):
    CLUSTER = "ClusterLifecyclePolicy"
    NAMESPACED = "LifecyclePolicy"


@dataclass(frozen=True, slots=True, order=True)
class PolicyRef:
    """Which policy: ``ClusterLifecyclePolicy/NAME`` or ``LifecyclePolicy/NAMESPACE/NAME``."""

    kind: PolicyKind
    namespace: str | None
    name: str

    def __str__(self) -> str:
        if self.namespace is None:
            return f"{self.kind}/{self.name}"
        return f"{self.kind}/{self.namespace}/{self.name}"


_ACTIONS: Final = {
    "delete-after": Action.DELETE,
    "delete-at": Action.DELETE,
    "restart-at": Action.RESTART,
    "restart-every": Action.RESTART,
    "restart-cron": Action.RESTART,
}
_MODIFIERS: Final = ("cron-timezone", "catch-up", "dry-run", "warn-before", "maintenance-window")
#: The ``spec.lifecycle`` keys a policy may set (annotation keys without the prefix).
LIFECYCLE_KEYS: Final = (*_ACTIONS, *_MODIFIERS)
_REFUSED: Final = {
    "restart-after": "not allowed in a policy: it counts from when an annotation was applied, "
    "which a rule does not have; use restart-at, restart-every or restart-cron",
    "reference-point": "not allowed in a policy: a policy's delete-after counts from the "
    "object's creationTimestamp, or from what spec.since yields",
}
_SPEC_FIELDS: Final = frozenset(
    {"resources", "namespaces", "selector", "names", "condition", "includeOwned", "priority"}
    | {"lifecycle", "enforce", "deletionPropagation", "namespaceSelector", "limit", "since"}
)
#: ``deletionPropagation``: the DELETE's propagationPolicy (how the owned objects go).
PROPAGATIONS: Final = ("Background", "Foreground", "Orphan")
#: The resource keys a restart can act on (keys.RESTARTABLE_KINDS in group apps).
RESTARTABLE_RESOURCES: Final = ("daemonsets.apps", "deployments.apps", "statefulsets.apps")
#: The most ``names`` (and ``namespaces``) globs a policy may list, and their longest (the
#: CRDs' ``maxItems`` and ``maxLength``, compared by a test).
MAX_GLOBS: Final = 256
MAX_GLOB_LENGTH: Final = 253


def _parse_dry_run(value: str) -> object:
    if go_parse_bool(value) is None:
        raise ValueError("expected a boolean")
    return None


def _parse_zone(value: str) -> object:
    try:
        return load_zone(value, local_zone=UTC)  # only whether the name exists matters here
    except ValueError:
        raise ValueError(f"unknown time zone {go_quote(value)}") from None


#: The annotation parser behind each key (they raise ValueError subclasses with the text).
_PARSERS: Final[Mapping[str, Callable[[str], object]]] = {
    "delete-after": parse_duration,
    "delete-at": parse_rfc3339,
    "restart-at": parse_rfc3339,
    "restart-every": parse_restart_every,
    "restart-cron": parse_cron,
    "cron-timezone": _parse_zone,
    "catch-up": parse_catch_up_rule,
    "dry-run": _parse_dry_run,
    "warn-before": parse_warn_before,
    "maintenance-window": parse_windows,
}


@dataclass(frozen=True, slots=True, eq=False)
class Policy:
    """A valid policy of one generation (matching: :mod:`.match`)."""

    ref: PolicyRef
    generation: int
    resources: tuple[str, ...]
    lifecycle: Mapping[str, str]
    action: Action
    namespaces: tuple[str, ...] = ()
    selector: LabelSelector | None = None
    names: tuple[str, ...] = ()
    condition: Condition | None = None
    include_owned: bool = False
    priority: int = 0
    #: A ``ClusterLifecyclePolicy`` that wins over namespaced policies, own annotations and
    #: ``exempt`` (always False for a ``LifecyclePolicy``).
    enforce: bool = False
    #: How the objects it deletes take their dependents (``PROPAGATIONS``); None: the
    #: server's default (Background for most kinds).
    deletion_propagation: str | None = None
    #: Over the labels of the object's Namespace (a ``ClusterLifecyclePolicy`` only; ANDed
    #: with ``namespaces``); None: every namespace.
    namespace_selector: LabelSelector | None = None
    #: ``spec.limit``: at most so many actions per sliding window (:mod:`.limit`);
    #: None: the controller's default (``--policy-default-limit``) applies.
    limit: PolicyLimit | None = None
    #: The policy object's ``metadata.uid`` ("" for a manifest without one): with
    #: ``generation``, which policy object and which spec (the policy fence compares both).
    uid: str = ""
    #: ``spec.since``: what its ``delete-after`` counts from (:mod:`.since`); None: the
    #: object's creation.
    since: Since | None = None

    @property
    def reads(self) -> frozenset[tuple[str, ...]]:
        """The paths beyond metadata its condition and its ``since`` read (what the cache
        keeps of the objects it may match)."""
        found = self.condition.reads if self.condition is not None else frozenset()
        return found | self.since.reads if self.since is not None else found

    @property
    def reads_references(self) -> bool:
        """Its condition or its ``since`` reads ``referencedBy``."""
        return (self.condition is not None and self.condition.reads_references) or (
            self.since is not None and self.since.reads_references
        )

    @property
    def kind(self) -> PolicyKind:
        return self.ref.kind

    @property
    def annotations(self) -> dict[str, str]:
        """``lifecycle`` as the annotations it stands for (``lifecycle.cezary.dev/`` keys)."""
        return {keys.PREFIX + key: value for key, value in self.lifecycle.items()}

    def rank(self) -> tuple[int, str]:
        """Sort key, best first: higher priority, then name order (then namespace)."""
        return (-self.priority, f"{self.ref.name}\x00{self.ref.namespace or ''}")


@dataclass(frozen=True, slots=True)
class HeldScope:
    """What an invalid policy's spec still says about its selection; None: unreadable.

    An unreadable field selects everything (its resources, namespaces, names or labels), so
    the objects it holds are at least those it would have matched. An unreadable priority
    ranks first among its kind; an unreadable action holds both families.
    """

    resources: tuple[str, ...] | None = None
    namespaces: tuple[str, ...] | None = None
    names: tuple[str, ...] | None = None
    selector: LabelSelector | None = None
    priority: int | None = None
    action: Action | None = None
    enforce: bool = False
    namespace_selector: LabelSelector | None = None


@dataclass(frozen=True, slots=True)
class PolicyInvalid:
    """A policy that acts on nothing: every problem, each with its field path, and what it
    holds (:class:`HeldScope`)."""

    ref: PolicyRef
    generation: int
    problems: tuple[str, ...]
    scope: HeldScope = HeldScope()

    @property
    def message(self) -> str:
        """The ``Invalid`` condition's message and the Warning's note."""
        return "; ".join(self.problems)


def _string_list(spec: Mapping[str, object], field: str, problems: list[str]) -> list[str]:
    value = spec.get(field, [])
    if not isinstance(value, list) or not all(isinstance(item, str) for item in value):
        problems.append(f"spec.{field}: must be a list of strings")
        return []
    return value


def _bounded_globs(spec: Mapping[str, object], field: str, problems: list[str]) -> list[str]:
    """``names`` or ``namespaces``: globs matched against every object, so bounded as the
    CRDs bound them (:data:`MAX_GLOBS` entries of :data:`MAX_GLOB_LENGTH` characters); a list
    over the bound is not read further."""
    globs = _string_list(spec, field, problems)
    if len(globs) > MAX_GLOBS:
        problems.append(f"spec.{field}: has {len(globs)} entries; at most {MAX_GLOBS} are allowed")
        return []
    long = [i for i, glob in enumerate(globs) if len(glob) > MAX_GLOB_LENGTH]
    problems.extend(
        f"spec.{field}[{i}]: is {len(globs[i])} characters long; "
        f"at most {MAX_GLOB_LENGTH} are allowed"
        for i in long
    )
    if long:
        return []
    _globs(field, globs, problems)
    return globs


def _globs(field: str, patterns: list[str], problems: list[str]) -> None:
    for index, pattern in enumerate(patterns):
        if not has_glob_meta(pattern):
            continue  # an exact name is a well-formed pattern (most are: no match to run)
        try:
            filepath_match(pattern, "")  # Go validates the whole pattern even on a mismatch
        except BadPatternError as error:
            problems.append(f"spec.{field}[{index}] {go_quote(pattern)}: {error}")


def selects_key(pattern: str, key: str, *, namespaced: bool) -> bool:
    """A ``resources`` entry selects the type of resource key ``key``: it names it exactly,
    or it is a glob that matches it and the type is namespaced (a glob never selects a
    cluster-scoped type)."""
    if pattern == key:
        return True
    return namespaced and has_glob_meta(pattern) and glob_match(pattern, key)


def _secret_refusal(
    resources: tuple[str, ...], condition: Condition, problems: list[str], field: str = "condition"
) -> None:
    """A condition (or ``since``) over Secrets may read their metadata only
    (:mod:`.condition_reads`)."""
    selecting = [
        f"spec.resources[{index}] {go_quote(pattern)}"
        for index, pattern in enumerate(resources)
        if selects_key(pattern, SECRETS, namespaced=True)
    ]
    refusal = secret_refusal(condition.reads, selecting)
    if refusal is not None:
        problems.append(f"spec.{field}: {refusal}")


def _since(
    spec: Mapping[str, object],
    resources: tuple[str, ...],
    lifecycle: Mapping[str, object],
    problems: list[str],
) -> Since | None:
    """``spec.since``, compiled as a condition is; it moves the start of ``delete-after``
    only, so with any other action it is refused."""
    source = spec.get("since")
    if source is None:
        return None
    if not isinstance(source, str):
        problems.append("spec.since: must be a string (a CEL expression, such as matchedAt)")
        return None
    try:
        since = compile_since(source)
    except ConditionError as error:
        problems.append(f"spec.since: {error}")
        return None
    _secret_refusal(resources, since.expression, problems, "since")
    if "delete-after" not in lifecycle:
        problems.append(
            "spec.since: only with delete-after, which it moves the start of (the other "
            "actions name their own times)"
        )
    return since


def _resources(
    kind: PolicyKind, spec: Mapping[str, object], action: Action | None, problems: list[str]
) -> tuple[str, ...]:
    resources = _string_list(spec, "resources", problems)
    if "resources" in spec and isinstance(spec["resources"], list) and not resources:
        problems.append("spec.resources: must name at least one resource")
    elif "resources" not in spec:
        problems.append(
            'spec.resources: required: the resources to match, such as "configmaps" '
            'or "deployments.apps"'
        )
    _globs("resources", resources, problems)
    for index, resource in enumerate(resources):
        exact = not has_glob_meta(resource)
        if kind is PolicyKind.NAMESPACED and not exact:
            problems.append(
                f"spec.resources[{index}] {go_quote(resource)}: a LifecyclePolicy names "
                "resources exactly (no globs), so that its author's rights can be checked"
            )
        if action is Action.RESTART and exact and resource not in RESTARTABLE_RESOURCES:
            problems.append(
                f"spec.resources[{index}] {go_quote(resource)}: restarts apply only to "
                + ", ".join(RESTARTABLE_RESOURCES)
            )
    return tuple(resources)


def _lifecycle(raw: object, problems: list[str]) -> tuple[dict[str, str], Action | None]:
    """The validated ``lifecycle`` map and its action (None when there is no single one)."""
    if raw is None:
        problems.append(
            "spec.lifecycle: required: one action (" + ", ".join(_ACTIONS) + ") and its modifiers"
        )
        return {}, None
    if not isinstance(raw, Mapping):
        problems.append("spec.lifecycle: must be a map of strings")
        return {}, None
    lifecycle: dict[str, str] = {}
    for key in sorted(raw, key=str):
        value = raw[key]
        where = f"spec.lifecycle.{key}"
        if not isinstance(key, str):
            problems.append(f"spec.lifecycle: keys must be strings, got {key!r}")
        elif key.startswith(keys.PREFIX):
            short = key.removeprefix(keys.PREFIX)
            problems.append(f"{where}: write the key without the {keys.PREFIX} prefix ({short})")
        elif key in _REFUSED:
            problems.append(f"{where}: {_REFUSED[key]}")
        elif key not in _PARSERS:
            near = difflib.get_close_matches(key, LIFECYCLE_KEYS, n=1)
            hint = f"; did you mean {near[0]}?" if near else ""
            problems.append(f"{where}: unknown key{hint}")
        elif not isinstance(value, str):
            problems.append(f'{where}: must be a string (quote it: "{value}")')
        else:
            try:
                _PARSERS[key](value)
            except ValueError as error:
                problems.append(f"{where}: {error}")
            else:
                lifecycle[key] = value
    actions = [key for key in _ACTIONS if key in raw]
    if len(actions) > 1:
        problems.append(
            f"spec.lifecycle: sets {' and '.join(actions)}; a policy sets exactly one action"
        )
    elif not actions:
        problems.append(
            "spec.lifecycle: sets no action; a policy sets exactly one of " + ", ".join(_ACTIONS)
        )
    if "cron-timezone" in raw and "restart-cron" not in raw:
        problems.append("spec.lifecycle.cron-timezone: only meaningful with restart-cron")
    return lifecycle, _ACTIONS[actions[0]] if len(actions) == 1 else None


def _selector_problem(problem: str, field: str = "selector") -> str:
    """A selector problem with its path under ``spec.selector`` (or ``field``)."""
    joiner = ": " if problem.startswith("must") else "."
    return f"spec.{field}{joiner}{problem}"


def _namespace_selector(
    kind: PolicyKind, spec: Mapping[str, object], problems: list[str]
) -> LabelSelector | None:
    """``spec.namespaceSelector`` (None: absent, or unreadable, which selects every namespace
    for what an invalid policy holds)."""
    raw = spec.get("namespaceSelector")
    if raw is None:
        return None
    if kind is PolicyKind.NAMESPACED:
        problems.append(
            "spec.namespaceSelector: only a ClusterLifecyclePolicy may select namespaces by "
            "label; a LifecyclePolicy matches objects in its own namespace"
        )
        return None
    try:
        return parse_label_selector(raw)
    except SelectorError as error:
        problems.extend(_selector_problem(p, "namespaceSelector") for p in error.problems)
        return None


def parse_policy(
    kind: PolicyKind,
    namespace: str | None,
    name: str,
    generation: int,
    spec: object,
    *,
    uid: str = "",
) -> Policy | PolicyInvalid:
    """Validate a decoded ``spec``; never raises. ``namespace`` is None for a cluster policy;
    ``uid`` is the object's ``metadata.uid``, when it has one."""
    ref = PolicyRef(kind, namespace if kind is PolicyKind.NAMESPACED else None, name)
    if not isinstance(spec, Mapping):
        return PolicyInvalid(ref, generation, ("spec: must be an object",))
    problems = [
        f"spec.{field}: unknown field" for field in sorted(set(spec) - _SPEC_FIELDS, key=str)
    ]
    if kind is PolicyKind.NAMESPACED and not namespace:
        problems.insert(0, "metadata.namespace: a LifecyclePolicy lives in a namespace")
    lifecycle_problems: list[str] = []
    lifecycle, action = _lifecycle(spec.get("lifecycle"), lifecycle_problems)
    readable: dict[str, bool] = {}
    before = len(problems)
    resources = _resources(kind, spec, action, problems)
    readable["resources"] = len(problems) == before and bool(resources)

    before = len(problems)
    namespaces = _bounded_globs(spec, "namespaces", problems)
    if kind is PolicyKind.NAMESPACED and "namespaces" in spec:
        problems.append(
            "spec.namespaces: only a ClusterLifecyclePolicy may set namespaces; "
            "a LifecyclePolicy matches objects in its own namespace"
        )
    readable["namespaces"] = len(problems) == before

    selector: LabelSelector | None = None
    readable["selector"] = True
    if spec.get("selector") is not None:
        try:
            selector = parse_label_selector(spec["selector"])
        except SelectorError as error:
            problems.extend(map(_selector_problem, error.problems))
            readable["selector"] = False

    namespace_selector = _namespace_selector(kind, spec, problems)

    before = len(problems)
    names = _bounded_globs(spec, "names", problems)
    readable["names"] = len(problems) == before

    condition: Condition | None = None
    source = spec.get("condition")
    if source is not None:
        if not isinstance(source, str):
            problems.append("spec.condition: must be a string")
        else:
            try:
                condition = compile_condition(source)
            except ConditionError as error:
                problems.append(f"spec.condition: {error}")
            else:
                _secret_refusal(resources, condition, problems)

    raw_lifecycle = spec.get("lifecycle")
    since = _since(
        spec, resources, raw_lifecycle if isinstance(raw_lifecycle, Mapping) else {}, problems
    )

    include_owned = spec.get("includeOwned", False)
    if not isinstance(include_owned, bool):
        problems.append("spec.includeOwned: must be a boolean")
    priority = spec.get("priority", 0)
    priority_ok = isinstance(priority, int) and not isinstance(priority, bool)
    if not priority_ok:
        problems.append("spec.priority: must be an integer")
    enforce = spec.get("enforce", False)
    if kind is PolicyKind.NAMESPACED and "enforce" in spec:
        problems.append(
            "spec.enforce: only a ClusterLifecyclePolicy may enforce; a LifecyclePolicy "
            "never wins over the objects' own annotations"
        )
        enforce = False
    elif not isinstance(enforce, bool):
        problems.append("spec.enforce: must be a boolean")
        enforce = True  # unreadable: it may have meant to enforce, so it holds as if it did

    propagation = spec.get("deletionPropagation")
    if propagation is not None and propagation not in PROPAGATIONS:
        problems.append(
            f"spec.deletionPropagation: must be one of {', '.join(PROPAGATIONS)}, "
            f"got {go_quote(str(propagation))}"
        )
    elif propagation is not None and action is Action.RESTART:
        problems.append("spec.deletionPropagation: only for deletions (delete-after, delete-at)")

    limit = parse_limit(spec.get("limit"), problems)

    problems.extend(lifecycle_problems)
    if problems or action is None:
        scope = HeldScope(
            resources=resources if readable["resources"] else None,
            namespaces=tuple(namespaces) if readable["namespaces"] else None,
            names=tuple(names) if readable["names"] else None,
            selector=selector if readable["selector"] else None,
            priority=int(priority) if priority_ok else None,
            action=action,
            enforce=bool(enforce),
            namespace_selector=namespace_selector,
        )
        return PolicyInvalid(ref, generation, tuple(problems), scope)
    return Policy(
        ref=ref,
        generation=generation,
        resources=resources,
        lifecycle=MappingProxyType(lifecycle),
        action=action,
        namespaces=tuple(namespaces),
        selector=selector,
        names=tuple(names),
        condition=condition,
        include_owned=bool(include_owned),
        priority=int(priority),
        enforce=bool(enforce),
        deletion_propagation=str(propagation) if propagation is not None else None,
        namespace_selector=namespace_selector,
        limit=limit,
        uid=uid,
        since=since,
    )
