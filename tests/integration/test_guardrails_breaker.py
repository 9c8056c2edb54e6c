"""The latched circuit breaker on the real control plane (docs/behaviour.md#circuit-breaker).

20 due deletions with ``--breaker-max-actions 5``: exactly 5 are carried out, the other 15
are held (one Warning ``ActionsHalted`` each), the tripped state survives a controller
restart (it lives in the ConfigMap beside the Lease), and ``lifecycle-controller breaker
reset`` (a real process) releases the rest; ``lifecycle-controller status`` warns meanwhile.
"""

from __future__ import annotations

import json

import pytest

from lifecycle_controller.devcluster import ControlPlane
from lifecycle_controller.kube import KubeClient
from lifecycle_controller.kube.breaker_store import breaker_name, read_breaker
from lifecycle_controller.kube.resources import CONFIGMAPS
from tests.integration.controller import StartController
from tests.integration.events import events_of
from tests.integration.keys import DELETE_AT
from tests.integration.scenario_support import run_cli, sample, settle, start_for
from tests.integration.support import configmap, eventually

pytestmark = pytest.mark.integration

LEASE = "9a46ead0.lifecycle.cezary.dev"
HALTED = (
    "Warning",
    "ActionsHalted",
    "Circuit breaker open: 5 actions within 10m0s; reset with `lifecycle-controller breaker reset`",
)


async def _remaining(kube: KubeClient, namespace: str) -> set[str]:
    listing = await kube.request("GET", CONFIGMAPS.collection_path(namespace))
    return {
        item["metadata"]["name"]
        for item in listing["items"]
        if item["metadata"]["name"].startswith("doomed-")
    }


async def _breaker_cli(control_plane: ControlPlane, namespace: str, verb: str) -> str:
    return (await run_cli(control_plane, namespace, "breaker", verb))[0]


async def test_breaker_trips_before_the_sixth_action_and_stays_latched_until_reset(
    start_controller: StartController,
    control_plane: ControlPlane,
    namespace: str,
    kube: KubeClient,
) -> None:
    names = [f"doomed-{i:02d}" for i in range(20)]
    for name in names:
        await kube.create(
            CONFIGMAPS, namespace, configmap(name, **{DELETE_AT: "2020-01-01T00:00:00Z"})
        )
    flags = {"leader_election_namespace": namespace}
    running = await start_for(start_controller, namespace, breaker_max_actions=5, **flags)

    async def tripped() -> bool:
        return (await read_breaker(kube, namespace, breaker_name(LEASE))).open

    await eventually(tripped, within=20, what="the breaker to trip")
    await settle(2.0)
    held = await _remaining(kube, namespace)
    assert len(held) == 15

    async def all_told() -> bool:
        for name in held:
            if HALTED not in await events_of(kube, namespace, name):
                return False
        return True

    await eventually(all_told, within=20, what="ActionsHalted on every held object")
    for name in held:
        assert (await events_of(kube, namespace, name)).count(HALTED) == 1
    assert sample(running, "lifecycle_breaker_open") == 1
    assert sample(running, "lifecycle_breaker_trips_total") == 1
    assert "OPEN" in await _breaker_cli(control_plane, namespace, "status")
    _, warned = await run_cli(control_plane, namespace, "status", "-n", namespace)
    assert "warning: circuit breaker OPEN since " in warned

    # A restarted controller (even one allowed more) honours the latched state.
    await running.stop()
    running = await start_for(start_controller, namespace, breaker_max_actions=50, **flags)
    await settle(3.0)
    assert await _remaining(kube, namespace) == held
    assert sample(running, "lifecycle_breaker_open") == 1

    assert "closed" in await _breaker_cli(control_plane, namespace, "reset")

    async def released() -> bool:
        return not await _remaining(kube, namespace)

    await eventually(released, within=30, what="the held deletions after the reset")
    assert sample(running, "lifecycle_breaker_open") == 0
    state = await read_breaker(kube, namespace, breaker_name(LEASE))
    assert not state.open
    assert state.trips == 1


async def test_one_reset_lets_every_held_action_go_and_the_window_counts_only_the_rest(
    start_controller: StartController,
    control_plane: ControlPlane,
    namespace: str,
    kube: KubeClient,
) -> None:
    """7 due deletions, ``--breaker-max-actions 3``: 3 go, 4 are held (the latched state
    counts and names them); one reset lets all 4 go without tripping again, and the window
    then still admits 3 more actions that were not held before the 4th trips it."""
    for i in range(7):
        await kube.create(
            CONFIGMAPS,
            namespace,
            configmap(f"doomed-{i:02d}", **{DELETE_AT: "2020-01-01T00:00:00Z"}),
        )
    flags = {"leader_election_namespace": namespace}
    await start_for(start_controller, namespace, breaker_max_actions=3, **flags)
    name = breaker_name(LEASE)

    async def holding_four() -> bool:
        state = await read_breaker(kube, namespace, name)
        return state.open and state.held == 4

    await eventually(holding_four, within=30, what="the breaker to trip and record 4 held")
    held = await _remaining(kube, namespace)
    assert len(held) == 4
    state = await read_breaker(kube, namespace, name)
    assert {entry.rsplit("/", 1)[-1] for entry in state.held_objects} == held
    # What operators look at says so: breaker status names the held actions, status and
    # explain show them held (found with the controller's own flags), not "delete now".
    told = await _breaker_cli(control_plane, namespace, "status")
    assert "holding 4: ConfigMap/" in told, told
    rows, _ = await run_cli(control_plane, namespace, "status", "-n", namespace, "-o", "json")
    summaries = {row["name"]: row["summary"] for row in json.loads(rows)}
    reset = f"lifecycle-controller breaker reset --leader-election-id {LEASE}"
    for held_name in held:
        assert summaries[held_name].startswith("delete due now; held by the circuit breaker")
        assert f"`{reset} --leader-election-namespace {namespace}`" in summaries[held_name]
    some = sorted(held)[0]
    explained, _ = await run_cli(
        control_plane, namespace, "explain", f"configmap/{some}", "-n", namespace
    )
    assert "held by the circuit breaker (open since " in explained, explained

    assert "closed" in await _breaker_cli(control_plane, namespace, "reset")

    async def released() -> bool:
        return not await _remaining(kube, namespace)

    await eventually(released, within=30, what="every held deletion after one reset")
    await settle(2.0)
    state = await read_breaker(kube, namespace, name)
    assert not state.open
    assert state.trips == 1  # the released actions did not count in the window

    # Actions that were not held are counted again: 3 go, the 4th trips the breaker.
    for i in range(4):
        await kube.create(
            CONFIGMAPS,
            namespace,
            configmap(f"doomed-new-{i}", **{DELETE_AT: "2020-01-01T00:00:00Z"}),
        )

    async def tripped_again() -> bool:
        return (await read_breaker(kube, namespace, name)).trips == 2

    await eventually(tripped_again, within=30, what="the window to trip on the 4th new action")
    assert len(await _remaining(kube, namespace)) == 1
