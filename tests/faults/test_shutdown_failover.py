"""Scenarios 7 and 10 with real ``lifecycle-controller run`` processes and leader election.

7. SIGTERM while 300 due deletes are in flight: the leader lets the writes it sent finish
   and records their Events, releases the Lease and exits 0; the follower takes over and does
   the rest. Every ConfigMap is deleted exactly once (audit log) with exactly one ``Deleted``
   Event (docs/reliability.md#shutdown).
10. The restart marker across a failover: the leader restarts a Deployment, hands over on
   SIGTERM, the new leader restarts it again at once: the two markers differ, so both roll
   (two new ReplicaSets), with exactly one patch and one ``RestartTriggered`` Event each
   (docs/reliability.md#restart-marker-failover).
"""

from __future__ import annotations

import signal
from collections import Counter
from typing import Any

from lifecycle_controller.core.text.timestamps import parse_rfc3339
from lifecycle_controller.devcluster import ControlPlane
from lifecycle_controller.kube import KubeClient, NotFound
from lifecycle_controller.kube.resources import DEPLOYMENTS, LEASES, REPLICASETS
from tests.faults.quiet import processes_idle, wait_quiet
from tests.faults.support import (
    Tally,
    audited,
    controller_kubeconfig,
    deletion_tally,
    event_reasons,
    writes,
)
from tests.faults.test_api_outage import create_all, live_names
from tests.integration.keys import DELETE_AT, RESTART_AT, RESTARTED_AT
from tests.integration.processes import ControllerProcess, ProcessLauncher
from tests.integration.scenario_support import owned_by, template_annotations, workload
from tests.integration.support import configmap, eventually
from tests.integration.timestamps import PAST

DELETES = 300


def replica_args(kubeconfig: str, namespace: str, *resources: str) -> list[str]:
    return [
        f"--kubeconfig={kubeconfig}",
        "--leader-elect",
        f"--leader-election-id=faults-{namespace}",
        f"--leader-election-namespace={namespace}",
        "--leader-election-lease-duration=4s",
        "--leader-election-renew-deadline=3s",
        "--leader-election-retry-period=0.5s",
        *[f"--watch-resource={resource}" for resource in resources],
        f"--watch-namespace={namespace}",
    ]


async def lease_spec(kube: KubeClient, namespace: str) -> dict[str, Any]:
    try:
        lease = await kube.get(LEASES, namespace, f"faults-{namespace}")
    except NotFound:
        return {}
    return dict(lease.get("spec") or {})


async def leading(kube: KubeClient, namespace: str, process: ControllerProcess) -> None:
    async def holds() -> bool:
        if process.process.returncode is not None:
            raise AssertionError(process.log_text())
        holder = (await lease_spec(kube, namespace)).get("holderIdentity")
        return bool(holder) and (await process.get("/readyz"))[0] == 200

    await eventually(holds, within=30, what=f"{process.name} ready and a leader elected")


async def test_sigterm_under_load_finishes_sent_writes_and_their_events(
    control_plane: ControlPlane, kube: KubeClient, namespace: str, launcher: ProcessLauncher
) -> None:
    args = replica_args(controller_kubeconfig(control_plane), namespace, "configmaps")
    first = await launcher.start("replica-a", *args, metrics=True)
    await leading(kube, namespace, first)
    second = await launcher.start("replica-b", *args, metrics=True)
    await second.wait_ready()
    names = [f"due-{i:03d}" for i in range(DELETES)]
    await create_all(kube, namespace, [configmap(n, **{DELETE_AT: PAST}) for n in names])

    def deletes() -> int:
        counts = audited(control_plane, verb="delete", resource="configmaps", namespace=namespace)
        return sum(counts.values())

    async def busy() -> bool:
        return deletes() >= 20

    await eventually(busy, within=30, interval=0.05, what="deletes in flight")
    first.send(signal.SIGTERM)
    assert await first.wait_exit(within=20) == 0
    at_exit = audited(control_plane, verb="delete", resource="configmaps", namespace=namespace)
    events_at_exit = (await event_reasons(kube, namespace)).get("Deleted")
    # Every delete the first leader carried out has its Event (none lost at shutdown).
    lost = sorted(n for n in at_exit if (events_at_exit or Counter())[n] == 0)
    assert len(at_exit) < DELETES, "SIGTERM came too late to test anything"

    async def all_gone() -> bool:
        return not await live_names(kube, namespace)

    await eventually(all_gone, within=90, interval=1.0, what="the follower finishes the rest")
    await wait_quiet(control_plane, processes_idle(second))  # any doubled delete or Event
    tally = await deletion_tally(
        control_plane, kube, "7 SIGTERM under load", names, namespace=namespace, gone=names
    )
    tally.extra = {"deleted_by_first": len(at_exit), "events_lost_at_shutdown": len(lost)}
    tally.record()
    assert lost == []
    tally.assert_exactly_once()
    assert tally.events == DELETES


