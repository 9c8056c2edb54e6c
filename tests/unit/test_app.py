"""The composition root wired to the fake API server and the fake clock.

A whole ``Controller`` runs here: probes on loopback, discovery, informers, queue, workers,
reconciler, recorder and (when asked) the leader elector, all against the in-memory API. The
scenarios of the acceptance suite stay on the real control plane; these check the wiring.
"""

from __future__ import annotations

import asyncio
import os
import signal
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import aiohttp
import pytest
from structlog.testing import capture_logs

from lifecycle_controller.app import EXIT_FAILURE, EXIT_OK, Controller, run_async
from lifecycle_controller.app.controller import WORKERS_WAIT_FOR_LISTS
from lifecycle_controller.config import RawFlags, Settings, build_settings
from lifecycle_controller.controller.leadership.elector import LeadershipLost
from lifecycle_controller.controller.watch.discovery import DiscoveryFatal
from lifecycle_controller.core.objects import keys
from lifecycle_controller.kube import EVENTS, LEASES, KubeClient
from tests.doubles.fakeapi import CONFIGMAPS, FakeApiServer
from tests.doubles.fakeclock import FakeClock
from tests.unit.support import annotated, eventually

HOUR = 3600.0


def settings(**flags: Any) -> Settings:
    defaults: dict[str, Any] = {
        "watch_resource": ("configmaps",),
        "health_probe_bind_address": "127.0.0.1:0",
        "metrics_bind_address": "0",
        "workers": "2",
    }
    return build_settings(RawFlags(**{**defaults, **flags}))


@pytest.fixture
async def running(
    request: pytest.FixtureRequest, api: FakeApiServer, kube: KubeClient, clock: FakeClock
) -> AsyncIterator[Controller]:
    flags = getattr(request, "param", {})
    controller = Controller(settings(**flags), kube, clock=clock, identity="replica-a")
    task = asyncio.create_task(controller.run())
    await eventually(lambda: controller.not_ready_reason() is None and controller.pipeline)
    yield controller
    task.cancel()
    await asyncio.gather(task, return_exceptions=True)


def reasons(api: FakeApiServer) -> list[str]:
    return [event["reason"] for event in api.store.objects(EVENTS)]


