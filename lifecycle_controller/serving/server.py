"""The controller's HTTP surface: health probes and the Prometheus scrape endpoint.

Two independent aiohttp servers, as in controller-runtime (docs/behaviour.md#readiness and
docs/behaviour.md#metrics):

* :class:`ProbeServer` on ``--health-probe-bind-address`` (default ``:8081``): ``/healthz``
  (check ``healthz``, a plain ping, plus any liveness checks the app adds, such as the leader
  elector's renew watchdog; followers are healthy) and ``/readyz`` (check
  ``resource-coverage``: the app supplies a callable returning ``None`` when ready or the
  reason it is not, e.g. "resource discovery has not completed"). Each check is also served
  alone at ``/healthz/<name>`` and ``/readyz/<name>``.
* :class:`MetricsServer` on ``--metrics-bind-address`` (``0`` disables it). With
  ``--metrics-secure`` (the default) it serves HTTPS and authenticates and authorises every
  scrape like controller-runtime's ``WithAuthenticationAndAuthorization`` filter: the bearer
  token goes to a ``TokenReview``, the user it names to a ``SubjectAccessReview`` for
  ``get`` on the non-resource URL ``/metrics``. Both answers are cached briefly
  (:mod:`lifecycle_controller.serving.scrape_auth`). The certificate is self-signed and generated
  at start, unless
  ``--metrics-cert-path`` names a directory holding ``tls.crt``/``tls.key`` (names
  configurable), which is re-read whenever the files change
  (:class:`~lifecycle_controller.serving.reloading_tls.ReloadingTls`).

Response bodies follow controller-runtime's healthz handler (``ok``; on failure one
``[+]name ok`` / ``[-]name failed: <reason>`` line per check, then ``healthz check failed``),
except that the failure reason is shown instead of "reason withheld": it only says which
part of the start-up is pending.

``--enable-http2`` is accepted and has no effect: aiohttp speaks HTTP/1.1 only, which is
what the reference serves by default anyway (ALPN offers ``http/1.1`` alone).

A server that cannot listen (the port is taken, a privileged port, an unknown host) raises
:class:`ListenError`, whose message names the flag and the address, so start-up fails with
one line instead of a traceback.

Access logs are off on both servers (probes every few seconds would drown everything else);
denied scrapes are logged at debug level.
"""

from __future__ import annotations

import asyncio
import os
import socket
import ssl
from collections.abc import Awaitable, Callable, Mapping, Sequence

import structlog
from aiohttp import web
from prometheus_client import CollectorRegistry
from prometheus_client.aiohttp import make_aiohttp_handler

from lifecycle_controller.config import parse_bind_address
from lifecycle_controller.machinery.clock import Clock
from lifecycle_controller.serving.reloading_tls import ReloadingTls
from lifecycle_controller.serving.scrape_auth import ApiRequester, ScrapeAuthorizer

__all__ = [
    "CACHES_PENDING",
    "CACHES_STALE",
    "DISCOVERY_PENDING",
    "HEALTHZ_CHECK",
    "READYZ_CHECK",
    "REFERENCES_PENDING",
    "Check",
    "ListenError",
    "MetricsServer",
    "Notes",
    "ProbeServer",
    "caches_stale",
    "resource_coverage",
]

_log = structlog.get_logger(__name__)

#: A health check: returns ``None`` when healthy, otherwise why not.
Check = Callable[[], str | None]
#: Lines a probe shows without failing (e.g. a ``--watch-namespace`` name that does not exist).
Notes = Callable[[], Sequence[str]]

HEALTHZ_CHECK = "healthz"
READYZ_CHECK = "resource-coverage"
_READINESS_PREFIX = "resource coverage not ready: "
_SHUTDOWN_TIMEOUT = 2.0


class ListenError(Exception):
    """A server could not listen on the address its flag gives."""

    def __init__(self, flag: str, address: str, reason: str) -> None:
        super().__init__(f"{flag}={address}: cannot listen there: {reason}")
        self.flag = flag
        self.address = address
        self.reason = reason


def _reason(error: OSError) -> str:
    """``address already in use`` rather than asyncio's sentence around it."""
    if isinstance(error, socket.gaierror) or not error.errno:
        return (error.strerror or str(error)).lower()
    return os.strerror(error.errno).lower()


async def _start_site(
    app: web.Application,
    address: tuple[str | None, int],
    ssl_context: ssl.SSLContext | None = None,
    *,
    flag: str,
    bind_address: str,
) -> tuple[web.AppRunner, int]:
    runner = web.AppRunner(app, access_log=None, shutdown_timeout=_SHUTDOWN_TIMEOUT)
    await runner.setup()
    try:
        site = web.TCPSite(runner, address[0], address[1], ssl_context=ssl_context)
        await site.start()
    except OSError as error:
        await runner.cleanup()
        raise ListenError(flag, bind_address, _reason(error)) from error
    except BaseException:
        await runner.cleanup()
        raise
    port = int(runner.addresses[0][1])
    return runner, port


