"""Command-line entry point: the ``lifecycle-controller`` click group.

Each sub-command is a thin shell that turns flags into typed settings and hands them to the
module that does the work; no behaviour lives here. The ``run`` options are made from the flag
table (``config/flags.py``: name, default, help, kind). Every ``run`` flag can also be given as
an environment variable ``LIFECYCLE_<FLAG>`` (``--watch-resource`` → ``LIFECYCLE_WATCH_RESOURCE``;
lists are comma-separated). Boolean flags follow Go's syntax: ``--dry-run`` or
``--dry-run=false``. Invalid configuration exits 1 with one line saying what is wrong.
"""

from __future__ import annotations

import sys
from collections.abc import Callable
from typing import Any, TypeVar

import click

from lifecycle_controller import __version__
from lifecycle_controller.config import RUN_FLAGS as RUN_FLAGS
from lifecycle_controller.config import Flag as Flag

F = TypeVar("F", bound=Callable[..., Any])
#: ``plan`` found objects with problems.
EXIT_PROBLEMS = 1
#: A tool was called wrongly (``run`` keeps 1 for every configuration error).
EXIT_USAGE = 2


class _CommaList(click.ParamType[str]):
    """A string option whose environment variable holds a comma-separated list."""

    name = "list"
    envvar_list_splitter = ","

    def convert(self, value: Any, param: click.Parameter | None, ctx: click.Context | None) -> str:
        return str(value)


def _apply_flags(flags: tuple[Flag, ...]) -> Callable[[F], F]:
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


@click.group(context_settings={"help_option_names": ["-h", "--help"], "max_content_width": 100})
def cli() -> None:
    """Carry out lifecycle.cezary.dev annotations: timed deletes and workload restarts."""


@cli.command()
def version() -> None:
    """Print the version of lifecycle-controller."""
    click.echo(f"lifecycle-controller {__version__}")


@cli.command()
@_apply_flags(RUN_FLAGS)
def run(**values: Any) -> None:
    """Run the controller (connects to the cluster from --kubeconfig, KUBECONFIG or in-cluster)."""
    from lifecycle_controller import config

    try:
        settings = config.build_settings(values)
    except config.ConfigError as error:
        raise click.UsageError(str(error)) from error
    from lifecycle_controller.app import run_controller

    sys.exit(run_controller(settings))


_OUTPUT = click.option(
    "-o",
    "--output",
    type=click.Choice(["table", "json", "yaml"]),
    default="table",
    show_default=True,
    help="Output format.",
)


@cli.command()
@click.option(
    "-f",
    "--filename",
    "files",
    multiple=True,
    required=True,
    help="Manifest file or folder (read recursively; YAML or JSON, several documents allowed); "
    "'-' reads stdin. Repeatable.",
)
@click.option("--now", default="", help="Evaluate at this RFC3339 time instead of the clock.")
@click.option(
    "--occurrences",
    type=click.IntRange(min=1, max=100),
    default=3,
    show_default=True,
    help="How many upcoming occurrences of a recurring schedule to list.",
)
@click.option("--dry-run", is_flag=True, help="Explain as a controller started with --dry-run.")
@click.option(
    "--max-delete-ttl",
    default="",
    help="Report delete TTLs longer than this (e.g. 30d), as run's flag of that name.",
)
@_OUTPUT
def plan(
    files: tuple[str, ...],
    now: str,
    occurrences: int,
    dry_run: bool,
    max_delete_ttl: str,
    output: str,
) -> None:
    """Explain offline what the controller would do with manifests, and when.

    Also a linter: exit status 1 when any object has a problem (an invalid value,
    conflicting annotations, a restart on an unsupported kind, a TTL over
    --max-delete-ttl), 2 for usage errors, 0 otherwise.
    """
    from lifecycle_controller.app import local_zone
    from lifecycle_controller.core.durations import DurationError, parse_max_delete_ttl
    from lifecycle_controller.core.timestamps import TimestampError, parse_rfc3339
    from lifecycle_controller.machinery.clock import RealClock
    from lifecycle_controller.tools.plan import (
        ManifestError,
        has_problems,
        load_manifests,
        plan_rows,
        read_sources,
    )
    from lifecycle_controller.tools.report import render

    try:
        now_ns = parse_rfc3339(now) if now else RealClock().now_ns()
    except TimestampError as error:
        raise click.UsageError(f"--now: {error}") from error
    try:
        ttl_ns = parse_max_delete_ttl(max_delete_ttl)
    except DurationError as error:
        raise click.UsageError(f"--max-delete-ttl: {error}") from error
    try:
        objects = load_manifests(read_sources(files))
    except ManifestError as error:
        raise click.UsageError(str(error)) from error
    rows = plan_rows(
        objects,
        now_ns=now_ns,
        dry_run=dry_run,
        local_zone=local_zone(),
        occurrences=occurrences,
        max_delete_ttl_ns=ttl_ns,
    )
    click.echo(render(rows, output))  # type: ignore[arg-type]
    if has_problems(rows):
        sys.exit(EXIT_PROBLEMS)


