"""The console's server on the fake API server: its JSON, its stream, its address and host rules.

The console serves on loopback (a real socket, as it must); the cluster it looks at is the
in-memory API server, and its looks move with the fake clock.
"""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from typing import Any

import aiohttp
import pytest
from click.testing import CliRunner

from lifecycle_controller.cli import cli
from lifecycle_controller.core.objects import keys
from lifecycle_controller.core.text.timestamps import format_rfc3339_nano
from lifecycle_controller.core.text.units import NS_PER_SECOND
from lifecycle_controller.kube import KubeClient
from lifecycle_controller.kube.resources import CONFIGMAPS, EVENTS
from lifecycle_controller.tools.console.server import AddressError, Console, parse_address
from lifecycle_controller.tools.console.snapshot import ConsoleView, guard_text
from lifecycle_controller.tools.kubectl_plugin import plugin
from lifecycle_controller.tools.options import controller_settings
from tests.doubles.fakeapi import FakeApiServer
from tests.doubles.fakeclock import FakeClock
from tests.unit.support import annotated, eventually


def later(clock: FakeClock, seconds: int) -> str:
    return format_rfc3339_nano(clock.now_ns() + seconds * NS_PER_SECOND)


async def no_explainer(api_version: str, kind: str, namespace: str, name: str) -> str:
    return f"explained {api_version} {kind} {namespace}/{name}"


@pytest.fixture
async def console(kube: KubeClient, clock: FakeClock) -> AsyncIterator[Console]:
    controller = controller_settings(
        {"watch_resource": ("configmaps",), "maintenance_window": "Mon-Sun 01:00-02:00 UTC"}
    )
    served = Console(
        kube,
        ConsoleView(namespace=None, controller=controller),
        clock=clock,
        interval=2.0,
        explainer=no_explainer,
        title="all namespaces",
    )
    await served.start("127.0.0.1", 0)
    try:
        yield served
    finally:
        await served.stop()


async def fetch(console: Console, path: str, **params: Any) -> Any:
    async with (
        aiohttp.ClientSession() as session,
        session.get(console.url.rstrip("/") + path, params=params) as response,
    ):
        assert response.status == 200, await response.text()
        return await response.json()


async def test_the_page_and_its_files_come_from_the_package(console: Console) -> None:
    async with aiohttp.ClientSession() as session:
        async with session.get(console.url) as page:
            text = await page.text()
            assert page.status == 200
            assert "script-src 'self'" in page.headers["Content-Security-Policy"]
        assert '<script src="/static/console.js"' in text
        for name, kind in (("console.js", "text/javascript"), ("console.css", "text/css")):
            async with session.get(f"{console.url}static/{name}") as asset:
                assert (asset.status, asset.content_type) == (200, kind)
        async with session.get(f"{console.url}static/../server.py") as refused:
            assert refused.status == 404


async def test_a_foreign_host_is_refused(console: Console) -> None:
    """DNS rebinding: a page of another site resolving to 127.0.0.1 sends its own Host."""
    async with (
        aiohttp.ClientSession() as session,
        session.get(console.url + "api/overview", headers={"Host": "evil.example:80"}) as answer,
    ):
        assert answer.status == 403


async def test_overview_timeline_and_cell_from_one_look(
    kube: KubeClient, clock: FakeClock, console: Console
) -> None:
    await kube.create(CONFIGMAPS, "team-a", annotated("soon", {keys.DELETE_AT: later(clock, 600)}))
    await kube.create(
        CONFIGMAPS,
        "team-a",
        annotated(
            "windowed",
            {keys.DELETE_AT: later(clock, 900), keys.MAINTENANCE_WINDOW: "Sat-Sun 00:00-24:00 UTC"},
        ),
    )
    await kube.create(CONFIGMAPS, "team-a", annotated("broken", {keys.DELETE_AFTER: "2x"}))
    await kube.create(
        EVENTS,
        "team-a",
        {
            "metadata": {"name": "e1"},
            "reason": "Deleted",
            "note": "deleted: delete-at reached",
            "eventTime": later(clock, -60),
            "reportingController": "lifecycle-controller",
            "reportingInstance": "x",
            "action": "Delete",
            "type": "Normal",
            "regarding": {"kind": "ConfigMap", "namespace": "team-a", "name": "gone", "uid": "u"},
        },
    )
    await clock.advance(2.0)
    await eventually(lambda: console.version >= 1)
    overview = await fetch(console, "/api/overview")
    assert overview["ready"] is True
    assert (overview["objects"], overview["problems"]) == (3, 1)
    assert overview["breaker"] == {"open": False, "text": ""}
    assert [a["name"] for a in overview["actions"]] == ["gone"]
    assert {w["text"]: w["from"] for w in overview["windows"]} == {
        "Mon-Sun 01:00-02:00 UTC": "--maintenance-window",
        "Sat-Sun 00:00-24:00 UTC": "1 object",
    }
    # both deletions wait for their windows (the flag's every night, the annotation's at the
    # weekend): within the week
    view = await fetch(console, "/api/timeline", span="week")
    assert [g["name"] for g in view["groups"]] == ["team-a"]
    assert view["totals"]["delete"] == 2
    assert [len(w["spans"]) > 0 for w in view["windows"]] == [True, True]
    bucket = view["groups"][0]["cells"][0][0]
    cell = await fetch(console, "/api/cell", span="week", bucket=str(bucket), group="team-a")
    assert cell["total"] >= 1
    assert cell["items"][0]["category"] == "delete"
    explained = await fetch(
        console, "/api/explain", apiVersion="v1", kind="ConfigMap", namespace="team-a", name="x"
    )
    assert explained == {"text": "explained v1 ConfigMap team-a/x"}


