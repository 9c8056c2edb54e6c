"""The informer supervisor: start, stop, relist, what a 403 or 404 means, the synced signal.

Real reflector informers over a scripted source (each list answers what the test says; a
watch never delivers) and a fake clock: nothing sleeps for real.
"""

from __future__ import annotations

import asyncio
from collections import Counter
from collections.abc import AsyncIterator, Hashable, Mapping
from functools import partial
from typing import Any

import pytest
import structlog

from lifecycle_controller.controller.watch.ports import InformerSettings, Keeper
from lifecycle_controller.controller.watch.projection import WholeObjects
from lifecycle_controller.controller.watch.reflector import Informer
from lifecycle_controller.controller.watch.supervisor import (
    InformerSupervisor,
    Stop,
    Stopped,
)
from lifecycle_controller.core.objects.resources import ResourceType
from lifecycle_controller.kube import Forbidden, NotFound, TransportError
from tests.doubles.fakeclock import FakeClock

PODS = ResourceType("", "v1", "pods", "Pod", True)
JOBS = ResourceType("batch", "v1", "jobs", "Job", True)
#: A list that never answers.
STALL = object()
#: 403 ends the informer (the owner decides what follows), as the optional watches have it.
STOPPING = InformerSettings(stop_when_forbidden=True)


class _Source:
    """Each list of a type answers the next of ``answers[type]`` (an exception is raised,
    :data:`STALL` never answers), then an empty list; watches never deliver."""

    def __init__(self, **answers: list[object]) -> None:
        self.answers = answers
        self.lists: Counter[str] = Counter()

    async def list_objects(self, resource: ResourceType, **_: Any) -> dict[str, Any]:
        self.lists[resource.resource] += 1
        script = self.answers.get(resource.resource, [])
        answer = script.pop(0) if script else None
        if answer is STALL:
            await asyncio.Event().wait()
        if isinstance(answer, Exception):
            raise answer
        return {"metadata": {"resourceVersion": "1"}, "items": []}

    async def watch_objects(
        self, resource: ResourceType, **_: Any
    ) -> AsyncIterator[dict[str, Any]]:
        await asyncio.Event().wait()
        yield {}  # pragma: no cover - never reached


class _Keeper(Keeper):
    """Keeps nothing; tells ``listed`` after each full list."""

    def __init__(self, listed: Any = None) -> None:
        super().__init__()
        self._on_listed = listed

    def upsert(self, obj: Mapping[str, Any], *, created: bool, listed: bool) -> Hashable:
        return ""  # pragma: no cover - the source lists nothing

    def remove(self, obj: Mapping[str, Any]) -> None:
        pass  # pragma: no cover - the source deletes nothing

    def listed(self, stale: set[Hashable]) -> None:
        super().listed(stale)
        if self._on_listed is not None:
            self._on_listed()


async def _settle() -> None:
    for _ in range(50):
        await asyncio.sleep(0)


class _Harness:
    def __init__(self, source: _Source, settings: InformerSettings | None = None) -> None:
        self.clock = FakeClock()
        self.source = source
        self.stops: list[Stopped[str]] = []
        self.made: list[Informer] = []
        self.watches: InformerSupervisor[str] = InformerSupervisor(
            clock=self.clock, settings=settings, on_stop=self.stops.append
        )

    def make(self, resource: ResourceType = PODS) -> Informer:
        informer = self.watches.informer(
            resource,
            projection=WholeObjects(self.source),
            keeper=_Keeper(self.watches.listed),
            purpose="test",
        )
        self.made.append(informer)
        return informer


async def test_a_started_watch_lists_and_is_synced() -> None:
    h = _Harness(_Source())
    assert not h.watches.synced(["pods"])  # no such watch
    h.watches.start("pods", h.make, name="pods informer")
    assert h.watches.running("pods")
    assert h.watches.informer_of("pods") is h.made[0]
    assert await h.watches.wait_synced()
    assert h.watches.synced()
    assert h.watches.running_keys() == ["pods"]
    assert h.watches.ended("pods") is None
    assert h.stops == []
    await h.watches.aclose()
    assert not h.watches.running("pods")
    assert h.watches.informers() == {}


