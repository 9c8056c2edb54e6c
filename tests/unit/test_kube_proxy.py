"""Which proxy the API client uses, read once: the kubeconfig's, else the environment's.

A real HTTP proxy stand-in on loopback answers the requests the client sends it, so the
tests see what went through the proxy, with which credentials, and what bypassed it.
"""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from typing import Any

import pytest
from aiohttp import web

from lifecycle_controller.kube import KubeClient, TransportError
from lifecycle_controller.kube.connection import ClusterConfig
from lifecycle_controller.kube.resources import NAMESPACES
from tests.loopback import served

HOST = "http://kube.invalid:6443"
PROXY_VARIABLES = ("HTTP_PROXY", "HTTPS_PROXY", "NO_PROXY", "http_proxy", "https_proxy", "no_proxy")


@pytest.fixture(autouse=True)
def clean_environment(monkeypatch: pytest.MonkeyPatch) -> None:
    for name in PROXY_VARIABLES:
        monkeypatch.delenv(name, raising=False)


class Proxy:
    def __init__(self) -> None:
        self.seen: list[tuple[str, str | None]] = []
        self.url = ""


@pytest.fixture
async def proxy() -> AsyncIterator[Proxy]:
    recorded = Proxy()

    async def answer(request: web.Request) -> web.Response:
        recorded.seen.append((str(request.url), request.headers.get("Proxy-Authorization")))
        return web.json_response({"kind": "Namespace", "metadata": {"name": "default"}})

    app = web.Application()
    app.router.add_route("*", "/{tail:.*}", answer)
    async with served(app) as base:
        recorded.url = base
        yield recorded


@pytest.mark.parametrize(
    ("environment", "expected"),
    [
        ({}, None),
        ({"HTTP_PROXY": "http://p:3128"}, "http://p:3128"),
        ({"HTTPS_PROXY": "http://p:3128"}, None),  # the host is plain http here
        ({"HTTP_PROXY": "http://p:3128", "NO_PROXY": "kube.invalid"}, None),
        ({"HTTP_PROXY": "http://p:3128", "NO_PROXY": ".invalid"}, None),
        ({"HTTP_PROXY": "http://p:3128", "NO_PROXY": "other.example"}, "http://p:3128"),
    ],
)
def test_the_environment_proxy_is_chosen_as_client_go_chooses_it(
    monkeypatch: pytest.MonkeyPatch, environment: dict[str, str], expected: str | None
) -> None:
    for name, value in environment.items():
        monkeypatch.setenv(name, value)
    assert ClusterConfig(host=HOST).request_proxy() == expected


def test_the_kubeconfig_proxy_wins_over_the_environment(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("HTTP_PROXY", "http://env:3128")
    monkeypatch.setenv("NO_PROXY", "kube.invalid")
    assert ClusterConfig(host=HOST, proxy="http://own:8080").request_proxy() == "http://own:8080"


async def test_requests_go_through_the_environment_proxy_with_its_credentials(
    monkeypatch: pytest.MonkeyPatch, proxy: Proxy
) -> None:
    monkeypatch.setenv("HTTP_PROXY", proxy.url.replace("http://", "http://alice:s3cret@"))
    async with KubeClient(ClusterConfig(host=HOST)) as kube:
        got = await kube.get(NAMESPACES, None, "default")
        await kube.get(NAMESPACES, None, "default")
    assert got["metadata"]["name"] == "default"
    assert [url for url, _ in proxy.seen] == [f"{HOST}/api/v1/namespaces/default"] * 2
    assert {auth for _, auth in proxy.seen} == {"Basic YWxpY2U6czNjcmV0"}  # alice:s3cret


async def test_no_proxy_hosts_bypass_the_proxy(
    monkeypatch: pytest.MonkeyPatch, proxy: Proxy
) -> None:
    monkeypatch.setenv("HTTP_PROXY", proxy.url)
    monkeypatch.setenv("NO_PROXY", "kube.invalid")
    async with KubeClient(ClusterConfig(host=HOST)) as kube:
        with pytest.raises(TransportError):
            await kube.get(NAMESPACES, None, "default")
    assert proxy.seen == []


async def test_requests_take_no_thread_hop_for_proxy_or_netrc_lookups(
    monkeypatch: pytest.MonkeyPatch, proxy: Proxy
) -> None:
    """The environment is read once, not per request in a worker thread (which is what
    aiohttp's ``trust_env`` does, twice per request: about a third of a deletion's CPU)."""
    loop = asyncio.get_running_loop()
    hops: list[object] = []
    original = loop.run_in_executor

    def counting(executor: Any, func: Any, *args: Any) -> Any:
        hops.append(func)
        return original(executor, func, *args)

    monkeypatch.setattr(loop, "run_in_executor", counting)
    async with KubeClient(ClusterConfig(host=proxy.url)) as kube:
        for _ in range(5):
            await kube.get(NAMESPACES, None, "default")
    assert len(proxy.seen) == 5
    assert hops == []