async def test_bad_views_are_refused(console: Console, clock: FakeClock) -> None:
    await eventually(lambda: console.version >= 1)
    async with aiohttp.ClientSession() as session:
        async with session.get(console.url + "api/timeline?span=year") as wrong:
            assert (wrong.status, await wrong.text()) == (
                400,
                "span: expected one of hour, day, week, got 'year'",
            )
        async with session.get(console.url + "api/cell?bucket=x") as wrong:
            assert wrong.status == 400


async def test_the_stream_pushes_a_new_version_only_when_something_changed(
    kube: KubeClient, clock: FakeClock, console: Console
) -> None:
    await kube.create(CONFIGMAPS, "team-a", annotated("old", {keys.DELETE_AT: later(clock, 60)}))
    await kube.create(CONFIGMAPS, "team-a", annotated("cron", {keys.RESTART_CRON: "0 3 * * *"}))
    await eventually(lambda: console.version >= 1)
    await clock.advance(2.0)  # a look after both were created
    seen = console.version
    async with aiohttp.ClientSession() as session, session.get(console.url + "api/stream") as s:
        assert s.content_type == "text/event-stream"
        first = await s.content.readuntil(b"\n\n")
        assert first == f"event: version\ndata: {seen}\n\n".encode()
        await clock.advance(2.0)  # looks that find nothing new, though the clock moved
        await clock.advance(2.0)
        assert console.version == seen
        await kube.create(
            CONFIGMAPS, "team-b", annotated("new", {keys.DELETE_AT: later(clock, 60)})
        )
        await clock.advance(2.0)
        second = await asyncio.wait_for(s.content.readuntil(b"\n\n"), timeout=5)
        assert second == f"event: version\ndata: {seen + 1}\n\n".encode()
    view = await fetch(console, "/api/timeline", span="week")
    assert [g["name"] for g in view["groups"]] == ["team-a", "team-b"]


@pytest.mark.parametrize(
    ("address", "expected"),
    [
        ("127.0.0.1:8750", ("127.0.0.1", 8750)),
        ("localhost:0", ("localhost", 0)),
        ("[::1]:9000", ("::1", 9000)),
        ("127.0.0.2:1", ("127.0.0.2", 1)),
    ],
)
def test_loopback_addresses(address: str, expected: tuple[str, int]) -> None:
    assert parse_address(address) == expected


@pytest.mark.parametrize(
    ("address", "error"),
    [
        ("0.0.0.0:8750", "'0.0.0.0' is not a loopback address"),
        ("example.com:80", "'example.com' is not a loopback address"),
        ("127.0.0.1", "expected HOST:PORT"),
        ("127.0.0.1:99999", "expected HOST:PORT"),
    ],
)
def test_other_addresses_are_refused(address: str, error: str) -> None:
    with pytest.raises(AddressError, match=error):
        parse_address(address)


def test_the_restart_guard_in_words() -> None:
    assert guard_text(controller_settings({})) == ""
    guarded = controller_settings({"min_restart_interval": "1h", "restart_jitter": "90s"})
    assert guard_text(guarded) == (
        "restart guard: at most one restart per workload every 1h (--min-restart-interval); "
        "each restart delayed by up to 90s (--restart-jitter)"
    )


def test_both_front_doors_have_the_command_and_refuse_a_foreign_address() -> None:
    runner = CliRunner()
    for group in (cli, plugin):
        listing = runner.invoke(group, ["--help"])
        assert "  console " in listing.output
        refused = runner.invoke(group, ["console", "--address", "0.0.0.0:1", "--no-browser"])
        assert refused.exit_code == 2
        assert "is not a loopback address" in refused.output


async def test_a_failed_look_is_shown_and_the_next_one_tries_again(
    kube: KubeClient, clock: FakeClock, api: FakeApiServer
) -> None:
    served = Console(
        kube,
        ConsoleView(namespace=None, controller=controller_settings({})),
        clock=clock,
        interval=2.0,
        explainer=no_explainer,
    )
    api.fail(500, path="/api", times=10_000)  # discovery too: the whole look fails
    await served.start("127.0.0.1", 0)
    try:
        await eventually(lambda: served.error != "")
        overview = await fetch(served, "/api/overview")
        assert overview["ready"] is False
        assert overview["error"]
        api.faults.clear()
        await clock.advance(2.0)
        await eventually(lambda: served.version == 1)
        assert (await fetch(served, "/api/overview"))["error"] == ""
    finally:
        await served.stop()
