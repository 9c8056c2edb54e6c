"""``policies`` and ``policies try``, for both front doors (``lifecycle-controller`` and the
kubectl plugin); the work is in :mod:`~lifecycle_controller.tools.policies`.

``policies`` follows the live commands' namespace rules: every namespace unless ``-n`` for
``lifecycle-controller``, the context's namespace unless ``-A`` for the plugin (cluster
policies are always listed: they cover every namespace). ``policies try`` writes nothing and
exits 1 when a tried policy is invalid (its problems are printed), like ``plan``.
"""

from __future__ import annotations

import asyncio
import sys
from collections.abc import Mapping
from typing import Any

import click

from lifecycle_controller.tools.click_shell import apply_flags
from lifecycle_controller.tools.commands import (
    EXIT_PROBLEMS,
    NOW_OPTION,
    namespace_options,
    now_ns_of,
)
from lifecycle_controller.tools.options import (
    CONTROLLER_FLAGS,
    ControllerView,
    OutputOption,
    cluster_options,
    controller_settings,
)

__all__ = ["policies_command"]


def policies_command(*, kubectl_namespaces: bool) -> click.Group:
    """The ``policies`` group; with ``kubectl_namespaces`` no ``-n`` means the context's."""

    @click.group("policies", invoke_without_command=True)
    @cluster_options
    @namespace_options
    @OutputOption
    @click.pass_context
    def policies(
        ctx: click.Context,
        kubeconfig: str,
        context: str | None,
        namespace: str | None,
        all_namespaces: bool,
        output: str,
    ) -> None:
        """The lifecycle policies in the cluster and what the controller reports of them.

        KIND, NAME, the action, the objects each matches and overlaps, its next action
        and its conditions (Ready, Invalid, Unwatched) from its status. `policies try`
        shows what a policy would do before it is applied.
        """
        if ctx.invoked_subcommand is not None:
            return
        if namespace is not None and all_namespaces:
            raise click.UsageError("-n and -A cannot be used together")
        every = all_namespaces or (namespace is None and not kubectl_namespaces)
        click.echo(
            asyncio.run(_list(kubeconfig or None, context, namespace, every, output, now_ns_of("")))
        )

    policies.add_command(_try_command())
    return policies


async def _list(
    kubeconfig: str | None,
    context: str | None,
    namespace: str | None,
    every: bool,
    output: str,
    now_ns: int,
) -> str:
    from lifecycle_controller.kube import KubeClient, KubeError
    from lifecycle_controller.tools.policies import list_policies, render_policies

    try:
        async with await KubeClient.connect(kubeconfig, context=context) as kube:
            where = None if every else (namespace or kube.default_namespace)
            rows = await list_policies(kube, now_ns=now_ns, namespace=where)
    except (KubeError, ValueError) as error:
        raise click.ClickException(str(error)) from error
    return render_policies(rows, output)


def _try_command() -> click.Command:
    @click.command("try")
    @click.option(
        "-f",
        "--filename",
        "files",
        multiple=True,
        required=True,
        help="Policy manifests (file, folder or '-'); other kinds in them are ignored.",
    )
    @cluster_options
    @click.option(
        "-n",
        "--namespace",
        default=None,
        help="The namespace of a LifecyclePolicy that names none (default: the context's).",
    )
    @NOW_OPTION
    @apply_flags(CONTROLLER_FLAGS)
    @OutputOption
    def try_(
        files: tuple[str, ...],
        kubeconfig: str,
        context: str | None,
        namespace: str | None,
        now: str,
        output: str,
        **flags: Any,
    ) -> None:
        """Every object the given policies would act on, what and when; writes nothing.

        Reads the cluster's metadata as `status` does, with the given policies in force
        beside the existing ones (one of the same kind, namespace and name is replaced),
        and decides each object they match as the controller would: windows, catch-up,
        namespace caps included. The POLICY column names who decides; an annotation or
        another policy may win. Exit status 1 when a given policy is invalid.
        """
        from lifecycle_controller.core.policy.in_force import is_policy_manifest
        from lifecycle_controller.tools.plan import ManifestError, load_manifests, read_sources

        now_ns = now_ns_of(now)
        controller = controller_settings(flags)
        try:
            documents = load_manifests(read_sources(files))
        except ManifestError as error:
            raise click.UsageError(str(error)) from error
        manifests = [doc for doc in documents if is_policy_manifest(doc)]
        if not manifests:
            raise click.UsageError("no ClusterLifecyclePolicy or LifecyclePolicy in the input")
        if len(manifests) < len(documents):
            ignored = len(documents) - len(manifests)
            click.echo(f"note: {ignored} object(s) that are not policies ignored", err=True)
        text, invalid = asyncio.run(
            _try(kubeconfig or None, context, namespace, manifests, controller, now_ns, output)
        )
        click.echo(text)
        if invalid:
            sys.exit(EXIT_PROBLEMS)

    return try_


def _in_namespace(manifest: Mapping[str, Any], namespace: str) -> Mapping[str, Any]:
    """A LifecyclePolicy without a namespace goes to ``namespace``, as ``kubectl apply``."""
    metadata = manifest.get("metadata")
    metadata = dict(metadata) if isinstance(metadata, Mapping) else {}
    if manifest.get("kind") != "LifecyclePolicy" or metadata.get("namespace"):
        return manifest
    return {**manifest, "metadata": {**metadata, "namespace": namespace}}


async def _try(
    kubeconfig: str | None,
    context: str | None,
    namespace: str | None,
    manifests: list[Mapping[str, Any]],
    controller: ControllerView,
    now_ns: int,
    output: str,
) -> tuple[str, bool]:
    """The text to print, and whether a tried policy is invalid."""
    from lifecycle_controller.kube import KubeClient, KubeError
    from lifecycle_controller.tools.live import guardrails_of
    from lifecycle_controller.tools.plan import invalid_policy_rows
    from lifecycle_controller.tools.policies import render_try, try_policies
    from lifecycle_controller.tools.policy_view import policy_docs
    from lifecycle_controller.tools.report import render

    try:
        async with await KubeClient.connect(kubeconfig, context=context) as kube:
            where = namespace or kube.default_namespace
            placed = [_in_namespace(manifest, where) for manifest in manifests]
            invalid = invalid_policy_rows(policy_docs(placed, now_ns=now_ns))
            if invalid:
                return render(invalid, output, policies=True), True  # type: ignore[arg-type]
            report = await try_policies(
                kube,
                placed,
                scope=controller.scope,
                settings=controller.decision,
                now_ns=now_ns,
                guardrails=await guardrails_of(kube, controller),
                default_limit=controller.default_limit,
            )
    except KubeError as error:
        raise click.ClickException(str(error)) from error
    for problem in report.unreadable:
        click.echo(f"warning: could not list {problem}", err=True)
    return render_try(report, output), False
