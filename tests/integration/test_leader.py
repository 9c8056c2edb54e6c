"""Leader election against the real API server, with short timings and real clocks.

Each candidate is its own least-privilege user (get/create/update on Leases in the test
namespace), so losing leadership can be produced for real by revoking its RoleBinding.
"""

from __future__ import annotations

import asyncio
import re
import socket
import time
from collections.abc import AsyncIterator, Awaitable, Callable
from contextlib import AsyncExitStack
from dataclasses import dataclass, field
from typing import Any

import pytest

from lifecycle_controller.config import LeaderElectionSettings
from lifecycle_controller.controller.leadership.elector import (
    LeaderElector,
    LeadershipLost,
    micro_time,
)
from lifecycle_controller.devcluster import ControlPlane
from lifecycle_controller.kube import LEASES, KubeClient, load_configuration
from tests.integration.support import eventually

LEASE, RENEW, RETRY = 3.0, 2.0, 0.5
NAME = "lifecycle-test"
MICRO_TIME = re.compile(r"\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d{6}Z")
LEASE_RULES = [
    {
        "apiGroups": ["coordination.k8s.io"],
        "resources": ["leases"],
        "verbs": ["get", "create", "update"],
    }
]


@dataclass
class Work:
    """Stands in for the controller's leader-only work: runs until cancelled."""

    elector: LeaderElector | None = None
    read_holder: Callable[[], Awaitable[str]] | None = None
    started: asyncio.Event = field(default_factory=asyncio.Event)
    stopped: asyncio.Event = field(default_factory=asyncio.Event)
    may_write_when_stopping: bool | None = None
    holder_when_stopping: str | None = None

    async def __call__(self) -> None:
        self.started.set()
        try:
            await asyncio.Event().wait()
        finally:
            assert self.elector is not None
            assert self.read_holder is not None
            self.may_write_when_stopping = self.elector.may_write()
            self.holder_when_stopping = await self.read_holder()
            self.stopped.set()


@dataclass
class Candidate:
    elector: LeaderElector
    work: Work
    user: str
    statuses: list[bool]
    task: asyncio.Task[None] | None = None

    def start(self) -> asyncio.Task[None]:
        self.task = asyncio.create_task(self.elector.run(self.work))
        return self.task

    async def leading(self, within: float = 10.0) -> None:
        await asyncio.wait_for(self.work.started.wait(), within)


class Election:
    """Builds candidates for one namespace and reads the Lease as the admin."""

    def __init__(
        self, control_plane: ControlPlane, namespace: str, admin: KubeClient, stack: AsyncExitStack
    ) -> None:
        self.control_plane = control_plane
        self.namespace = namespace
        self.admin = admin
        self._stack = stack

    async def lease(self) -> dict[str, Any]:
        return await self.admin.get(LEASES, self.namespace, NAME)

    async def holder(self) -> str:
        return str((await self.lease())["spec"].get("holderIdentity") or "")

    async def candidate(self, label: str, *, release_on_cancel: bool = True) -> Candidate:
        user = f"leader-{label}-{self.namespace}"
        kubeconfig = self.control_plane.user_kubeconfig(
            user, namespaced_rules={self.namespace: LEASE_RULES}
        )
        kube = await self._stack.enter_async_context(await KubeClient.connect(str(kubeconfig)))
        config = LeaderElectionSettings(
            namespace=self.namespace,
            name=NAME,
            lease_duration=LEASE,
            renew_deadline=RENEW,
            retry_period=RETRY,
            release_on_cancel=release_on_cancel,
        )
        statuses: list[bool] = []
        elector = LeaderElector(kube, config, identity=f"{label}_{user}", on_status=statuses.append)
        work = Work(elector=elector, read_holder=self.holder)
        candidate = Candidate(elector, work, user, statuses)
        self._stack.push_async_callback(_cancel, candidate)
        return candidate

    def revoke(self, candidate: Candidate) -> None:
        response = self.control_plane.request(
            "DELETE",
            f"/apis/rbac.authorization.k8s.io/v1/namespaces/{self.namespace}"
            f"/rolebindings/devcluster:{candidate.user}",
        )
        assert response.status == 200, response.body


