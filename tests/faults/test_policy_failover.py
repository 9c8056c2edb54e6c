"""Scenario 12: the leader SIGKILLed, at several points, while a limited policy acts.

Two ``lifecycle-controller run`` replicas with leader election (Lease 4 s, retry 0.5 s). A
``ClusterLifecyclePolicy`` ``sweep`` deletes :data:`DELETES` ConfigMaps (``delete-after: 1s``,
``limit`` :data:`LIMIT` per :data:`WINDOW` seconds); its rehearsal sibling ``rehearse``
(``dry-run: "true"``, the same limit) reports :data:`REHEARSALS` others. The leader is
SIGKILLed at the points of :data:`KILLS`: twice in a burst, once after a burst its status
write has caught up with (a new replica started after each kill, so there is always a
follower); the last leader finishes the run. Counted from the API server once the
controllers are quiet:

* every ConfigMap deleted exactly once (every DELETE in the audit log, whatever its answer)
  and no ``Deleted`` Event doubled (an action whose Event the SIGKILL cut off is allowed:
  docs/reliability.md#shutdown); no occurrence twice in ``status.lastActions``; the rehearsal
  counted every object exactly once (``status.actions.dryRun``);
* **never exceeded**: at most :data:`LIMIT` successful DELETEs within any :data:`WINDOW`
  seconds of the audit log (less the half second between a place taken and its request
  received), a window holding a kill included: a leader records the places of its limit in
  the policy's status before it uses them, so its successor seeds them all
  (docs/reliability.md#policy-sigkill);
* **the audit exact**: ``status.actions.deleted`` equals the deletions done, the killed
  leaders' included: the last leader counts those from the places they recorded (a
  deletion whose object is gone);
* every rehearsal has its ``DryRunDelete`` Event; one decided again (by a new leader, or on
  a pass that re-queues it) records it again, while its report is counted once: the figures
  say how often.

The figures say the most actions in one window (and in one holding a kill) and how many
status writes each policy took (its places' records and its status reports).

Caught (in the harness, tests/faults/test_harness.py): a successor that did not know its
predecessor's places, two actions past the limit in the window holding the kill. Before
the places were recorded, this scenario measured 60 deletions in 14 s under ``30/15s``.
"""

from __future__ import annotations

import contextlib
import time
from collections import Counter
from typing import Any

from lifecycle_controller.devcluster import ControlPlane
from lifecycle_controller.kube import KubeClient, NotFound
from lifecycle_controller.kube.resources import CLUSTER_POLICIES
from tests.faults.limits import (
    SEND_SLACK,
    action_instants,
    in_window,
    max_in_window,
    past_the_limit,
)
from tests.faults.quiet import processes_idle, wait_quiet
from tests.faults.support import Tally, audited, controller_kubeconfig, event_reasons, writes
from tests.faults.test_api_outage import create_all, live_names
from tests.faults.test_shutdown_failover import replica_args
from tests.integration.policy_crds import install_policy_crds
from tests.integration.policy_tools import cluster_policy, labelled
from tests.integration.processes import ControllerProcess, ProcessLauncher
from tests.integration.scenario_support import create
from tests.integration.support import eventually

DELETES = 120
REHEARSALS = 60
LIMIT = 30
WINDOW = 15.0
#: The leader is SIGKILLed once this many deletions are done (audit log) and, where the second
#: item says so, once its status write has caught up with them: within the first window's
#: burst (nothing written yet), after the second burst is written (the window it seeds is all
#: that holds the next leader back for the rest of that window), in the third burst.
KILLS = ((12, False), (45, True), (75, False))