async def test_wait_synced_times_out_on_the_clock_and_wakes_on_a_list() -> None:
    h = _Harness(_Source(pods=[STALL], jobs=[STALL]))
    h.watches.start("pods", h.make, name="pods")
    waiting = asyncio.create_task(h.watches.wait_synced(10))
    await _settle()
    await h.clock.advance(10)
    assert await waiting is False
    # Woken by the list of another watch, the owner's rule is checked again.
    h.watches.start("jobs", partial(h.make, JOBS), name="jobs")
    h.watches.relist("jobs")  # started without ``relists``: nothing happens
    h.source.answers["pods"] = []
    pods_listed = asyncio.create_task(
        h.watches.wait_synced(synced=lambda: h.watches.synced(["pods"]))
    )
    await _settle()
    assert not pods_listed.done()
    await h.watches.stop("pods")
    h.watches.start("pods", h.make, name="pods")  # lists again, answered now
    assert await pods_listed is True
    assert not h.watches.synced()  # jobs still stalls
    await h.watches.aclose()


async def test_a_404_ends_a_watch_without_a_wait() -> None:
    h = _Harness(_Source(pods=[NotFound(404)]))
    h.watches.start("pods", h.make, name="pods")
    stopped = await h.watches.first_ended()
    assert stopped == Stopped("pods", Stop.GONE)
    assert h.stops == [stopped]
    assert h.watches.ended("pods") == stopped
    assert not h.watches.running("pods")
    assert h.watches.running_keys() == []
    assert h.watches.informer_of("pods") is h.made[0]  # still readable
    # An ended watch is replaced by a new start.
    h.watches.start("pods", h.make, name="pods")
    assert await h.watches.wait_synced()
    await h.watches.aclose()


async def test_a_403_is_told_then_a_new_informer_after_the_wait() -> None:
    h = _Harness(_Source(pods=[Forbidden(403), Forbidden(403)]), STOPPING)
    h.watches.start("pods", h.make, name="pods", forbidden=partial(h.clock.sleep, 60), gone=None)
    await _settle()
    assert [s.why for s in h.stops] == [Stop.FORBIDDEN]
    assert isinstance(h.stops[0].error, Forbidden)
    assert h.watches.running("pods")
    assert not h.watches.synced()
    await h.clock.advance(59)
    assert len(h.made) == 1  # still waiting
    await h.clock.advance(1)
    assert len(h.made) == 2
    assert len(h.stops) == 2
    await h.clock.advance(60)
    assert len(h.made) == 3
    assert await h.watches.wait_synced()
    assert h.watches.informer_of("pods") is h.made[2]
    await h.watches.aclose()


async def test_a_403_without_a_wait_ends_the_watch() -> None:
    h = _Harness(_Source(pods=[Forbidden(403)]), STOPPING)
    h.watches.start("pods", h.make, name="pods")
    stopped = await h.watches.first_ended()
    assert stopped.why is Stop.FORBIDDEN
    assert h.watches.ended("pods") is stopped
    await h.watches.aclose()


async def test_an_informer_given_itself_runs_again_after_the_wait() -> None:
    h = _Harness(_Source(pods=[NotFound(404)]))
    informer = h.make()
    waits: list[bool] = []

    async def wait() -> None:
        waits.append(True)

    h.watches.start("pods", informer, name="pods", gone=wait)
    assert await h.watches.wait_synced()
    assert waits == [True]
    assert h.watches.informer_of("pods") is informer
    assert h.source.lists["pods"] == 2
    await h.watches.aclose()


