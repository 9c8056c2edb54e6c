"""What the console shows of the cluster: ``status``'s rows, the policies, the last actions.

:class:`Following` is ``status --watch -A`` (:class:`~lifecycle_controller.tools.live_status.
LiveStatus`: the same lists, then watches, and the same decision code for every kept object)
plus what the console shows beside the rows: the policies with their ``status``
(``policies``' rows), the last actions (the policies' ``status.lastActions`` and the
controller's Events, followed too), the latched circuit breaker (as ``status`` reads it), the
restart guard of the flags, and the maintenance windows named by the flags, the policies and
the objects. Each :meth:`Following.snapshot` is one :class:`Snapshot`, a new one only when
something it shows may have changed. Nothing is written; every read is one the user's own
kubeconfig may make, and one that fails is named in ``unreadable``, as ``status`` names it.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from lifecycle_controller.core.decision.breaker import BreakerState
from lifecycle_controller.core.objects import keys
from lifecycle_controller.core.objects.resources import ResourceType
from lifecycle_controller.core.policy.model import Policy
from lifecycle_controller.core.text.units import NS_PER_SECOND
from lifecycle_controller.kube import KubeClient
from lifecycle_controller.kube.resources import EVENTS
from lifecycle_controller.machinery.clock import Clock
from lifecycle_controller.tools.breaker import describe_breaker
from lifecycle_controller.tools.console.actions import (
    DoneAction,
    from_events,
    from_statuses,
    merged,
)
from lifecycle_controller.tools.console.timeline import Instants, Mark, marks_of
from lifecycle_controller.tools.follow import Follower, without_managed_fields
from lifecycle_controller.tools.live import latched_breaker, with_breaker
from lifecycle_controller.tools.live_status import LiveStatus
from lifecycle_controller.tools.options import ControllerView
from lifecycle_controller.tools.policies import PolicyRow, policy_rows
from lifecycle_controller.tools.report import Row
from lifecycle_controller.tools.status import Metadata

__all__ = ["ConsoleView", "Following", "PolicyNext", "Snapshot", "guard_text"]


@dataclass(frozen=True)
class ConsoleView:
    """What the console looks at: one namespace (None: all) as a controller with these
    flags would judge it; ``occurrences`` of a recurring schedule per object."""

    namespace: str | None
    controller: ControllerView
    occurrences: int = 10


@dataclass(frozen=True)
class PolicyNext:
    """What the rows say of one policy: how many objects it decides, and its next action."""

    decides: int = 0
    next_at: str = ""
    next_object: str = ""


@dataclass(frozen=True)
class Snapshot:
    """One look; ``content()`` is what a page shows (two looks equal in it are one version)."""

    collected_ns: int
    rows: tuple[Row, ...] = ()
    marks: tuple[Mark, ...] = ()
    policies: tuple[PolicyRow, ...] = ()
    policy_next: Mapping[str, PolicyNext] = field(default_factory=dict)
    actions: tuple[DoneAction, ...] = ()
    #: Each maintenance window value, and what names it (``--maintenance-window``, a policy,
    #: or how many of the objects shown).
    windows: Mapping[str, str] = field(default_factory=dict)
    breaker: str = ""
    breaker_open: bool = False
    guard: str = ""
    unreadable: tuple[str, ...] = ()

    def content(self) -> tuple[Any, ...]:
        return (
            self.rows,
            self.policies,
            self.actions,
            tuple(self.windows.items()),
            self.breaker,
            self.unreadable,
        )


def _duration(ns: int) -> str:
    seconds = ns / NS_PER_SECOND
    if seconds >= 3600 and seconds % 3600 == 0:
        return f"{seconds / 3600:g}h"
    if seconds >= 60 and seconds % 60 == 0:
        return f"{seconds / 60:g}m"
    return f"{seconds:g}s"


def guard_text(controller: ControllerView) -> str:
    """The restart guard of the flags in words ("" off)."""
    guardrails = controller.guardrails
    parts = []
    if guardrails.min_interval_ns:
        parts.append(
            f"at most one restart per workload every {_duration(guardrails.min_interval_ns)} "
            "(--min-restart-interval)"
        )
    if guardrails.jitter_ns:
        parts.append(
            f"each restart delayed by up to {_duration(guardrails.jitter_ns)} (--restart-jitter)"
        )
    return "restart guard: " + "; ".join(parts) if parts else ""


def _policy_next(rows: tuple[Row, ...]) -> dict[str, PolicyNext]:
    found: dict[str, PolicyNext] = {}
    for row in rows:
        for ref in {row.policy, *row.also_decided_by} - {""}:
            known = found.get(ref, PolicyNext())
            earlier = bool(row.next) and (not known.next_at or row.next < known.next_at)
            found[ref] = PolicyNext(
                decides=known.decides + 1,
                next_at=row.next if earlier else known.next_at,
                next_object=(
                    f"{row.action} {row.kind}/{row.namespace + '/' if row.namespace else ''}"
                    f"{row.name}"
                    if earlier
                    else known.next_object
                ),
            )
    return found


def _reported_action(item: Mapping[str, Any]) -> Mapping[str, Any] | None:
    """Keep an Event only when it reports one of the controller's actions."""
    return without_managed_fields(item) if from_events((item,)) else None


