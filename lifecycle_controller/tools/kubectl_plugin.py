"""``kubectl lifecycle``: the operator commands as a kubectl plugin.

kubectl runs any executable named ``kubectl-<name>`` on the PATH as ``kubectl <name>``, so
installing the package (which installs ``kubectl-lifecycle``) is all it takes. The plugin
follows kubectl's conventions: ``--kubeconfig``, ``--context``, ``-n/--namespace`` (default:
the context's namespace), ``-A/--all-namespaces`` and ``-o``.

    kubectl lifecycle status [-n NS | -A] [-w]
    kubectl lifecycle explain deployment/web -n prod
    kubectl lifecycle plan -f manifests/
    kubectl lifecycle policies [-n NS | -A]
    kubectl lifecycle policies try -f policy.yaml
    kubectl lifecycle console [-n NS | -A]
"""

from __future__ import annotations

import sys

import click

from lifecycle_controller import __version__
from lifecycle_controller.tools.click_shell import invoke
from lifecycle_controller.tools.commands import (
    explain_command,
    plan_command,
    status_command,
)
from lifecycle_controller.tools.console.command import console_command
from lifecycle_controller.tools.policy_commands import policies_command

__all__ = ["main", "plugin"]


@click.group(
    "kubectl lifecycle",
    context_settings={"help_option_names": ["-h", "--help"], "max_content_width": 100},
)
@click.version_option(__version__, "--version", prog_name="kubectl-lifecycle")
def plugin() -> None:
    """What lifecycle-controller will do in your cluster, and why (lifecycle.cezary.dev)."""


plugin.add_command(status_command(kubectl_namespaces=True))
plugin.add_command(explain_command)
plugin.add_command(plan_command)
plugin.add_command(policies_command(kubectl_namespaces=True))
plugin.add_command(console_command(kubectl_namespaces=True))


def main(argv: list[str] | None = None) -> None:
    """The ``kubectl-lifecycle`` executable."""
    invoke(plugin, "kubectl lifecycle", sys.argv[1:] if argv is None else argv)
