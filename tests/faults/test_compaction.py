"""Scenario 2: etcd compaction forcing 410 Gone on a watch while objects change (issue 8).

The controller watches core ``events`` (v1 Events carry annotations like any object, and the
API server has no watch cache for them, so their watches are served from etcd directly and
see its compaction). It runs through the loopback proxy (:mod:`tests.faults.proxy`), which
*freezes* its watch: the stream stays open but forwards nothing, as a stalled connection
would. During the gap:

* 10 of 20 Events with a far deadline are deleted by the test (the cache must notice);
* 20 Events created before the gap fall due and are deleted by the controller (its writes
  pass; the watch's DELETED notifications do not);
* 20 Events are created with a due ``delete-at``;

then etcd is compacted to its current revision and the watch is cut. The re-watch from the
old resourceVersion gets 410 Gone (``lifecycle_watch_restarts_total{reason="expired"}``),
the informer relists: the 10 vanished Events leave the cache (synthesised deletes), the 20
new due ones are deleted, each of the 40 due Events exactly once (audit log).
"""

from __future__ import annotations

import asyncio
import time
from pathlib import Path
from typing import Any

from lifecycle_controller.devcluster import ControlPlane
from lifecycle_controller.kube import KubeClient
from lifecycle_controller.kube.resources import ResourceType
from tests.faults.proxy import FaultProxy
from tests.faults.quiet import queue_idle, wait_quiet
from tests.faults.support import controller_kubeconfig, deletion_tally, writes
from tests.integration.controller import StartController
from tests.integration.keys import DELETE_AT
from tests.integration.scenario_support import cached, sample, start_for
from tests.integration.support import eventually
from tests.integration.timestamps import PAST, stamp

CORE_EVENTS = ResourceType("", "v1", "events", "Event", namespaced=True)
#: Seconds from the creation of the first Events to the deadline of the ``soon`` ones: their
#: creation and the controller caching them take about 2 s. A slower run fails (its ``soon``
#: Events would be deleted before the gap, proving nothing), it does not pass.
LEAD = 10.0


def event(name: str, namespace: str, **annotations: str) -> dict[str, Any]:
    return {
        "apiVersion": "v1",
        "kind": "Event",
        "metadata": {"name": name, "annotations": annotations},
        "involvedObject": {"kind": "ConfigMap", "name": "anything", "namespace": namespace},
        "reason": "FaultsScenario2",
        "message": "an object for the compaction scenario",
        "type": "Normal",
    }


async def names_of(kube: KubeClient, namespace: str) -> set[str]:
    listing = await kube.list_metadata(CORE_EVENTS, namespace=namespace)
    return {item["metadata"]["name"] for item in listing.get("items") or []}


async def test_compaction_410_relists_notices_the_gap_and_doubles_nothing(
    control_plane: ControlPlane,
    kube: KubeClient,
    namespace: str,
    start_controller: StartController,
    tmp_path: Path,
) -> None:
    upstream = Path(controller_kubeconfig(control_plane))
    async with FaultProxy(upstream) as proxy:
        running = await start_for(
            start_controller,
            namespace,
            "events",
            kubeconfig=proxy.kubeconfig(tmp_path / "proxied.kubeconfig"),
        )
        plain = [f"plain-{i:02d}" for i in range(20)]
        soon = [f"soon-{i:02d}" for i in range(20)]
        later = [f"later-{i:02d}" for i in range(20)]
        due = time.time() + LEAD
        due_at = stamp(due)
        for name in plain:  # relevant (cached), never due
            body = event(name, namespace, **{DELETE_AT: "9999-12-31T23:59:59Z"})
            await kube.create(CORE_EVENTS, namespace, body)
        for name in soon:
            await kube.create(CORE_EVENTS, namespace, event(name, namespace, **{DELETE_AT: due_at}))

        async def all_cached() -> bool:
            return all(cached(running, CORE_EVENTS, namespace, n) for n in plain + soon)

        await eventually(all_cached, within=20, what="the Events in the controller's cache")

        def expired() -> float:
            labels = {"resource": "events", "reason": "expired"}
            return sample(running, "lifecycle_watch_restarts_total", **labels) or 0.0

        expired_before = expired()
        proxy.frozen = True
        frozen_at = time.time()
        assert frozen_at < due - 1, (
            f"setting up took {frozen_at - due + LEAD:.1f}s: the soon Events would fall due "
            "before the watch is frozen, so the run could not test deletes during the gap"
        )
        assert set(soon) <= await names_of(kube, namespace), "a soon Event went before the gap"
        vanished = plain[:10]
        for name in vanished:
            await kube.delete(CORE_EVENTS, namespace, name)
        for name in later:
            await kube.create(CORE_EVENTS, namespace, event(name, namespace, **{DELETE_AT: PAST}))

        async def soon_done() -> bool:
            return not (set(soon) & await names_of(kube, namespace))

        await eventually(soon_done, within=30, what="the due Events deleted during the gap")
        revision = await asyncio.to_thread(control_plane.compact_etcd)
        proxy.cut_watches()

        async def relisted() -> bool:
            return expired() > expired_before

        await eventually(relisted, within=20, interval=0.1, what="410 Gone and a relist")

        async def later_done() -> bool:
            return not (set(later) & await names_of(kube, namespace))

        await eventually(later_done, within=30, what="the Events created during the gap")

        async def noticed() -> bool:
            return not any(cached(running, CORE_EVENTS, namespace, n) for n in vanished)

        await eventually(noticed, within=10, what="the vanished Events gone from the cache")
        await wait_quiet(control_plane, queue_idle(running))  # any doubled delete or Event
        kept = [n for n in plain[10:] if cached(running, CORE_EVENTS, namespace, n)]
        await running.stop()
    deletes = writes(control_plane, verb="delete", resource="events", namespace=namespace)
    tally = await deletion_tally(
        control_plane,
        kube,
        "2 etcd compaction, 410",
        soon + later,
        namespace=namespace,
        resources=["events"],
    )
    tally.extra = {
        "compacted_to": revision,
        "expired_restarts": expired() - expired_before,
        "vanished_noticed": len(vanished),
        "still_cached": len(kept),
        "setup_s": round(frozen_at - due + LEAD, 1),
    }
    tally.record()
    tally.assert_exactly_once()
    assert len(kept) == 10
    assert not any(deletes.get(n) for n in plain)
