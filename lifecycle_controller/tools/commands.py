"""The operator commands, ``plan``, ``status`` and ``explain``, for both front doors.

``lifecycle-controller`` (cli.py) and the kubectl plugin ``kubectl-lifecycle``
(:mod:`~lifecycle_controller.tools.kubectl_plugin`) serve the same commands; only the
namespace default of the live ones differs: ``lifecycle-controller status`` looks at every
namespace unless ``-n`` is given, while the plugin follows kubectl (the context's namespace,
``-A`` for all). Exit statuses: 0 clean, 1 ``plan`` found problems or a live command
failed, 2 usage errors.
"""

from __future__ import annotations

import asyncio
import sys
from typing import Any

import click

from lifecycle_controller.tools.click_shell import apply_flags
from lifecycle_controller.tools.options import (
    CONTROLLER_FLAGS,
    OutputOption,
    cluster_options,
    controller_settings,
)

__all__ = [
    "EXIT_PROBLEMS",
    "NOW_OPTION",
    "explain_command",
    "namespace_options",
    "now_ns_of",
    "plan_command",
    "status_command",
]

#: ``plan`` found objects with problems.
EXIT_PROBLEMS = 1

NOW_OPTION = click.option(
    "--now", default="", help="Evaluate at this RFC3339 time instead of the clock."
)
_OCCURRENCES = click.option(
    "--occurrences",
    type=click.IntRange(min=1, max=100),
    default=3,
    show_default=True,
    help="How many upcoming occurrences of a recurring schedule to list.",
)


def now_ns_of(now: str) -> int:
    """``--now`` in nanoseconds (the clock's time when empty); a usage error if malformed."""
    from lifecycle_controller.core.text.timestamps import TimestampError, parse_rfc3339
    from lifecycle_controller.machinery.clock import RealClock

    try:
        return parse_rfc3339(now) if now else RealClock().now_ns()
    except TimestampError as error:
        raise click.UsageError(f"--now: {error}") from error


@click.command("plan")
@click.option(
    "-f",
    "--filename",
    "files",
    multiple=True,
    required=True,
    help="Manifest file or folder (read recursively; YAML or JSON, several documents allowed); "
    "'-' reads stdin. Repeatable.",
)
@NOW_OPTION
@_OCCURRENCES
@apply_flags(CONTROLLER_FLAGS)
@OutputOption
def plan_command(
    files: tuple[str, ...],
    now: str,
    occurrences: int,
    output: str,
    **flags: Any,
) -> None:
    """Explain offline what the controller would do with manifests, and when.

    Also a linter: exit status 1 when any object has a problem (an invalid value,
    conflicting annotations, a restart on an unsupported kind, a TTL over
    --max-delete-ttl, an unknown lifecycle key) or a lifecycle policy among the manifests
    is invalid, 2 for usage errors, 0 otherwise. Policies among the manifests are applied
    to the other objects as the controller applies them (a POLICY column).
    The controller flags (--dry-run, --maintenance-window, ...) say which controller to
    judge by: the same flags as ``run``.
    """
    from lifecycle_controller.tools.plan import (
        ManifestError,
        has_problems,
        load_manifests,
        plan_report,
        read_sources,
    )
    from lifecycle_controller.tools.report import render

    now_ns = now_ns_of(now)
    controller = controller_settings(flags)
    try:
        objects = load_manifests(read_sources(files))
    except ManifestError as error:
        raise click.UsageError(str(error)) from error
    report = plan_report(objects, now_ns=now_ns, controller=controller, occurrences=occurrences)
    click.echo(render(report.rows, output, policies=report.policies))  # type: ignore[arg-type]
    if has_problems(report.rows):
        sys.exit(EXIT_PROBLEMS)


def namespace_options(function: Any) -> Any:
    """``-n/--namespace`` and ``-A/--all-namespaces``."""
    function = click.option(
        "-A", "--all-namespaces", is_flag=True, help="Every namespace (cluster-scoped too)."
    )(function)
    return click.option("-n", "--namespace", default=None, help="Only this namespace.")(function)


def status_command(*, kubectl_namespaces: bool) -> click.Command:
    """``status``; with ``kubectl_namespaces`` no ``-n`` means the context's namespace."""

    @click.command("status")
    @cluster_options
    @namespace_options
    @click.option(
        "-w", "--watch", is_flag=True, help="Follow the cluster (list, then watch) and redraw."
    )
    @click.option(
        "--interval",
        type=click.FloatRange(min=0.2),
        default=2.0,
        show_default=True,
        help=(
            "With --watch (which follows changes with watches): seconds between in-memory "
            "re-judgements of the actions that fell due."
        ),
    )
    @apply_flags(CONTROLLER_FLAGS)
    @OutputOption
    def status(
        kubeconfig: str,
        context: str | None,
        namespace: str | None,
        all_namespaces: bool,
        watch: bool,
        interval: float,
        output: str,
        **flags: Any,
    ) -> None:
        """Every object with lifecycle annotations, or that a lifecycle policy decides, and
        its next action (a POLICY column names the policy when the cluster has any)."""
        from lifecycle_controller.tools.live import StatusView, watch_status

        if namespace is not None and all_namespaces:
            raise click.UsageError("-n and -A cannot be used together")
        view = StatusView(
            kubeconfig=kubeconfig or None,
            context=context,
            namespace=namespace,
            all_namespaces=all_namespaces or (namespace is None and not kubectl_namespaces),
            controller=controller_settings(flags),
            output=output,
        )
        try:
            asyncio.run(watch_status(view, interval=interval, once=not watch, echo=click.echo))
        except KeyboardInterrupt:
            return

    return status


@click.command("explain")
@click.argument("target", metavar="KIND/NAME")
@cluster_options
@click.option("-n", "--namespace", default=None, help="The object's namespace.")
@NOW_OPTION
@_OCCURRENCES
@apply_flags(CONTROLLER_FLAGS)
@OutputOption
def explain_command(
    target: str,
    kubeconfig: str,
    context: str | None,
    namespace: str | None,
    now: str,
    occurrences: int,
    output: str,
    **flags: Any,
) -> None:
    """Everything the controller knows and would do about one object, and why.

    KIND/NAME as kubectl takes it: deployment/web, deployments.apps/web, cm/...
    The controller flags (--watch-resource, --dry-run, ...) say which controller to judge
    by: the same flags as ``run``.
    """
    from lifecycle_controller.tools.explain import ExplainError, split_target
    from lifecycle_controller.tools.live import explain_live

    try:
        split_target(target)
    except ExplainError as error:
        raise click.BadParameter(str(error), param_hint="KIND/NAME") from error
    now_ns = now_ns_of(now)
    controller = controller_settings(flags)
    text = asyncio.run(
        explain_live(
            target,
            kubeconfig=kubeconfig or None,
            context=context,
            namespace=namespace,
            controller=controller,
            now_ns=now_ns,
            occurrences=occurrences,
            output=output,
        )
    )
    click.echo(text)
