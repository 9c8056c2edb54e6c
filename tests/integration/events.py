"""Reading the Events (events.k8s.io/v1) about an object, the way the tests assert on them.

One reader, :func:`list_events`: the Events regarding an object by name, oldest first, by
default only those this controller reported (kube-controller-manager reports about
Deployments too). Views of it:

- :func:`events_of`: ``(type, reason, note)`` tuples of the controller's Events;
- :func:`event_records`: :class:`EventRecord` with the series count, of every reporter's
  Events (the restart scenarios assert that nobody warned, kube-controller-manager included);

and waits for an Event with a given reason (:func:`wait_event`, :func:`wait_for_event`) or
for the one Event an action writes (:func:`sole_event`).
"""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from typing import Any, TypeVar

from lifecycle_controller.kube import EVENTS, KubeClient
from tests.integration.keys import CONTROLLER
from tests.integration.support import eventually

EventTuple = tuple[str, str, str]
_T = TypeVar("_T")
#: Two reads this far apart that agree end :func:`events_of` (at most SETTLE_READS more reads).
SETTLE_SECONDS = 0.5
SETTLE_READS = 20


#: The Normal Event that follows every restart once its rollout completes (the rollout
#: verification, docs/operator-guide.md#blast-radius-controls). It comes whenever the
#: Deployment controller gets there, so the scenario checks leave it out.
ROLLOUT_COMPLETED = "RolloutCompleted"


async def list_events(
    kube: KubeClient, namespace: str, name: str, *, reporter: str | None = CONTROLLER
) -> list[dict[str, Any]]:
    """The Events about ``name`` in ``namespace``, oldest first, as the API returns them.

    Only those whose ``reportingController`` is ``reporter``; every Event when it is None.
    Cluster-scoped objects have theirs in ``default``.
    """
    listing = await kube.request(
        "GET",
        EVENTS.collection_path(namespace),
        query=[("fieldSelector", f"regarding.name={name}")],
    )
    items = [
        event
        for event in listing["items"]
        if reporter is None or event.get("reportingController") == reporter
    ]
    return sorted(items, key=lambda event: str(event.get("eventTime") or ""))


async def events_of(
    kube: KubeClient,
    namespace: str,
    name: str,
    *,
    reporter: str | None = CONTROLLER,
    rollouts: bool = False,
) -> list[EventTuple]:
    """(type, reason, note) of the controller's Events about ``name``, oldest first.

    ``RolloutCompleted`` is left out unless ``rollouts`` (see :data:`ROLLOUT_COMPLETED`).
    The controller writes an action's Event a moment after the action (beside its workers,
    docs/behaviour.md#event-catalogue), so a test that has just seen the action's effect
    reads until two reads :data:`SETTLE_SECONDS` apart agree.
    """

    async def read() -> list[EventTuple]:
        return [
            (event["type"], event["reason"], event.get("note", ""))
            for event in await list_events(kube, namespace, name, reporter=reporter)
            if rollouts or event["reason"] != ROLLOUT_COMPLETED
        ]

    return await settled(read)


async def settled(read: Callable[[], Awaitable[list[_T]]]) -> list[_T]:
    """``read()`` again until two reads :data:`SETTLE_SECONDS` apart agree."""
    seen = await read()
    for _ in range(SETTLE_READS):
        await asyncio.sleep(SETTLE_SECONDS)
        again = await read()
        if again == seen:
            break
        seen = again
    return seen


async def wait_event(
    kube: KubeClient, namespace: str, name: str, reason: str, *, within: float = 10
) -> list[EventTuple]:
    """Poll the controller's Events about ``name`` until one has ``reason``; return them all
    (``RolloutCompleted`` only when that is the reason waited for)."""
    seen: list[EventTuple] = []
    rollouts = reason == ROLLOUT_COMPLETED

    async def present() -> bool:
        seen[:] = await events_of(kube, namespace, name, rollouts=rollouts)
        return any(event[1] == reason for event in seen)

    await eventually(present, within=within, what=f"a {reason} Event about {name}")
    return seen


async def sole_event(
    kube: KubeClient, namespace: str, name: str, *, within: float = 10
) -> dict[str, Any]:
    """The one Event the controller wrote about ``name``, as the API returns it.

    Waits for it first: an action's Event follows the action by a moment (see
    :func:`events_of`), so a test that has just seen an object go may read before it is
    written. Then reads until settled and fails unless there is exactly one.
    """

    async def written() -> bool:
        return bool(await list_events(kube, namespace, name))

    await eventually(written, within=within, what=f"an Event about {name}")
    events = await settled(lambda: list_events(kube, namespace, name))
    assert len(events) == 1, events
    return events[0]


@dataclass(frozen=True)
class EventRecord:
    """One Event; ``count`` is its series count (1 when it has no series)."""

    type: str
    reason: str
    note: str
    count: int


async def event_records(
    kube: KubeClient,
    namespace: str,
    name: str,
    *,
    reporter: str | None = None,
    rollouts: bool = False,
) -> list[EventRecord]:
    """Every Event regarding ``name`` (any reporter unless ``reporter``), oldest first.

    ``RolloutCompleted`` is left out unless ``rollouts`` (see :data:`ROLLOUT_COMPLETED`).
    Read until settled, like :func:`events_of`.
    """

    async def read() -> list[EventRecord]:
        return [
            EventRecord(
                event["type"],
                event["reason"],
                event.get("note", ""),
                int((event.get("series") or {}).get("count", 1)),
            )
            for event in await list_events(kube, namespace, name, reporter=reporter)
            if rollouts or event["reason"] != ROLLOUT_COMPLETED
        ]

    return await settled(read)


async def wait_for_event(
    kube: KubeClient, namespace: str, name: str, reason: str, *, within: float = 15
) -> EventRecord:
    """The first Event (of any reporter) with ``reason`` about ``name``, once it exists."""
    found: list[EventRecord] = []

    async def present() -> bool:
        found[:] = [e for e in await event_records(kube, namespace, name) if e.reason == reason]
        return bool(found)

    await eventually(present, within=within, what=f"Event {reason} on {name}")
    return found[0]


async def reasons(
    kube: KubeClient, namespace: str, name: str, *, rollouts: bool = False
) -> list[str]:
    """The reasons of every Event (of any reporter) about ``name``, oldest first.

    ``RolloutCompleted`` is left out unless ``rollouts`` (see :data:`ROLLOUT_COMPLETED`).
    """
    return [e.reason for e in await event_records(kube, namespace, name, rollouts=rollouts)]
