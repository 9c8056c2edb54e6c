"""``lifecycle-controller console`` (and ``kubectl lifecycle console``): the console's command.

Connects with the user's kubeconfig (nothing is installed in the cluster, nothing written),
serves the page on a loopback address, prints its URL and opens a browser unless told not
to; Ctrl-C stops it. ``demo --console`` opens the same console on the demo's cluster
(:func:`open_console`). The server itself is :mod:`.server`; this module only wires it.
"""

from __future__ import annotations

import asyncio
import contextlib
import webbrowser
from collections.abc import AsyncIterator, Callable
from typing import TYPE_CHECKING, Any

import click

from lifecycle_controller.tools.click_shell import apply_flags
from lifecycle_controller.tools.commands import namespace_options
from lifecycle_controller.tools.options import (
    CONTROLLER_FLAGS,
    ControllerView,
    cluster_options,
    controller_settings,
)

__all__ = ["DEFAULT_ADDRESS", "console_command", "open_console"]

DEFAULT_ADDRESS = "127.0.0.1:8750"

if TYPE_CHECKING:  # the server (aiohttp) is imported only when the console starts
    from lifecycle_controller.kube import KubeClient
    from lifecycle_controller.tools.console.server import Console


async def _explain(
    kube: KubeClient,
    controller: ControllerView,
    api_version: str,
    kind: str,
    namespace: str,
    name: str,
) -> str:
    """``explain``'s text for one object, judged now (as the command prints it)."""
    from lifecycle_controller.machinery.clock import RealClock
    from lifecycle_controller.tools.explain import ExplainError, explain_object, render_report
    from lifecycle_controller.tools.live import guardrails_of

    group = api_version.rpartition("/")[0]
    target = f"{kind.lower()}.{group}/{name}" if group else f"{kind.lower()}/{name}"
    try:
        report = await explain_object(
            kube,
            target,
            namespace=namespace or None,
            scope=controller.scope,
            settings=controller.decision,
            now_ns=RealClock().now_ns(),
            guardrails=await guardrails_of(kube, controller),
        )
    except ExplainError as error:
        return f"cannot explain {target}: {error}"
    return render_report(report)


@contextlib.asynccontextmanager
async def open_console(
    kube: KubeClient,
    *,
    namespace: str | None,
    controller: ControllerView,
    address: str = DEFAULT_ADDRESS,
    interval: float = 2.0,
    occurrences: int = 10,
    title: str = "",
) -> AsyncIterator[Console]:
    """A console serving ``kube``'s cluster on ``address`` while the block runs."""
    from lifecycle_controller.machinery.clock import RealClock
    from lifecycle_controller.tools.console.server import Console, parse_address
    from lifecycle_controller.tools.console.snapshot import ConsoleView

    host, port = parse_address(address)

    async def explainer(api_version: str, kind: str, where: str, name: str) -> str:
        return await _explain(kube, controller, api_version, kind, where, name)

    console = Console(
        kube,
        ConsoleView(namespace=namespace, controller=controller, occurrences=occurrences),
        clock=RealClock(),
        interval=interval,
        explainer=explainer,
        title=title,
    )
    await console.start(host, port)
    try:
        yield console
    finally:
        await console.stop()


def show(url: str, *, browser: bool, echo: Callable[[str], None]) -> None:
    """Print the console's URL and, with ``browser``, open it."""
    echo(f"console: {url}  (read-only; Ctrl-C stops it)")
    if browser and not webbrowser.open(url):
        echo("(no browser could be opened: open the URL yourself)")


async def _serve(
    *,
    kubeconfig: str | None,
    context: str | None,
    namespace: str | None,
    all_namespaces: bool,
    controller: ControllerView,
    address: str,
    interval: float,
    occurrences: int,
    browser: bool,
) -> None:
    from lifecycle_controller.kube import KubeClient, KubeError

    try:
        async with await KubeClient.connect(kubeconfig, context=context) as kube:
            where = None if all_namespaces else (namespace or kube.default_namespace)
            title = f"namespace {where}" if where else "all namespaces"
            async with open_console(
                kube,
                namespace=where,
                controller=controller,
                address=address,
                interval=interval,
                occurrences=occurrences,
                title=title,
            ) as console:
                show(console.url, browser=browser, echo=click.echo)
                await asyncio.Event().wait()
    except KubeError as error:
        raise click.ClickException(str(error)) from error
    except OSError as error:
        raise click.ClickException(f"--address {address}: {error.strerror or error}") from error


def console_command(*, kubectl_namespaces: bool) -> click.Command:
    """``console``; with ``kubectl_namespaces`` no ``-n`` means the context's namespace."""

    @click.command("console")
    @cluster_options
    @namespace_options
    @click.option(
        "--address",
        default=DEFAULT_ADDRESS,
        show_default=True,
        help="Loopback HOST:PORT to serve the console on (port 0: any free port).",
    )
    @click.option("--no-browser", is_flag=True, help="Print the URL; do not open a browser.")
    @click.option(
        "--interval",
        type=click.FloatRange(min=0.2),
        default=2.0,
        show_default=True,
        help=(
            "Seconds between in-memory re-judgements of the actions that fell due (changes "
            "are followed with watches, as status --watch)."
        ),
    )
    @click.option(
        "--occurrences",
        type=click.IntRange(min=1, max=100),
        default=10,
        show_default=True,
        help="Upcoming occurrences of a recurring schedule drawn per object.",
    )
    @apply_flags(CONTROLLER_FLAGS)
    def console(
        kubeconfig: str,
        context: str | None,
        namespace: str | None,
        all_namespaces: bool,
        address: str,
        no_browser: bool,
        interval: float,
        occurrences: int,
        **flags: Any,
    ) -> None:
        """A read-only web console on this machine: tonight's timeline, the last actions,
        every policy, following the cluster live (nothing installed, nothing written)."""
        from lifecycle_controller.tools.console.server import AddressError, parse_address

        if namespace is not None and all_namespaces:
            raise click.UsageError("-n and -A cannot be used together")
        try:
            parse_address(address)
        except AddressError as error:
            raise click.BadParameter(str(error), param_hint="--address") from error
        with contextlib.suppress(KeyboardInterrupt):
            asyncio.run(
                _serve(
                    kubeconfig=kubeconfig or None,
                    context=context,
                    namespace=namespace,
                    all_namespaces=all_namespaces or (namespace is None and not kubectl_namespaces),
                    controller=controller_settings(flags),
                    address=address,
                    interval=interval,
                    occurrences=occurrences,
                    browser=not no_browser,
                )
            )

    return console
