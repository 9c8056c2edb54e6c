"""What the controller would do with an object, and when: the engine of ``plan`` and ``status``.

:func:`explain` runs :func:`decide` the way the controller would over the object's near
future: bookkeeping writes that come first (a ``-after`` converted to ``-at``, a redundant
``-after`` dropped, a recurring anchor initialized) are applied to a copy of the annotations
and the object is decided again, until a real action, a wait, or a problem remains. For a
recurring schedule it also lists the next occurrences, so the DST policy is visible.

The ledger starts empty, i.e. as a controller that sees the object for the first time now.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from lifecycle_controller.core import keys
from lifecycle_controller.core.catchup import Ledger
from lifecycle_controller.core.cron import CronError, ZoneError, load_zone, parse_cron
from lifecycle_controller.core.decision import (
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
from lifecycle_controller.core.durations import DurationError, parse_restart_every
from lifecycle_controller.core.events import EventType
from lifecycle_controller.core.namespace_defaults import (
    NamespaceDefaults,
    NamespaceSource,
    decide_in_namespace,
    resolve_inputs,
)
from lifecycle_controller.core.schedules import (
    CronSchedule,
    IntervalSchedule,
    Schedule,
    next_occurrences,
)
from lifecycle_controller.core.timestamps import TimestampError, parse_rfc3339

__all__ = ["Explanation", "explain"]

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
    """

    action: str | None
    due_ns: int | None
    summary: str
    steps: tuple[str, ...] = ()
    problems: tuple[str, ...] = ()
    upcoming: tuple[int, ...] = field(default=())
    dry_run: bool = False
    inherited: tuple[str, ...] = ()


def _apply_patch(annotations: dict[str, str], body: Mapping[str, Any]) -> None:
    """Apply a bookkeeping patch's top-level annotation changes (``None`` removes)."""
    for key, value in body["metadata"]["annotations"].items():
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
) -> Explanation:
    """Explain what the controller would do with the object from ``now_ns`` on.

    ``namespace_defaults``: those of the object's Namespace
    (docs/annotations.md#namespace-defaults), if known.
    """
    current = dict(annotations)
    ledger = Ledger()
    steps: list[str] = []
    problems: list[str] = []
    decision: Decision = Idle()
    for _ in range(_MAX_STEPS):
        decision = decide_in_namespace(
            annotations=current,
            facts=facts,
            now_ns=now_ns,
            settings=settings,
            ledger=ledger,
            defaults=namespace_defaults,
        )
        ledger.apply(facts.key, decision.ledger_ops)
        for event in decision.events:
            if event.type is EventType.WARNING:
                problems.append(f"{event.reason}: {event.message}")
        if isinstance(decision, Invalid) and not decision.events and decision.log:
            problems.append(f"{decision.reason}: {decision.log}")  # held back by its namespace
        if not (isinstance(decision, Patch) and decision.operation in _BOOKKEEPING):
            break
        steps.append(decision.log or decision.operation.value)
        _apply_patch(current, decision.body)
        ledger.apply(facts.key, decision.on_success.ledger_ops)
    due = decision.due_ns if isinstance(decision, Wait | Delete | Patch | DryRun) else None
    return Explanation(
        action=None
        if decision.action is None or isinstance(decision, Invalid | Idle)
        else decision.action.value,
        due_ns=due,
        summary=_summary(decision),
        steps=tuple(steps),
        problems=tuple(dict.fromkeys(problems)),
        upcoming=_upcoming(current, settings, decision, now_ns=now_ns, count=occurrences),
        dry_run=isinstance(decision, DryRun),
        inherited=_inherited(annotations, namespace_defaults, settings),
    )


def _inherited(
    annotations: Mapping[str, str],
    defaults: NamespaceDefaults | None,
    settings: DecisionSettings,
) -> tuple[str, ...]:
    """``<key> from namespace <name>`` for each value the object takes from its Namespace."""
    if defaults is None:
        return ()
    sources = resolve_inputs(annotations, defaults, settings).sources
    return tuple(
        f"{key.removeprefix(keys.PREFIX)} from namespace {defaults.namespace}"
        for key in keys.NAMESPACE_DEFAULT_KEYS
        if sources.get(key) is NamespaceSource.NAMESPACE and key in defaults.values
    )
