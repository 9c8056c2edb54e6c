"""The rollout watch on the fake API server and the fake clock.

docs/behaviour.md#rollout-verification: while a workload's rollout is followed, one watch of
whole objects of its type keeps its latest state; a follower takes that state instead of
reading the workload when it is the one the informer cache holds, reads it otherwise (a
forced turn reads only while the watch does not deliver), and the watch ends with the
type's last follower.
"""

from __future__ import annotations

import asyncio
import json

from lifecycle_controller.controller.events.recorder import KubeEventRecorder
from lifecycle_controller.controller.rollout.tracker import (
    FORCED_READ_TICKS,
    MAX_WATCH_WAITS,
    RolloutTracker,
)
from lifecycle_controller.controller.rollout.watch import RolloutWatch
from lifecycle_controller.controller.watch.cache import CachedObject, MetadataCache
from lifecycle_controller.core.objects import keys
from lifecycle_controller.core.objects.resources import ObjectKey
from lifecycle_controller.kube import KubeClient
from tests.doubles.fakeapi import DEPLOYMENTS, STATEFULSETS, FakeApiServer
from tests.doubles.fakeclock import FakeClock
from tests.unit.support import eventually
from tests.unit.test_guardrails import (
    DUE,
    Metrics,
    build,
    deployment,
    put,
    reasons,
    status_reads,
    tick,
)


def watched(
    api: FakeApiServer, kube: KubeClient, clock: FakeClock, metrics: Metrics
) -> tuple[RolloutTracker, RolloutWatch]:
    recorder = KubeEventRecorder(kube, clock=clock, reporting_instance="test")
    watch = RolloutWatch(kube, clock)
    tracker = RolloutTracker(
        kube, recorder, clock, metrics, timeout=600, poll_interval=1, watch=watch
    )
    return tracker, watch


async def restarted(
    api: FakeApiServer, kube: KubeClient, clock: FakeClock, metrics: Metrics
) -> tuple[RolloutTracker, RolloutWatch, ObjectKey, MetadataCache]:
    tracker, watch = watched(api, kube, clock, metrics)
    reconcile, cache = build(kube, clock, rollouts=tracker)
    tracker.version_of = lambda key: o.resource_version if (o := cache.get(key)) else None
    key = put(api, cache, DEPLOYMENTS, deployment("web", {keys.RESTART_AT: DUE}))
    assert await reconcile(key) is None  # patched and followed
    await eventually(
        lambda: (DEPLOYMENTS, None) in watch.watching and bool(api.store.watchers(DEPLOYMENTS))
    )
    return tracker, watch, key, cache


async def delivering(api: FakeApiServer, watch: RolloutWatch, key: ObjectKey) -> None:
    """The watch delivers (a bookmark): from now on it streams ``key``'s states."""
    api.bookmark(DEPLOYMENTS)
    await eventually(lambda: watch.streaming(key))


async def ticks_without_a_read(
    api: FakeApiServer, clock: FakeClock, tracker: RolloutTracker, metrics: Metrics, n: int
) -> None:
    """``n`` ticks after which the follower waits again, none of them reading."""
    for _ in range(n):
        await tick(clock)
        await eventually(lambda: tracker.awaiting_turn == 1)
    assert status_reads(api) == 0
    assert metrics.states == []


def moved(api: FakeApiServer, version: str) -> CachedObject:
    """The cached state of "web" at ``version``, a resourceVersion the watch never saw."""
    metadata = dict(api.store.get(DEPLOYMENTS, "team", "web")["metadata"])
    metadata["resourceVersion"] = version
    return CachedObject.from_metadata(metadata)


async def read_on_the_next_tick(api: FakeApiServer, clock: FakeClock, metrics: Metrics) -> None:
    """The next tick reads the workload from the API: one GET, counted as a ``read``."""
    await tick(clock)
    await eventually(lambda: metrics.states == ["read"])
    assert status_reads(api) == 1


