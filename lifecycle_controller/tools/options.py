"""Click options shared by the commands: flags from the ``run`` table, output, cluster access.

The ``run`` options are made from the flag table (``config/flags.py``), so a tool that
should judge an object "as a controller started with these flags" (``explain``, ``status``)
accepts exactly the same flags, spelled and defaulted the same way, with the same
``LIFECYCLE_<FLAG>`` environment variables.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Any, TypeVar

import click

from lifecycle_controller.config import RUN_FLAGS, Flag, build_settings
from lifecycle_controller.config.parsing import ConfigError
from lifecycle_controller.config.settings import Settings

__all__ = [
    "CONTROLLER_FLAGS",
    "OutputOption",
    "apply_flags",
    "cluster_options",
    "controller_settings",
]

F = TypeVar("F", bound=Callable[..., Any])

#: The ``run`` flags that change what the controller would do with an object.
CONTROLLER_FLAGS: tuple[Flag, ...] = tuple(
    flag
    for flag in RUN_FLAGS
    if flag.name
    in {
        "watch-resource",
        "ignore-resource",
        "watch-namespace",
        "ignore-namespace",
        "dry-run",
        "delete-catch-up",
        "restart-catch-up",
        "max-delete-ttl",
        "act-on-annotation-copies",
        # where the circuit breaker is latched (beside the Lease), for status to show it
        "leader-election-id",
        "leader-election-namespace",
    }
)


class _CommaList(click.ParamType[str]):
    """A string option whose environment variable holds a comma-separated list."""

    name = "list"
    envvar_list_splitter = ","

    def convert(self, value: Any, param: click.Parameter | None, ctx: click.Context | None) -> str:
        return str(value)


def apply_flags(flags: tuple[Flag, ...]) -> Callable[[F], F]:
    """Click options for ``flags``: lists repeatable, booleans in Go's syntax, env vars."""

    def decorate(function: F) -> F:
        for flag in reversed(flags):
            names = [f"--{flag.name}", flag.dest]
            common: dict[str, Any] = {
                "envvar": flag.envvar,
                "help": flag.help,
                "hidden": flag.hidden,
                "show_envvar": True,
            }
            if flag.kind == "list":
                option = click.option(*names, type=_CommaList(), multiple=True, **common)
            elif flag.kind == "bool":
                option = click.option(
                    *names,
                    is_flag=False,
                    flag_value="true",
                    default=flag.default,
                    show_default=True,
                    metavar="[BOOL]",
                    **common,
                )
            else:
                option = click.option(
                    *names, default=flag.default, show_default=bool(flag.default), **common
                )
            function = option(function)
        return function

    return decorate


def controller_settings(values: Mapping[str, Any]) -> Settings:
    """Settings from the CONTROLLER_FLAGS among ``values`` (others at their defaults)."""
    dests = {flag.dest for flag in CONTROLLER_FLAGS}
    try:
        return build_settings({name: value for name, value in values.items() if name in dests})
    except ConfigError as error:
        raise click.UsageError(str(error)) from error


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
