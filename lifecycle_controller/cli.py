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