async def _cancel(candidate: Candidate) -> None:
    if candidate.task is not None and not candidate.task.done():
        candidate.task.cancel()
        await asyncio.wait((candidate.task,))


@pytest.fixture
async def election(control_plane: ControlPlane, namespace: str) -> AsyncIterator[Election]:
    async with AsyncExitStack() as stack:
        admin = await stack.enter_async_context(
            await KubeClient.connect(str(control_plane.admin_kubeconfig))
        )
        yield Election(control_plane, namespace, admin, stack)


def assert_micro_times(lease: dict[str, Any]) -> None:
    for key in ("acquireTime", "renewTime"):
        assert MICRO_TIME.fullmatch(lease["spec"][key]), lease["spec"]


async def test_one_leads_the_other_waits_and_release_hands_over_fast(election: Election) -> None:
    a = await election.candidate("a")
    b = await election.candidate("b")
    a.start()
    await a.leading()
    lease = await election.lease()
    assert lease["spec"]["holderIdentity"] == a.elector.identity
    assert lease["spec"]["leaseDurationSeconds"] == 3
    assert lease["spec"]["leaseTransitions"] == 0
    assert_micro_times(lease)
    assert a.elector.is_leader
    assert a.elector.may_write()
    assert a.elector.healthy()
    first_renew = lease["spec"]["renewTime"]

    b.start()
    await eventually(
        lambda: _true(b.elector.holder == a.elector.identity), within=5, what="b sees a's lease"
    )
    # Renewals keep the lease: b still waits after more than a whole lease duration.
    with pytest.raises(TimeoutError):
        await b.leading(within=LEASE + 0.5)
    assert not b.elector.is_leader
    assert not b.elector.may_write()
    assert b.elector.healthy()
    lease = await election.lease()
    assert lease["spec"]["holderIdentity"] == a.elector.identity
    assert lease["spec"]["renewTime"] > first_renew
    assert lease["spec"]["acquireTime"] < lease["spec"]["renewTime"]
    assert_micro_times(lease)

    assert a.task is not None
    handed_over_at = time.monotonic()
    a.task.cancel()
    with pytest.raises(asyncio.CancelledError):
        await a.task
    # The work stopped first, while the lease was still ours; then it was released.
    assert a.work.holder_when_stopping == a.elector.identity
    assert a.work.may_write_when_stopping is True
    assert not a.elector.is_leader
    assert not a.elector.may_write()
    assert a.statuses == [False, True, False]

    await b.leading(within=LEASE)
    assert time.monotonic() - handed_over_at < LEASE
    lease = await election.lease()
    assert lease["spec"]["holderIdentity"] == b.elector.identity
    assert lease["spec"]["leaseTransitions"] == 1
    assert lease["spec"]["leaseDurationSeconds"] == 3
    assert_micro_times(lease)


async def test_without_release_the_follower_waits_for_expiry(election: Election) -> None:
    a = await election.candidate("a", release_on_cancel=False)
    b = await election.candidate("b")
    a.start()
    await a.leading()
    b.start()
    await eventually(
        lambda: _true(b.elector.holder == a.elector.identity), within=5, what="b sees a's lease"
    )
    assert a.task is not None
    stopped_at = time.monotonic()
    a.task.cancel()
    with pytest.raises(asyncio.CancelledError):
        await a.task
    assert await election.holder() == a.elector.identity  # not released

    await b.leading(within=LEASE + 3)
    # a's last renewal started at most one retry period before it stopped; b counts the
    # lease from when it saw that renewal, so it cannot take over much earlier than expiry.
    assert time.monotonic() - stopped_at >= LEASE - RETRY - 0.2
    lease = await election.lease()
    assert lease["spec"]["holderIdentity"] == b.elector.identity
    assert lease["spec"]["leaseTransitions"] == 1


