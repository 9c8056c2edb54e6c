"""The probe and metrics servers on loopback; scrape authorisation through the fake API server.

The fake answers TokenReview and SubjectAccessReview from its ``tokens`` and ``grants``, so
these tests check the whole chain (bearer token → TokenReview → SubjectAccessReview → 401,
403, 500 or the metrics) and its cache on the fake clock.
"""

from __future__ import annotations

from collections.abc import AsyncIterator
from pathlib import Path

import aiohttp
import pytest
from prometheus_client import CollectorRegistry, Counter

from lifecycle_controller.kube import KubeClient
from lifecycle_controller.machinery.tls import self_signed_certificate
from lifecycle_controller.serving.reloading_tls import ReloadingTls
from lifecycle_controller.serving.server import MetricsServer, ProbeServer
from tests.doubles.fakeapi import FakeApiServer
from tests.doubles.fakeclock import FakeClock

REVIEWS = "reviews"


@pytest.fixture
async def http() -> AsyncIterator[aiohttp.ClientSession]:
    async with aiohttp.ClientSession(connector=aiohttp.TCPConnector(ssl=False)) as session:
        yield session


async def get(http: aiohttp.ClientSession, url: str, token: str | None = None) -> tuple[int, str]:
    headers = {"Authorization": f"Bearer {token}"} if token else {}
    async with http.get(url, headers=headers) as response:
        return response.status, await response.text()


async def test_probes_answer_like_controller_runtime(http: aiohttp.ClientSession) -> None:
    reason: list[str | None] = ["resource discovery has not completed"]

    def broken() -> str | None:
        raise RuntimeError("bug")

    probes = ProbeServer(
        bind_address="127.0.0.1:0",
        readiness=lambda: reason[0],
        liveness={"broken": broken},
    )
    await probes.start()
    try:
        base = f"http://127.0.0.1:{probes.port}"
        assert await get(http, f"{base}/readyz") == (
            500,
            "[-]resource-coverage failed: resource coverage not ready: "
            "resource discovery has not completed\nhealthz check failed",
        )
        status, text = await get(http, f"{base}/readyz/resource-coverage")
        assert (status, text.startswith("internal server error: resource coverage")) == (500, True)
        reason[0] = None
        assert await get(http, f"{base}/readyz") == (200, "ok")
        assert await get(http, f"{base}/readyz?verbose=1") == (
            200,
            "[+]resource-coverage ok\nhealthz check passed\n",
        )
        status, text = await get(http, f"{base}/healthz")
        assert status == 500
        assert "[-]broken failed: check raised RuntimeError: bug" in text
        assert await get(http, f"{base}/healthz?exclude=broken") == (200, "ok")
        assert await get(http, f"{base}/healthz/healthz") == (200, "ok")
    finally:
        await probes.aclose()
        await probes.aclose()  # idempotent


async def test_a_disabled_probe_server_does_not_bind() -> None:
    probes = ProbeServer(bind_address="0", readiness=lambda: None)
    await probes.start()
    assert probes.port is None
    metrics = MetricsServer(bind_address="0", registry=CollectorRegistry())
    assert not metrics.enabled
    await metrics.start()
    assert metrics.port is None


def test_secure_metrics_need_an_api_client() -> None:
    with pytest.raises(ValueError, match="API client"):
        MetricsServer(bind_address="127.0.0.1:0", registry=CollectorRegistry())


@pytest.fixture
async def metrics_url(api: FakeApiServer, kube: KubeClient, clock: FakeClock) -> AsyncIterator[str]:
    registry = CollectorRegistry()
    Counter("scrapes_seen", "a test counter", registry=registry).inc()
    server = MetricsServer(
        bind_address="127.0.0.1:0",
        registry=registry,
        api=kube,
        clock=clock,
        auth_cache_ttl=10,
        enable_http2=True,
    )
    await server.start()
    assert server.tls is not None
    try:
        yield f"https://127.0.0.1:{server.port}/metrics"
    finally:
        await server.aclose()