def rolled_out(api: FakeApiServer, name: str) -> str:
    """Write the status the Deployment controller would; return the new resourceVersion."""
    generation = api.store.get(DEPLOYMENTS, "team", name)["metadata"].get("generation", 0)
    api.store.patch(DEPLOYMENTS, "team", name, {"status": {"observedGeneration": generation}})
    return str(api.store.get(DEPLOYMENTS, "team", name)["metadata"]["resourceVersion"])


async def test_a_follower_takes_the_state_the_watch_kept_instead_of_reading(
    api: FakeApiServer, kube: KubeClient, clock: FakeClock
) -> None:
    metrics = Metrics()
    tracker, watch, key, cache = await restarted(api, kube, clock, metrics)
    version = rolled_out(api, "web")
    await eventually(lambda: watch.version(key) == version)
    cache.put(
        key, CachedObject.from_metadata(api.store.get(DEPLOYMENTS, "team", "web")["metadata"])
    )

    await tick(clock)
    await eventually(lambda: "RolloutCompleted" in reasons(api, "web"))
    assert status_reads(api) == 0
    assert metrics.states == ["watch"]
    await eventually(lambda: not watch.watching)  # its last follower is done: the watch ends
    await tracker.aclose()


async def test_until_the_watch_delivers_the_states_are_read(
    api: FakeApiServer, kube: KubeClient, clock: FakeClock
) -> None:
    metrics = Metrics()
    tracker, watch, key, cache = await restarted(api, kube, clock, metrics)
    assert not watch.streaming(key)  # open, but nothing delivered yet
    cache.put(key, moved(api, "999999"))  # a version the watch never delivered

    await read_on_the_next_tick(api, clock, metrics)
    await tracker.aclose()


async def test_a_delivering_watch_is_waited_for_a_few_turns_then_the_state_is_read(
    api: FakeApiServer, kube: KubeClient, clock: FakeClock
) -> None:
    metrics = Metrics()
    tracker, watch, key, cache = await restarted(api, kube, clock, metrics)
    await delivering(api, watch, key)
    cache.put(key, moved(api, "999999"))  # the cache moved; the watch has not caught up

    await ticks_without_a_read(api, clock, tracker, metrics, MAX_WATCH_WAITS)
    await read_on_the_next_tick(api, clock, metrics)
    await tracker.aclose()


async def test_while_the_watch_delivers_a_forced_turn_reads_nothing(
    api: FakeApiServer, kube: KubeClient, clock: FakeClock
) -> None:
    metrics = Metrics()
    tracker, watch, key, _ = await restarted(api, kube, clock, metrics)
    await delivering(api, watch, key)

    # Nothing moves for five forced turns: with the watch delivering, none of them reads (a
    # forced turn used to wait for the watch three turns, then read).
    await ticks_without_a_read(api, clock, tracker, metrics, 5 * FORCED_READ_TICKS)

    version = rolled_out(api, "web")  # and the state the watch delivers is still taken
    await eventually(lambda: watch.version(key) == version)
    await tick(clock)
    await eventually(lambda: "RolloutCompleted" in reasons(api, "web"))
    assert metrics.states == ["watch"]
    assert status_reads(api) == 0
    await tracker.aclose()


async def test_a_state_only_the_watch_saw_is_evaluated_at_the_next_tick_without_a_read(
    api: FakeApiServer, kube: KubeClient, clock: FakeClock
) -> None:
    metrics = Metrics()
    tracker, watch, key, _ = await restarted(api, kube, clock, metrics)
    version = rolled_out(api, "web")  # the cache never moves: an informer that lost its watch
    await eventually(lambda: watch.version(key) == version)

    await tick(clock)
    await eventually(lambda: "RolloutCompleted" in reasons(api, "web"))
    assert metrics.states == ["watch"]
    assert status_reads(api) == 0
    await tracker.aclose()