def policies(namespace: str) -> list[dict[str, Any]]:
    limit = {"actions": LIMIT, "window": f"{int(WINDOW)}s"}
    common: dict[str, Any] = {
        "resources": ["configmaps"],
        "namespaces": [namespace],  # no other test's objects
        "limit": limit,
    }
    return [
        cluster_policy(
            f"sweep-{namespace}", names=["del-*"], lifecycle={"delete-after": "1s"}, **common
        ),
        cluster_policy(
            f"rehearse-{namespace}",
            names=["dry-*"],
            lifecycle={"delete-after": "1s", "dry-run": "true"},
            **common,
        ),
    ]


async def status_of(kube: KubeClient, name: str) -> dict[str, Any]:
    policy = await kube.get(CLUSTER_POLICIES, None, name)
    status: dict[str, Any] = policy.get("status") or {}
    return status


async def leader_of(replicas: list[ControllerProcess], lease: str) -> ControllerProcess | None:
    for replica in replicas:
        if replica.process.returncode is None:
            status = await replica.metric("leader_election_master_status", {"name": lease})
            if status == 1:
                return replica
    return None


async def test_leader_sigkilled_while_a_limited_policy_and_its_rehearsal_act(
    control_plane: ControlPlane, kube: KubeClient, namespace: str, launcher: ProcessLauncher
) -> None:
    install_policy_crds(control_plane)
    sweep, rehearse = (p["metadata"]["name"] for p in policies(namespace))
    try:
        await _run(control_plane, kube, namespace, launcher, sweep, rehearse)
    finally:  # cluster policies outlive the test's namespace: the next tests must not see them
        for name in (sweep, rehearse):
            with contextlib.suppress(NotFound):
                await kube.request("DELETE", CLUSTER_POLICIES.object_path(None, name))