class Following:
    """The console's cluster, followed: ``status``'s rows
    (:class:`~lifecycle_controller.tools.live_status.LiveStatus`), the policies, and the
    controller's Events (a follower of their own, keeping only those that report an action);
    :meth:`snapshot` builds what the page shows, again only when something in it may have
    changed."""

    def __init__(self, kube: KubeClient, view: ConsoleView, *, clock: Clock) -> None:
        controller = view.controller
        self._kube = kube
        self._view = view
        self._clock = clock
        self.live = LiveStatus(
            kube,
            scope=controller.scope,
            settings=controller.decision,
            clock=clock,
            namespace=view.namespace,
            occurrences=view.occurrences,
        )
        self._events = Follower(
            kube,
            EVENTS,
            keep=_reported_action,
            changed=self._event_moved,
            clock=clock,
            namespace=view.namespace,
            whole=True,
        )
        self._events_moved = True
        self._last: Snapshot | None = None
        self._last_docs: object = None
        self._instants: Instants = {}

    def _event_moved(self, uid: str, item: Mapping[str, Any] | None) -> None:
        self._events_moved = True
        self.live.notify()

    async def start(self) -> None:
        """Every first list (see :meth:`LiveStatus.start`), the Events' too."""
        await self.live.start()
        self._events.start()
        await self._events.tried.wait()

    async def stop(self) -> None:
        await self._events.stop()
        await self.live.stop()

    async def wait(self, interval: float) -> None:
        await self.live.wait(interval)

    def lists(self) -> dict[str, int]:
        return {**self.live.lists(), EVENTS.key: self._events.lists}

    async def snapshot(self) -> Snapshot:
        """Judge again what may have changed; the snapshot (the previous one when nothing
        it shows can have changed)."""
        controller = self._view.controller
        state, where = await latched_breaker(self._kube, controller)
        changed = await self.live.refresh(with_breaker(controller.guardrails, state))
        breaker = "" if state is None else describe_breaker(state, where)
        unreadable = tuple(self._unreadable())
        last = self._last
        if (
            last is not None
            and not changed
            and not self._events_moved
            and self.live.docs is self._last_docs
            and (breaker, unreadable) == (last.breaker, last.unreadable)
        ):
            return last
        self._events_moved = False
        self._last_docs = self.live.docs
        self._last = self._build(state, breaker, unreadable)
        return self._last

    def _unreadable(self) -> list[str]:
        found = self.live.unreadable()
        if self._events.problem:
            found.append(
                f"events (the last actions show the policies' own only): {self._events.problem}"
            )
        return found

    def _build(
        self, state: BreakerState | None, breaker: str, unreadable: tuple[str, ...]
    ) -> Snapshot:
        controller = self._view.controller
        windows: Counter[str] = Counter()

        def seen(resource: ResourceType, metadata: Metadata, row: Row) -> None:
            value = (metadata.get("annotations") or {}).get(keys.MAINTENANCE_WINDOW)
            if isinstance(value, str) and value.strip():
                windows[value.strip()] += 1

        rows = tuple(self.live.rows(seen))
        docs = self.live.docs
        statuses = {str(ref): status for ref, status in docs.statuses.items()}
        found = from_events(self._events.items.values())
        return Snapshot(
            collected_ns=self._clock.now_ns(),
            rows=rows,
            marks=tuple(marks_of(rows, self._instants)),
            policies=tuple(policy_rows(docs, self._view.namespace)),
            policy_next=_policy_next(rows),
            actions=tuple(merged(from_statuses(statuses), found)),
            windows=_window_sources(docs.policies.valid, windows, controller),
            breaker=breaker,
            breaker_open=state is not None and state.open,
            guard=guard_text(controller),
            unreadable=unreadable,
        )


def _window_sources(
    policies: tuple[Policy, ...], objects: Counter[str], controller: ControllerView
) -> dict[str, str]:
    named: dict[str, list[str]] = {}
    default = controller.decision.maintenance_windows
    if default is not None:
        named.setdefault(default.text, []).append("--maintenance-window")
    for policy in policies:
        value = policy.lifecycle.get("maintenance-window")
        if value:
            named.setdefault(value.strip(), []).append(str(policy.ref))
    for value, count in sorted(objects.items()):
        named.setdefault(value, []).append(f"{count} object{'s' if count != 1 else ''}")
    return {value: ", ".join(sources) for value, sources in named.items()}
