"""The controller's HTTP surface: health probes and the Prometheus scrape endpoint.

Two independent aiohttp servers, as in controller-runtime (REFERENCE §7.3, §7.4):

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
  (:class:`ScrapeAuthorizer`). The certificate is self-signed and generated at start, unless
  ``--metrics-cert-path`` names a directory holding ``tls.crt``/``tls.key`` (names
  configurable), which is re-read whenever the files change (:class:`ReloadingTls`).

Response bodies follow controller-runtime's healthz handler (``ok``; on failure one
``[+]name ok`` / ``[-]name failed: <reason>`` line per check, then ``healthz check failed``),
except that the failure reason is shown instead of "reason withheld": it only says which
part of the start-up is pending.

``--enable-http2`` is accepted and has no effect: aiohttp speaks HTTP/1.1 only, which is
what the reference serves by default anyway (ALPN offers ``http/1.1`` alone).

Access logs are off on both servers (probes every few seconds would drown everything else);
denied scrapes are logged at debug level.
"""

from __future__ import annotations

import asyncio
import hashlib
import ssl
import tempfile
from collections import OrderedDict
from collections.abc import Awaitable, Callable, Hashable, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Generic, Protocol, TypeVar

import structlog
from aiohttp import web
from prometheus_client import CollectorRegistry
from prometheus_client.aiohttp import make_aiohttp_handler

from lifecycle_controller.clock import Clock, RealClock
from lifecycle_controller.config import parse_bind_address
from lifecycle_controller.kube import KubeError
from lifecycle_controller.tls import self_signed_certificate

__all__ = [
    "CACHES_PENDING",
    "DISCOVERY_PENDING",
    "HEALTHZ_CHECK",
    "READYZ_CHECK",
    "ApiRequester",
    "Check",
    "Denial",
    "MetricsServer",
    "ProbeServer",
    "ReloadingTls",
    "ScrapeAuthorizer",
    "UserInfo",
    "parse_bind_address",
    "resource_coverage",
    "self_signed_certificate",
]

_log = structlog.get_logger(__name__)

#: A health check: returns ``None`` when healthy, otherwise why not.
Check = Callable[[], str | None]

HEALTHZ_CHECK = "healthz"
READYZ_CHECK = "resource-coverage"
_READINESS_PREFIX = "resource coverage not ready: "
_SHUTDOWN_TIMEOUT = 2.0

TOKEN_REVIEWS = "/apis/authentication.k8s.io/v1/tokenreviews"
SUBJECT_ACCESS_REVIEWS = "/apis/authorization.k8s.io/v1/subjectaccessreviews"


class ApiRequester(Protocol):
    """The slice of ``kube.KubeClient`` the scrape authoriser needs."""

    async def request(self, method: str, path: str, *, body: Any = None) -> dict[str, Any]:
        """Send one request; return the decoded JSON answer; raise ``KubeError``."""
        ...


async def _start_site(
    app: web.Application,
    address: tuple[str | None, int],
    ssl_context: ssl.SSLContext | None = None,
) -> tuple[web.AppRunner, int]:
    runner = web.AppRunner(app, access_log=None, shutdown_timeout=_SHUTDOWN_TIMEOUT)
    await runner.setup()
    try:
        site = web.TCPSite(runner, address[0], address[1], ssl_context=ssl_context)
        await site.start()
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


def _checks_handler(
    checks: Mapping[str, Check], endpoint: str
) -> Callable[[web.Request], Awaitable[web.Response]]:
    """The aggregated handler of controller-runtime's ``healthz.Handler`` for ``checks``."""

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
        if failed:
            _log.debug(f"{endpoint} check failed", statuses=lines)
            return web.Response(status=500, text="\n".join([*lines, "healthz check failed"]))
        if "verbose" not in request.query:
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


