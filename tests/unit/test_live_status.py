"""``status --watch``'s live rows on the fake API server: judged again only when needed.

Each refresh is compared with what ``status`` (:func:`collect_status`, one whole look) says
at the same instant: the live rows must be the same rows, whatever changed and however.
"""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from typing import Any

import pytest

from lifecycle_controller.core import DecisionSettings
from lifecycle_controller.core.objects import keys
from lifecycle_controller.core.objects.scope import ScopeConfig
from lifecycle_controller.core.text.timestamps import format_rfc3339_nano
from lifecycle_controller.core.text.units import NS_PER_SECOND
from lifecycle_controller.kube import KubeClient
from lifecycle_controller.kube.resources import (
    CLUSTER_POLICIES,
    CONFIGMAPS,
    NAMESPACES,
    POLICIES,
)
from lifecycle_controller.tools.live_status import REDISCOVER_S, LiveStatus, recheck_at
from lifecycle_controller.tools.report import Row
from lifecycle_controller.tools.status import collect_status
from tests.doubles.fakeapi import DEPLOYMENTS, FakeApiServer
from tests.doubles.fakeclock import FakeClock
from tests.unit.support import annotated

SCOPE = ScopeConfig(watch_resources=("configmaps",))
NOW = 1_800_000_000 * NS_PER_SECOND


def at(seconds: int) -> str:
    return format_rfc3339_nano(NOW + seconds * NS_PER_SECOND)


def row(next_at: str = "", upcoming: tuple[str, ...] = ()) -> Row:
    return Row(
        api_version="v1",
        kind="ConfigMap",
        namespace="a",
        name="x",
        action="delete" if next_at else "",
        next=next_at,
        summary="",
        steps=[],
        problems=[],
        upcoming=list(upcoming),
        dry_run=False,
    )


@pytest.mark.parametrize(
    ("shown", "expected"),
    [
        (None, None),  # nothing shown: time changes nothing
        (row(), None),  # a problem only
        (row(at(60)), NOW + 60 * NS_PER_SECOND),  # its due action
        (row(at(0)), NOW),  # due now: at every refresh
        (row(at(-5)), NOW),  # overdue (held): at every refresh
        (row(at(60), (at(60), at(120))), NOW + 60 * NS_PER_SECOND),
        (row("", (at(30), at(90))), NOW + 30 * NS_PER_SECOND),  # only occurrences named
        (row("not a time", (at(-10), at(90))), NOW + 90 * NS_PER_SECOND),
    ],
)
def test_when_a_row_is_judged_again(shown: Row | None, expected: int | None) -> None:
    assert recheck_at(shown, NOW) == expected


@pytest.fixture
async def live(kube: KubeClient, clock: FakeClock) -> AsyncIterator[LiveStatus]:
    following = LiveStatus(kube, scope=SCOPE, settings=DecisionSettings(), clock=clock)
    await following.start()
    try:
        yield following
    finally:
        await following.stop()


def later(clock: FakeClock, seconds: float) -> str:
    return format_rfc3339_nano(clock.now_ns() + int(seconds * NS_PER_SECOND))


async def same_as_status(live: LiveStatus, kube: KubeClient, clock: FakeClock) -> list[Row]:
    """The live rows, checked against one whole look of ``status`` now."""
    looked = await collect_status(kube, scope=SCOPE, clock=clock, settings=DecisionSettings())
    rows = live.rows()
    assert rows == looked.rows
    return rows


def lists(api: FakeApiServer, path: str = "/configmaps") -> int:
    return sum(1 for r in api.requests_to("GET", path) if r.param("watch") != "true")


async def settled(live: LiveStatus, api: FakeApiServer, what: Any) -> bool:
    """Refresh until ``what()`` holds (a watch event may still be on its way)."""
    for _ in range(100):
        await live.refresh()
        if what():
            return True
        await asyncio.sleep(0)  # a yield: the watch delivers
    return False


async def test_a_change_is_judged_from_the_watch_without_listing_again(
    kube: KubeClient, api: FakeApiServer, clock: FakeClock, live: LiveStatus
) -> None:
    assert await live.refresh() is False  # nothing in the cluster yet
    await kube.create(CONFIGMAPS, "team-a", annotated("a", {keys.DELETE_AT: later(clock, 600)}))
    assert await settled(live, api, lambda: len(live.rows()) == 1)
    await same_as_status(live, kube, clock)
    before = lists(api)
    await kube.merge_patch(
        CONFIGMAPS, "team-a", "a", {"metadata": {"annotations": {keys.DELETE_AT: None}}}
    )
    assert await settled(live, api, lambda: live.rows() == [])
    assert lists(api) == before  # the watch told it; nothing listed again
    assert live.lists() == {"configmaps": 1}