async def test_restart_marker_differs_across_a_failover(
    control_plane: ControlPlane, kube: KubeClient, namespace: str, launcher: ProcessLauncher
) -> None:
    args = replica_args(controller_kubeconfig(control_plane), namespace, "deployments.apps")
    first = await launcher.start("replica-a", *args, metrics=True)
    await leading(kube, namespace, first)
    second = await launcher.start("replica-b", *args, metrics=True)
    await second.wait_ready()
    created = await kube.create(
        DEPLOYMENTS, namespace, workload("Deployment", "web", {RESTART_AT: PAST}, replicas=0)
    )
    uid = created["metadata"]["uid"]

    async def marker() -> str:
        obj = await kube.get(DEPLOYMENTS, namespace, "web")
        return template_annotations(obj).get(RESTARTED_AT, "")

    async def restarted_once() -> bool:
        return bool(await marker())

    await eventually(restarted_once, within=20, what="the first restart")
    first_marker = await marker()
    first.send(signal.SIGTERM)  # hand over at once (the Lease is released)
    await kube.merge_patch(
        DEPLOYMENTS, namespace, "web", {"metadata": {"annotations": {RESTART_AT: PAST}}}
    )
    assert await first.wait_exit(within=20) == 0

    async def restarted_twice() -> bool:
        return (await marker()) not in ("", first_marker)

    await eventually(restarted_twice, within=30, what="the new leader's restart")
    second_marker = await marker()

    async def two_rollouts() -> bool:  # the original ReplicaSet and one per restart
        return len(await owned_by(kube, REPLICASETS, namespace, uid)) == 3

    await eventually(two_rollouts, within=30, what="a new ReplicaSet per restart")
    await wait_quiet(control_plane, processes_idle(second))  # a doubled patch or Event
    restarts = (await event_reasons(kube, namespace)).get("RestartTriggered") or Counter()
    patches = writes(control_plane, verb="patch", resource="deployments", namespace=namespace)
    answers = patches.get("web", [])
    done = [i for i, code in enumerate(answers) if 200 <= code < 300]
    tally = Tally.of("10 restart marker across a failover", ["web"], patches, gone=[])
    tally.expected, tally.executed = 2, len(done)
    # Two restarts, so two successful patches; any write after the second one is doubled
    # (whatever its answer), a conflict refused before it is a retry.
    tally.duplicated = len(answers) - done[1] - 1 if len(done) >= 2 else 0
    tally.missed = max(0, 2 - len(done))
    tally.events = restarts["web"]
    tally.doubled_events = max(0, restarts["web"] - 2)  # one Event per restart
    tally.extra = {"markers": [first_marker, second_marker], "answers": answers}
    tally.record()
    assert parse_rfc3339(first_marker) != parse_rfc3339(second_marker)
    assert (tally.executed, tally.duplicated) == (2, 0), answers
    assert restarts["web"] == 2, restarts  # SIGTERM drains the first leader's Event