async def test_revoked_rbac_loses_leadership_and_cancels_the_work(election: Election) -> None:
    a = await election.candidate("a")
    task = a.start()
    await a.leading()
    assert a.elector.may_write()

    election.revoke(a)
    revoked_at = time.monotonic()
    with pytest.raises(LeadershipLost, match=r"not renewed within 2\.0s"):
        await asyncio.wait_for(task, RENEW + RETRY + 3)
    elapsed = time.monotonic() - revoked_at
    assert RENEW - RETRY - 0.2 <= elapsed <= RENEW + RETRY + 1
    assert a.work.stopped.is_set()
    # Fenced before the work was even cancelled.
    assert a.work.may_write_when_stopping is False
    assert not a.elector.is_leader
    assert not a.elector.may_write()
    assert a.statuses == [False, True, False]
    assert await election.holder() == a.elector.identity  # release was refused too


async def test_a_direct_takeover_is_noticed_at_the_next_renewal(election: Election) -> None:
    a = await election.candidate("a")
    task = a.start()
    await a.leading()

    lease = await election.lease()
    stamp = micro_time(time.time_ns())
    lease["spec"].update(
        holderIdentity="intruder",
        acquireTime=stamp,
        renewTime=stamp,
        leaseTransitions=lease["spec"]["leaseTransitions"] + 1,
    )
    taken_at = time.monotonic()
    lease = await election.admin.replace(LEASES, election.namespace, NAME, lease)
    with pytest.raises(LeadershipLost, match="held by intruder"):
        await asyncio.wait_for(task, RENEW + 3)
    assert time.monotonic() - taken_at < RENEW
    assert a.work.stopped.is_set()
    assert not a.elector.may_write()
    # The release did not overwrite the new holder.
    assert await election.lease() == lease


async def test_failing_work_releases_the_lease_and_is_re_raised(election: Election) -> None:
    a = await election.candidate("a")
    b = await election.candidate("b")

    async def crash() -> None:
        await asyncio.sleep(RETRY * 2)  # long enough for a renewal
        raise RuntimeError("worker crashed")

    with pytest.raises(RuntimeError, match="worker crashed"):
        await a.elector.run(crash)
    lease = await election.lease()
    assert lease["spec"]["holderIdentity"] == ""
    assert lease["spec"]["leaseDurationSeconds"] == 1
    assert lease["spec"]["leaseTransitions"] == 0
    assert lease["spec"]["acquireTime"] == lease["spec"]["renewTime"]
    assert_micro_times(lease)

    b.start()
    await b.leading(within=RETRY * 2.2 + 1)
    assert (await election.lease())["spec"]["leaseTransitions"] == 1


async def test_an_unreachable_api_is_retried_never_crashes(
    control_plane: ControlPlane, namespace: str
) -> None:
    configuration, _ = await load_configuration(str(control_plane.admin_kubeconfig))
    configuration.host = f"https://127.0.0.1:{_closed_port()}"
    failures: list[str] = []
    kube = KubeClient(configuration, observe=lambda method, code: failures.append(code))
    async with kube:
        config = LeaderElectionSettings(
            namespace=namespace,
            name=NAME,
            lease_duration=LEASE,
            renew_deadline=RENEW,
            retry_period=RETRY,
        )
        elector = LeaderElector(kube, config)
        task = asyncio.create_task(elector.run(Work()))
        await eventually(lambda: _true(len(failures) >= 3), within=10, what="three failed attempts")
        assert set(failures) == {"<error>"}
        assert not task.done()
        assert not elector.is_leader
        assert elector.healthy()
        task.cancel()
        with pytest.raises(asyncio.CancelledError):
            await task


async def _true(value: bool) -> bool:
    return value


def _closed_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return int(probe.getsockname()[1])
