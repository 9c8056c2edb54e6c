"""``lifecycle-controller breaker status|reset``: read and clear the latched circuit breaker.

The breaker is latched in the ConfigMap ``<lease name>-breaker`` in the Lease's namespace
(docs/behaviour.md#circuit-breaker); these commands take the flags ``run`` uses to find the
Lease (``--kubeconfig``, ``--leader-election-namespace``, ``--leader-election-id``, and
their ``LIFECYCLE_*`` environment variables). ``reset`` closes the breaker; the controller
sees it within seconds and every action it held runs (their catch-up policy is evaluated
then), outside the window; ``status`` shows how many actions are held and names the first.
Exit status 1 when the cluster cannot be read or written, and when no breaker state exists
where the flags point (a mistyped ``--leader-election-id``, or a controller whose breaker
has never been written): ``reset`` then creates nothing.
"""

from __future__ import annotations

import asyncio
import json
from collections.abc import Awaitable, Callable

import click

from lifecycle_controller.config import RUN_FLAGS
from lifecycle_controller.core.decision.breaker import BreakerState
from lifecycle_controller.core.text.timestamps import format_rfc3339_seconds
from lifecycle_controller.kube import KubeClient, KubeError, NotFound
from lifecycle_controller.kube.breaker_store import breaker_name, find_breaker
from lifecycle_controller.kube.resources import CONFIGMAPS
from lifecycle_controller.machinery.clock import RealClock
from lifecycle_controller.tools.click_shell import apply_flags

__all__ = ["breaker_command", "describe_breaker"]


def describe_breaker(state: BreakerState, where: str) -> str:
    """One human line about the latched state (with what an open breaker holds)."""
    if state.open:
        held = ""
        if state.held:
            named = ", ".join(state.held_objects)
            more = state.held - len(state.held_objects)
            held = f"; holding {state.held}: {named}" + (f" and {more} more" if more > 0 else "")
        return (
            f"circuit breaker OPEN since {state.tripped_at}: {state.actions} actions within "
            f"{state.window}{held}; reset with `lifecycle-controller breaker reset` ({where})"
        )
    since = f", reset at {state.reset_at}" if state.reset_at else ""
    return f"circuit breaker closed (trips so far: {state.trips}{since}) ({where})"


#: Where the breaker is latched: the Lease's name and namespace flags of ``run``.
_LEASE_FLAGS = tuple(
    flag for flag in RUN_FLAGS if flag.into in ("leader_election.name", "leader_election.namespace")
)


def _options(function: Callable[..., None]) -> Callable[..., None]:
    for option in reversed(
        [
            click.option(
                "--kubeconfig", default="", envvar="LIFECYCLE_KUBECONFIG", help="kubeconfig file."
            ),
            apply_flags(_LEASE_FLAGS),  # spelled, defaulted and read from LIFECYCLE_* as run
            click.option(
                "-o",
                "--output",
                type=click.Choice(["table", "json"]),
                default="table",
                show_default=True,
                help="Output format.",
            ),
        ]
    ):
        function = option(function)
    return function


def _run(
    kubeconfig: str,
    namespace: str,
    lease: str,
    output: str,
    act: Callable[[KubeClient, str, str], Awaitable[BreakerState | None]],
) -> None:
    async def go() -> tuple[BreakerState | None, str]:
        async with await KubeClient.connect(kubeconfig or None) as kube:
            where_ns = namespace or kube.default_namespace
            name = breaker_name(lease)
            return await act(kube, where_ns, name), f"ConfigMap {where_ns}/{name}"

    try:
        state, where = asyncio.run(go())
    except KubeError as error:
        raise click.ClickException(str(error)) from error
    if state is None:
        raise click.ClickException(
            f"no circuit breaker state exists in {where}: check --leader-election-id and "
            "--leader-election-namespace (a controller writes it when its breaker first counts)"
        )
    if output == "json":
        click.echo(json.dumps({"configMap": where.split(" ", 1)[1], **state.to_data()}))
    else:
        click.echo(describe_breaker(state, where))


@click.group("breaker")
def breaker_command() -> None:
    """Read or reset the latched circuit breaker (--breaker-max-actions)."""


@breaker_command.command("status")
@_options
def status(
    kubeconfig: str, leader_election_namespace: str, leader_election_id: str, output: str
) -> None:
    """Show whether the circuit breaker is open."""
    _run(kubeconfig, leader_election_namespace, leader_election_id, output, find_breaker)


@breaker_command.command("reset")
@_options
def reset(
    kubeconfig: str, leader_election_namespace: str, leader_election_id: str, output: str
) -> None:
    """Close the circuit breaker: every deletion and restart it holds then runs.

    The held actions (listed by 'breaker status', each announced by an ActionsHalted
    Warning) do not count against the window again: only actions that were not held can
    trip the breaker anew.
    """

    async def act(kube: KubeClient, namespace: str, name: str) -> BreakerState | None:
        state = await find_breaker(kube, namespace, name)
        if state is None:
            return None
        state = state.reset(at=format_rfc3339_seconds(RealClock().now_ns()))
        try:  # a patch, never a create: a reset makes no ConfigMap where there was none
            await kube.merge_patch(CONFIGMAPS, namespace, name, {"data": state.to_data()})
        except NotFound:
            return None
        return state

    _run(kubeconfig, leader_election_namespace, leader_election_id, output, act)
