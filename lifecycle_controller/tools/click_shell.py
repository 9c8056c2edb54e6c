"""The click plumbing both front doors share, light enough for ``run`` to load.

``lifecycle-controller run`` is started far more often than the operator tools, and every
module it imports is paid at each start (docs/performance.md#start-up-imports). So the
pieces ``run`` needs live here, apart from the tools: the ``run`` flag table as click
options (:func:`apply_flags`), the program runner with one-line errors and exit statuses
(:func:`invoke`), and a group whose sub-commands are imported when first asked for
(:class:`LazyGroup`), which keeps ``plan``, ``status``, ``explain``, ``breaker`` and
``policies`` out of a controller's start.
"""

from __future__ import annotations

import sys
from collections.abc import Callable, Mapping, Sequence
from typing import Any, TypeVar

import click

from lifecycle_controller.config import Flag

__all__ = ["EXIT_USAGE", "LazyGroup", "apply_flags", "invoke"]

#: A tool was called wrongly.
EXIT_USAGE = 2

F = TypeVar("F", bound=Callable[..., Any])


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


class LazyGroup(click.Group):
    """A click group whose ``lazy`` sub-commands are made (and their modules imported) the
    first time one is looked up: to run it, for its help, or for the group's listing."""

    def __init__(
        self,
        *args: Any,
        lazy: Mapping[str, Callable[[], click.Command]] | None = None,
        **kwargs: Any,
    ) -> None:
        super().__init__(*args, **kwargs)
        self._lazy = dict(lazy or {})

    def list_commands(self, ctx: click.Context) -> list[str]:
        return sorted({*super().list_commands(ctx), *self._lazy})

    def get_command(self, ctx: click.Context, cmd_name: str) -> click.Command | None:
        make = self._lazy.pop(cmd_name, None)
        if make is not None:
            self.add_command(make(), cmd_name)
        return super().get_command(ctx, cmd_name)


def invoke(group: click.Group, prog: str, argv: Sequence[str], *, exit_1_for: str = "") -> None:
    """Run ``group`` as a program: one-line errors, exit 2 for usage errors.

    A usage error of the sub-command ``exit_1_for`` exits 1 instead (``run``, as the
    reference controller does for invalid configuration).
    """
    args = list(argv)
    try:
        group.main(args=args, prog_name=prog, standalone_mode=False)
    except click.exceptions.Abort:
        sys.exit(130)
    except click.ClickException as error:
        click.echo(f"{prog}: {error.format_message()}", err=True)
        usage = isinstance(error, click.UsageError) and not (args and args[0] == exit_1_for)
        sys.exit(EXIT_USAGE if usage else 1)
