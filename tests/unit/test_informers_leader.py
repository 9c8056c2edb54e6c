"""Informers and the leader elector over the real client against the fake API server.

The machinery tests drive both through stubs; these check that the protocol they speak is the
one an API server answers: paginated metadata lists, watches resumed from a resourceVersion,
relists after 410, and Lease create / optimistic update / release over HTTP.
"""

from __future__ import annotations

import asyncio
import random

import pytest

from lifecycle_controller.config import LeaderElectionSettings
from lifecycle_controller.controller.leadership.elector import LeaderElector, LeadershipLost
from lifecycle_controller.controller.watch.cache import CachedObject, MetadataCache
from lifecycle_controller.controller.watch.informers import (
    ChangeHandler,
    ChangeKind,
    InformerSet,
    InformerSettings,
)
from lifecycle_controller.core.objects.resources import ObjectKey
from lifecycle_controller.kube import LEASES, KubeClient
from tests.doubles.fakeapi import CONFIGMAPS, FakeApiServer
from tests.doubles.fakeapi.faults import RecordedRequest
from tests.doubles.fakeclock import FakeClock
from tests.unit.support import TrackedLeases, annotated, eventually, sleeping

TTL = {"lifecycle.cezary.dev/delete-after": "1h"}

Seen = list[tuple[str, str, bool, bool]]


def recorder(seen: Seen) -> ChangeHandler:
    def on_object_change(
        kind: ChangeKind, key: ObjectKey, old: CachedObject | None, new: CachedObject | None
    ) -> None:
        seen.append((kind, key.name, old is not None, new is not None))

    return on_object_change


@pytest.mark.parametrize(
    ("server_streams", "informer_streams"),
    [(True, True), (False, True), (True, False)],
    ids=["streaming-list", "server-refuses-streaming", "paginated"],
)
async def test_an_informer_lists_then_follows_the_watch(
    api: FakeApiServer,
    kube: KubeClient,
    clock: FakeClock,
    server_streams: bool,
    informer_streams: bool,
) -> None:
    api.streaming_lists = server_streams
    for name in ("a", "b", "c"):
        api.store.create(CONFIGMAPS, "default", annotated(name, TTL))
    api.store.create(CONFIGMAPS, "default", annotated("plain", {}))
    cache = MetadataCache()
    seen: Seen = []
    informers = InformerSet(
        source=kube,
        cache=cache,
        on_object_change=recorder(seen),
        clock=clock,
        settings=InformerSettings(page_size=2, streaming_list=informer_streams),
        rng=random.Random(1),
    )
    async with informers:
        await informers.ensure([CONFIGMAPS])
        await eventually(informers.synced)
        assert sorted(seen) == [("add", n, False, True) for n in "abc"]
        await eventually(lambda: api.store.watchers(CONFIGMAPS))
        lists = [r for r in api.requests_to("GET") if not r.is_watch]
        watches = [r for r in api.requests_to("GET") if r.is_watch]
        if server_streams and informer_streams:
            assert lists == []  # one request lists and then watches
            assert [w.param("sendInitialEvents") for w in watches] == ["true"]
            assert watches[0].param("resourceVersionMatch") == "NotOlderThan"
            assert watches[0].param("resourceVersion") is None
        else:
            assert [r.param("limit") for r in lists] == ["2", "2"]
            # a consistent paginated list: with resourceVersion=0 the API server ignores limit
            assert lists[0].param("resourceVersion") is None
            assert watches[-1].param("resourceVersion") == str(api.store.revision)
            assert watches[-1].param("sendInitialEvents") is None
            # refused once (422), then never asked again
            assert len(watches) == (2 if informer_streams else 1)
        assert 300 <= int(watches[-1].param("timeoutSeconds") or 0) <= 600
        seen.clear()
        api.store.patch(CONFIGMAPS, "default", "a", {"metadata": {"annotations": None}})
        api.store.patch(CONFIGMAPS, "default", "plain", {"metadata": {"annotations": TTL}})
        api.store.delete(CONFIGMAPS, "default", "b")
        await eventually(lambda: len(seen) == 3)
        assert seen == [
            ("update", "a", True, True),
            ("update", "plain", False, True),
            ("delete", "b", True, True),
        ]
        assert {k.name for k in cache.keys(CONFIGMAPS)} == {"c", "plain"}


