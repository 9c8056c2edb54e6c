"""The live tools' follower on the fake API server: one list, then a watch; relists on 410 only."""

from __future__ import annotations

from collections.abc import AsyncIterator
from typing import Any

import pytest

from lifecycle_controller.core.objects import keys
from lifecycle_controller.kube import KubeClient
from lifecycle_controller.kube.resources import CONFIGMAPS, POLICIES
from lifecycle_controller.tools.follow import Follower, Item, without_managed_fields
from tests.doubles.fakeapi import FakeApiServer
from tests.doubles.fakeclock import FakeClock
from tests.unit.support import annotated, eventually, sleeping


class Told:
    """What the follower told, in order: (name or uid, kept or gone)."""

    def __init__(self) -> None:
        self.changes: list[tuple[str, bool]] = []
        self._names: dict[str, str] = {}

    def __call__(self, uid: str, item: Item | None) -> None:
        if item is not None:
            self._names[uid] = str(item["metadata"]["name"])
        self.changes.append((self._names.get(uid, uid), item is not None))


def annotated_only(item: Item) -> Item | None:
    metadata = item.get("metadata") or {}
    kept = any(str(key).startswith(keys.PREFIX) for key in metadata.get("annotations") or {})
    return without_managed_fields(item) if kept else None


@pytest.fixture
async def follower(kube: KubeClient, clock: FakeClock) -> AsyncIterator[tuple[Follower, Told]]:
    told = Told()
    follower = Follower(
        kube, CONFIGMAPS, keep=annotated_only, changed=told, clock=clock, namespace="team-a"
    )
    follower.start()
    await follower.tried.wait()
    try:
        yield follower, told
    finally:
        await follower.stop()


def lists(api: FakeApiServer) -> int:
    return sum(1 for r in api.requests_to("GET", "/configmaps") if r.param("watch") != "true")


def names(follower: Follower) -> set[str]:
    return {str(item["metadata"]["name"]) for item in follower.items.values()}


async def watching(api: FakeApiServer, count: int = 1) -> None:
    await api.until(lambda: len(api.store.watchers(CONFIGMAPS)) >= count)


async def test_one_list_then_the_watch_tells_each_change(
    kube: KubeClient, api: FakeApiServer, follower: tuple[Follower, Told]
) -> None:
    found, told = follower
    await watching(api)
    await kube.create(CONFIGMAPS, "team-a", annotated("a", {keys.DELETE_AFTER: "1h"}))
    await kube.create(CONFIGMAPS, "team-a", {"metadata": {"name": "plain"}})
    await kube.create(CONFIGMAPS, "team-b", annotated("elsewhere", {keys.DELETE_AFTER: "1h"}))
    await eventually(lambda: names(found) == {"a"})
    patch = {"metadata": {"annotations": {keys.DELETE_AFTER: "2h"}}}
    await kube.merge_patch(CONFIGMAPS, "team-a", "plain", patch)
    await eventually(lambda: names(found) == {"a", "plain"})
    await kube.merge_patch(
        CONFIGMAPS, "team-a", "a", {"metadata": {"annotations": {keys.DELETE_AFTER: None}}}
    )
    await eventually(lambda: names(found) == {"plain"})
    await kube.delete(CONFIGMAPS, "team-a", "plain")
    await eventually(lambda: names(found) == set())
    assert [name for name, _ in told.changes] == ["a", "plain", "a", "plain"]
    assert [kept for _, kept in told.changes] == [True, True, False, False]
    assert lists(api) == 1
    assert found.problem == ""


async def test_a_watch_the_server_ends_is_opened_again_from_where_it_stopped(
    kube: KubeClient, api: FakeApiServer, follower: tuple[Follower, Told]
) -> None:
    found, _ = follower
    await watching(api)
    api.bookmark(CONFIGMAPS)
    api.close_watches(CONFIGMAPS)
    await kube.create(CONFIGMAPS, "team-a", annotated("after", {keys.DELETE_AFTER: "1h"}))
    await eventually(lambda: names(found) == {"after"})
    assert lists(api) == 1
    assert len([r for r in api.requests_to("GET", "/configmaps") if r.param("watch")]) == 2


async def test_an_expired_watch_lists_again_and_forgets_what_went_meanwhile(
    kube: KubeClient, api: FakeApiServer, follower: tuple[Follower, Told]
) -> None:
    found, told = follower
    await kube.create(CONFIGMAPS, "team-a", annotated("stays", {keys.DELETE_AFTER: "1h"}))
    await kube.create(CONFIGMAPS, "team-a", annotated("goes", {keys.DELETE_AFTER: "1h"}))
    await eventually(lambda: names(found) == {"stays", "goes"})
    api.store.delete(CONFIGMAPS, "team-a", "goes")  # unseen: the watch ends with a 410 first
    api.watch_error(410, CONFIGMAPS)
    await eventually(lambda: lists(api) == 2 and names(found) == {"stays"})
    assert told.changes[-1] == ("goes", False)


async def test_a_failed_list_is_named_and_tried_again(
    kube: KubeClient, api: FakeApiServer, clock: FakeClock
) -> None:
    told = Told()
    api.fail(403, path="/configmaps", times=1)
    follower = Follower(kube, CONFIGMAPS, changed=told, clock=clock)
    follower.start()
    try:
        await follower.tried.wait()
        assert follower.problem.startswith("configmaps: ")
        await sleeping(clock)
        await clock.advance(60)
        await eventually(lambda: follower.problem == "" and lists(api) == 2)
    finally:
        await follower.stop()


async def test_a_type_not_served_is_absent_and_asked_for_again(
    kube: KubeClient, api: FakeApiServer, clock: FakeClock
) -> None:
    told = Told()
    follower = Follower(kube, POLICIES, changed=told, clock=clock, whole=True)
    follower.start()
    try:
        await follower.tried.wait()
        assert (follower.absent, follower.problem, follower.items) == (True, "", {})
    finally:
        await follower.stop()


def test_managed_fields_are_not_kept() -> None:
    item: dict[str, Any] = {"metadata": {"name": "a", "managedFields": [{"manager": "x"}]}}
    assert without_managed_fields(item) == {"metadata": {"name": "a"}}
    assert without_managed_fields({"metadata": {"name": "b"}}) == {"metadata": {"name": "b"}}