# --- probes -------------------------------------------------------------------------------


def _run_check(check: Check) -> str | None:
    try:
        return check()
    except Exception as error:  # a broken check is a failing check, not a crashed server
        return f"check raised {type(error).__name__}: {error}"


def _run_notes(notes: Notes) -> list[str]:
    try:
        return list(notes())
    except Exception as error:  # notes are informational: never fail the probe for them
        return [f"notes raised {type(error).__name__}: {error}"]


def _checks_handler(
    checks: Mapping[str, Check], endpoint: str, notes: Notes = lambda: ()
) -> Callable[[web.Request], Awaitable[web.Response]]:
    """The aggregated handler of controller-runtime's ``healthz.Handler`` for ``checks``.

    ``notes`` are lines that do not fail the probe (``[!]`` lines after the checks); while
    there are any, a passing probe answers with the verbose body so that they are seen.
    """

    async def handle(request: web.Request) -> web.Response:
        excluded = set(request.query.getall("exclude", []))
        lines: list[str] = []
        failed = False
        for name, check in checks.items():
            if name in excluded:
                continue
            reason = _run_check(check)
            if reason is None:
                lines.append(f"[+]{name} ok")
            else:
                failed = True
                lines.append(f"[-]{name} failed: {reason}")
        noted = [f"[!]{note}" for note in _run_notes(notes)]
        lines.extend(noted)
        if failed:
            _log.debug("probe check failed", endpoint=endpoint, statuses=lines)
            return web.Response(status=500, text="\n".join([*lines, "healthz check failed"]))
        if "verbose" not in request.query and not noted:
            return web.Response(text="ok")
        return web.Response(text="\n".join([*lines, "healthz check passed"]) + "\n")

    return handle


def _single_check_handler(check: Check) -> Callable[[web.Request], Awaitable[web.Response]]:
    async def handle(_request: web.Request) -> web.Response:
        reason = _run_check(check)
        if reason is None:
            return web.Response(text="ok")
        return web.Response(status=500, text=f"internal server error: {reason}")

    return handle


#: Readiness reasons of the reference (docs/behaviour.md#readiness).
DISCOVERY_PENDING = "resource discovery has not completed"
CACHES_PENDING = "waiting for resource watch caches to synchronize"
CACHES_STALE = "watch caches are not current (API server unreachable or refusing)"
#: While a policy reads ``referencedBy`` and the reference index has not synced (followed by
#: why: not listed yet, or which types the controller may not list).
REFERENCES_PENDING = "waiting for the reference index (a policy reads referencedBy)"


def caches_stale(names: list[str], *, shown: int = 3) -> str | None:
    """The readiness reason for informers that cannot list or watch, or None when none."""
    if not names:
        return None
    listed = ", ".join(names[:shown])
    more = f" and {len(names) - shown} more" if len(names) > shown else ""
    return f"{CACHES_STALE}: {listed}{more}"


def resource_coverage(
    *,
    leader_election: bool,
    is_leader: Callable[[], bool],
    discovery_complete: Callable[[], bool],
    caches_synced: Callable[[], bool],
    sync_error: Callable[[], str | None] = lambda: None,
) -> Check:
    """The reference's ``resource-coverage`` readiness as a :data:`Check` (AS-67).

    With leader election on, a replica that is not the leader is ready (so a passive
    replica can take over). Otherwise it is ready only once discovery completed and every
    watch cache synced; a cache sync error (e.g. :func:`caches_stale` during an API server
    outage) is reported with its own message.
    """

    def check() -> str | None:
        if leader_election and not is_leader():
            return None
        if not discovery_complete():
            return DISCOVERY_PENDING
        error = sync_error()
        if error:
            return error
        return None if caches_synced() else CACHES_PENDING

    return check


def _readiness_check(readiness: Check) -> Check:
    def check() -> str | None:
        reason = readiness()
        return None if reason is None else f"{_READINESS_PREFIX}{reason}"

    return check


