"""``status --watch`` and the console follow the cluster with watches, not by listing again.

Both tools run in this process, through the loopback recording proxy of the fault scenarios
(:mod:`tests.faults.proxy`), against the real API server, with ``--interval 60``: a change
that shows within seconds was pushed by a watch, not found by the periodic re-judgement. The
proxy's record of every request then shows one list of the followed type, the first.
"""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import AsyncIterator, Awaitable, Callable
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

import aiohttp
import pytest

from lifecycle_controller.devcluster import ControlPlane
from lifecycle_controller.kube import KubeClient
from lifecycle_controller.tools.console.command import open_console
from lifecycle_controller.tools.console.server import Console
from lifecycle_controller.tools.live import StatusView, watch_status
from lifecycle_controller.tools.options import controller_settings
from tests.faults.proxy import FaultProxy
from tests.faults.support import controller_kubeconfig
from tests.integration.keys import DELETE_AT
from tests.integration.scenario_support import create
from tests.integration.support import CONFIGMAPS, configmap, eventually

pytestmark = pytest.mark.integration

#: Seconds between the tools' periodic re-judgements: longer than any wait below.
INTERVAL = 60.0
#: Seconds a change may take to show.
SHOWN = 5.0


def due_in(hours: int) -> str:
    return (datetime.now(UTC) + timedelta(hours=hours)).strftime("%Y-%m-%dT%H:%M:%SZ")


def lists_of_configmaps(proxy: FaultProxy, namespace: str) -> list[str]:
    """The LISTs (not watches) of the namespace's ConfigMaps the tools made."""
    path = f"/api/v1/namespaces/{namespace}/configmaps"
    return [
        target
        for method, target, _ in proxy.arrived
        if method == "GET"
        and urlsplit(target).path == path
        and "watch=true" not in urlsplit(target).query
    ]


@contextlib.asynccontextmanager
async def proxied(control_plane: ControlPlane, tmp_path: Path) -> AsyncIterator[FaultProxy]:
    async with FaultProxy(Path(controller_kubeconfig(control_plane))) as proxy:
        proxy.kubeconfig(tmp_path / "proxied.kubeconfig")
        yield proxy


async def test_the_console_shows_an_annotation_within_seconds_without_listing_again(
    control_plane: ControlPlane, kube: KubeClient, namespace: str, tmp_path: Path
) -> None:
    await create(kube, CONFIGMAPS, namespace, configmap("first", **{DELETE_AT: due_in(2)}))
    await create(kube, CONFIGMAPS, namespace, configmap("plain"))
    controller = controller_settings({"watch_resource": ("configmaps",)})
    async with proxied(control_plane, tmp_path) as proxy:
        config = str(tmp_path / "proxied.kubeconfig")
        async with (
            await KubeClient.connect(config) as through_proxy,
            open_console(
                through_proxy,
                namespace=namespace,
                controller=controller,
                address="127.0.0.1:0",
                interval=INTERVAL,
            ) as console,
        ):

            def objects(count: int) -> Callable[[], Awaitable[bool]]:
                async def shown() -> bool:
                    return (await overview(console)).get("objects") == count

                return shown

            await eventually(objects(1), within=30, what="the first look")
            assert len(lists_of_configmaps(proxy, namespace)) == 1
            version = console.version

            # kubectl annotate: shown within seconds, by the watch
            annotations = {"metadata": {"annotations": {DELETE_AT: due_in(3)}}}
            await kube.merge_patch(CONFIGMAPS, namespace, "plain", annotations)
            await eventually(objects(2), within=SHOWN, what="the annotated object")
            assert console.version > version
            cell = await names_on_the_timeline(console)
            assert {"first", "plain"} <= cell

            # and the annotation removed: its row goes
            removed = {"metadata": {"annotations": {DELETE_AT: None}}}
            await kube.merge_patch(CONFIGMAPS, namespace, "first", removed)
            await eventually(objects(1), within=SHOWN, what="its row gone")
            assert console.lists()["configmaps"] == 1
        assert len(lists_of_configmaps(proxy, namespace)) == 1


async def overview(console: Console) -> dict[str, Any]:
    async with (
        aiohttp.ClientSession() as session,
        session.get(console.url + "api/overview") as answer,
    ):
        return dict(await answer.json())


async def names_on_the_timeline(console: Console) -> set[str]:
    """The names of every object the day's view counts (its cells' rows)."""
    async with aiohttp.ClientSession() as session:
        async with session.get(console.url + "api/timeline", params={"span": "day"}) as answer:
            view = await answer.json()
        names: set[str] = set()
        for group in view["groups"]:
            for bucket, _, _ in group["cells"]:
                params = {"span": "day", "bucket": str(bucket), "group": group["name"]}
                async with session.get(console.url + "api/cell", params=params) as answer:
                    names |= {item["name"] for item in (await answer.json())["items"]}
        return names


async def test_status_watch_redraws_on_an_annotation_without_listing_again(
    control_plane: ControlPlane, kube: KubeClient, namespace: str, tmp_path: Path
) -> None:
    await create(kube, CONFIGMAPS, namespace, configmap("first", **{DELETE_AT: due_in(2)}))
    async with proxied(control_plane, tmp_path) as proxy:
        printed: list[str] = []

        def echo(text: str = "", **_: object) -> None:
            printed.append(text)

        view = StatusView(
            kubeconfig=str(tmp_path / "proxied.kubeconfig"),
            context=None,
            namespace=namespace,
            all_namespaces=False,
            controller=controller_settings({"watch_resource": ("configmaps",)}),
            output="table",
        )
        watching = asyncio.create_task(watch_status(view, interval=INTERVAL, once=False, echo=echo))
        try:

            def drawn(name: str, after: int) -> Callable[[], Awaitable[bool]]:
                async def found() -> bool:
                    return any(name in text for text in printed[after:])

                return found

            await eventually(drawn("first", 0), within=30, what="the first draw")
            before = len(printed)
            body = configmap("second", **{DELETE_AT: due_in(3)})
            await create(kube, CONFIGMAPS, namespace, body)
            await eventually(drawn("second", before), within=SHOWN, what="the new object")
        finally:
            watching.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await watching
        assert len(lists_of_configmaps(proxy, namespace)) == 1