async def test_scrapes_are_authenticated_and_authorised(
    api: FakeApiServer, http: aiohttp.ClientSession, metrics_url: str, clock: FakeClock
) -> None:
    api.tokens["good"] = {"username": "prometheus", "groups": ["monitoring"]}
    api.tokens["nosy"] = {"username": "alice"}
    api.grants.add(("prometheus", "/metrics", "get"))
    assert await get(http, metrics_url) == (401, "Unauthorized")
    assert await get(http, metrics_url, "unknown") == (401, "Unauthorized")
    assert await get(http, metrics_url, "nosy") == (403, "Authorization denied for user alice")
    status, text = await get(http, metrics_url, "good")
    assert status == 200
    assert "scrapes_seen_total 1.0" in text
    review = api.requests_to("POST", "subjectaccessreviews")[-1].body
    assert review["spec"]["user"] == "prometheus"
    assert review["spec"]["groups"] == ["monitoring"]
    assert review["spec"]["nonResourceAttributes"] == {"path": "/metrics", "verb": "get"}
    # Both answers are cached for 10 s of the fake clock.
    posts = len(api.requests_to("POST"))
    assert (await get(http, metrics_url, "good"))[0] == 200
    assert len(api.requests_to("POST")) == posts
    await clock.advance(10)
    assert (await get(http, metrics_url, "good"))[0] == 200
    assert len(api.requests_to("POST")) == posts + 2


async def test_failed_reviews_refuse_the_scrape_and_are_not_cached(
    api: FakeApiServer, http: aiohttp.ClientSession, metrics_url: str
) -> None:
    api.tokens["good"] = {"username": "prometheus"}
    api.grants.add(("prometheus", "/metrics", "get"))
    api.fail(503, path="tokenreviews")
    assert await get(http, metrics_url, "good") == (401, "Authentication failed")
    api.fail(500, path="subjectaccessreviews")
    assert await get(http, metrics_url, "good") == (
        500,
        "Authorization for user prometheus failed",
    )
    assert (await get(http, metrics_url, "good"))[0] == 200


def write_pair(folder: Path, host: str) -> None:
    cert, key = self_signed_certificate((host,))
    (folder / "tls.crt").write_bytes(cert)
    (folder / "tls.key").write_bytes(key)


async def test_a_certificate_folder_is_reloaded_when_it_changes(
    tmp_path: Path, clock: FakeClock
) -> None:
    write_pair(tmp_path, "first.example")
    tls = ReloadingTls(cert_dir=str(tmp_path), clock=clock, check_interval=1)
    tls.maybe_reload()
    assert tls.reloads == 0
    (tmp_path / "tls.crt").write_bytes(b"half-written")
    tls.maybe_reload()
    assert tls.reloads == 0  # a broken pair keeps the old certificate
    write_pair(tmp_path, "second.example")
    tls.maybe_reload()
    assert tls.reloads == 1


async def test_a_rotated_certificate_is_served_at_the_next_handshake(
    tmp_path: Path, kube: KubeClient, clock: FakeClock, http: aiohttp.ClientSession
) -> None:
    """A fresh connection (a new handshake) after the check interval sees the new pair."""
    write_pair(tmp_path, "first.example")
    server = MetricsServer(
        bind_address="127.0.0.1:0",
        registry=CollectorRegistry(),
        api=kube,
        cert_dir=str(tmp_path),
        clock=clock,
        cert_check_interval=1,
    )
    await server.start()
    try:
        url = f"https://127.0.0.1:{server.port}/metrics"
        assert (await get(http, url))[0] == 401
        write_pair(tmp_path, "second.example")
        await clock.advance(1)
        async with aiohttp.ClientSession(connector=aiohttp.TCPConnector(ssl=False)) as fresh:
            assert (await get(fresh, url))[0] == 401
        assert server.tls is not None
        assert server.tls.reloads == 1
    finally:
        await server.aclose()
