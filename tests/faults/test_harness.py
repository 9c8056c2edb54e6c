"""The fault tier's counting, tested: it must see what the scenarios claim never happens.

A second DELETE of an object is answered 404 (its preconditions fail or the object is gone),
and a doubled Event can be folded by the recorder into one Event whose ``series.count`` is 2.
Both must show in the figures (:mod:`tests.faults.support`), or "0 doubled deletes" in
docs/reliability.md could not fail: in the scenarios that count Events beside writes
(:func:`~tests.faults.support.deletion_tally`, the counting of scenarios 1, 2, 5 to 8 and 11)
as well. So must an action past a policy's limit (scenario 12's audit-log count), also across
a failover (a successor that did not know its predecessor's places), and a second write
after a success whose answer was not lost (scenario 4's excuse).
The writes here are made as the controller's own user on the fault tier's audited control
plane, exactly as the scenarios' controllers make them.
"""

from __future__ import annotations

import time
from collections import Counter
from datetime import UTC, datetime

import pytest

from lifecycle_controller.devcluster import ControlPlane
from lifecycle_controller.kube import EVENTS, KubeClient, NotFound
from lifecycle_controller.kube.resources import CONFIGMAPS
from tests.faults.limits import action_instants, over_limit, past_the_limit
from tests.faults.proxy import Recorded
from tests.faults.support import (
    Tally,
    controller_kubeconfig,
    deletion_tally,
    event_reasons,
    lost_successes,
    writes,
)
from tests.integration.keys import CONTROLLER
from tests.integration.support import configmap, eventually


def deleted_event(namespace: str, name: str, occurrences: int) -> dict[str, object]:
    """A ``Deleted`` Event of the controller for ConfigMap ``name``, folded ``occurrences``
    times into its series (no series for one occurrence)."""
    now = datetime.now(UTC).strftime("%Y-%m-%dT%H:%M:%S.%fZ")
    body: dict[str, object] = {
        "apiVersion": "events.k8s.io/v1",
        "kind": "Event",
        "metadata": {"name": f"{name}.harness", "namespace": namespace},
        "eventTime": now,
        "reportingController": CONTROLLER,
        "reportingInstance": "harness-test",
        "action": "Delete",
        "reason": "Deleted",
        "type": "Normal",
        "note": f"deleted {name}",
        "regarding": {
            "kind": "ConfigMap",
            "apiVersion": "v1",
            "namespace": namespace,
            "name": name,
        },
    }
    if occurrences > 1:
        body["series"] = {"count": occurrences, "lastObservedTime": now}
    return body


async def test_the_figures_catch_a_second_delete_answered_404_and_a_doubled_event(
    control_plane: ControlPlane, kube: KubeClient, namespace: str
) -> None:
    for name in ("once", "twice"):
        await kube.create(CONFIGMAPS, namespace, configmap(name))
    async with await KubeClient.connect(controller_kubeconfig(control_plane)) as controller:
        await controller.delete(CONFIGMAPS, namespace, "once")
        await controller.delete(CONFIGMAPS, namespace, "twice")
        with pytest.raises(NotFound):
            await controller.delete(CONFIGMAPS, namespace, "twice")
        await controller.create(EVENTS, namespace, deleted_event(namespace, "once", 1))
        await controller.create(EVENTS, namespace, deleted_event(namespace, "twice", 2))

    async def audited_all() -> bool:
        found = writes(control_plane, verb="delete", resource="configmaps", namespace=namespace)
        return sum(len(codes) for codes in found.values()) == 3

    await eventually(audited_all, within=10, interval=0.1, what="the three deletes audited")
    deletes = writes(control_plane, verb="delete", resource="configmaps", namespace=namespace)
    assert deletes == {"once": [200], "twice": [200, 404]}
    events = (await event_reasons(kube, namespace))["Deleted"]
    assert events == Counter({"once": 1, "twice": 2})

    names = ["once", "twice"]
    tally = Tally.of("harness", names, deletes, gone=names, events=events)
    assert (tally.expected, tally.executed, tally.missed) == (2, 2, 0)
    assert (tally.writes, tally.duplicated, tally.doubled_events) == (3, 1, 1)
    with pytest.raises(AssertionError):
        tally.assert_exactly_once()
    # Each alone is enough to fail the scenario.
    with pytest.raises(AssertionError):
        Tally.of("harness", names, deletes, gone=names).assert_exactly_once()
    single = {"once": [200], "twice": [200]}
    with pytest.raises(AssertionError):
        Tally.of("harness", names, single, gone=names, events=events).assert_exactly_once()
    Tally.of("harness", names, single, gone=names, events=Counter(names)).assert_exactly_once()


def test_only_writes_after_the_first_success_count_as_doubled() -> None:
    """A write refused before the action (409 on a stale resourceVersion, a 429, a 5xx) is a
    retry; any write after the successful one is doubled, whatever its answer, unless the
    scenario lost that success's answer on the way (``excused``)."""
    found = {
        "retried": [409, 429, 503, 200],
        "deleted-again": [200, 404],
        "patched-again": [200, 409],
        "lost-answer": [200, 404],
        "refused": [403, 403],
    }
    tally = Tally.of(
        "harness", list(found), found, gone=["lost-answer"], excused=Counter({"lost-answer": 1})
    )
    assert (tally.writes, tally.executed, tally.duplicated, tally.missed) == (12, 4, 2, 1)