async def test_rows_move_with_time_without_a_call(
    kube: KubeClient, api: FakeApiServer, clock: FakeClock, live: LiveStatus
) -> None:
    await kube.create(CONFIGMAPS, "team-a", annotated("soon", {keys.DELETE_AT: later(clock, 10)}))
    await kube.create(CONFIGMAPS, "team-a", annotated("cron", {keys.RESTART_CRON: "0 3 * * *"}))
    await kube.create(CONFIGMAPS, "team-a", annotated("broken", {keys.DELETE_AFTER: "2x"}))
    assert await settled(live, api, lambda: len(live.rows()) == 3)
    assert await live.refresh() is False  # the clock did not move
    asked = len(api.requests)
    await clock.advance(11)
    assert await live.refresh() is True  # "soon" fell due
    made = {(r.method, r.path) for r in api.requests[asked:]}
    assert all("lifecyclepolicies" in path for _, path in made), made  # not served: asked again
    rows = await same_as_status(live, kube, clock)
    assert next(r for r in rows if r.name == "soon").summary == "delete now"
    assert await live.refresh() is False  # judged again (due), unchanged


async def test_a_policy_keeping_other_objects_lists_their_type_again(
    kube: KubeClient, api: FakeApiServer, clock: FakeClock
) -> None:
    api.serve(CLUSTER_POLICIES)
    api.serve(POLICIES)
    labelled = {"metadata": {"name": "cache-1", "labels": {"tier": "cache"}}}
    await kube.create(CONFIGMAPS, "team-a", labelled)
    async with LiveStatus(kube, scope=SCOPE, settings=DecisionSettings(), clock=clock) as live:
        await live.refresh()
        assert live.rows() == []
        policy = {
            "metadata": {"name": "caches"},
            "spec": {
                "resources": ["configmaps"],
                "selector": {"matchLabels": {"tier": "cache"}},
                "lifecycle": {"delete-after": "1h"},
            },
        }
        await kube.create(CLUSTER_POLICIES, None, policy)
        assert await settled(live, api, lambda: [r.name for r in live.rows()] == ["cache-1"])
        assert live.lists() == {"configmaps": 2}  # the unlabelled object was never kept
        assert live.rows()[0].policy == "ClusterLifecyclePolicy/caches"
        await same_as_status(live, kube, clock)
        read = live.docs
        labels = {"metadata": {"labels": {"reviewed": "yes"}}}  # no new generation
        await kube.merge_patch(CLUSTER_POLICIES, None, "caches", labels)
        assert await settled(live, api, lambda: live.docs is not read)  # read again
        assert live.lists() == {"configmaps": 2}  # what the policy keeps did not change
        assert live.judged == 0  # nor what it decides: nothing judged again
        await same_as_status(live, kube, clock)


async def test_a_namespaces_defaults_judge_its_objects_again(
    kube: KubeClient, api: FakeApiServer, clock: FakeClock, live: LiveStatus
) -> None:
    await kube.create(NAMESPACES, None, {"metadata": {"name": "previews"}})
    await kube.create(CONFIGMAPS, "previews", annotated("a", {keys.DELETE_AT: later(clock, 60)}))
    assert await settled(live, api, lambda: len(live.rows()) == 1)
    assert live.rows()[0].dry_run is False
    dry = {"metadata": {"annotations": {keys.DRY_RUN: "true"}}}
    await kube.merge_patch(NAMESPACES, None, "previews", dry)
    assert await settled(live, api, lambda: live.rows()[0].dry_run)
    assert live.rows()[0].inherited == ["dry-run: true (from namespace previews)"]
    await same_as_status(live, kube, clock)


async def test_a_type_served_later_is_followed_and_one_that_goes_is_dropped(
    kube: KubeClient, api: FakeApiServer, clock: FakeClock
) -> None:
    scope = ScopeConfig(watch_resources=("configmaps", "deployments.apps"))
    api.unserve(DEPLOYMENTS)
    async with LiveStatus(kube, scope=scope, settings=DecisionSettings(), clock=clock) as live:
        await live.refresh()
        assert set(live.lists()) == {"configmaps"}
        api.serve(DEPLOYMENTS)
        await clock.advance(REDISCOVER_S)
        await live.refresh()
        assert set(live.lists()) == {"configmaps", "deployments.apps"}
        await kube.create(CONFIGMAPS, "a", annotated("x", {keys.DELETE_AT: later(clock, 60)}))
        assert await settled(live, api, lambda: len(live.rows()) == 1)
        api.unserve(CONFIGMAPS)
        await clock.advance(REDISCOVER_S)
        await live.refresh()
        assert set(live.lists()) == {"deployments.apps"}
        assert live.rows() == []


async def test_what_cannot_be_read_is_named(
    kube: KubeClient, api: FakeApiServer, clock: FakeClock
) -> None:
    api.fail(403, path="/configmaps", times=1)
    api.fail(403, path="/namespaces", times=1)
    async with LiveStatus(kube, scope=SCOPE, settings=DecisionSettings(), clock=clock) as live:
        unreadable = live.unreadable()
        assert [line.split(":")[0] for line in unreadable] == [
            "namespaces (namespace defaults are not shown)",
            "configmaps",
        ]
        assert live.report().unreadable == unreadable
