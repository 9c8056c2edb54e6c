"""The namespace-defaults store over the real client against the fake API server."""

from __future__ import annotations

import asyncio
import random
from collections.abc import AsyncIterator

import pytest

from lifecycle_controller.controller.namespace.defaults import NamespaceDefaultsStore
from lifecycle_controller.core.decision.events import Event
from lifecycle_controller.core.objects import keys
from lifecycle_controller.core.objects.resources import ObjectRef
from lifecycle_controller.kube import KubeClient
from lifecycle_controller.kube.resources import NAMESPACES
from lifecycle_controller.machinery.tasks import cancel_and_wait
from tests.doubles.fakeapi import FakeApiServer
from tests.doubles.fakeclock import FakeClock
from tests.unit.support import annotated, eventually


class Recorded:
    def __init__(self) -> None:
        self.changes: list[str] = []
        self.reports: list[tuple[ObjectRef, Event]] = []

    def on_change(self, namespace: str) -> None:
        self.changes.append(namespace)

    async def report(self, ref: ObjectRef, event: Event) -> None:
        self.reports.append((ref, event))


@pytest.fixture
def recorded() -> Recorded:
    return Recorded()


async def running(store: NamespaceDefaultsStore) -> AsyncIterator[NamespaceDefaultsStore]:
    task = asyncio.create_task(store.run())
    try:
        yield store
    finally:
        await cancel_and_wait(task)


def make_store(
    kube: KubeClient, clock: FakeClock, recorded: Recorded, names: list[str] | None = None
) -> NamespaceDefaultsStore:
    return NamespaceDefaultsStore(
        source=kube,
        clock=clock,
        names=names,
        on_change=recorded.on_change,
        report=recorded.report,
        rng=random.Random(1),
    )


async def test_defaults_follow_the_namespace_and_only_their_changes_re_evaluate(
    api: FakeApiServer, kube: KubeClient, clock: FakeClock, recorded: Recorded
) -> None:
    api.store.create(NAMESPACES, None, annotated("previews", {keys.DRY_RUN: "true"}))
    api.store.create(NAMESPACES, None, annotated("plain", {}))
    store = make_store(kube, clock, recorded)
    assert not store.synced()
    async for _ in running(store):
        await asyncio.wait_for(store.wait_synced(), 5)
        defaults = store.get("previews")
        assert defaults is not None
        assert defaults.dry_run is True
        assert store.get("plain") is None
        assert store.get(None) is None
        assert recorded.changes == ["previews"]

        api.store.patch(NAMESPACES, None, "previews", {"metadata": {"labels": {"team": "a"}}})
        api.store.patch(
            NAMESPACES,
            None,
            "previews",
            {"metadata": {"annotations": {keys.DRY_RUN: "false"}}},
        )
        await eventually(lambda: len(recorded.changes) == 2)
        defaults = store.get("previews")
        assert defaults is not None
        assert defaults.dry_run is False

        api.store.patch(
            NAMESPACES, None, "previews", {"metadata": {"annotations": {keys.DRY_RUN: None}}}
        )
        await eventually(lambda: len(recorded.changes) == 3)
        assert store.get("previews") is None
        assert recorded.reports == []


async def test_a_namespace_gaining_or_losing_exempt_re_evaluates_its_objects(
    api: FakeApiServer, kube: KubeClient, clock: FakeClock, recorded: Recorded
) -> None:
    api.store.create(NAMESPACES, None, annotated("team-a", {}))
    store = make_store(kube, clock, recorded)
    async for _ in running(store):
        await asyncio.wait_for(store.wait_synced(), 5)
        assert not store.exempt("team-a")
        api.store.patch(
            NAMESPACES, None, "team-a", {"metadata": {"annotations": {keys.EXEMPT: "true"}}}
        )
        await eventually(lambda: recorded.changes == ["team-a"])
        assert store.exempt("team-a")
        assert not store.exempt("elsewhere")
        api.store.patch(
            NAMESPACES, None, "team-a", {"metadata": {"annotations": {keys.EXEMPT: None}}}
        )
        await eventually(lambda: recorded.changes == ["team-a", "team-a"])
        assert not store.exempt("team-a")


async def test_an_invalid_default_is_reported_once_on_the_namespace(
    api: FakeApiServer, kube: KubeClient, clock: FakeClock, recorded: Recorded
) -> None:
    created = api.store.create(
        NAMESPACES, None, annotated("broken", {keys.MAINTENANCE_WINDOW: "whenever"})
    )
    store = make_store(kube, clock, recorded)
    async for _ in running(store):
        await eventually(lambda: len(recorded.reports) == 1)
        ref, event = recorded.reports[0]
        assert ref.key.resource == NAMESPACES
        assert (ref.key.name, ref.uid) == ("broken", created["metadata"]["uid"])
        assert (event.type.value, event.reason) == ("Warning", "InvalidAnnotation")
        assert "maintenance-window" in event.message
        defaults = store.get("broken")
        assert defaults is not None
        assert defaults.problems
        # Another change that keeps the same bad value is not reported again.
        api.store.patch(
            NAMESPACES, None, "broken", {"metadata": {"annotations": {keys.DRY_RUN: "true"}}}
        )
        await eventually(lambda: len(recorded.changes) == 2)
        await asyncio.sleep(0)
        assert len(recorded.reports) == 1


async def test_exact_names_watch_just_those_namespaces_by_field_selector(
    api: FakeApiServer, kube: KubeClient, clock: FakeClock, recorded: Recorded
) -> None:
    api.store.create(NAMESPACES, None, annotated("a", {keys.DRY_RUN: "true"}))
    api.store.create(NAMESPACES, None, annotated("b", {keys.DRY_RUN: "true"}))
    store = make_store(kube, clock, recorded, names=["a"])
    async for _ in running(store):
        await asyncio.wait_for(store.wait_synced(), 5)
        assert store.get("a") is not None
        assert store.get("b") is None
        lists = api.requests_to("GET", "/api/v1/namespaces")
        assert lists
        assert all(r.param("fieldSelector") == "metadata.name=a" for r in lists)


async def test_forbidden_counts_as_synced_without_defaults(
    api: FakeApiServer, kube: KubeClient, clock: FakeClock, recorded: Recorded
) -> None:
    api.store.create(NAMESPACES, None, annotated("a", {keys.DRY_RUN: "true"}))
    api.fail(403, path="/api/v1/namespaces", times=1)
    store = make_store(kube, clock, recorded)
    async for _ in running(store):
        await asyncio.wait_for(store.wait_synced(), 5)
        assert store.get("a") is None  # behaves as before the feature
        await eventually(lambda: bool(clock.sleeper_deadlines()))
        await clock.advance(300)  # the retry (60 s and jitter) reads the Namespaces
        await eventually(lambda: store.get("a") is not None)
