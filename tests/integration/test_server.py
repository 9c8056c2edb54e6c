"""The HTTP surface against the real API server: probes, plain and secure /metrics.

Secure scrapes are authenticated with real ServiceAccount tokens (TokenReview) and
authorised by real RBAC (SubjectAccessReview for ``get`` on the non-resource URL
``/metrics``); the controller's own admin client performs the reviews.
"""

from __future__ import annotations

import asyncio
import ssl
from pathlib import Path
from typing import Any

import aiohttp
import pytest
import yaml

from lifecycle_controller.config import parse_bind_address
from lifecycle_controller.devcluster import ControlPlane
from lifecycle_controller.kube import KubeClient
from lifecycle_controller.machinery.tls import CertificateAuthority
from lifecycle_controller.serving.metrics import Metrics
from lifecycle_controller.serving.scrape_auth import ScrapeAuthorizer
from lifecycle_controller.serving.server import (
    CACHES_PENDING,
    DISCOVERY_PENDING,
    MetricsServer,
    ProbeServer,
    resource_coverage,
)
from tests.doubles.fakeclock import FakeClock
from tests.integration.support import eventually

READ_METRICS = [{"nonResourceURLs": ["/metrics"], "verbs": ["get"]}]


def sa_token(control_plane: ControlPlane, namespace: str, name: str) -> str:
    kubeconfig = yaml.safe_load(
        control_plane.service_account_kubeconfig(namespace, name).read_text()
    )
    return str(kubeconfig["users"][0]["user"]["token"])


def metrics_reader(control_plane: ControlPlane, namespace: str, name: str) -> str:
    token = sa_token(control_plane, namespace, name)
    control_plane.grant(
        {"kind": "ServiceAccount", "name": name, "namespace": namespace},
        name=f"metrics-reader-{namespace}-{name}",
        cluster_rules=READ_METRICS,
    )
    return token


async def get(
    http: aiohttp.ClientSession,
    url: str,
    *,
    token: str | None = None,
    tls: ssl.SSLContext | bool = True,
) -> tuple[int, str, str]:
    headers = {"Authorization": f"Bearer {token}"} if token is not None else {}
    async with http.get(url, headers=headers, ssl=tls) as response:
        return response.status, response.headers.get("Content-Type", ""), await response.text()


class CountingApi:
    """The real admin client, counting the reviews it sends."""

    def __init__(self, kube: KubeClient) -> None:
        self.kube = kube
        self.paths: list[str] = []

    async def request(self, method: str, path: str, *, body: Any = None) -> dict[str, Any]:
        self.paths.append(path)
        return await self.kube.request(method, path, body=body)


# --- probes -------------------------------------------------------------------------------


async def test_probes(http: aiohttp.ClientSession) -> None:
    coverage: list[str | None] = ["resource discovery has not completed"]
    renewing: list[str | None] = [None]
    server = ProbeServer(
        bind_address="127.0.0.1:0",
        readiness=lambda: coverage[0],
        liveness={"leader-election": lambda: renewing[0]},
    )
    await server.start()
    try:
        base = f"http://127.0.0.1:{server.port}"
        assert await get(http, f"{base}/healthz") == (200, "text/plain; charset=utf-8", "ok")
        status, _, body = await get(http, f"{base}/readyz")
        assert status == 500
        assert (
            "[-]resource-coverage failed: resource coverage not ready: "
            "resource discovery has not completed"
        ) in body
        status, _, body = await get(http, f"{base}/readyz/resource-coverage")
        assert (status, body) == (
            500,
            "internal server error: resource coverage not ready: "
            "resource discovery has not completed",
        )

        coverage[0] = None
        assert (await get(http, f"{base}/readyz"))[::2] == (200, "ok")
        status, _, body = await get(http, f"{base}/readyz?verbose")
        assert (status, body) == (200, "[+]resource-coverage ok\nhealthz check passed\n")

        renewing[0] = "lease not renewed for 25s"
        status, _, body = await get(http, f"{base}/healthz")
        assert status == 500
        assert "[+]healthz ok\n[-]leader-election failed: lease not renewed for 25s" in body
        assert (await get(http, f"{base}/healthz/healthz"))[::2] == (200, "ok")
        assert (await get(http, f"{base}/healthz?exclude=leader-election"))[0] == 200
    finally:
        await server.aclose()
        await server.aclose()  # idempotent


