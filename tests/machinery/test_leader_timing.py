"""Leader election timing under a fake clock, with faults the real API server cannot produce.

The in-memory Lease store below injects a hung API, bursts of 5xx/429/transport errors and a
concurrent resourceVersion bump; the behaviour on the real server is covered in
``tests/integration/test_leader.py``.
"""

from __future__ import annotations

import asyncio
import copy
import random
from collections.abc import Mapping
from typing import Any

import pytest

from lifecycle_controller.config import LeaderElectionSettings
from lifecycle_controller.controller.leadership.elector import (
    LeaderElector,
    LeadershipLost,
    micro_time,
)
from lifecycle_controller.kube import (
    AlreadyExists,
    Conflict,
    KubeError,
    NotFound,
    ResourceType,
    ServerError,
    TooManyRequests,
    TransportError,
)
from lifecycle_controller.kube.client import Pool
from tests.doubles.fakeclock import DEFAULT_START_MONOTONIC, FakeClock

T0 = DEFAULT_START_MONOTONIC
CONFIG = LeaderElectionSettings(namespace="ns", name="lease")  # 15 s / 10 s / 2 s


class FakeLeases:
    """Lease get/create/replace with resourceVersion checks, plus fault injection."""

    def __init__(self) -> None:
        self.objects: dict[str, dict[str, Any]] = {}
        self.version = 0
        self.hang = False
        self.failures: list[KubeError] = []
        self.calls: list[tuple[str, float | None]] = []

    async def _gate(self, verb: str, timeout: float | None) -> None:
        self.calls.append((verb, timeout))
        if self.hang:
            await asyncio.Event().wait()
        if self.failures:
            raise self.failures.pop(0)

    def _store(self, name: str, body: Mapping[str, Any]) -> dict[str, Any]:
        self.version += 1
        stored = copy.deepcopy(dict(body))
        stored.setdefault("metadata", {})["resourceVersion"] = str(self.version)
        self.objects[name] = stored
        return copy.deepcopy(stored)

    def put_directly(self, name: str, **spec: Any) -> None:
        """Another writer (a second candidate, a human): no precondition."""
        lease = self.objects.get(name) or {"metadata": {"name": name}, "spec": {}}
        lease["spec"].update(spec)
        self._store(name, lease)

    async def get(
        self,
        resource: ResourceType,
        namespace: str | None,
        name: str,
        *,
        pool: Pool = "requests",
        timeout: float | None = None,
    ) -> dict[str, Any]:
        await self._gate("get", timeout)
        if name not in self.objects:
            raise NotFound(404)
        return copy.deepcopy(self.objects[name])

    async def create(
        self,
        resource: ResourceType,
        namespace: str | None,
        body: Mapping[str, Any],
        *,
        pool: Pool = "requests",
        timeout: float | None = None,
    ) -> dict[str, Any]:
        await self._gate("create", timeout)
        name = body["metadata"]["name"]
        if name in self.objects:
            raise AlreadyExists(409, {"reason": "AlreadyExists"})
        return self._store(name, body)

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
        await self._gate("replace", timeout)
        current = self.objects.get(name)
        if current is None:
            raise NotFound(404)
        if body["metadata"].get("resourceVersion") != current["metadata"]["resourceVersion"]:
            raise Conflict(409, {"reason": "Conflict"})
        return self._store(name, body)

    def spec(self, name: str = "lease") -> dict[str, Any]:
        return dict(self.objects[name]["spec"])


class Work:
    def __init__(self, elector: LeaderElector | None = None) -> None:
        self.elector = elector
        self.started = asyncio.Event()
        self.cancelled = False
        self.may_write_when_stopping: bool | None = None

    async def __call__(self) -> None:
        self.started.set()
        try:
            await asyncio.Event().wait()
        except asyncio.CancelledError:
            self.cancelled = True
            if self.elector is not None:
                self.may_write_when_stopping = self.elector.may_write()
            raise


class StallClock(FakeClock):
    """A fake clock whose monotonic time can jump without waking anyone (a blocked loop)."""

    def __init__(self) -> None:
        super().__init__()
        self.offset = 0.0

    def monotonic(self) -> float:
        return super().monotonic() + self.offset


def elector_for(
    api: FakeLeases, clock: FakeClock, statuses: list[bool] | None = None
) -> LeaderElector:
    on_status = statuses.append if statuses is not None else None
    return LeaderElector(
        api, CONFIG, identity="me", clock=clock, on_status=on_status, rng=random.Random(7)
    )


