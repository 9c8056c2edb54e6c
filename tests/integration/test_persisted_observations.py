"""A `never` occurrence across a SIGKILL failover, with and without ``--persist-observations``.

docs/behaviour.md#persisted-observations. Two real ``lifecycle-controller run`` processes on
one Lease (6 s lease, 4 s renew deadline, 0.5 s retry). A ConfigMap with ``catch-up: never``
and a ``delete-at`` a few seconds ahead is observed by the leader, the leader is SIGKILLed
before the deadline, and the deadline passes while nobody leads (the follower takes over only
once the Lease expires, seconds after the deadline; the test checks that order on the Lease):

* with the flag the leader wrote the record, and the new leader deletes the object, exactly
  once (one ``Deleted`` Event, from the new leader, no ``ActionSkipped``);
* without it (the reference rule) the new leader skips the deletion: ``ActionSkipped``, the
  ConfigMap stays and loses its ``delete-at``;
* with the flag but the schedule edited after the record was written (another ``delete-at``,
  also passed before the takeover), the record no longer matches and the deletion is skipped.

And, with the controller in-process, a ``restart-at`` under ``never``: one record patch before
the deadline, then the one restart patch, which also removes the record.
"""

from __future__ import annotations

import asyncio
import signal
import time
from collections import Counter

import pytest

from lifecycle_controller.kube import LEASES, KubeClient, NotFound
from lifecycle_controller.kube.resources import DEPLOYMENTS
from tests.integration.controller import StartController
from tests.integration.events import list_events
from tests.integration.faults import committed, spy_writes
from tests.integration.keys import CATCH_UP, DELETE_AT, RESTART_AT, P
from tests.integration.processes import ControllerProcess, ProcessLauncher
from tests.integration.scenario_support import (
    annotations_of,
    sample,
    settle,
    start_for,
    wait_restarted,
    workload,
)
from tests.integration.support import CONFIGMAPS, configmap, eventually
from tests.integration.timestamps import parse_utc, stamp

OBSERVED = P + "observed"
PERSISTED = "lifecycle_observations_persisted_total"
LEASE_SECONDS = 6.0
#: How far ahead of its creation the deadline is: enough for the leader to observe it.
AHEAD = 3


def replica_args(namespace: str, lease_name: str, persist: bool) -> list[str]:
    args = [
        "--leader-elect",
        f"--leader-election-id={lease_name}",
        f"--leader-election-namespace={namespace}",
        f"--leader-election-lease-duration={int(LEASE_SECONDS)}s",
        "--leader-election-renew-deadline=4s",
        "--leader-election-retry-period=0.5s",
        "--watch-resource=configmaps",
        f"--watch-namespace={namespace}",
    ]
    return [*args, "--persist-observations"] if persist else args


async def lease_spec(kube: KubeClient, namespace: str, name: str) -> dict[str, object]:
    try:
        return dict((await kube.get(LEASES, namespace, name))["spec"])
    except NotFound:
        return {}


async def metric(process: ControllerProcess, family: str, **labels: str) -> float:
    return await process.metric(family, labels) or 0.0


async def leads(process: ControllerProcess, lease_name: str) -> bool:
    if process.process.returncode is not None:
        raise AssertionError(process.log_text())
    if (await process.get("/readyz"))[0] != 200:
        return False
    return await metric(process, "leader_election_master_status", name=lease_name) == 1


async def reasons(kube: KubeClient, namespace: str, name: str) -> Counter[str]:
    counts: Counter[str] = Counter()
    for event in await list_events(kube, namespace, name):
        counts[str(event.get("reason"))] += int((event.get("series") or {}).get("count", 1))
    return counts