class ProbeServer:
    """``/healthz`` and ``/readyz`` on the health probe address.

    ``readiness`` returns ``None`` when resource coverage is complete (or when this replica is
    a passive follower, docs/behaviour.md#readiness: the app decides) and a reason
    otherwise; the failure text is "resource coverage not ready: <reason>". ``liveness`` adds
    named checks to ``/healthz`` next to the ``healthz`` ping (keep them about process health,
    never about apiserver reachability). ``readiness_notes`` are ``/readyz`` lines that do not
    make the replica unready (docs/behaviour.md#readiness).
    """

    #: The flag that sets the address, named when the server cannot listen there.
    FLAG = "--health-probe-bind-address"

    def __init__(
        self,
        *,
        bind_address: str = ":8081",
        readiness: Check,
        liveness: Mapping[str, Check] | None = None,
        readiness_notes: Notes | None = None,
    ) -> None:
        self._bind_address = bind_address
        self._address = parse_bind_address(bind_address)
        self._healthz: dict[str, Check] = {HEALTHZ_CHECK: lambda: None, **(liveness or {})}
        self._readyz: dict[str, Check] = {READYZ_CHECK: _readiness_check(readiness)}
        self._readyz_notes: Notes = readiness_notes or (lambda: ())
        self._runner: web.AppRunner | None = None
        self._port: int | None = None

    @property
    def port(self) -> int | None:
        """The bound port once started (useful with port 0), else None."""
        return self._port

    def build_app(self) -> web.Application:
        """The aiohttp application (exposed for in-process tests)."""
        app = web.Application()
        app.router.add_get("/healthz", _checks_handler(self._healthz, "healthz"))
        app.router.add_get("/readyz", _checks_handler(self._readyz, "readyz", self._readyz_notes))
        for endpoint, checks in (("healthz", self._healthz), ("readyz", self._readyz)):
            for name, check in checks.items():
                app.router.add_get(f"/{endpoint}/{name}", _single_check_handler(check))
        return app

    async def start(self) -> None:
        """Bind and serve; does nothing when the address is ``0``."""
        if self._address is None or self._runner is not None:
            return
        self._runner, self._port = await _start_site(
            self.build_app(), self._address, flag=self.FLAG, bind_address=self._bind_address
        )
        _log.info("serving health probes", port=self._port)

    async def aclose(self) -> None:
        """Stop serving. Idempotent."""
        runner, self._runner = self._runner, None
        if runner is not None:
            await runner.cleanup()


# --- metrics server -------------------------------------------------------------------------


class MetricsServer:
    """``/metrics`` on the metrics bind address; HTTPS + scrape auth when ``secure``.

    ``api`` (a ``kube.KubeClient``) performs the reviews and is required when ``secure``;
    the controller's identity needs ``create`` on ``tokenreviews`` and
    ``subjectaccessreviews``. ``enable_http2`` is accepted for flag compatibility and
    ignored (HTTP/1.1 only).
    """

    #: The flag that sets the address, named when the server cannot listen there.
    FLAG = "--metrics-bind-address"

    def __init__(
        self,
        *,
        bind_address: str,
        registry: CollectorRegistry,
        secure: bool = True,
        api: ApiRequester | None = None,
        cert_dir: str | None = None,
        cert_name: str = "tls.crt",
        key_name: str = "tls.key",
        enable_http2: bool = False,
        clock: Clock | None = None,
        auth_cache_ttl: float = 10.0,
        cert_check_interval: float = 1.0,
    ) -> None:
        self._bind_address = bind_address
        self._address = parse_bind_address(bind_address)
        if secure and api is None and self._address is not None:
            raise ValueError("secure metrics serving needs an API client for the reviews")
        self._registry = registry
        self._secure = secure
        self._cert_dir = cert_dir
        self._cert_name = cert_name
        self._key_name = key_name
        self._clock = clock
        self._cert_check_interval = cert_check_interval
        self._authorizer = (
            ScrapeAuthorizer(api, clock=clock, ttl=auth_cache_ttl)
            if secure and api is not None
            else None
        )
        self._enable_http2 = enable_http2
        self.tls: ReloadingTls | None = None
        self._runner: web.AppRunner | None = None
        self._port: int | None = None

    @property
    def port(self) -> int | None:
        """The bound port once started (useful with port 0), else None."""
        return self._port

    @property
    def enabled(self) -> bool:
        """False when the bind address is ``0``."""
        return self._address is not None

    def build_app(self) -> web.Application:
        """The aiohttp application (exposed for in-process tests)."""
        app = web.Application()
        serve = make_aiohttp_handler(self._registry)
        authorizer = self._authorizer

        async def metrics(request: web.Request) -> web.StreamResponse:
            if authorizer is not None:
                denial = await authorizer.check(
                    request.headers.get("Authorization"),
                    path=request.path,
                    verb=request.method.lower(),
                )
                if denial is not None:
                    return web.Response(status=denial.status, text=denial.text)
            return await serve(request)

        app.router.add_get("/metrics", metrics)
        return app

    async def start(self) -> None:
        """Bind and serve; does nothing when the address is ``0``."""
        if self._address is None or self._runner is not None:
            return
        if self._enable_http2:
            _log.info("--enable-http2 has no effect: the metrics server speaks HTTP/1.1 only")
        ssl_context = None
        if self._secure:
            self.tls = await asyncio.to_thread(
                ReloadingTls,
                cert_dir=self._cert_dir,
                cert_name=self._cert_name,
                key_name=self._key_name,
                clock=self._clock,
                check_interval=self._cert_check_interval,
            )
            ssl_context = self.tls.context
        self._runner, self._port = await _start_site(
            self.build_app(),
            self._address,
            ssl_context,
            flag=self.FLAG,
            bind_address=self._bind_address,
        )
        _log.info(
            "serving metrics",
            port=self._port,
            secure=self._secure,
            certificate=self._cert_dir or "self-signed",
        )

    async def aclose(self) -> None:
        """Stop serving. Idempotent."""
        runner, self._runner = self._runner, None
        if runner is not None:
            await runner.cleanup()
