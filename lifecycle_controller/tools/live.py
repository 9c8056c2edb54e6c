"""The live commands' event loop side: connect, collect, render, and redraw with ``--watch``.

``status --watch`` follows the cluster (:class:`~lifecycle_controller.tools.live_status.
LiveStatus`: one list of each type, then watches), refreshes when a watch reports a change
and every ``--interval`` seconds (for the actions that fall due), and redraws only when what
it would print has changed (on a terminal the screen is cleared first), so a quiet cluster
gives a still screen and a change shows as soon as its watch event arrives.
"""

from __future__ import annotations

import json
import sys
from collections.abc import Callable
from dataclasses import dataclass, replace

import click
import yaml

from lifecycle_controller.core.decision.breaker import BreakerState
from lifecycle_controller.core.decision.guardrails import BreakerFacts
from lifecycle_controller.core.tooling.plan import GuardrailView
from lifecycle_controller.kube import KubeClient, KubeError
from lifecycle_controller.machinery.clock import RealClock
from lifecycle_controller.tools.breaker import describe_breaker
from lifecycle_controller.tools.options import ControllerView
from lifecycle_controller.tools.policy_live import RestartMarkers
from lifecycle_controller.tools.report import render

__all__ = [
    "StatusView",
    "explain_live",
    "guardrails_of",
    "latched_breaker",
    "watch_status",
    "with_breaker",
]

_CLEAR = "\x1b[H\x1b[2J"


@dataclass(frozen=True)
class StatusView:
    """What one ``status`` call looks at and how it prints it."""

    kubeconfig: str | None
    context: str | None
    namespace: str | None
    all_namespaces: bool
    controller: ControllerView
    output: str


async def _render_status(
    kube: KubeClient, view: StatusView, guardrails: GuardrailView, markers: RestartMarkers
) -> tuple[str, list[str]]:
    from lifecycle_controller.tools.status import collect_status

    namespace = None if view.all_namespaces else (view.namespace or kube.default_namespace)
    report = await collect_status(
        kube,
        scope=view.controller.scope,
        clock=RealClock(),
        settings=view.controller.decision,
        namespace=namespace,
        guardrails=guardrails,
        markers=markers,
    )
    text = render(report.rows, view.output, policies=report.policies)  # type: ignore[arg-type]
    return text, list(report.unreadable)


async def latched_breaker(
    kube: KubeClient, controller: ControllerView
) -> tuple[BreakerState | None, str]:
    """The breaker's latched state where the flags point (None: none there, or unreadable)."""
    from lifecycle_controller.kube.breaker_store import breaker_name, find_breaker

    namespace = controller.breaker_namespace or kube.default_namespace
    name = breaker_name(controller.breaker_lease)
    try:
        state = await find_breaker(kube, namespace, name)
    except KubeError:
        state = None  # not readable by this user: the objects are shown without it
    return state, f"ConfigMap {namespace}/{name}"


def with_breaker(guardrails: GuardrailView, state: BreakerState | None) -> GuardrailView:
    """The tools' guardrails with the latched breaker: an open one holds every due action."""
    if state is None or not state.open:
        return guardrails
    facts = BreakerFacts(
        open=True,
        limit=state.actions,
        window_ns=0,
        tripped_at=state.tripped_at,
        tripped_actions=state.actions,
    )
    return replace(guardrails, breaker=facts)


async def guardrails_of(kube: KubeClient, controller: ControllerView) -> GuardrailView:
    """The controller's guardrails as the tools know them, with the latched breaker."""
    state, _ = await latched_breaker(kube, controller)
    return with_breaker(controller.guardrails, state)


async def watch_status(
    view: StatusView, *, interval: float, once: bool, echo: Callable[..., None]
) -> None:
    """Print the status once, or keep redrawing it when it changes (until interrupted)."""
    try:
        async with await KubeClient.connect(view.kubeconfig, context=view.context) as kube:
            if once:
                state, where = await latched_breaker(kube, view.controller)
                guardrails = with_breaker(view.controller.guardrails, state)
                text, unreadable = await _render_status(kube, view, guardrails, RestartMarkers())
                _show(echo, text, unreadable, _breaker_text(state, where), clear=False)
                return
            await _follow_status(kube, view, interval=interval, echo=echo)
    except KubeError as error:
        raise click.ClickException(str(error)) from error


def _breaker_text(state: BreakerState | None, where: str) -> str | None:
    return describe_breaker(state, where) if state and state.open else None


def _show(
    echo: Callable[..., None],
    text: str,
    unreadable: list[str],
    breaker: str | None,
    *,
    clear: bool,
) -> None:
    if clear:
        echo(_CLEAR, nl=False)
    echo(text)
    for problem in unreadable:
        echo(f"warning: could not list {problem}", err=True)
    if breaker is not None:
        echo(f"warning: {breaker}", err=True)


async def _follow_status(
    kube: KubeClient, view: StatusView, *, interval: float, echo: Callable[..., None]
) -> None:
    """``--watch``: list once, then follow the watches (:class:`~.live_status.LiveStatus`);
    judge again what changed, and every ``interval`` seconds what time moved on."""
    from lifecycle_controller.tools.live_status import LiveStatus

    namespace = None if view.all_namespaces else (view.namespace or kube.default_namespace)
    live = LiveStatus(
        kube,
        scope=view.controller.scope,
        settings=view.controller.decision,
        clock=RealClock(),
        namespace=namespace,
    )
    async with live:
        shown: tuple[str, list[str], str | None] | None = None
        while True:
            state, where = await latched_breaker(kube, view.controller)
            changed = await live.refresh(with_breaker(view.controller.guardrails, state))
            unreadable, breaker = live.unreadable(), _breaker_text(state, where)
            if shown is None or changed or (unreadable, breaker) != shown[1:]:
                report = live.report()
                text = render(report.rows, view.output, policies=report.policies)  # type: ignore[arg-type]
                if shown is None or (text, unreadable, breaker) != shown:
                    _show(echo, text, unreadable, breaker, clear=sys.stdout.isatty())
                    shown = (text, unreadable, breaker)
            await live.wait(interval)


async def explain_live(
    target: str,
    *,
    kubeconfig: str | None,
    context: str | None,
    namespace: str | None,
    controller: ControllerView,
    now_ns: int,
    occurrences: int,
    output: str,
) -> str:
    """Explain ``target`` (KIND/NAME) and return the text to print."""
    from lifecycle_controller.tools.explain import (
        ExplainError,
        explain_object,
        render_report,
        report_data,
    )

    try:
        async with await KubeClient.connect(kubeconfig, context=context) as kube:
            report = await explain_object(
                kube,
                target,
                namespace=namespace,
                scope=controller.scope,
                settings=controller.decision,
                now_ns=now_ns,
                occurrences=occurrences,
                guardrails=await guardrails_of(kube, controller),
            )
    except (ExplainError, KubeError) as error:
        raise click.ClickException(str(error)) from error
    if output == "json":
        return json.dumps(report_data(report), indent=2)
    if output == "yaml":
        return yaml.safe_dump(report_data(report), sort_keys=False).rstrip()
    return render_report(report)