async def test_only_lines_about_followed_workloads_are_decoded(
    api: FakeApiServer, kube: KubeClient, clock: FakeClock
) -> None:
    watch = RolloutWatch(kube, clock)
    key = ObjectKey(DEPLOYMENTS, "team", "web")
    watch.follow(key, "uid-web", "1")
    decodes = watch.decodes((DEPLOYMENTS, None))

    def line(event: str, uid: str, owner: str = "") -> bytes:
        metadata = {"name": "x", "namespace": "team", "uid": uid}
        if owner:
            metadata["ownerReferences"] = [{"uid": owner}]  # type: ignore[assignment]
        return json.dumps({"type": event, "object": {"metadata": metadata}}).encode()

    def wants(raw: bytes) -> bool:
        framed = b"junk\n" + raw + b"\n"  # the filter is given the line's bounds
        return decodes(framed, 5, 5 + len(raw))

    assert wants(line("MODIFIED", "uid-web"))
    assert wants(b'{"type":"MODIFIED","object":{"metadata":{"uid":"uid-web"}}}')  # Go's spacing
    assert not wants(b'{"type":"MODIFIED","object":{"metadata":{"uid":7}}}')
    assert not wants(line("MODIFIED", "uid-other"))
    assert wants(line("MODIFIED", "uid-other", owner="uid-web"))  # decoded, not kept
    assert wants(b'{"type":"BOOKMARK","object":{"metadata":{"resourceVersion":"9"}}}')
    assert wants(b'{"type":"ERROR","object":{"code":410}}')
    other_type = line("MODIFIED", "uid-web")
    assert not watch.decodes((STATEFULSETS, None))(other_type, 0, len(other_type))
    await watch.aclose()


async def test_the_watch_of_a_type_ends_with_its_last_follower(
    api: FakeApiServer, kube: KubeClient, clock: FakeClock
) -> None:
    watch = RolloutWatch(kube, clock)
    version = str(api.store.revision)
    web, api_ = ObjectKey(DEPLOYMENTS, "team", "web"), ObjectKey(DEPLOYMENTS, "team", "api")
    watch.follow(web, "uid-web", version)
    watch.follow(api_, "uid-api", version)
    await eventually(lambda: len(api.store.watchers(DEPLOYMENTS)) == 1)  # one for both

    watch.unfollow(web)
    await asyncio.sleep(0)
    assert watch.watching == {(DEPLOYMENTS, None)}
    watch.unfollow(api_)
    await eventually(lambda: not api.store.watchers(DEPLOYMENTS))
    assert not watch.watching
    await watch.aclose()


async def test_a_watch_fallen_too_far_behind_goes_on_from_now(
    api: FakeApiServer, kube: KubeClient, clock: FakeClock
) -> None:
    metrics = Metrics()
    tracker, watch, key, _ = await restarted(api, kube, clock, metrics)
    opened = len(api.requests_to("GET"))
    api.watch_error(410, DEPLOYMENTS)  # history compacted: the watch cannot resume
    await eventually(
        lambda: len(api.store.watchers(DEPLOYMENTS)) == 1 and len(api.requests_to("GET")) > opened
    )

    version = rolled_out(api, "web")
    await eventually(lambda: watch.version(key) == version)
    await tracker.aclose()


async def test_with_namespaced_informers_each_namespace_has_its_own_watch(
    api: FakeApiServer, kube: KubeClient, clock: FakeClock
) -> None:
    watch = RolloutWatch(kube, clock, per_namespace=True)  # namespaced Roles suffice
    version = str(api.store.revision)
    watch.follow(ObjectKey(DEPLOYMENTS, "team", "web"), "uid-web", version)
    watch.follow(ObjectKey(DEPLOYMENTS, "team", "api"), "uid-api", version)
    watch.follow(ObjectKey(DEPLOYMENTS, "ops", "web"), "uid-ops", version)
    await eventually(lambda: len(api.store.watchers(DEPLOYMENTS)) == 2)
    assert sorted(str(w.namespace) for w in api.store.watchers(DEPLOYMENTS)) == ["ops", "team"]
    assert watch.watching == {(DEPLOYMENTS, "team"), (DEPLOYMENTS, "ops")}
    await watch.aclose()
    await eventually(lambda: not api.store.watchers(DEPLOYMENTS))