@pytest.mark.parametrize("case", ["persisted", "reference", "schedule-edited"])
async def test_a_never_occurrence_across_a_sigkill_failover(
    launcher: ProcessLauncher, kube: KubeClient, namespace: str, case: str
) -> None:
    persist = case != "reference"
    lease_name = f"persist-{namespace}"
    args = replica_args(namespace, lease_name, persist)
    first = await launcher.start("replica-a", *args, metrics=True)
    await eventually(lambda: leads(first, lease_name), within=30, what="replica-a to lead")
    second = await launcher.start("replica-b", *args, metrics=True)
    await second.wait_ready()
    assert not await leads(second, lease_name)

    due_s = int(time.time()) + AHEAD + 1
    due = stamp(due_s)
    await kube.create(
        CONFIGMAPS, namespace, configmap("promised", **{DELETE_AT: due, CATCH_UP: "never"})
    )

    async def observed() -> bool:
        return await metric(first, "lifecycle_ledger_arms") == 1

    await eventually(
        observed, within=AHEAD, interval=0.05, what="replica-a to observe the deadline"
    )
    if persist:

        async def recorded() -> bool:
            obj = await kube.get(CONFIGMAPS, namespace, "promised")
            return OBSERVED in (obj["metadata"].get("annotations") or {})

        await eventually(recorded, within=AHEAD, interval=0.05, what="the observed record")

        async def counted() -> bool:  # counted once the controller has read the write's answer
            return await metric(first, PERSISTED, result="written") == 1

        await eventually(counted, within=5, interval=0.05, what="the persisted write counted")
        record = (await kube.get(CONFIGMAPS, namespace, "promised"))["metadata"]["annotations"][
            OBSERVED
        ]
        assert record.startswith(f"{due};v1-"), record
    first.send(signal.SIGKILL)
    killed_s = time.time()
    assert await first.wait_exit() == -signal.SIGKILL
    assert killed_s < due_s, "the leader was killed after the deadline; nothing tested"
    if case == "schedule-edited":  # a new deadline, also passed before the takeover
        edited = {"metadata": {"annotations": {DELETE_AT: stamp(due_s + 1)}}}
        await kube.merge_patch(CONFIGMAPS, namespace, "promised", edited)

    await eventually(
        lambda: leads(second, lease_name), within=3 * LEASE_SECONDS, what="the takeover"
    )
    acquired = parse_utc(str((await lease_spec(kube, namespace, lease_name))["acquireTime"]))
    assert acquired.timestamp() > due_s + (1 if case == "schedule-edited" else 0), (
        "the new leader took over before the deadline; nothing tested"
    )

    async def settled() -> bool:
        counts = await reasons(kube, namespace, "promised")
        return counts["Deleted"] + counts["ActionSkipped"] > 0

    await eventually(settled, within=15, what="the new leader's decision")
    await asyncio.sleep(2.0)  # room for a duplicate, if there were one
    counts = await reasons(kube, namespace, "promised")
    events = await list_events(kube, namespace, "promised")
    try:
        left = await kube.get(CONFIGMAPS, namespace, "promised")
    except NotFound:
        left = None
    if case == "persisted":
        assert counts == Counter({"Deleted": 1}), counts
        assert [e.get("reportingInstance") for e in events] == ["replica-b"]
        assert left is None
    else:
        assert counts == Counter({"ActionSkipped": 1}), counts
        assert left is not None
        annotations = left["metadata"].get("annotations") or {}
        assert DELETE_AT not in annotations
        assert OBSERVED not in annotations  # a stale record goes with the acknowledgement


async def test_a_restart_clears_its_record_in_the_one_restart_patch(
    start_controller: StartController,
    namespace: str,
    kube: KubeClient,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    running = await start_for(
        start_controller, namespace, "deployments.apps", persist_observations="true"
    )
    writes = spy_writes(monkeypatch, running)
    due = stamp(int(time.time()) + AHEAD)
    annotations = {RESTART_AT: due, CATCH_UP: "never"}
    await kube.create(
        DEPLOYMENTS, namespace, workload("Deployment", "web", annotations, replicas=0)
    )
    obj = await wait_restarted(kube, DEPLOYMENTS, namespace, "web", within=AHEAD + 10)
    assert RESTART_AT not in annotations_of(obj)
    assert OBSERVED not in annotations_of(obj)
    await settle()
    record, restart = committed(writes.to("web"))  # 409s from status churn applied nothing
    assert record.body["metadata"]["annotations"][OBSERVED].startswith(f"{due};v1-")
    assert "spec" not in record.body
    restart_annotations = restart.body["metadata"]["annotations"]
    assert restart_annotations[RESTART_AT] is None
    assert restart_annotations[OBSERVED] is None  # cleared in the same patch as the restart
    assert "spec" in restart.body
    assert sample(running, PERSISTED, result="written") == 1
