"""The fault tier's counting, tested: it must see what the scenarios claim never happens.

A second DELETE of an object is answered 404 (its preconditions fail or the object is gone),
and a doubled Event can be folded by the recorder into one Event whose ``series.count`` is 2.
Both must show in the figures (:mod:`tests.faults.support`), or "0 doubled deletes" in
docs/reliability.md could not fail. The writes here are made as the controller's own user on
the fault tier's audited control plane, exactly as the scenarios' controllers make them.
"""

from __future__ import annotations

from collections import Counter
from datetime import UTC, datetime

import pytest

from lifecycle_controller.devcluster import ControlPlane
from lifecycle_controller.kube import EVENTS, KubeClient, NotFound
from lifecycle_controller.kube.resources import CONFIGMAPS
from tests.faults.support import Tally, controller_kubeconfig, event_reasons, writes
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