async def test_a_deletion_scenario_fails_on_a_doubled_event_alone(
    control_plane: ControlPlane, kube: KubeClient, namespace: str
) -> None:
    """One DELETE each (no doubled write), but one object's ``Deleted`` Event folded twice:
    the counting the scenarios without restarts share fails on it."""
    names = ["single", "folded"]
    for name in names:
        await kube.create(CONFIGMAPS, namespace, configmap(name))
    async with await KubeClient.connect(controller_kubeconfig(control_plane)) as controller:
        for name in names:
            await controller.delete(CONFIGMAPS, namespace, name)
        await controller.create(EVENTS, namespace, deleted_event(namespace, "single", 1))
        await controller.create(EVENTS, namespace, deleted_event(namespace, "folded", 2))

    async def audited_both() -> bool:
        found = writes(control_plane, verb="delete", resource="configmaps", namespace=namespace)
        return sum(len(codes) for codes in found.values()) == 2

    await eventually(audited_both, within=10, interval=0.1, what="the two deletes audited")
    tally = await deletion_tally(control_plane, kube, "harness", names, namespace=namespace)
    assert (tally.executed, tally.duplicated, tally.doubled_events) == (2, 0, 1)
    with pytest.raises(AssertionError):
        tally.assert_exactly_once()


async def test_an_action_past_the_limit_shows_in_the_audit_log(
    control_plane: ControlPlane, kube: KubeClient, namespace: str
) -> None:
    """Four successful DELETEs within a minute break a limit of 3 per minute, counted from
    the audit log as scenario 12 counts them; three do not."""
    names = [f"cm-{i}" for i in range(4)]
    for name in names:
        await kube.create(CONFIGMAPS, namespace, configmap(name))
    async with await KubeClient.connect(controller_kubeconfig(control_plane)) as controller:
        for name in names:
            await controller.delete(CONFIGMAPS, namespace, name)

    async def audited_all() -> bool:
        found = action_instants(
            control_plane, verb="delete", resource="configmaps", namespace=namespace
        )
        return len(found) == 4

    await eventually(audited_all, within=10, interval=0.1, what="the four deletes audited")
    instants = action_instants(
        control_plane, verb="delete", resource="configmaps", namespace=namespace
    )
    [(_, count)] = over_limit(instants, actions=3, window=60)
    assert count == 4
    assert over_limit(instants[:3], actions=3, window=60) == []


async def test_an_action_past_the_limit_across_a_failover_is_caught(
    control_plane: ControlPlane, kube: KubeClient, namespace: str
) -> None:
    """Limit 3 per minute. A first leader deletes 2 and is killed; its successor, as one that
    did not know the places the first had used, deletes 2 more within the minute: scenario
    12's check finds the window that holds the kill holding 4, past the limit across the
    failover. With one deletion after the kill (3 in the window) it finds nothing."""
    names = [f"cm-{i}" for i in range(4)]
    for name in names:
        await kube.create(CONFIGMAPS, namespace, configmap(name))
    async with await KubeClient.connect(controller_kubeconfig(control_plane)) as first:
        for name in names[:2]:
            await first.delete(CONFIGMAPS, namespace, name)
    kill = time.time()  # the API server's audit log and this process share the clock
    async with await KubeClient.connect(controller_kubeconfig(control_plane)) as second:
        for name in names[2:]:
            await second.delete(CONFIGMAPS, namespace, name)

    async def audited_all() -> bool:
        found = action_instants(
            control_plane, verb="delete", resource="configmaps", namespace=namespace
        )
        return len(found) == 4

    await eventually(audited_all, within=10, interval=0.1, what="the four deletes audited")
    instants = action_instants(
        control_plane, verb="delete", resource="configmaps", namespace=namespace
    )
    assert instants[1] < kill < instants[2]
    past = past_the_limit(instants, actions=3, window=60, kills=[kill])
    assert past == [(instants[3], 4, True)]
    assert past_the_limit(instants[:3], actions=3, window=60, kills=[kill]) == []
    # the same four with no kill in the window: past the limit all the same
    assert past_the_limit(instants, actions=3, window=60, kills=[]) == [(instants[3], 4, False)]


def test_only_a_lost_answer_to_a_successful_write_excuses_a_second_one() -> None:
    """Scenario 4: a refused write whose answer was lost was no action, so the write after the
    object's success is doubled all the same; a lost answer to the success excuses one."""

    def lost(path: str, status: int) -> Recorded:
        return Recorded(0.0, "DELETE", path, "", status, 0, "lost")

    records = [lost("/api/v1/namespaces/n/configmaps/refused?x=1", 409)]
    records += [lost("/api/v1/namespaces/n/configmaps/done", 200)]
    excused = lost_successes(records)
    assert excused == Counter({"done": 1})
    found = {"refused": [409, 200, 404], "done": [200, 404]}
    tally = Tally.of("harness", list(found), found, excused=excused)
    assert (tally.executed, tally.duplicated) == (2, 1)
