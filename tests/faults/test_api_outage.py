"""Scenario 1: kube-apiserver SIGKILLed and restarted while deadlines fall due (issue 8).

200 ConfigMaps have ``delete-at`` deadlines spread over the outage. The informers recover
within about 2 s of the API server answering again (docs/reliability.md#watch-recovery),
every delete due during the outage runs once after recovery (catch-up), none twice (audit
log), and ``/readyz`` goes unready and back (docs/reliability.md#probes-during-an-outage)
while ``/healthz`` stays ok.
"""

from __future__ import annotations

import asyncio
import time

from lifecycle_controller.devcluster import ControlPlane
from lifecycle_controller.kube import KubeClient
from lifecycle_controller.kube.resources import CONFIGMAPS
from lifecycle_controller.serving.server import CACHES_STALE
from tests.faults.quiet import queue_idle, wait_quiet
from tests.faults.support import controller_kubeconfig, deletion_tally
from tests.integration.controller import StartController
from tests.integration.keys import DELETE_AT
from tests.integration.scenario_support import start_for
from tests.integration.support import configmap, eventually
from tests.integration.timestamps import stamp

OBJECTS = 200
OUTAGE = 10.0
#: Seconds from the test's start to the first deadline: the 200 creates fit in about 2 s on a
#: loaded 2-core machine. A run slower than that fails (it could not prove anything), it does
#: not pass with deadlines that fell due before the kill.
LEAD = 8.0


async def create_all(kube: KubeClient, namespace: str, bodies: list[dict[str, object]]) -> None:
    gate = asyncio.Semaphore(20)

    async def one(body: dict[str, object]) -> None:
        async with gate:
            await kube.create(CONFIGMAPS, namespace, body)

    await asyncio.gather(*(one(body) for body in bodies))


async def live_names(kube: KubeClient, namespace: str) -> set[str]:
    listing = await kube.list_metadata(CONFIGMAPS, namespace=namespace, limit=1000)
    return {item["metadata"]["name"] for item in listing.get("items") or []} - {"kube-root-ca.crt"}


async def test_apiserver_sigkill_mid_watch_loses_and_doubles_nothing(
    control_plane: ControlPlane, kube: KubeClient, namespace: str, start_controller: StartController
) -> None:
    running = await start_for(
        start_controller, namespace, kubeconfig=controller_kubeconfig(control_plane)
    )
    controller = running.controller
    # Deadlines from LEAD to LEAD + OUTAGE - 1 s after now; the API server is killed 1 s
    # before the first and comes back after the last, so every one falls due in the outage.
    first_due = time.time() + LEAD
    last_due = first_due + int(OUTAGE) - 1
    names = [f"cm-{i:03d}" for i in range(OBJECTS)]
    bodies = [
        configmap(name, **{DELETE_AT: stamp(first_due + (i % int(OUTAGE)))})
        for i, name in enumerate(names)
    ]
    await create_all(kube, namespace, bodies)
    set_up = time.time()
    assert set_up < first_due - 1, (
        f"creating the objects took {set_up - first_due + LEAD:.1f}s: deadlines would fall due "
        "before the API server is killed, so the run could not test deletes during the outage"
    )
    await asyncio.sleep(max(0.0, first_due - 1 - time.time()))

    control_plane.kill("kube-apiserver")
    killed_at = time.time()
    killed = time.monotonic()
    seen_stale = False
    try:
        while time.monotonic() - killed < OUTAGE:
            reason = controller.not_ready_reason()
            seen_stale = seen_stale or (reason is not None and CACHES_STALE in reason)
            assert controller._liveness() is None  # /healthz never follows the API server
            await asyncio.sleep(0.2)
    finally:
        control_plane.restart("kube-apiserver", wait=False)  # spawned by the main thread
        await asyncio.to_thread(control_plane.wait_ready, "kube-apiserver")
    assert seen_stale, "readiness did not report the outage"
    back = time.monotonic()
    back_at = time.time()
    outage = f"{killed_at - first_due:+.1f}s to {back_at - first_due:+.1f}s of the first deadline"
    assert killed_at < first_due, f"the outage ({outage}) began after a deadline"
    assert back_at > last_due, f"the outage ({outage}) ended before the last deadline"

    async def ready() -> bool:
        return controller.not_ready_reason() is None

    await eventually(ready, within=10, interval=0.05, what="ready again")
    resumed = time.monotonic() - back
    assert resumed < 3.0, f"informers resumed {resumed:.1f}s after the API server was ready"

    async def all_gone() -> bool:
        return not await live_names(kube, namespace)

    await eventually(all_gone, within=120, interval=1.0, what="every object deleted")
    await wait_quiet(control_plane, queue_idle(running))  # the last Events, any double
    tally = await deletion_tally(
        control_plane, kube, "1 apiserver SIGKILL", names, namespace=namespace, gone=names
    )
    tally.extra = {
        "watch_resumed_s": round(resumed, 2),
        "outage_s": OUTAGE,
        "setup_s": round(set_up - first_due + LEAD, 1),
    }
    tally.record()
    tally.assert_exactly_once()
    assert tally.events == OBJECTS  # nothing was in flight at the kill: every Event written