async def lead(api: FakeLeases, clock: FakeClock) -> tuple[LeaderElector, Work, asyncio.Task[None]]:
    statuses: list[bool] = []
    elector = elector_for(api, clock, statuses)
    work = Work(elector)
    task = asyncio.create_task(elector.run(work))
    await clock.settle()
    assert work.started.is_set()
    assert elector.is_leader
    assert statuses == [False, True]
    return elector, work, task


async def stop(task: asyncio.Task[None], clock: FakeClock) -> None:
    task.cancel()
    await clock.advance(CONFIG.renew_deadline)
    assert task.done()
    with pytest.raises(asyncio.CancelledError):
        task.result()


async def test_create_then_renew_every_retry_period_keeping_acquire_time(
    clock: FakeClock, no_leaked_tasks: None
) -> None:
    api = FakeLeases()
    elector, _, task = await lead(api, clock)
    created = api.spec()
    assert created["holderIdentity"] == "me"
    assert created["leaseTransitions"] == 0
    assert created["acquireTime"] == created["renewTime"] == micro_time(clock.now_ns())
    assert elector.last_renew_monotonic == T0

    await clock.advance(2)
    renewed = api.spec()
    assert renewed["acquireTime"] == created["acquireTime"]
    assert renewed["renewTime"] == micro_time(clock.now_ns()) != created["renewTime"]
    assert elector.last_renew_monotonic == T0 + 2
    assert [verb for verb, _ in api.calls] == ["get", "create", "replace"]  # fast path
    await stop(task, clock)
    assert api.spec()["holderIdentity"] == ""


async def test_hung_api_loses_leadership_exactly_at_the_renew_deadline(
    clock: FakeClock, no_leaked_tasks: None
) -> None:
    api = FakeLeases()
    elector, work, task = await lead(api, clock)
    api.hang = True

    await clock.advance(2 + 7.9)  # the renewal started at T0+2 and hangs
    assert elector.is_leader
    assert elector.may_write()
    verb, timeout = api.calls[-1]
    assert verb == "replace"
    assert timeout == pytest.approx(8.0)  # the request ends at the deadline, T0+10

    await clock.advance(0.1)
    assert not elector.may_write()
    assert not elector.is_leader
    assert work.cancelled
    assert work.may_write_when_stopping is False
    assert not task.done()  # the release attempt is hanging too, bounded by the deadline

    await clock.advance(CONFIG.renew_deadline)
    assert task.done()
    with pytest.raises(LeadershipLost, match=r"not renewed within 10\.0s"):
        task.result()
    assert all(timeout is not None and timeout <= 10 for _, timeout in api.calls)


async def test_transient_errors_are_retried_within_the_deadline(
    clock: FakeClock, no_leaked_tasks: None
) -> None:
    api = FakeLeases()
    elector, _, task = await lead(api, clock)
    api.failures = [
        ServerError(500),  # fast path at T0+2
        TooManyRequests(429),  # GET at T0+2
        TransportError("connection reset"),  # fast path at T0+4
        ServerError(503),  # GET at T0+4
    ]
    await clock.advance(4)
    assert elector.last_renew_monotonic == T0
    assert elector.may_write()
    await clock.advance(2)  # third attempt at T0+6 succeeds
    assert elector.last_renew_monotonic == T0 + 6
    assert elector.is_leader
    assert not task.done()
    assert api.spec()["leaseTransitions"] == 0
    await stop(task, clock)


async def test_follower_retries_with_jitter_and_takes_over_only_after_expiry(
    clock: FakeClock, no_leaked_tasks: None
) -> None:
    api = FakeLeases()
    api.put_directly("lease", holderIdentity="other", leaseDurationSeconds=15, leaseTransitions=4)
    statuses: list[bool] = []
    elector = elector_for(api, clock, statuses)
    task = asyncio.create_task(elector.run(Work()))
    await clock.settle()
    assert elector.holder == "other"

    waits = []
    for _ in range(3):
        [deadline] = clock.sleeper_deadlines()
        waits.append(deadline - clock.monotonic())
        await clock.advance_to_next()
    assert all(2 <= wait <= 2 * 2.2 for wait in waits)
    assert len(set(waits)) == 3

    # The other holder renews at T0+10: its lease counts from when we saw the change.
    await clock.advance(T0 + 10 - clock.monotonic())
    api.put_directly("lease", renewTime=micro_time(clock.now_ns()))
    await clock.advance(T0 + 24 - clock.monotonic())
    assert not elector.is_leader
    await clock.advance(5)  # the last observation was at most one jittered wait after T0+10
    assert elector.is_leader
    assert api.spec()["holderIdentity"] == "me"
    assert api.spec()["leaseTransitions"] == 5
    assert statuses == [False, True]
    await stop(task, clock)