#: Readiness reasons of the reference (REFERENCE §7.4).
DISCOVERY_PENDING = "resource discovery has not completed"
CACHES_PENDING = "waiting for resource watch caches to synchronize"


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
    watch cache synced; a cache sync error is reported with its own message.
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
    a passive follower, REFERENCE §7.4: the app decides) and a reason otherwise; the failure
    text is "resource coverage not ready: <reason>". ``liveness`` adds named checks to
    ``/healthz`` next to the ``healthz`` ping (keep them about process health, never about
    apiserver reachability).
    """

    def __init__(
        self,
        *,
        bind_address: str = ":8081",
        readiness: Check,
        liveness: Mapping[str, Check] | None = None,
    ) -> None:
        self._address = parse_bind_address(bind_address)
        self._healthz: dict[str, Check] = {HEALTHZ_CHECK: lambda: None, **(liveness or {})}
        self._readyz: dict[str, Check] = {READYZ_CHECK: _readiness_check(readiness)}
        self._runner: web.AppRunner | None = None
        self._port: int | None = None

    @property
    def port(self) -> int | None:
        """The bound port once started (useful with port 0), else None."""
        return self._port

    def build_app(self) -> web.Application:
        """The aiohttp application (exposed for in-process tests)."""
        app = web.Application()
        for endpoint, checks in (("healthz", self._healthz), ("readyz", self._readyz)):
            app.router.add_get(f"/{endpoint}", _checks_handler(checks, endpoint))
            for name, check in checks.items():
                app.router.add_get(f"/{endpoint}/{name}", _single_check_handler(check))
        return app

    async def start(self) -> None:
        """Bind and serve; does nothing when the address is ``0``."""
        if self._address is None or self._runner is not None:
            return
        self._runner, self._port = await _start_site(self.build_app(), self._address)
        _log.info("serving health probes", port=self._port)

    async def aclose(self) -> None:
        """Stop serving. Idempotent."""
        runner, self._runner = self._runner, None
        if runner is not None:
            await runner.cleanup()


# --- scrape authentication and authorisation ------------------------------------------------


@dataclass(frozen=True, slots=True)
class UserInfo:
    """The identity a ``TokenReview`` returned."""

    username: str
    uid: str = ""
    groups: tuple[str, ...] = ()
    extra: tuple[tuple[str, tuple[str, ...]], ...] = ()

    @classmethod
    def from_status(cls, user: Mapping[str, Any]) -> UserInfo:
        extra = user.get("extra") or {}
        return cls(
            username=str(user.get("username", "")),
            uid=str(user.get("uid", "")),
            groups=tuple(str(g) for g in user.get("groups") or ()),
            extra=tuple(sorted((str(k), tuple(map(str, v or ()))) for k, v in extra.items())),
        )

    def spec(self) -> dict[str, Any]:
        """The user fields of a ``SubjectAccessReview`` spec."""
        return {
            "user": self.username,
            "uid": self.uid,
            "groups": list(self.groups),
            "extra": {key: list(values) for key, values in self.extra},
        }


_V = TypeVar("_V")


class _TtlCache(Generic[_V]):
    """A small LRU map whose entries expire ``ttl`` seconds after they were stored."""

    def __init__(self, *, clock: Clock, ttl: float, max_entries: int) -> None:
        self._clock = clock
        self._ttl = ttl
        self._max = max_entries
        self._items: OrderedDict[Hashable, tuple[float, _V]] = OrderedDict()

    def get(self, key: Hashable) -> tuple[bool, _V | None]:
        """Return (hit, value)."""
        item = self._items.get(key)
        if item is None:
            return False, None
        if item[0] <= self._clock.monotonic():
            del self._items[key]
            return False, None
        self._items.move_to_end(key)
        return True, item[1]

    def put(self, key: Hashable, value: _V) -> None:
        if self._ttl <= 0 or self._max <= 0:
            return
        self._items[key] = (self._clock.monotonic() + self._ttl, value)
        self._items.move_to_end(key)
        while len(self._items) > self._max:
            self._items.popitem(last=False)

    def __len__(self) -> int:
        return len(self._items)


@dataclass(frozen=True, slots=True)
class Denial:
    """Why a scrape was refused: HTTP status and body."""

    status: int
    text: str


class ScrapeAuthorizer:
    """Bearer token → ``TokenReview`` → ``SubjectAccessReview`` (non-resource URL), cached.

    Positive and negative answers are cached for ``ttl`` seconds (at most ``max_entries``
    each, least recently used evicted) so a scraper every few seconds costs two API calls
    per ``ttl``, not per scrape. Failed API calls are not cached: a failed TokenReview means
    401 "Authentication failed", a failed SubjectAccessReview 500, as in controller-runtime.
    Tokens are cached by their SHA-256, never stored as they are.
    """

    def __init__(
        self,
        api: ApiRequester,
        *,
        clock: Clock | None = None,
        ttl: float = 10.0,
        max_entries: int = 1024,
    ) -> None:
        self._api = api
        clock = clock if clock is not None else RealClock()
        self._users: _TtlCache[UserInfo | None] = _TtlCache(
            clock=clock, ttl=ttl, max_entries=max_entries
        )
        self._decisions: _TtlCache[bool] = _TtlCache(clock=clock, ttl=ttl, max_entries=max_entries)

    async def check(self, authorization: str | None, *, path: str, verb: str) -> Denial | None:
        """Return None when the request may proceed, else the :class:`Denial` to answer."""
        token = _bearer_token(authorization)
        if token is None:
            return Denial(401, "Unauthorized")
        try:
            user = await self.authenticate(token)
        except KubeError as error:
            _log.error("scrape authentication failed", error=str(error))
            return Denial(401, "Authentication failed")
        if user is None:
            _log.debug("scrape token not authenticated")
            return Denial(401, "Unauthorized")
        try:
            allowed = await self.authorize(user, path=path, verb=verb)
        except KubeError as error:
            message = f"Authorization for user {user.username} failed"
            _log.error(message, error=str(error))
            return Denial(500, message)
        if not allowed:
            message = f"Authorization denied for user {user.username}"
            _log.debug(message, path=path, verb=verb)
            return Denial(403, message)
        return None

    async def authenticate(self, token: str) -> UserInfo | None:
        """The user ``token`` belongs to, or None when the apiserver rejects it."""
        key = hashlib.sha256(token.encode()).hexdigest()
        hit, cached = self._users.get(key)
        if hit:
            return cached
        review = await self._api.request(
            "POST",
            TOKEN_REVIEWS,
            body={
                "apiVersion": "authentication.k8s.io/v1",
                "kind": "TokenReview",
                "spec": {"token": token},
            },
        )
        status = review.get("status") or {}
        user = (
            UserInfo.from_status(status.get("user") or {}) if status.get("authenticated") else None
        )
        self._users.put(key, user)
        return user

    async def authorize(self, user: UserInfo, *, path: str, verb: str) -> bool:
        """Whether ``user`` may ``verb`` the non-resource URL ``path``."""
        key = (user, path, verb)
        hit, cached = self._decisions.get(key)
        if hit and cached is not None:
            return cached
        review = await self._api.request(
            "POST",
            SUBJECT_ACCESS_REVIEWS,
            body={
                "apiVersion": "authorization.k8s.io/v1",
                "kind": "SubjectAccessReview",
                "spec": {**user.spec(), "nonResourceAttributes": {"path": path, "verb": verb}},
            },
        )
        allowed = bool((review.get("status") or {}).get("allowed"))
        self._decisions.put(key, allowed)
        return allowed


def _bearer_token(authorization: str | None) -> str | None:
    if not authorization:
        return None
    scheme, _, token = authorization.strip().partition(" ")
    token = token.strip()
    if scheme.lower() != "bearer" or not token:
        return None
    return token


# --- TLS ----------------------------------------------------------------------------------


def _server_context(cert_file: Path, key_file: Path) -> ssl.SSLContext:
    context = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
    context.minimum_version = ssl.TLSVersion.TLSv1_2
    context.set_alpn_protocols(["http/1.1"])
    context.load_cert_chain(cert_file, key_file)
    return context


def _file_signature(*paths: Path) -> tuple[tuple[int, int, int], ...]:
    signature = []
    for path in paths:
        stat = path.stat()
        signature.append((stat.st_mtime_ns, stat.st_ino, stat.st_size))
    return tuple(signature)


class ReloadingTls:
    """The metrics server's TLS: a certificate directory re-read on change, or self-signed.

    The context given to the listener swaps in the current one during each handshake (the
    SNI callback runs for every ClientHello, with or without SNI). With a directory, at most
    once per ``check_interval`` seconds a handshake compares the files' mtime, inode and size
    with what was loaded; if they changed, a new context is built, and swapped in only if
    the pair loads (a half-written rotation keeps the old certificate).
    """

    def __init__(
        self,
        *,
        cert_dir: str | None = None,
        cert_name: str = "tls.crt",
        key_name: str = "tls.key",
        clock: Clock | None = None,
        check_interval: float = 1.0,
    ) -> None:
        self._clock: Clock = clock if clock is not None else RealClock()
        self._interval = check_interval
        self._files: tuple[Path, Path] | None = None
        if cert_dir:
            self._files = (Path(cert_dir) / cert_name, Path(cert_dir) / key_name)
            self._signature = _file_signature(*self._files)
            self._current = _server_context(*self._files)
        else:
            self._signature = ()
            self._current = self._self_signed()
        self._checked_at = self._clock.monotonic()
        self.reloads = 0
        self.context = self._current
        self.context.sni_callback = self._on_hello

    @staticmethod
    def _self_signed() -> ssl.SSLContext:
        cert_pem, key_pem = self_signed_certificate()
        with tempfile.TemporaryDirectory(prefix="lifecycle-metrics-tls-") as tmp:
            cert_file, key_file = Path(tmp) / "tls.crt", Path(tmp) / "tls.key"
            cert_file.write_bytes(cert_pem)
            key_file.touch(mode=0o600)
            key_file.write_bytes(key_pem)
            return _server_context(cert_file, key_file)

    def maybe_reload(self) -> None:
        """Re-read the certificate files if they changed since the last load."""
        if self._files is None:
            return
        try:
            signature = _file_signature(*self._files)
            if signature == self._signature:
                return
            context = _server_context(*self._files)
        except (OSError, ssl.SSLError) as error:
            _log.warning("metrics certificate not reloaded", error=str(error))
            return
        self._current = context
        self._signature = signature
        self.reloads += 1
        _log.info("metrics certificate reloaded", cert=str(self._files[0]))

    def _on_hello(
        self, connection: ssl.SSLObject | ssl.SSLSocket, _server_name: str | None, _ctx: object
    ) -> None:
        now = self._clock.monotonic()
        if now - self._checked_at >= self._interval:
            self._checked_at = now
            self.maybe_reload()
        if connection.context is not self._current:
            connection.context = self._current


# --- metrics server -------------------------------------------------------------------------


class MetricsServer:
    """``/metrics`` on the metrics bind address; HTTPS + scrape auth when ``secure``.

    ``api`` (a ``kube.KubeClient``) performs the reviews and is required when ``secure``;
    the controller's identity needs ``create`` on ``tokenreviews`` and
    ``subjectaccessreviews``. ``enable_http2`` is accepted for flag compatibility and
    ignored (HTTP/1.1 only).
    """

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
        self._runner, self._port = await _start_site(self.build_app(), self._address, ssl_context)
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
