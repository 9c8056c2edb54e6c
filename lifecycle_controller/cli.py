"""Command-line entry point: the ``lifecycle-controller`` click group.

Each sub-command is a thin shell that turns flags into typed settings and hands them to the
module that does the work; no behaviour lives here. The ``run`` options are made from the flag
table (``config/flags.py``: name, default, help, kind). Every ``run`` flag can also be given as
an environment variable ``LIFECYCLE_<FLAG>`` (``--watch-resource`` → ``LIFECYCLE_WATCH_RESOURCE``;
lists are comma-separated). Boolean flags follow Go's syntax: ``--dry-run`` or
``--dry-run=false``. Invalid configuration exits 1 with one line saying what is wrong.
The operator tools (``plan``, ``status``, ``explain``, ``breaker``, ``policies``,
``console``) are imported only when one is called
(:class:`~lifecycle_controller.tools.click_shell.LazyGroup`), so a controller's start does not
load them.
"""

from __future__ import annotations

import gc
import sys
from typing import Any

import click

from lifecycle_controller import __version__
from lifecycle_controller.config import RUN_FLAGS as RUN_FLAGS
from lifecycle_controller.config import Flag as Flag
from lifecycle_controller.tools.click_shell import LazyGroup, apply_flags, invoke


def _plan() -> click.Command:
    from lifecycle_controller.tools.commands import plan_command

    return plan_command


def _status() -> click.Command:
    from lifecycle_controller.tools.commands import status_command

    return status_command(kubectl_namespaces=False)


def _explain() -> click.Command:
    from lifecycle_controller.tools.commands import explain_command

    return explain_command


def _breaker() -> click.Command:
    from lifecycle_controller.tools.breaker import breaker_command

    return breaker_command


def _console() -> click.Command:
    from lifecycle_controller.tools.console.command import console_command

    return console_command(kubectl_namespaces=False)


def _policies() -> click.Command:
    from lifecycle_controller.tools.policy_commands import policies_command

    return policies_command(kubectl_namespaces=False)


#: The operator tools, imported only when one is asked for: ``run`` starts without them.
TOOLS = {
    "plan": _plan,
    "status": _status,
    "explain": _explain,
    "breaker": _breaker,
    "policies": _policies,
    "console": _console,
}


@click.group(
    cls=LazyGroup,
    lazy=TOOLS,
    context_settings={"help_option_names": ["-h", "--help"], "max_content_width": 100},
)
def cli() -> None:
    """Carry out lifecycle.cezary.dev annotations: timed deletes and workload restarts."""


@cli.command()
def version() -> None:
    """Print the version of lifecycle-controller."""
    click.echo(f"lifecycle-controller {__version__}")


@cli.command()
@apply_flags(RUN_FLAGS)
def run(**values: Any) -> None:
    """Run the controller (connects to the cluster from --kubeconfig, KUBECONFIG or in-cluster)."""
    from lifecycle_controller import config

    try:
        settings = config.build_settings(values)
    except config.ConfigError as error:
        raise click.UsageError(str(error)) from error
    # What the controller imports lives as long as the process: no collection scans it while
    # it loads; run_controller freezes it and turns the collector back on.
    gc.disable()
    from lifecycle_controller.app import run_controller

    sys.exit(run_controller(settings))


@cli.command()
@click.option(
    "--duration",
    type=click.FloatRange(min=0),
    default=None,
    help="Stop after this many seconds (default: run until Ctrl-C).",
)
@click.option(
    "--nodes",
    type=click.IntRange(min=0, max=50),
    default=3,
    show_default=True,
    help="Fake Nodes (kube-scheduler + kwok) on which the samples' Pods run; 0: none, Pods "
    "stay Pending.",
)
@click.option(
    "--console",
    "console",
    is_flag=True,
    help="Also open the read-only web console on the demo's cluster (lifecycle-controller "
    "console).",
)
@click.option(
    "--no-browser", is_flag=True, help="With --console: print its URL, do not open a browser."
)
def demo(duration: float | None, nodes: int, console: bool, no_browser: bool) -> None:
    """Start a local control plane and show the controller deleting and restarting samples."""
    from lifecycle_controller.tools.demo import run_demo

    run_demo(
        duration=duration, echo=click.echo, nodes=nodes, console=console, browser=not no_browser
    )


def main(argv: list[str] | None = None) -> None:
    """Console-script entry: errors exit with one clear line.

    ``run``'s invalid configuration exits 1 (as the reference controller does); the tools'
    usage errors exit 2, so a CI job can tell "bad annotations" (``plan``: 1) from "bad call".
    """
    invoke(cli, "lifecycle-controller", sys.argv[1:] if argv is None else argv, exit_1_for="run")
