"""Waiting until a controller is quiet, so that a double has had every chance to show.

Quiet: its work queue empty and no worker busy (read from its metrics), and no write of its
user in the audit log (Leases aside) for a while. A fixed wait would pass too early on a
loaded machine and too late on an idle one.
"""

from __future__ import annotations

import asyncio
import json
from collections.abc import Awaitable, Callable
from dataclasses import dataclass

from lifecycle_controller.devcluster import ControlPlane
from tests.faults.support import CONTROLLER_USER
from tests.integration.controller import RunningController
from tests.integration.processes import ControllerProcess
from tests.integration.scenario_support import sample

#: The audit verbs of a write (a Lease renewal is left out by resource: it never stops).
WRITE_VERBS = frozenset({"create", "update", "patch", "delete", "deletecollection"})


@dataclass
class AuditTail:
    """The writes of one user in the audit log, read on from where the last read stopped
    (the log of a whole fault session is too long to parse again every quarter second)."""

    control_plane: ControlPlane
    user: str = CONTROLLER_USER
    offset: int = 0
    writes: int = 0

    def read(self) -> int:
        """How many writes of :attr:`user` the log holds so far (Leases left out)."""
        needle = f'"username":"{self.user}"'.encode()
        try:
            with self.control_plane.audit_log.open("rb") as log:
                log.seek(self.offset)
                chunk = log.read()
        except FileNotFoundError:
            return self.writes
        complete = chunk.rfind(b"\n") + 1  # a torn last line is read next time
        self.offset += complete
        for line in chunk[:complete].splitlines():
            if needle not in line:
                continue
            try:
                event = json.loads(line)
            except ValueError:
                continue
            ref = event.get("objectRef") or {}
            if (
                event.get("stage") == "ResponseComplete"
                and event.get("verb") in WRITE_VERBS
                and ref.get("resource") != "leases"
            ):
                self.writes += 1
        return self.writes


#: Whether a controller's work queue is empty and none of its workers busy.
QueueIdle = Callable[[], Awaitable[bool]]


def queue_idle(running: RunningController) -> QueueIdle:
    """:data:`QueueIdle` of an in-process controller (its metrics registry)."""

    async def idle() -> bool:
        depth = sample(running, "workqueue_depth", name="lifecycle") or 0.0
        busy = sample(running, "controller_runtime_active_workers", controller="lifecycle")
        return depth == 0 and not busy

    return idle


def processes_idle(*processes: ControllerProcess) -> QueueIdle:
    """:data:`QueueIdle` of controller processes (started with ``metrics=True``), read from
    their ``/metrics``; a process that has exited is idle."""

    async def idle() -> bool:
        for process in processes:
            if process.process.returncode is not None:
                continue
            depth = await process.metric("workqueue_depth", {"name": "lifecycle"})
            busy = await process.metric(
                "controller_runtime_active_workers", {"controller": "lifecycle"}
            )
            if depth or busy:
                return False
        return True

    return idle


async def wait_quiet(
    control_plane: ControlPlane,
    idle: QueueIdle,
    *,
    user: str = CONTROLLER_USER,
    quiet_for: float = 2.0,
    within: float = 60.0,
) -> float:
    """Wait until the controller is quiet: ``idle`` holds, and ``user`` wrote nothing (Leases
    aside), for ``quiet_for`` seconds on end; what a doubled write or Event would need to
    show. Returns how long it took; fails after ``within`` seconds."""
    tail = AuditTail(control_plane, user)
    loop = asyncio.get_running_loop()
    started = loop.time()
    last = (tail.read(), started)
    while True:
        now = loop.time()
        writes_now = tail.read()
        if writes_now != last[0] or not await idle():
            last = (writes_now, now)
        elif now - last[1] >= quiet_for:
            return now - started
        if now - started >= within:
            raise AssertionError(
                f"the controller was not quiet for {quiet_for}s within {within}s "
                f"({writes_now} writes of {user} so far)"
            )
        await asyncio.sleep(0.1)