async def _run(
    control_plane: ControlPlane,
    kube: KubeClient,
    namespace: str,
    launcher: ProcessLauncher,
    sweep: str,
    rehearse: str,
) -> None:
    args = replica_args(controller_kubeconfig(control_plane), namespace, "configmaps")
    lease = f"faults-{namespace}"
    replicas = [await launcher.start(f"replica-{i}", *args, metrics=True) for i in range(2)]
    for replica in replicas:
        await replica.wait_ready()
    for policy in policies(namespace):
        await create(kube, CLUSTER_POLICIES, None, policy)
    deleted = [f"del-{i:03d}" for i in range(DELETES)]
    rehearsed = [f"dry-{i:03d}" for i in range(REHEARSALS)]
    await create_all(kube, namespace, [labelled(n, {}) for n in deleted + rehearsed])

    def done() -> int:
        counts = audited(control_plane, verb="delete", resource="configmaps", namespace=namespace)
        return sum(counts.values())

    def written() -> bool:
        """The sweep's status written after its last deletion (its audit caught up)."""
        status_writes = action_instants(
            control_plane,
            verb="patch",
            resource="clusterlifecyclepolicies",
            subresource="status",
            name=sweep,
        )
        deletions = action_instants(
            control_plane, verb="delete", resource="configmaps", namespace=namespace
        )
        return bool(status_writes and deletions) and status_writes[-1] > deletions[-1]

    killed: list[dict[str, Any]] = []
    for at, caught_up in KILLS:

        async def reached(at: int = at, caught_up: bool = caught_up) -> bool:
            return done() >= at and (not caught_up or written())

        what = f"{at} deletions done" + (" and written" if caught_up else "")
        await eventually(reached, within=120, interval=0.05, what=what)
        leader = await leader_of(replicas, lease)
        assert leader is not None, "no replica leads"
        leader.process.kill()
        await leader.process.wait()
        at_kill = {"after": done(), "written": caught_up, "replica": leader.name}
        killed.append({**at_kill, "at": time.time()})
        replica = await launcher.start(f"replica-{len(replicas)}", *args, metrics=True)
        replicas.append(replica)
        await replica.wait_ready()

    async def all_deleted() -> bool:
        return not (set(deleted) & await live_names(kube, namespace))

    await eventually(all_deleted, within=120, interval=0.5, what="every del-* ConfigMap deleted")

    async def all_rehearsed() -> bool:
        actions = (await status_of(kube, rehearse)).get("actions") or {}
        return int(actions.get("dryRun", 0)) >= REHEARSALS

    await eventually(all_rehearsed, within=60, interval=0.5, what="every dry-* object reported")

    async def audit_settled() -> bool:  # the last leader counts what the killed ones did
        actions = (await status_of(kube, sweep)).get("actions") or {}
        return int(actions.get("deleted", 0)) >= DELETES

    await eventually(audit_settled, within=60, interval=0.5, what="every deletion audited")
    quiet_s = await wait_quiet(control_plane, processes_idle(*replicas), quiet_for=6.0)

    deletes = writes(control_plane, verb="delete", resource="configmaps", namespace=namespace)
    events = await event_reasons(kube, namespace)
    tally = Tally.of(
        "12 leader SIGKILL while a limited policy acts",
        deleted,
        deletes,
        gone=deleted,
        events=events.get("Deleted") or Counter(),
    )
    instants = action_instants(
        control_plane, verb="delete", resource="configmaps", namespace=namespace
    )
    kills = [float(kill["at"]) for kill in killed]
    past = past_the_limit(instants, actions=LIMIT, window=WINDOW, kills=kills)
    swept, reported = await status_of(kube, sweep), await status_of(kube, rehearse)
    occurrences = Counter(
        entry["occurrence"]
        for status in (swept, reported)
        for entry in status.get("lastActions") or ()
    )
    dry_events = events.get("DryRunDelete") or Counter()
    status_deleted = int((swept.get("actions") or {}).get("deleted", 0))
    window = WINDOW - SEND_SLACK
    tally.extra = {
        "limit": f"{LIMIT}/{int(WINDOW)}s",
        "kills": killed,
        "most_in_a_window": max_in_window(instants, window),
        # how long each successor waited: the places its predecessor reserved, used or not
        "next_deletion_after_kill_s": [
            round(min((at - kill for at in instants if at > kill), default=-1.0), 1)
            for kill in kills
        ],
        "most_in_a_window_holding_a_kill": max(
            (
                n
                for at, n in in_window(instants, window)
                if any(at - window < k <= at for k in kills)
            ),
            default=0,
        ),
        "past_the_limit": past[:5],
        "status_deleted": status_deleted,
        "status_dry_run": (reported.get("actions") or {}).get("dryRun"),
        "duplicate_occurrences": sorted(o for o, n in occurrences.items() if n > 1),
        "status_writes": {
            name: len(
                action_instants(
                    control_plane,
                    verb="patch",
                    resource="clusterlifecyclepolicies",
                    subresource="status",
                    name=name,
                )
            )
            for name in (sweep, rehearse)
        },
        "dry_run_events": sum(1 for n in rehearsed if dry_events[n] >= 1),
        "dry_run_events_again": sum(max(0, dry_events[n] - 1) for n in rehearsed),
        "run_s": round(instants[-1] - instants[0], 1),
        "quiet_after_s": round(quiet_s, 1),
    }
    tally.record()
    assert all(k["after"] < DELETES for k in killed), "a kill came too late"
    # Held across every failover: no DELETE or Deleted Event doubled, no audit entry twice,
    # every rehearsal counted once.
    tally.assert_exactly_once()
    assert tally.extra["duplicate_occurrences"] == [], tally.extra
    assert tally.extra["status_dry_run"] == REHEARSALS, tally.extra
    # Never exceeded (docs/reliability.md#policy-sigkill): no window holds more than the
    # limit, a window holding a kill included; the audit counts exactly what was done, the
    # killed leaders' actions included.
    assert past == [], tally.extra
    assert status_deleted == tally.executed, tally.extra
    # Every rehearsal reported by its Event. A report is counted once, but its Event is
    # recorded again whenever a controller decides the object again (a new leader, a pass
    # that re-queues it): the figures say how often.
    assert all(dry_events[n] >= 1 for n in rehearsed), dry_events
