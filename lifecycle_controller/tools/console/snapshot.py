"""One look at the cluster for the console: ``status``'s rows, the policies, the last actions.

:func:`collect_snapshot` is ``status -A`` (:func:`~lifecycle_controller.tools.status.
collect_status`, the same listing and the same decision code for every kept object) plus
what the console shows beside the rows, read in the same look: the policies with their
``status`` (``policies``' rows), the last actions (the policies' ``status.lastActions`` and
the controller's Events), the latched circuit breaker (as ``status`` reads it), the restart
guard of the flags, and the maintenance windows named by the flags, the policies and the
objects. Nothing is written; every read is one the user's own kubeconfig may make, and one
that fails is named in ``unreadable``, as ``status`` names it.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Mapping
from dataclasses import dataclass, field
from functools import partial
from typing import Any

from lifecycle_controller.core.objects import keys
from lifecycle_controller.core.objects.resources import ResourceType
from lifecycle_controller.core.policy.model import Policy
from lifecycle_controller.core.text.units import NS_PER_SECOND
from lifecycle_controller.kube import KubeClient, KubeError
from lifecycle_controller.kube.paging import list_whole
from lifecycle_controller.kube.resources import EVENTS
from lifecycle_controller.machinery.clock import Clock
from lifecycle_controller.tools.breaker import describe_breaker
from lifecycle_controller.tools.console.actions import (
    DoneAction,
    from_events,
    from_statuses,
    merged,
)
from lifecycle_controller.tools.console.timeline import Mark, marks_of
from lifecycle_controller.tools.live import latched_breaker, with_breaker
from lifecycle_controller.tools.options import ControllerView
from lifecycle_controller.tools.policies import PolicyRow, policy_rows
from lifecycle_controller.tools.policy_live import RestartMarkers
from lifecycle_controller.tools.report import Row
from lifecycle_controller.tools.status import Metadata, collect_status

__all__ = ["ConsoleView", "PolicyNext", "Snapshot", "collect_snapshot", "guard_text"]


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


async def _events(kube: KubeClient, namespace: str | None) -> list[Mapping[str, Any]]:
    async def page(token: str | None) -> dict[str, Any]:
        return await kube.list_objects(EVENTS, namespace=namespace, continue_token=token)

    items, _ = await list_whole(partial(page))
    return items


async def collect_snapshot(
    kube: KubeClient, view: ConsoleView, *, clock: Clock, markers: RestartMarkers
) -> Snapshot:
    """See the module docstring; ``markers`` are kept between looks (as ``status -w``)."""
    controller = view.controller
    state, where = await latched_breaker(kube, controller)
    windows: Counter[str] = Counter()

    def seen(resource: ResourceType, metadata: Metadata, row: Row) -> None:
        value = (metadata.get("annotations") or {}).get(keys.MAINTENANCE_WINDOW)
        if isinstance(value, str) and value.strip():
            windows[value.strip()] += 1

    report = await collect_status(
        kube,
        scope=controller.scope,
        clock=clock,
        settings=controller.decision,
        namespace=view.namespace,
        guardrails=with_breaker(controller.guardrails, state),
        markers=markers,
        occurrences=view.occurrences,
        seen=seen,
    )
    unreadable = list(report.unreadable)
    try:
        found = from_events(await _events(kube, view.namespace))
    except KubeError as error:
        unreadable.append(f"events (the last actions show the policies' own only): {error}")
        found = []
    statuses = {str(ref): status for ref, status in report.docs.statuses.items()}
    rows = tuple(report.rows)
    named = _window_sources(report.docs.policies.valid, windows, controller)
    return Snapshot(
        collected_ns=clock.now_ns(),
        rows=rows,
        marks=tuple(marks_of(rows)),
        policies=tuple(policy_rows(report.docs, view.namespace)),
        policy_next=_policy_next(rows),
        actions=tuple(merged(from_statuses(statuses), found)),
        windows=named,
        breaker="" if state is None else describe_breaker(state, where),
        breaker_open=state is not None and state.open,
        guard=guard_text(controller),
        unreadable=tuple(unreadable),
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