@pytest.mark.parametrize(
    ("election", "leader", "discovered", "synced", "error", "expected"),
    [
        (True, False, False, False, None, None),  # passive replica: ready
        (True, True, False, False, None, DISCOVERY_PENDING),
        (True, True, True, False, None, CACHES_PENDING),
        (False, False, True, False, None, CACHES_PENDING),  # no election: always applies
        (False, False, True, False, "cache sync failed: boom", "cache sync failed: boom"),
        (False, False, True, True, None, None),
    ],
)
def test_resource_coverage_readiness(
    election: bool, leader: bool, discovered: bool, synced: bool, error: str | None,
    expected: str | None,
) -> None:  # fmt: skip
    check = resource_coverage(
        leader_election=election,
        is_leader=lambda: leader,
        discovery_complete=lambda: discovered,
        caches_synced=lambda: synced,
        sync_error=lambda: error,
    )
    assert check() == expected


@pytest.mark.parametrize(
    ("text", "parsed"),
    [
        ("0", None),
        (":8081", (None, 8081)),
        ("127.0.0.1:0", ("127.0.0.1", 0)),
        ("[::1]:8443", ("::1", 8443)),
        ("localhost:9090", ("localhost", 9090)),
    ],
)
def test_bind_addresses(text: str, parsed: tuple[str | None, int] | None) -> None:
    assert parse_bind_address(text) == parsed


@pytest.mark.parametrize("text", ["8080", ":http", "::1:80", "host:70000", ""])
def test_bad_bind_addresses(text: str) -> None:
    with pytest.raises(ValueError, match="invalid bind address"):
        parse_bind_address(text)


async def test_disabled_servers_do_not_bind() -> None:
    metrics = MetricsServer(bind_address="0", registry=Metrics().registry)
    await metrics.start()
    assert not metrics.enabled
    assert metrics.port is None
    await metrics.aclose()
    with pytest.raises(ValueError, match="needs an API client"):
        MetricsServer(bind_address=":8443", registry=Metrics().registry, secure=True)


# --- plain metrics ----------------------------------------------------------------------------


async def test_plain_http_metrics(http: aiohttp.ClientSession) -> None:
    metrics = Metrics()
    metrics.count_action("delete", "ConfigMap", "success")
    server = MetricsServer(bind_address="127.0.0.1:0", registry=metrics.registry, secure=False)
    await server.start()
    try:
        status, content_type, body = await get(http, f"http://127.0.0.1:{server.port}/metrics")
        assert status == 200
        assert content_type.startswith("text/plain")
        assert 'lifecycle_actions_total{action="delete",kind="ConfigMap",result="success"} 1.0' in (
            body
        )
        assert 'controller_runtime_reconcile_total{controller="lifecycle",result="error"} 0.0' in (
            body
        )
    finally:
        await server.aclose()


# --- secure metrics ---------------------------------------------------------------------------


async def test_secure_metrics_authenticate_and_authorise_every_scrape(
    control_plane: ControlPlane, namespace: str, kube: KubeClient, http: aiohttp.ClientSession
) -> None:
    outsider = sa_token(control_plane, namespace, "outsider")
    reader = metrics_reader(control_plane, namespace, "prometheus")
    server = MetricsServer(
        bind_address="127.0.0.1:0",
        registry=Metrics().registry,
        secure=True,
        api=kube,
        auth_cache_ttl=0,  # RBAC may take a moment to apply: no stale denials while polling
        enable_http2=True,  # accepted, no effect
    )
    await server.start()
    try:
        url = f"https://127.0.0.1:{server.port}/metrics"
        with pytest.raises(aiohttp.ClientConnectorCertificateError):
            await get(http, url)  # self-signed: not trusted by default
        assert await get(http, url, tls=False) == (401, "text/plain; charset=utf-8", "Unauthorized")
        assert (await get(http, url, token="not-a-token", tls=False))[::2] == (401, "Unauthorized")
        assert (await get(http, url, token=outsider, tls=False))[::2] == (
            403,
            f"Authorization denied for user system:serviceaccount:{namespace}:outsider",
        )

        async def reader_allowed() -> bool:
            return (await get(http, url, token=reader, tls=False))[0] == 200

        await eventually(reader_allowed, within=15, what="the metrics reader to be allowed")
        status, content_type, body = await get(http, url, token=reader, tls=False)
        assert status == 200
        assert content_type.startswith("text/plain")
        assert "# TYPE workqueue_depth gauge" in body
    finally:
        await server.aclose()