async def test_relist_starts_a_watch_over_with_a_new_informer() -> None:
    h = _Harness(_Source())
    h.watches.start("pods", h.make, name="pods", relists=True)
    assert await h.watches.wait_synced()
    h.watches.relist("pods")
    h.watches.relist("nothing")  # no such watch
    await _settle()
    assert len(h.made) == 2
    assert h.source.lists["pods"] == 2
    assert h.watches.informer_of("pods") is h.made[1]
    await h.watches.aclose()


async def test_a_relist_asked_while_waiting_after_a_stop_is_left_to_the_wait() -> None:
    h = _Harness(_Source(pods=[NotFound(404)]))
    h.watches.start("pods", h.make, name="pods", relists=True, gone=partial(h.clock.sleep, 5))
    await _settle()
    h.watches.relist("pods")
    await h.clock.advance(5)
    await _settle()
    assert len(h.made) == 2
    assert h.source.lists["pods"] == 2
    await h.watches.aclose()


async def test_start_refuses_a_running_watch_and_stop_waits_for_it() -> None:
    h = _Harness(_Source(pods=[STALL]))
    h.watches.start("pods", h.make, name="pods")
    with pytest.raises(RuntimeError, match="is running"):
        h.watches.start("pods", h.make, name="pods")
    await _settle()
    await h.watches.stop("pods", "nothing")
    assert not h.watches.running("pods")
    assert h.watches.informer_of("pods") is None
    await h.watches.stop()  # nothing to stop


async def test_cancel_forgets_now_and_aclose_waits() -> None:
    h = _Harness(_Source(pods=[STALL]))
    h.watches.start("pods", h.make, name="pods")
    await _settle()
    task = next(t for t in asyncio.all_tasks() if t.get_name() == "pods")
    h.watches.cancel("pods")
    assert h.watches.running_keys() == []
    assert not task.done()
    await h.watches.aclose()
    assert task.cancelled()
    await h.watches.aclose()  # idempotent


async def test_first_ended_needs_a_watch() -> None:
    h = _Harness(_Source())
    with pytest.raises(RuntimeError, match="no watch"):
        await h.watches.first_ended()


async def test_disconnected_names_running_watches_that_fail_in_a_row() -> None:
    outage: list[object] = [TransportError("down"), TransportError("down"), STALL]
    h = _Harness(_Source(pods=outage, jobs=[NotFound(404)]))
    h.watches.start("pods", h.make, name="pods")
    h.watches.start("jobs", partial(h.make, JOBS), name="jobs")
    await _settle()
    assert h.watches.disconnected() == []  # one failure is not an outage
    await h.clock.advance(2)
    await _settle()
    assert h.watches.disconnected() == ["pods"]  # jobs ended: not reported
    await h.watches.aclose()


class _Crashing(Informer):
    async def run(self) -> None:
        raise ValueError("a bug")


async def test_a_crashed_task_is_logged_and_raised_to_who_waits() -> None:
    h = _Harness(_Source())
    crashing = _Crashing(
        resource=PODS,
        namespace=None,
        projection=WholeObjects(h.source),
        keeper=_Keeper(),
        clock=h.clock,
    )
    with structlog.testing.capture_logs() as logs:
        h.watches.start("pods", crashing, name="pods")
        with pytest.raises(ValueError, match="a bug"):
            await h.watches.first_ended()
        await _settle()
    assert h.watches.ended("pods") is None
    assert not h.watches.running("pods")
    assert [entry["event"] for entry in logs] == ["informer task crashed"]
    await h.watches.aclose()


async def test_informers_share_the_owner_settings_unless_given() -> None:
    h = _Harness(_Source(), STOPPING)
    informer = h.make()
    assert informer.purpose == "test"
    assert informer.namespace is None
    own = h.watches.informer(
        JOBS,
        projection=WholeObjects(h.source),
        keeper=_Keeper(),
        purpose="jobs",
        namespace="a",
        settings=InformerSettings(),
    )
    assert own.namespace == "a"
    assert own.resource == JOBS
