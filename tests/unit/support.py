"""Helpers shared by the unit tests (not a test module, so test modules may import it).

Time on the controller's side moves only through ``FakeClock.advance``. :func:`eventually`
yields to the event loop until a condition holds: over the in-process fake API server that
takes a few loop iterations (nothing waits on a socket), over loopback HTTP (a webhook
receiver, ``FakeApiServer(over_http=True)``) as long as the I/O takes; a condition that never
comes true fails after a guard of real seconds. :func:`until_done` drives the fake clock
until a task ends and fails at once when the task is stuck, and :func:`fake_time_flowing`
lets fake time pass by itself while real loopback I/O goes on.
"""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import AsyncIterator, Callable, Mapping
from typing import Any

from lifecycle_controller.controller.policy.limits import PolicyLimits
from lifecycle_controller.core.decision.guardrails import GuardrailState, check
from lifecycle_controller.core.decision.outcomes import Decision, Delete, DryRun, Patch
from lifecycle_controller.core.objects.resources import ObjectKey
from lifecycle_controller.core.policy.model import PolicyKind, PolicyRef
from lifecycle_controller.kube import KubeClient, ResourceType
from lifecycle_controller.kube.client import Pool
from tests.doubles.fakeclock import FakeClock

#: Real seconds after which a condition that never came true fails the test (a guard only).
GUARD = 5.0


async def eventually(condition: Callable[[], object], *, guard: float = GUARD) -> None:
    """Yield to the loop until ``condition()`` is truthy; AssertionError after ``guard`` s."""
    loop = asyncio.get_running_loop()
    deadline = loop.time() + guard
    # sleep(0) is a yield, not a wait: the loop polls the sockets, then comes straight back.
    while not condition():
        if loop.time() > deadline:
            raise AssertionError(f"condition not met within {guard} s: {condition}")
        await asyncio.sleep(0)


async def sleeping(clock: FakeClock, count: int = 1) -> None:
    """Wait until at least ``count`` tasks are blocked on a fake sleep (the system is idle)."""
    await eventually(lambda: len(clock.sleeper_deadlines()) >= count)


async def until_done(task: asyncio.Future[Any], clock: FakeClock, *, steps: int = 100) -> Any:
    """Advance ``clock`` from one sleeper's deadline to the next until ``task`` is done;
    return its result. Over the in-process fake API nothing waits on real I/O, so a task
    that is neither done nor asleep on the clock once the loop settled is stuck: that, or
    more than ``steps`` deadlines, fails the test at once."""
    for _ in range(steps):
        await clock.settle()
        if task.done():
            return task.result()
        if await clock.advance_to_next() is None and not task.done():
            task.cancel()
            raise AssertionError(f"{task!r} is stuck: not done, and nothing sleeps on the clock")
    raise AssertionError(f"{task!r} not done after {steps} clock steps")


@contextlib.asynccontextmanager
async def fake_time_flowing(clock: FakeClock) -> AsyncIterator[None]:
    """While real loopback I/O goes on (a webhook receiver), let fake time pass by itself:
    whenever a task sleeps on ``clock``, it is advanced to the earliest deadline at once."""

    async def drive() -> None:
        while True:
            if clock.next_deadline() is None:
                await asyncio.sleep(0)  # a yield: the loop polls the sockets and comes back
            else:
                await clock.advance_to_next()

    driver = asyncio.create_task(drive())
    try:
        yield
    finally:
        driver.cancel()
        with contextlib.suppress(asyncio.CancelledError):
            await driver


def annotated(name: str, annotations: Mapping[str, str], **metadata: Any) -> dict[str, Any]:
    """An object body with ``annotations`` (and any other metadata fields)."""
    return {"metadata": {"name": name, "annotations": dict(annotations), **metadata}}


def widget_type(version: str = "v1") -> ResourceType:
    """A custom resource type, as a CRD would add it."""
    return ResourceType("example.com", version, "widgets", "Widget", namespaced=True)


class TrackedLeases:
    """The elector's three Lease calls, counted while in flight, so a test can tell "idle"
    (no request pending, every task blocked on the fake clock) from "waiting on loopback"."""

    def __init__(self, kube: KubeClient) -> None:
        self._kube = kube
        self.in_flight = 0

    async def get(
        self,
        resource: ResourceType,
        namespace: str | None,
        name: str,
        *,
        pool: Pool = "requests",
        timeout: float | None = None,
    ) -> dict[str, Any]:
        self.in_flight += 1
        try:
            return await self._kube.get(resource, namespace, name, pool=pool, timeout=timeout)
        finally:
            self.in_flight -= 1

    async def create(
        self,
        resource: ResourceType,
        namespace: str | None,
        body: Mapping[str, Any],
        *,
        pool: Pool = "requests",
        timeout: float | None = None,
    ) -> dict[str, Any]:
        self.in_flight += 1
        try:
            return await self._kube.create(resource, namespace, body, pool=pool, timeout=timeout)
        finally:
            self.in_flight -= 1

    async def replace(
        self,
        resource: ResourceType,
        namespace: str | None,
        name: str,
        body: Mapping[str, Any],
        *,
        pool: Pool = "requests",
        timeout: float | None = None,
    ) -> dict[str, Any]:
        self.in_flight += 1
        try:
            return await self._kube.replace(
                resource, namespace, name, body, pool=pool, timeout=timeout
            )
        finally:
            self.in_flight -= 1

    async def idle(self, clock: FakeClock) -> None:
        """Wait until no call is in flight and the loop has settled (everyone sleeps)."""
        while True:
            await eventually(lambda: self.in_flight == 0)
            await clock.settle()
            if self.in_flight == 0:
                return


def limit_pass(limits: PolicyLimits, key: ObjectKey, decision: Decision, now_ns: int) -> Decision:
    """One pass over ``key`` as the reconciler makes it, for its policy's limit alone: the
    limit's facts, the pure check, the line recorded, the place taken for what went.
    Returns what stands (``decision``, or the hold or wait of its limit)."""
    deciders = [] if decision.policy is None else [_ref(decision.policy)]
    facts = limits.facts(key, deciders, now_ns)
    state = GuardrailState(now_ns=now_ns, limits=facts)
    final: Decision = decision
    if isinstance(decision, (Patch, Delete, DryRun)):
        final = check(decision, state.facts(decision)) or decision
    limits.record(key, decision, final, now_ns)
    if final is decision:
        limits.take(key, decision, facts.get(decision.policy or ""), now_ns)
    return final


def _ref(name: str) -> PolicyRef:
    kind, _, rest = name.partition("/")
    if kind == PolicyKind.CLUSTER.value:
        return PolicyRef(PolicyKind.CLUSTER, None, rest)
    namespace, _, policy = rest.partition("/")
    return PolicyRef(PolicyKind(kind), namespace, policy)