async def test_reviews_are_cached_positive_and_negative(
    control_plane: ControlPlane, namespace: str, kube: KubeClient
) -> None:
    reader = metrics_reader(control_plane, namespace, "scraper")
    clock = FakeClock()
    api = CountingApi(kube)
    auth = ScrapeAuthorizer(api, clock=clock, ttl=10)

    async def allowed() -> bool:
        return await auth.check(f"Bearer {reader}", path="/metrics", verb="get") is None

    await eventually(allowed, within=15, what="the scraper to be allowed")
    api.paths.clear()
    for _ in range(5):
        assert await auth.check(f"Bearer {reader}", path="/metrics", verb="get") is None
        denial = await auth.check("Bearer nonsense", path="/metrics", verb="get")
        assert denial is not None
        assert denial.status == 401
    # one TokenReview for the bad token, then everything from the cache
    assert api.paths == ["/apis/authentication.k8s.io/v1/tokenreviews"]

    await clock.advance(10)
    assert await auth.check(f"Bearer {reader}", path="/metrics", verb="get") is None
    assert len(api.paths) == 3  # TokenReview + SubjectAccessReview again after the TTL

    user = await auth.authenticate(reader)
    assert user is not None
    assert user.username == f"system:serviceaccount:{namespace}:scraper"
    assert "system:serviceaccounts" in user.groups
    assert not await auth.authorize(user, path="/debug", verb="get")


async def served_common_name(port: int, trust: ssl.SSLContext) -> str:
    _, writer = await asyncio.open_connection("127.0.0.1", port, ssl=trust)
    try:
        cert = writer.get_extra_info("peercert")
        return str(dict(x[0] for x in cert["subject"])["commonName"])
    finally:
        writer.close()
        await writer.wait_closed()


async def test_certificate_directory_is_served_and_reloaded(
    control_plane: ControlPlane,
    namespace: str,
    kube: KubeClient,
    http: aiohttp.ClientSession,
    tmp_path: Path,
) -> None:
    ca = CertificateAuthority("metrics-test-ca")
    trust = ssl.create_default_context(cadata=ca.cert_pem.decode())

    def install(common_name: str) -> None:
        pair = ca.issue(common_name, server_hosts=("127.0.0.1", "localhost"))
        for data, name in ((pair.cert_pem, "serving.pem"), (pair.key_pem, "serving-key.pem")):
            staged = tmp_path / f".{name}.new"
            staged.write_bytes(data)
            staged.replace(tmp_path / name)  # atomic, like a projected Secret volume

    install("first")
    reader = metrics_reader(control_plane, namespace, "prom")
    server = MetricsServer(
        bind_address="127.0.0.1:0",
        registry=Metrics().registry,
        secure=True,
        api=kube,
        cert_dir=str(tmp_path),
        cert_name="serving.pem",
        key_name="serving-key.pem",
        cert_check_interval=0,
    )
    await server.start()
    try:
        assert server.port is not None
        assert await served_common_name(server.port, trust) == "first"
        url = f"https://127.0.0.1:{server.port}/metrics"

        async def verified_scrape_ok() -> bool:
            return (await get(http, url, token=reader, tls=trust))[0] == 200

        await eventually(verified_scrape_ok, within=15, what="a verified, authorised scrape")

        install("second")
        assert await served_common_name(server.port, trust) == "second"
        assert server.tls is not None
        assert server.tls.reloads == 1

        (tmp_path / "serving-key.pem").write_bytes(b"garbage")  # a broken rotation
        assert await served_common_name(server.port, trust) == "second"  # old one kept
    finally:
        await server.aclose()