@pytest.mark.parametrize("streaming", [True, False], ids=["streaming-list", "paginated"])
async def test_a_compacted_watch_relists_and_synthesises_deletes(
    api: FakeApiServer, kube: KubeClient, clock: FakeClock, streaming: bool
) -> None:
    for name in ("a", "b"):
        api.store.create(CONFIGMAPS, "default", annotated(name, TTL))
    cache = MetadataCache()
    seen: Seen = []

    def watches() -> list[RecordedRequest]:
        return [r for r in api.requests_to("GET") if r.is_watch]

    async with InformerSet(
        source=kube,
        cache=cache,
        on_object_change=recorder(seen),
        clock=clock,
        settings=InformerSettings(streaming_list=streaming),
        rng=random.Random(2),
    ) as informers:
        await informers.ensure([CONFIGMAPS])
        await eventually(lambda: api.store.watchers(CONFIGMAPS))
        if streaming:  # the streaming list's own stream ends normally: watched again at once
            api.close_watches()
            await eventually(lambda: len(watches()) == 2 and bool(api.store.watchers()))
        # A watch closed at once, with nothing in it, counts as a failure: the informer backs
        # off. Meanwhile "b" goes away, "c" appears and the history is compacted.
        api.close_watches()
        await sleeping(clock)
        api.store.delete(CONFIGMAPS, "default", "b")
        api.store.create(CONFIGMAPS, "default", annotated("c", TTL))
        api.store.compact()
        seen.clear()
        await clock.advance(60)  # past the backoff
        await eventually(lambda: len(seen) == 2)
        # The re-watch from the old resourceVersion got ERROR 410: a consistent relist.
        assert sorted(seen) == [("add", "c", False, True), ("delete", "b", True, False)]
        if streaming:
            assert watches()[-1].param("sendInitialEvents") == "true"
        else:
            relist = [r for r in api.requests_to("GET") if not r.is_watch][-1]
            assert relist.param("resourceVersion") is None
        assert {k.name for k in cache.keys(CONFIGMAPS)} == {"a", "c"}


def config(**overrides: float) -> LeaderElectionSettings:
    return LeaderElectionSettings(
        namespace="system",
        name="lock",
        lease_duration=overrides.get("lease", 15.0),
        renew_deadline=overrides.get("renew", 10.0),
        retry_period=overrides.get("retry", 2.0),
    )


async def test_the_elector_creates_renews_and_releases_the_lease(
    api: FakeApiServer, kube: KubeClient, clock: FakeClock
) -> None:
    status: list[bool] = []
    elector = LeaderElector(kube, config(), identity="me", clock=clock, on_status=status.append)
    leading = asyncio.Event()

    async def lead() -> None:
        leading.set()
        await asyncio.Event().wait()

    task = asyncio.create_task(elector.run(lead))
    await asyncio.wait_for(leading.wait(), 5)
    lease = api.store.get(LEASES, "system", "lock")
    assert lease["spec"]["holderIdentity"] == "me"
    assert lease["spec"]["leaseDurationSeconds"] == 15
    assert elector.may_write()
    version = lease["metadata"]["resourceVersion"]
    await sleeping(clock)
    await clock.advance(2)
    await eventually(lambda: api.requests_to("PUT"))
    renewed = api.store.get(LEASES, "system", "lock")
    assert int(renewed["metadata"]["resourceVersion"]) > int(version)
    assert renewed["spec"]["renewTime"] == "2026-01-01T00:00:02.000000Z"
    assert renewed["spec"]["acquireTime"] == lease["spec"]["acquireTime"]
    task.cancel()
    with pytest.raises(asyncio.CancelledError):
        await task
    released = api.store.get(LEASES, "system", "lock")
    assert released["spec"]["holderIdentity"] == ""
    assert released["spec"]["leaseDurationSeconds"] == 1
    assert status == [False, True, False]


async def test_renewals_that_keep_conflicting_lose_leadership_at_the_deadline(
    api: FakeApiServer, kube: KubeClient, clock: FakeClock
) -> None:
    leases = TrackedLeases(kube)
    elector = LeaderElector(leases, config(), identity="me", clock=clock, rng=random.Random(3))
    fenced: list[bool] = []

    async def lead() -> None:
        await asyncio.Event().wait()

    task = asyncio.create_task(elector.run(lead))
    await eventually(lambda: elector.is_leader)
    api.fail(409, method="PUT", times=1000)
    for _ in range(5):
        await leases.idle(clock)
        fenced.append(elector.may_write())
        await clock.advance(2)
    await eventually(task.done)
    with pytest.raises(LeadershipLost, match=r"not renewed within 10\.0s"):
        await task
    # Renewals every 2 s all conflict: writes stay allowed until 10 s after the last renewal.
    assert fenced == [True, True, True, True, True]
    assert not elector.may_write()
    assert api.store.get(LEASES, "system", "lock")["spec"]["holderIdentity"] == "me"


async def test_a_follower_waits_for_a_valid_holder_then_takes_over(
    api: FakeApiServer, kube: KubeClient, clock: FakeClock
) -> None:
    other = {
        "metadata": {"name": "lock"},
        "spec": {
            "holderIdentity": "other",
            "leaseDurationSeconds": 15,
            "renewTime": "2026-01-01T00:00:00.000000Z",
            "leaseTransitions": 4,
        },
    }
    api.store.create(LEASES, "system", other)
    leases = TrackedLeases(kube)
    elector = LeaderElector(leases, config(), identity="me", clock=clock, rng=random.Random(4))

    async def lead() -> None:
        await asyncio.Event().wait()

    task = asyncio.create_task(elector.run(lead))
    await leases.idle(clock)
    assert elector.holder == "other"
    observed = clock.monotonic()
    attempts = 0
    while not elector.is_leader and attempts < 20:
        await clock.advance_to_next()
        await leases.idle(clock)
        attempts += 1
    assert elector.is_leader
    # Taken over only once the lease, observed at `observed`, could have expired.
    assert observed + 15 <= clock.monotonic() <= observed + 15 + 4.4
    assert attempts >= 4
    spec = api.store.get(LEASES, "system", "lock")["spec"]
    assert (spec["holderIdentity"], spec["leaseTransitions"]) == ("me", 5)
    task.cancel()
    await asyncio.gather(task, return_exceptions=True)
