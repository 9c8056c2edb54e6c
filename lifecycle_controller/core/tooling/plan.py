"""What the controller would do with an object, and when: the engine of ``plan`` and ``status``.

:func:`explain` runs :func:`decide` the way the controller would over the object's near
future: bookkeeping writes that come first (a ``-after`` converted to ``-at``, a redundant
``-after`` dropped, a recurring anchor initialized) are applied to a copy of the annotations
and the object is decided again, until a real action, a wait, or a problem remains. For a
recurring schedule it also lists the next occurrences, so the DST policy is visible.

The ledger starts empty, i.e. as a controller that sees the object for the first time now.
The guardrails the controller applies to a due action
(:mod:`lifecycle_controller.core.decision.guardrails`:
the open circuit breaker, the restart guard and jitter) are applied here by the same
function, at the moment the action falls due (:class:`GuardrailView`), and the warning lead
time (``--warn-before`` or the annotation) gives the instant of the Upcoming warning.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from lifecycle_controller.core.decision.events import DELETION_FAILURE, EventType
from lifecycle_controller.core.decision.guardrails import (
    BreakerFacts,
    GuardrailFacts,
    HoldReason,
    check,
)
from lifecycle_controller.core.decision.namespace_defaults import (
    NamespaceDefaults,
    NamespaceSource,
    decide_in_namespace,
    resolve_inputs,
)
from lifecycle_controller.core.decision.outcomes import (
    Action,
    Decision,
    DecisionSettings,
    Delete,
    DryRun,
    Idle,
    Invalid,
    ObjectFacts,
    Operation,
    Patch,
    Wait,
)
from lifecycle_controller.core.decision.pacing import last_restart_ns
from lifecycle_controller.core.decision.warnings import parse_lead_time
from lifecycle_controller.core.objects import keys
from lifecycle_controller.core.policy.decide import decide_with_policies
from lifecycle_controller.core.policy.enforcement import defaults_for
from lifecycle_controller.core.policy.enforcement import overrides as enforced_overrides
from lifecycle_controller.core.policy.precedence import Resolution
from lifecycle_controller.core.policy.refused import cap_refusals
from lifecycle_controller.core.schedule.catchup import Ledger
from lifecycle_controller.core.schedule.schedules import (
    CronSchedule,
    IntervalSchedule,
    Schedule,
    next_occurrences,
)
from lifecycle_controller.core.text.cron import CronError, ZoneError, load_zone, parse_cron
from lifecycle_controller.core.text.durations import DurationError, parse_restart_every
from lifecycle_controller.core.text.gotext import go_parse_bool
from lifecycle_controller.core.text.timestamps import (
    TimestampError,
    format_rfc3339_nano,
    parse_rfc3339,
)

__all__ = ["DryRunState", "Explanation", "GuardrailView", "dry_run_state", "explain"]

_BOOKKEEPING = (Operation.CONVERT, Operation.CLEANUP, Operation.INITIALIZE)
_MAX_STEPS = 4


@dataclass(frozen=True, slots=True)
class Explanation:
    """The controller's view of one object at ``now``.

    ``action``: ``delete``, ``restart`` or None. ``due_ns``: when it happens (None: nothing
    scheduled). ``summary``: one line for humans. ``steps``: bookkeeping writes that come
    first. ``problems``: Warning Event messages (``reason: message``). ``upcoming``: the
    next occurrences of a recurring schedule (or the one-time due instant). ``inherited``:
    the values that came from the object's Namespace (``dry-run from namespace previews``).
    ``overrides``: what of its Namespace's an enforced policy acts regardless of
    (``enforced: overrides namespace team-a's catch-up never``).
    """

    action: str | None
    due_ns: int | None
    summary: str
    steps: tuple[str, ...] = ()
    problems: tuple[str, ...] = ()
    upcoming: tuple[int, ...] = field(default=())
    dry_run: bool = False
    inherited: tuple[str, ...] = ()
    #: When the Upcoming warning is posted (None: no lead time, or nothing scheduled).
    warn_at_ns: int | None = None
    overrides: tuple[str, ...] = ()
    #: A policy's deletion ``max-delete-ttl`` refuses, why in a few words ("" none): the
    #: words of the policy's ``Refused`` condition (docs/policies.md#status).
    refused: str = ""


@dataclass(frozen=True, slots=True)
class DryRunState:
    """Whether the object's actions are only recorded, and where that comes from.

    ``value`` None: an invalid value, which blocks the object until it is fixed. ``source``:
    ``--dry-run``, ``annotation``, ``namespace <name>`` or ``default``; ``text`` the value
    as written (for an invalid one).
    """

    value: bool | None
    source: str
    text: str = ""


def dry_run_state(
    annotations: Mapping[str, str],
    settings: DecisionSettings,
    defaults: NamespaceDefaults | None = None,
) -> DryRunState:
    """The dry-run in force for the object: ``--dry-run`` > its annotation > its Namespace."""
    if settings.dry_run:
        return DryRunState(True, "--dry-run")
    if keys.DRY_RUN in annotations:
        value = annotations[keys.DRY_RUN]
        return DryRunState(go_parse_bool(value), "annotation", value)
    if defaults is not None and keys.DRY_RUN in defaults.values:
        value = defaults.values[keys.DRY_RUN]
        return DryRunState(defaults.dry_run, f"namespace {defaults.namespace}", value)
    return DryRunState(False, "default")


@dataclass(frozen=True, slots=True, kw_only=True)
class GuardrailView:
    """What the tools know of the controller's guardrails: ``--min-restart-interval`` and
    ``--restart-jitter`` in nanoseconds (0 = off) and, when it could be read, the latched
    circuit breaker (``breaker``; its window's count lives in the leader's memory only) and
    the command that resets it."""

    min_interval_ns: int = 0
    jitter_ns: int = 0
    breaker: BreakerFacts | None = None
    reset_command: str = "lifecycle-controller breaker reset"


def _apply_patch(annotations: dict[str, str], body: Mapping[str, Any]) -> None:
    """Apply a bookkeeping patch's top-level annotation changes (``None`` removes)."""
    for key, value in ((body.get("metadata") or {}).get("annotations") or {}).items():
        if value is None:
            annotations.pop(key, None)
        else:
            annotations[key] = value


def _schedule(annotations: Mapping[str, str], settings: DecisionSettings) -> Schedule | None:
    """The recurring schedule in force once no ``restart-at`` is pending, if valid."""
    try:
        if expression := annotations.get(keys.RESTART_CRON):
            zone = load_zone(
                annotations.get(keys.CRON_TIMEZONE, ""), local_zone=settings.local_zone
            )
            return CronSchedule(parse_cron(expression), zone)
        if every := annotations.get(keys.RESTART_EVERY):
            return IntervalSchedule(parse_restart_every(every))
    except (CronError, ZoneError, DurationError):
        return None
    return None


def _upcoming(
    annotations: Mapping[str, str],
    settings: DecisionSettings,
    decision: Decision,
    *,
    now_ns: int,
    count: int,
) -> tuple[int, ...]:
    """The next occurrences: the one-time due instant, or a recurring schedule's next N.

    None for an object the controller will not act on (an invalid, conflicting or
    unsupported annotation): its problem is all there is to show.
    """
    if isinstance(decision, Invalid | Idle):
        return ()
    waiting = decision.due_ns if isinstance(decision, Wait) else None
    recurring = decision.action is Action.RESTART and not annotations.get(keys.RESTART_AT)
    schedule = _schedule(annotations, settings) if recurring else None
    if schedule is None:
        return (waiting,) if waiting is not None else ()
    if waiting is not None:
        return (waiting, *next_occurrences(schedule, waiting, count - 1))
    try:
        anchor = parse_rfc3339(annotations.get(keys.LAST_RESTART_TIMESTAMP, ""))
    except TimestampError:
        return ()
    # Due now: the restart (or skip) moves the anchor; list what follows it.
    return tuple(next_occurrences(schedule, schedule.coalesced_anchor(anchor, now_ns), count))


def _summary(decision: Decision) -> str:
    if isinstance(decision, Delete):
        return "delete now"
    if isinstance(decision, Patch) and decision.operation is Operation.RESTART:
        return "restart now"
    if isinstance(decision, DryRun):
        messages = [e.message for e in decision.events if e.type is EventType.NORMAL]
        if messages:
            return "; ".join(messages)
    if isinstance(decision, Invalid):
        if not decision.events and decision.log:  # held back by its namespace's defaults
            return "blocked: " + decision.log
        return "blocked: " + decision.reason
    return decision.log or type(decision).__name__.lower()


def explain(
    *,
    annotations: Mapping[str, str],
    facts: ObjectFacts,
    now_ns: int,
    settings: DecisionSettings,
    occurrences: int = 3,
    namespace_defaults: NamespaceDefaults | None = None,
    guardrails: GuardrailView | None = None,
    policy_inputs: Resolution | None = None,
) -> Explanation:
    """Explain what the controller would do with the object from ``now_ns`` on.

    ``namespace_defaults``: those of the object's Namespace
    (docs/annotations.md#namespace-defaults), if known. ``guardrails``: what is known of the
    controller's guardrails (the breaker may hold the action; the restart guard and jitter
    may move a restart past its due time). ``policy_inputs``: for an object a lifecycle
    policy could match, what :meth:`~..policy.in_force.PolicySet.resolve` made of its
    ``annotations``; the object is then decided as the controller decides it, by
    :func:`~..policy.decide.decide_with_policies` (whose decisions write no annotation, so
    there is no bookkeeping step), and its texts name the deciding policy; an enforced one
    takes less of the Namespace's defaults (:mod:`~lifecycle_controller.core.policy.
    enforcement`), and ``overrides`` says what it left out.
    """
    overrides: tuple[str, ...] = ()
    shown_defaults = namespace_defaults
    if policy_inputs is not None:
        primary = policy_inputs.primary
        overrides = tuple(
            f"enforced: {override.describe()}"
            for override in enforced_overrides(primary, namespace_defaults, settings)
        )
        shown_defaults = defaults_for(primary, namespace_defaults)
        annotations = policy_inputs.annotations
        if not policy_inputs.deciders and not policy_inputs.holds:
            # No policy decides or holds: decide_with_policies is decide_in_namespace on the
            # object's own annotations, and their bookkeeping (a conversion) is written as ever.
            policy_inputs = None
    current = dict(annotations)
    ledger = Ledger()
    steps: list[str] = []
    problems: list[str] = []
    decision: Decision = Idle()
    for _ in range(_MAX_STEPS):
        if policy_inputs is None:
            decision = decide_in_namespace(
                annotations=current,
                facts=facts,
                now_ns=now_ns,
                settings=settings,
                ledger=ledger,
                defaults=namespace_defaults,
            )
        else:
            decision = decide_with_policies(
                inputs=policy_inputs,
                facts=facts,
                now_ns=now_ns,
                settings=settings,
                ledger=ledger,
                defaults=namespace_defaults,
            ).decision
        ledger.apply(facts.key, decision.ledger_ops)
        for event in decision.events:
            if event.type is EventType.WARNING:
                problems.append(f"{event.reason}: {event.message}")
        if isinstance(decision, Invalid) and not decision.events and decision.log:
            problems.append(f"{decision.reason}: {decision.log}")  # held back by its namespace
        if policy_inputs is not None:
            break  # a policy's decision writes no annotation: nothing to apply
        if not (isinstance(decision, Patch) and decision.operation in _BOOKKEEPING):
            break
        steps.append(decision.log or decision.operation.value)
        _apply_patch(current, decision.body)
        ledger.apply(facts.key, decision.on_success.ledger_ops)
    due = decision.due_ns if isinstance(decision, Wait | Delete | Patch | DryRun) else None
    summary = _summary(decision)
    dry_run = (
        isinstance(decision, DryRun)
        or dry_run_state(annotations, settings, shown_defaults).value is True
    )
    if guardrails is not None and due is not None and not dry_run:
        due, summary = _guarded(decision, current, facts, now_ns, guardrails, due, summary)
    action = (
        None
        if decision.action is None or isinstance(decision, Invalid | Idle)
        else decision.action.value
    )
    return Explanation(
        action=action,
        due_ns=due,
        summary=summary,
        steps=tuple(steps),
        problems=tuple(dict.fromkeys(problems)),
        upcoming=_upcoming(current, settings, decision, now_ns=now_ns, count=occurrences),
        dry_run=dry_run,
        inherited=()
        if isinstance(decision, Invalid) and decision.events  # blocked by its own value
        else _inherited(annotations, shown_defaults, settings),
        warn_at_ns=_warn_at(
            current, facts, settings, shown_defaults, due if action else None, now_ns
        ),
        overrides=overrides,
        refused=next((cause for _, cause in cap_refusals((decision,))), ""),
    )


def _guarded(
    decision: Decision,
    annotations: Mapping[str, str],
    facts: ObjectFacts,
    now_ns: int,
    view: GuardrailView,
    due_ns: int,
    summary: str,
) -> tuple[int, str]:
    """The action's due time and summary after the guardrails, decided as the controller
    decides them (:func:`lifecycle_controller.core.decision.guardrails.check`) at the moment the
    action falls due: the open circuit breaker holds it, the restart guard and the jitter
    move a restart. Only an action that would be written (not a dry run) is guarded; the
    last restart is read from the object's own state."""
    write = _write_at_due(decision, facts, due_ns)
    if write is None:
        return due_ns, summary
    at = max(due_ns, now_ns)
    last = last_restart_ns((annotations.get(keys.LAST_RESTART_TIMESTAMP), facts.restart_marker))
    hold = check(
        write,
        GuardrailFacts(
            now_ns=at,
            uid=facts.uid,
            breaker=view.breaker,
            last_restart_ns=last,
            min_restart_interval_ns=view.min_interval_ns,
            restart_jitter_ns=view.jitter_ns,
        ),
    )
    if hold is None:
        return due_ns, summary
    if isinstance(decision, Patch | Delete):
        summary = f"{decision.action.value if decision.action else 'action'} due now"
    if hold.reason is HoldReason.BREAKER_OPEN and view.breaker is not None:
        return due_ns, (
            f"{summary}; held by the circuit breaker (open since {view.breaker.tripped_at}; "
            f"`{view.reset_command}`)"
        )
    if hold.until_ns is None:
        return due_ns, f"{summary}; {hold.log}"
    why = (
        "the minimum restart interval"
        if hold.reason is HoldReason.RESTART_GUARD
        else "its restart jitter"
    )
    return hold.until_ns, f"{summary}; waits for {why} until {format_rfc3339_nano(hold.until_ns)}"


def _write_at_due(decision: Decision, facts: ObjectFacts, due_ns: int) -> Patch | Delete | None:
    """The deletion or restart ``decision`` writes when it falls due (None: none)."""
    if isinstance(decision, Delete):
        return decision
    if isinstance(decision, Patch):
        return decision if decision.operation is Operation.RESTART else None
    if isinstance(decision, Wait) and decision.action is Action.RESTART:
        return Patch(operation=Operation.RESTART, action=Action.RESTART, due_ns=due_ns)
    if isinstance(decision, Wait) and decision.action is Action.DELETE:
        return Delete(
            uid=facts.uid,
            resource_version=facts.resource_version,
            action=Action.DELETE,
            due_ns=due_ns,
            failure=DELETION_FAILURE,
        )
    return None


def _warn_at(
    annotations: Mapping[str, str],
    facts: ObjectFacts,
    settings: DecisionSettings,
    defaults: NamespaceDefaults | None,
    due_ns: int | None,
    now_ns: int,
) -> int | None:
    """When the Upcoming warning of the action due at ``due_ns`` is posted, if it is ahead."""
    if due_ns is None or due_ns <= now_ns:
        return None
    if defaults is not None:
        settings = resolve_inputs(annotations, defaults, settings).settings
    return parse_lead_time(annotations, settings.warn_before_ns, facts.uid).warn_at(due_ns)


def _inherited(
    annotations: Mapping[str, str],
    defaults: NamespaceDefaults | None,
    settings: DecisionSettings,
) -> tuple[str, ...]:
    """``<key>: <value> (from namespace <name>)`` for each value the object takes from its
    Namespace."""
    if defaults is None:
        return ()
    sources = resolve_inputs(annotations, defaults, settings).sources
    return tuple(
        f"{key.removeprefix(keys.PREFIX)}: {defaults.values[key]} "
        f"(from namespace {defaults.namespace})"
        for key in keys.NAMESPACE_DEFAULT_KEYS
        if sources.get(key) is NamespaceSource.NAMESPACE and key in defaults.values
    )