async def test_release_retries_a_conflict_and_keeps_transitions(
    clock: FakeClock, no_leaked_tasks: None
) -> None:
    api = FakeLeases()
    api.put_directly("lease", holderIdentity="", leaseDurationSeconds=1, leaseTransitions=2)
    _, work, task = await lead(api, clock)
    api.put_directly("lease", preferredHolder="someone")  # bumps resourceVersion, still ours
    await clock.advance(0.5)

    task.cancel()
    await clock.settle()
    assert task.done()
    assert work.cancelled
    spec = api.spec()
    assert spec["holderIdentity"] == ""
    assert spec["leaseDurationSeconds"] == 1
    assert spec["leaseTransitions"] == 3
    assert spec["acquireTime"] == spec["renewTime"] == micro_time(clock.now_ns())
    assert spec["preferredHolder"] == "someone"
    assert [verb for verb, _ in api.calls[-3:]] == ["replace", "get", "replace"]


async def test_leading_that_fails_is_re_raised_after_release(
    clock: FakeClock, no_leaked_tasks: None
) -> None:
    api = FakeLeases()
    elector = elector_for(api, clock)

    async def crash() -> None:
        raise RuntimeError("boom")

    with pytest.raises(RuntimeError, match="boom"):
        await elector.run(crash)
    assert api.spec()["holderIdentity"] == ""
    assert not elector.is_leader


async def test_leading_that_returns_hands_over_and_returns(
    clock: FakeClock, no_leaked_tasks: None
) -> None:
    api = FakeLeases()
    elector = elector_for(api, clock)

    async def finish() -> None:
        return None

    await elector.run(finish)
    assert api.spec()["holderIdentity"] == ""
    assert not elector.is_leader
    with pytest.raises(RuntimeError, match="only once"):
        await elector.run(finish)


async def test_a_stalled_loop_fences_writes_then_fails_health(no_leaked_tasks: None) -> None:
    clock = StallClock()
    api = FakeLeases()
    elector, _, task = await lead(api, clock)
    assert elector.healthy()

    clock.offset = 10.0  # the event loop was blocked for 10 s: the renew task never ran
    assert elector.is_leader
    assert not elector.may_write()
    assert elector.healthy()
    clock.offset = 15.0 + 20.0 + 0.1
    assert not elector.healthy()
    assert elector.healthy(tolerance=60)
    await stop(task, clock)


async def test_follower_is_healthy_and_never_writes(
    clock: FakeClock, no_leaked_tasks: None
) -> None:
    api = FakeLeases()
    api.put_directly("lease", holderIdentity="other", leaseDurationSeconds=15)
    elector = elector_for(api, clock)
    task = asyncio.create_task(elector.run(Work()))
    await clock.advance(5)
    assert elector.healthy()
    assert not elector.may_write()
    assert elector.last_renew_monotonic is None
    assert [verb for verb, _ in api.calls] == ["get"] * len(api.calls)
    await stop(task, clock)


async def test_renewals_continue_while_the_work_drains_then_release(
    clock: FakeClock, no_leaked_tasks: None
) -> None:
    api = FakeLeases()
    elector = elector_for(api, clock)
    drained = asyncio.Event()

    async def slow_to_stop() -> None:
        try:
            await asyncio.Event().wait()
        finally:
            await clock.sleep(CONFIG.renew_deadline + 3)  # longer than the renew deadline
            assert api.spec()["holderIdentity"] == "me"
            drained.set()

    task = asyncio.create_task(elector.run(slow_to_stop))
    await clock.settle()
    task.cancel()
    await clock.advance(CONFIG.renew_deadline + 2)
    assert elector.may_write()  # still renewing: in-flight work may finish its writes
    assert elector.last_renew_monotonic == T0 + 12
    await clock.advance(1)
    assert drained.is_set()
    assert task.done()
    assert api.spec()["holderIdentity"] == ""
    assert not elector.may_write()
