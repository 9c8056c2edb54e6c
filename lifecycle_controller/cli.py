"""Command-line entry point: the ``lifecycle-controller`` click group.

Each sub-command is a thin shell that turns flags into typed settings and hands them to the
module that does the work; no behaviour lives here.
"""

from __future__ import annotations

import click

from lifecycle_controller import __version__


@click.group(context_settings={"help_option_names": ["-h", "--help"], "max_content_width": 100})
def main() -> None:
    """Carry out lifecycle.cezary.dev annotations: timed deletes and workload restarts."""


@main.command()
def version() -> None:
    """Print the version of lifecycle-controller."""
    click.echo(f"lifecycle-controller {__version__}")


@main.command()
@click.option(
    "--duration",
    type=click.FloatRange(min=0),
    default=None,
    help="Stop after this many seconds (default: run until Ctrl-C).",
)
def demo(duration: float | None) -> None:
    """Start a local control plane (etcd, kube-apiserver, kube-controller-manager)."""
    from lifecycle_controller.demo import run_demo

    run_demo(duration=duration, echo=click.echo)