@cli.command()
@click.option("--kubeconfig", default="", envvar="LIFECYCLE_KUBECONFIG", help="kubeconfig file.")
@click.option("-n", "--namespace", default=None, help="Only this namespace.")
@click.option("--watch-resource", multiple=True, help="Resource glob to include; repeatable.")
@click.option("--ignore-resource", multiple=True, help="Resource glob to leave out; repeatable.")
@click.option(
    "--act-on-annotation-copies",
    is_flag=True,
    help="Also list objects whose annotations their owner copied (as run's flag of that name).",
)
@_OUTPUT
def status(
    kubeconfig: str,
    namespace: str | None,
    watch_resource: tuple[str, ...],
    ignore_resource: tuple[str, ...],
    act_on_annotation_copies: bool,
    output: str,
) -> None:
    """List every object with lifecycle annotations in the cluster and its next action."""
    import asyncio

    from lifecycle_controller.app import local_zone
    from lifecycle_controller.core import DecisionSettings
    from lifecycle_controller.core.scope import ScopeConfig
    from lifecycle_controller.kube import KubeClient, KubeError
    from lifecycle_controller.machinery.clock import RealClock
    from lifecycle_controller.tools.report import render
    from lifecycle_controller.tools.status import StatusReport, collect_status

    async def collect() -> StatusReport:
        async with await KubeClient.connect(kubeconfig or None) as kube:
            return await collect_status(
                kube,
                scope=ScopeConfig(watch_resources=watch_resource, ignore_resources=ignore_resource),
                clock=RealClock(),
                settings=DecisionSettings(
                    local_zone=local_zone(), act_on_annotation_copies=act_on_annotation_copies
                ),
                namespace=namespace,
            )

    try:
        report = asyncio.run(collect())
    except KubeError as error:
        raise click.ClickException(str(error)) from error
    click.echo(render(report.rows, output))  # type: ignore[arg-type]
    for problem in report.unreadable:
        click.echo(f"warning: could not list {problem}", err=True)


@cli.command()
@click.option(
    "--duration",
    type=click.FloatRange(min=0),
    default=None,
    help="Stop after this many seconds (default: run until Ctrl-C).",
)
def demo(duration: float | None) -> None:
    """Start a local control plane (etcd, kube-apiserver, kube-controller-manager)."""
    from lifecycle_controller.tools.demo import run_demo

    run_demo(duration=duration, echo=click.echo)


def main(argv: list[str] | None = None) -> None:
    """Console-script entry: errors exit with one clear line.

    ``run``'s invalid configuration exits 1 (as the reference controller does); the tools'
    usage errors exit 2, so a CI job can tell "bad annotations" (``plan``: 1) from "bad call".
    """
    args = sys.argv[1:] if argv is None else argv
    try:
        cli.main(args=args, prog_name="lifecycle-controller", standalone_mode=False)
    except click.exceptions.Abort:
        sys.exit(130)
    except click.ClickException as error:
        click.echo(f"lifecycle-controller: {error.format_message()}", err=True)
        tool = bool(args) and args[0] != "run"
        sys.exit(EXIT_USAGE if tool and isinstance(error, click.UsageError) else 1)
