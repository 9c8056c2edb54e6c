"""Namespace defaults wired into a whole ``Controller`` (fake API server, fake clock).

The workers wait for the namespace-defaults store's first sync (so an object in a dry-run
namespace is never acted on before its namespace is known), /readyz waits for it too, and a
change of a Namespace's defaults re-evaluates the objects in it.
"""

from __future__ import annotations

import asyncio

import aiohttp
from structlog.testing import capture_logs

from lifecycle_controller.app import Controller
from lifecycle_controller.core.objects import keys
from lifecycle_controller.kube import EVENTS, KubeClient
from lifecycle_controller.kube.resources import NAMESPACES
from tests.doubles.fakeapi import CONFIGMAPS, FakeApiServer
from tests.doubles.fakeclock import FakeClock
from tests.unit.support import annotated, eventually
from tests.unit.test_app import settings

PAST = "2020-01-01T00:00:00Z"


def reasons(api: FakeApiServer) -> list[str]:
    return [event["reason"] for event in api.store.objects(EVENTS)]


async def test_nothing_acts_and_readiness_waits_until_the_namespaces_are_read(
    api: FakeApiServer, kube: KubeClient, clock: FakeClock
) -> None:
    api.store.create(NAMESPACES, None, annotated("team", {keys.DRY_RUN: "true"}))
    api.store.create(CONFIGMAPS, "team", annotated("due", {keys.DELETE_AT: PAST}))
    fault = api.fail(503, path=r"^/api/v1/namespaces$", times=2)
    controller = Controller(settings(), kube, clock=clock, identity="replica-a")
    task = asyncio.create_task(controller.run())
    try:
        await eventually(lambda: fault.exhausted or controller.pipeline is not None)
        await eventually(lambda: controller.pipeline is not None and fault.hits >= 1)
        assert controller.not_ready_reason() is not None
        assert reasons(api) == []  # the workers have not started
        while not fault.exhausted or controller.not_ready_reason() is not None:
            await clock.advance(5)  # the Namespace informer's backoff
            await eventually(lambda: True)
        await eventually(lambda: "DryRunDelete" in reasons(api))
        assert not api.requests_to("DELETE")
        assert api.store.find(CONFIGMAPS, "team", "due") is not None
    finally:
        task.cancel()
        await asyncio.gather(task, return_exceptions=True)


async def test_a_namespace_change_re_evaluates_its_objects(
    api: FakeApiServer, kube: KubeClient, clock: FakeClock
) -> None:
    api.store.create(NAMESPACES, None, annotated("team", {keys.DRY_RUN: "true"}))
    api.store.create(CONFIGMAPS, "team", annotated("due", {keys.DELETE_AT: PAST}))
    controller = Controller(settings(), kube, clock=clock, identity="replica-a")
    task = asyncio.create_task(controller.run())
    try:
        await eventually(lambda: "DryRunDelete" in reasons(api))
        api.store.patch(NAMESPACES, None, "team", {"metadata": {"labels": {"a": "b"}}})
        await eventually(lambda: True)
        assert api.store.find(CONFIGMAPS, "team", "due") is not None  # labels change nothing
        api.store.patch(
            NAMESPACES, None, "team", {"metadata": {"annotations": {keys.DRY_RUN: None}}}
        )
        await eventually(lambda: api.store.find(CONFIGMAPS, "team", "due") is None)
        await eventually(lambda: reasons(api) == ["DryRunDelete", "Deleted"])
    finally:
        task.cancel()
        await asyncio.gather(task, return_exceptions=True)


async def test_a_watched_namespace_that_does_not_exist_is_logged_and_shown_on_readyz(
    api: FakeApiServer, kube: KubeClient, clock: FakeClock
) -> None:
    api.store.create(NAMESPACES, None, annotated("team", {}))
    flags = {"watch_namespace": ("team", "nothing-here")}
    controller = Controller(settings(**flags), kube, clock=clock, identity="replica-a")
    with capture_logs() as logs:
        task = asyncio.create_task(controller.run())
        try:
            await eventually(lambda: controller.pipeline is not None)
            await eventually(lambda: controller.not_ready_reason() is None)
            probes = controller.probes
            assert probes is not None
            assert probes.port is not None
            async with (
                aiohttp.ClientSession() as http,
                http.get(f"http://127.0.0.1:{probes.port}/readyz") as response,
            ):
                assert (response.status, await response.text()) == (
                    200,
                    "[+]resource-coverage ok\n"
                    "[!]watched namespace nothing-here does not exist (--watch-namespace)\n"
                    "healthz check passed\n",
                )
            # Created later: the note goes away.
            api.store.create(NAMESPACES, None, annotated("nothing-here", {}))
            await eventually(lambda: controller.readiness_notes() == [])
        finally:
            task.cancel()
            await asyncio.gather(task, return_exceptions=True)
    missing = [
        (line["log_level"], line.get("name"))
        for line in logs
        if line["event"].startswith("watched namespace does not exist")
    ]
    assert missing == [("warning", "nothing-here")]
