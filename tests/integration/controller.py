"""Run the real controller in-process against the test control plane.

``start_controller(**flags)`` builds settings exactly as ``lifecycle-controller run`` does
(from the same flag names, as strings), starts a :class:`Controller` in a task and waits until
it is ready; everything started is stopped at the end of the test. Tests then act on the API
and poll for the controller's effects with :func:`tests.integration.support.eventually`.
``start_kwok_controller`` is the same against the control plane with fake nodes
(``kwok_plane``, tests/conftest.py).
"""

from __future__ import annotations

import asyncio
import contextlib
import io
from collections.abc import AsyncIterator, Awaitable
from contextlib import asynccontextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Protocol

import pytest

from lifecycle_controller.app import Controller
from lifecycle_controller.config import RawFlags, build_settings
from lifecycle_controller.devcluster import ControlPlane
from lifecycle_controller.kube import KubeClient


@dataclass
class RunningController:
    """A controller started by the fixture, with its own API client."""

    controller: Controller
    task: asyncio.Task[None]
    kube: KubeClient

    async def stop(self, *, within: float = 60.0) -> None:
        """Cancel it like SIGTERM does and wait until it has shut down.

        A controller that has not stopped ``within`` seconds fails the test with the stack of
        every task still running (what it waits on), rather than hanging until the test's
        timeout names only the event loop.
        """
        if not self.task.done():
            self.task.cancel()
        done, _ = await asyncio.wait({self.task}, timeout=within)
        if not done:
            raise AssertionError(
                f"controller did not stop within {within}s; tasks:\n{_task_stacks()}"
            )
        with contextlib.suppress(asyncio.CancelledError):
            await self.task
        await self.kube.close()


def _task_stacks() -> str:
    """Every task of the running loop but the caller, with where each one waits."""
    out = io.StringIO()
    for task in asyncio.all_tasks():
        if task is not asyncio.current_task():
            task.print_stack(limit=12, file=out)
    return out.getvalue()


class StartController(Protocol):
    def __call__(
        self, *, kubeconfig: str | None = ..., ready: bool = ..., **flags: Any
    ) -> Awaitable[RunningController]: ...


async def wait_ready(running: RunningController, *, within: float = 30.0) -> None:
    loop = asyncio.get_running_loop()
    deadline = loop.time() + within
    while running.controller.not_ready_reason() is not None or running.controller.pipeline is None:
        if running.task.done():
            running.task.result()  # raises what stopped it
            raise AssertionError("controller stopped before it became ready")
        if loop.time() > deadline:
            raise AssertionError(
                f"controller not ready after {within}s: {running.controller.not_ready_reason()}"
            )
        await asyncio.sleep(0.05)


@asynccontextmanager
async def controllers(default_kubeconfig: Path) -> AsyncIterator[StartController]:
    """A :class:`StartController` whose controllers use ``default_kubeconfig`` unless told
    otherwise; every one it started is stopped on exit."""
    started: list[RunningController] = []

    async def start(
        *, kubeconfig: str | None = None, ready: bool = True, **flags: Any
    ) -> RunningController:
        values: dict[str, Any] = {"health_probe_bind_address": "127.0.0.1:0", **flags}
        for name, value in list(values.items()):
            if isinstance(value, list | tuple):
                values[name] = tuple(value)
            elif isinstance(value, bool):
                values[name] = "true" if value else "false"
            else:
                values[name] = str(value)
        settings = build_settings(RawFlags(**values))
        kube = await KubeClient.connect(kubeconfig or str(default_kubeconfig))
        controller = Controller(settings, kube)
        running = RunningController(controller, asyncio.create_task(controller.run()), kube)
        started.append(running)
        if ready:
            await wait_ready(running)
        return running

    yield start
    for running in reversed(started):
        await running.stop()


@pytest.fixture
async def start_controller(control_plane: ControlPlane) -> AsyncIterator[StartController]:
    async with controllers(control_plane.admin_kubeconfig) as start:
        yield start


@pytest.fixture
async def start_kwok_controller(kwok_plane: ControlPlane) -> AsyncIterator[StartController]:
    async with controllers(kwok_plane.admin_kubeconfig) as start:
        yield start
