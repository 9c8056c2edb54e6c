"""Click options shared by the commands: flags from the ``run`` table, output, cluster access.

The ``run`` options are made from the flag table (``config/flags.py``), so a tool that
should judge an object "as a controller started with these flags" (``explain``, ``status``,
``plan``) accepts exactly the flags marked ``affects_decision``, spelled and defaulted the
same way, with the same ``LIFECYCLE_<FLAG>`` environment variables; :func:`controller_view`
is the one place that turns them into what the tools decide with.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any, TypeVar

import click

from lifecycle_controller.config import RUN_FLAGS, Flag, build_settings
from lifecycle_controller.config.parsing import ConfigError
from lifecycle_controller.config.settings import Settings
from lifecycle_controller.core.decision.outcomes import DecisionSettings
from lifecycle_controller.core.objects.scope import ScopeConfig
from lifecycle_controller.core.policy.limit import PolicyLimit
from lifecycle_controller.core.policy.match import (
    DEFAULT_PROTECTION,
    SYSTEM_NAMESPACES,
    Protection,
)
from lifecycle_controller.core.text.durations import NS_PER_SECOND
from lifecycle_controller.core.tooling.plan import GuardrailView
from lifecycle_controller.kube.breaker_store import breaker_name

__all__ = [
    "CONTROLLER_FLAGS",
    "ControllerView",
    "OutputOption",
    "cluster_options",
    "controller_settings",
    "controller_view",
    "reset_command",
]

F = TypeVar("F", bound=Callable[..., Any])

#: The ``run`` flags that change what the controller would do with an object.
CONTROLLER_FLAGS: tuple[Flag, ...] = tuple(flag for flag in RUN_FLAGS if flag.affects_decision)


@dataclass(frozen=True)
class ControllerView:
    """What the tools decide with: the controller's settings that shape one object's fate.

    ``breaker_lease`` and ``breaker_namespace`` say where the circuit breaker is latched
    (beside the Lease; None: the context's namespace).
    """

    scope: ScopeConfig
    decision: DecisionSettings
    guardrails: GuardrailView
    breaker_lease: str
    breaker_namespace: str | None
    #: What no policy reaches (docs/policies.md#safety-rules); the controller's own namespace
    #: is known only when ``--leader-election-namespace`` names it.
    protection: Protection = DEFAULT_PROTECTION
    #: ``--policy-default-limit``: the limit of a policy that sets none (None: none).
    default_limit: PolicyLimit | None = None


def reset_command(lease: str, namespace: str | None) -> str:
    """The ``breaker reset`` command that finds this controller's breaker."""
    where = f" --leader-election-namespace {namespace}" if namespace else ""
    return f"lifecycle-controller breaker reset --leader-election-id {lease}{where}"


def controller_view(settings: Settings) -> ControllerView:
    """The parts of ``settings`` the controller's decision for one object depends on."""
    guardrails = settings.guardrails
    return ControllerView(
        scope=settings.scope,
        decision=settings.actions.decision_settings(),
        guardrails=GuardrailView(
            min_interval_ns=round(guardrails.min_restart_interval * NS_PER_SECOND),
            jitter_ns=round(guardrails.restart_jitter * NS_PER_SECOND),
            reset_command=reset_command(
                settings.leader_election.name, settings.leader_election.namespace
            ),
        ),
        breaker_lease=settings.leader_election.name,
        breaker_namespace=settings.leader_election.namespace,
        protection=Protection(
            namespaces=SYSTEM_NAMESPACES | frozenset(settings.actions.policy_protected_namespaces),
            own_namespace=settings.leader_election.namespace,
            lease=settings.leader_election.name,
            breaker=breaker_name(settings.leader_election.name),
        ),
        default_limit=settings.actions.policy_default_limit,
    )


def controller_settings(values: Mapping[str, Any]) -> ControllerView:
    """The view of the CONTROLLER_FLAGS among ``values`` (others at their defaults)."""
    dests = {flag.dest for flag in CONTROLLER_FLAGS}
    try:
        settings = build_settings({k: v for k, v in values.items() if k in dests})
    except ConfigError as error:
        raise click.UsageError(str(error)) from error
    return controller_view(settings)


OutputOption = click.option(
    "-o",
    "--output",
    type=click.Choice(["table", "json", "yaml"]),
    default="table",
    show_default=True,
    help="Output format.",
)


def cluster_options(function: F) -> F:
    """``--kubeconfig`` and ``--context``, as kubectl spells them."""
    function = click.option(
        "--context", default=None, help="The kubeconfig context to use (default: current)."
    )(function)
    return click.option(
        "--kubeconfig",
        default="",
        envvar="LIFECYCLE_KUBECONFIG",
        help="kubeconfig file (default: $KUBECONFIG, then in-cluster, then ~/.kube/config).",
    )(function)