async def advance_until(clock: FakeClock, seconds: float, step: float = 60.0) -> None:
    """Advance in steps, letting loopback I/O finish between them."""
    for _ in range(int(seconds // step)):
        await clock.advance(step)
        await eventually(lambda: True)


async def test_the_controller_gets_ready_and_deletes_a_due_object(
    api: FakeApiServer, kube: KubeClient, clock: FakeClock
) -> None:
    api.store.create(CONFIGMAPS, "team", annotated("ttl", {keys.DELETE_AFTER: "1h"}))
    api.store.create(CONFIGMAPS, "team", annotated("plain", {}))
    controller = Controller(settings(), kube, clock=clock, identity="replica-a")
    assert controller.not_ready_reason() == "resource discovery has not completed"
    task = asyncio.create_task(controller.run())
    await eventually(lambda: controller.not_ready_reason() is None and controller.pipeline)
    assert controller.probes is not None
    async with (
        aiohttp.ClientSession() as http,
        http.get(f"http://127.0.0.1:{controller.probes.port}/readyz") as ready,
    ):
        assert ready.status == 200
    await advance_until(clock, HOUR - 60)
    assert api.store.find(CONFIGMAPS, "team", "ttl") is not None  # not due yet
    await clock.advance(60)
    await eventually(lambda: api.store.find(CONFIGMAPS, "team", "ttl") is None)
    await eventually(lambda: "Deleted" in reasons(api))
    (delete,) = api.requests_to("DELETE")
    assert delete.body["preconditions"]["uid"]
    assert delete.body["preconditions"]["resourceVersion"]
    assert api.store.find(CONFIGMAPS, "team", "plain") is not None
    (event,) = api.store.objects(EVENTS)
    assert event["regarding"]["name"] == "ttl"
    assert event["metadata"]["namespace"] == "team"
    task.cancel()
    await asyncio.gather(task, return_exceptions=True)
    assert controller.pipeline is None


@pytest.mark.parametrize("running", [{"dry_run": "true"}], indirect=True)
async def test_dry_run_only_reports(
    api: FakeApiServer, running: Controller, clock: FakeClock
) -> None:
    api.store.create(CONFIGMAPS, "team", annotated("ttl", {keys.DELETE_AFTER: "1m"}))
    await advance_until(clock, 120)
    await eventually(lambda: "DryRunDelete" in reasons(api))
    assert api.store.find(CONFIGMAPS, "team", "ttl") is not None
    assert not api.requests_to("DELETE")


async def test_an_invalid_annotation_is_reported_and_nothing_acts(
    api: FakeApiServer, running: Controller
) -> None:
    api.store.create(CONFIGMAPS, "team", annotated("bad", {keys.DELETE_AFTER: "soon"}))
    await eventually(lambda: reasons(api))
    assert reasons(api) == ["InvalidAnnotation"]
    assert api.store.find(CONFIGMAPS, "team", "bad") is not None


async def test_explicit_discovery_failure_stops_the_controller(
    kube: KubeClient, clock: FakeClock
) -> None:
    controller = Controller(settings(watch_resource=("widgets.example.com",)), kube, clock=clock)
    with pytest.raises(DiscoveryFatal, match=r"missing patterns=\[widgets\.example\.com\]"):
        await controller.run()


async def test_the_leader_acquires_the_lease_and_releases_it_on_shutdown(
    api: FakeApiServer, kube: KubeClient, clock: FakeClock
) -> None:
    flags = settings(leader_elect="true", leader_election_namespace="system")
    controller = Controller(flags, kube, clock=clock, identity="replica-a")
    assert controller.not_ready_reason() is None  # a follower is ready
    task = asyncio.create_task(controller.run())
    await eventually(lambda: controller.is_leader() and controller.pipeline is not None)
    await eventually(lambda: controller.not_ready_reason() is None)
    assert controller.may_write()
    lease = api.store.get(LEASES, "system", "9a46ead0.lifecycle.cezary.dev")
    assert lease["spec"]["holderIdentity"] == "replica-a"
    task.cancel()
    await asyncio.gather(task, return_exceptions=True)
    released = api.store.get(LEASES, "system", "9a46ead0.lifecycle.cezary.dev")
    assert released["spec"]["holderIdentity"] == ""


async def test_lost_leadership_stops_the_work_and_fails(
    api: FakeApiServer, kube: KubeClient, clock: FakeClock
) -> None:
    flags = settings(leader_elect="true", leader_election_namespace="system")
    controller = Controller(flags, kube, clock=clock, identity="replica-a")
    task = asyncio.create_task(controller.run())
    await eventually(lambda: controller.pipeline is not None and controller.is_leader())
    api.fail(500, path="/leases/", times=10_000)
    for _ in range(20):
        await clock.advance(1)
        await eventually(lambda: True)
        if task.done():
            break
    with pytest.raises(LeadershipLost):
        await task
    assert not controller.may_write()
    assert controller.pipeline is None


async def test_run_async_connects_through_a_kubeconfig_and_stops_on_sigterm(
    loopback_api: FakeApiServer, tmp_path: Path
) -> None:
    api = loopback_api
    kubeconfig = str(api.write_kubeconfig(tmp_path / "kubeconfig"))
    task = asyncio.create_task(run_async(settings(kubeconfig=kubeconfig)))
    await eventually(lambda: api.store.watchers(CONFIGMAPS))
    os.kill(os.getpid(), signal.SIGTERM)
    assert await asyncio.wait_for(task, 5) == EXIT_OK
    loop = asyncio.get_running_loop()
    for signum in (signal.SIGTERM, signal.SIGINT):
        loop.remove_signal_handler(signum)


async def test_run_async_exits_1_on_fatal_errors(
    loopback_api: FakeApiServer, tmp_path: Path
) -> None:
    kubeconfig = str(loopback_api.write_kubeconfig(tmp_path / "kubeconfig"))
    missing = settings(kubeconfig=kubeconfig, watch_resource=("widgets.example.com",))
    assert await run_async(missing) == EXIT_FAILURE
    nowhere = settings(kubeconfig=str(tmp_path / "absent"))
    assert await run_async(nowhere) == EXIT_FAILURE
    loop = asyncio.get_running_loop()
    for signum in (signal.SIGTERM, signal.SIGINT):
        loop.remove_signal_handler(signum)


def secrets_too() -> Settings:
    return settings(watch_resource=("configmaps", "secrets"))


async def test_workers_wait_for_every_informer_s_first_list(
    api: FakeApiServer, kube: KubeClient, clock: FakeClock
) -> None:
    """A due object is not acted on while another type has not listed; once it has, at once."""
    api.store.create(CONFIGMAPS, "team", annotated("due", {keys.DELETE_AFTER: "1s"}))
    hung = api.fail(200, path="/api/v1/secrets", hang=True)
    controller = Controller(secrets_too(), kube, clock=clock, identity="replica-a")
    task = asyncio.create_task(controller.run())
    await eventually(lambda: hung.hits == 1 and controller.pipeline)
    assert controller.pipeline is not None
    (configmaps,) = [
        informer
        for informer in controller.pipeline.informers.informers()
        if informer.resource.resource == "configmaps"
    ]
    await eventually(lambda: configmaps.synced)
    with capture_logs() as logs:
        for _ in range(5):
            await clock.advance(1)
        await clock.settle()
        assert not api.requests_to("PATCH", "/configmaps/")  # delete-after not even converted
        assert controller.not_ready_reason() is not None
        hung.release()  # answered with an error: the informer lists again after its backoff
        for _ in range(3):
            await clock.advance(1)
        await eventually(lambda: api.store.find(CONFIGMAPS, "team", "due") is None)
    assert controller.not_ready_reason() is None
    assert not [line for line in logs if line["event"].startswith("starting workers before")]
    task.cancel()
    await asyncio.gather(task, return_exceptions=True)


async def test_a_type_that_cannot_be_listed_holds_the_workers_ten_seconds_at_most(
    api: FakeApiServer, kube: KubeClient, clock: FakeClock
) -> None:
    api.store.create(CONFIGMAPS, "team", annotated("due", {keys.DELETE_AFTER: "1s"}))
    api.fail(403, path="/api/v1/secrets", times=10_000)
    controller = Controller(secrets_too(), kube, clock=clock, identity="replica-a")
    task = asyncio.create_task(controller.run())
    started = clock.monotonic()
    await eventually(lambda: started + WORKERS_WAIT_FOR_LISTS in clock.sleeper_deadlines())
    with capture_logs() as logs:
        for _ in range(9):
            await clock.advance(1)
        await clock.settle()
        assert not api.requests_to("PATCH", "/configmaps/")  # delete-after not even converted
        await clock.advance(1)
        converted = api.requests_to
        await eventually(lambda: [r.status for r in converted("PATCH", "/configmaps/")] == [200])
        await clock.settle()
        await clock.advance(2)  # the converted delete-at is one second after the conversion
        await eventually(lambda: api.store.find(CONFIGMAPS, "team", "due") is None)
    (warning,) = [line for line in logs if line["event"].startswith("starting workers before")]
    assert warning["not_listed"] == ["secrets/v1"]
    assert controller.not_ready_reason() is not None  # still not ready: secrets never listed
    task.cancel()
    await asyncio.gather(task, return_exceptions=True)
