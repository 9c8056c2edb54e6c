"""The console's web server: a read-only page on the loopback address, pushed live.

One aiohttp application serves the page's three files (package data: nothing from a CDN,
nothing built at install or run time) and a small JSON API over the latest
:class:`~.snapshot.Snapshot`:

* ``GET /api/overview``: the version, the banner facts (breaker, restart guard, windows,
  what could not be read), the policies and the last actions;
* ``GET /api/timeline?span=hour|day|week&by=namespace|policy[&policy=REF][&namespace=NS]``:
  the counts :func:`~.timeline.timeline` makes, and the maintenance windows' openings on
  that axis;
* ``GET /api/cell?...&bucket=N&group=G[&group=G2...]``: the rows behind one cell;
* ``GET /api/explain?apiVersion=&kind=&namespace=&name=``: ``explain``'s text for one object;
* ``GET /api/stream``: server-sent events, one ``version`` message whenever what the page
  shows changed (and a comment every 15 s to keep the line open); the page then fetches the
  new counts.

The cluster is followed as ``status -w`` follows it (:class:`~.snapshot.Following`: one list
of each type with the user's kubeconfig, metadata only, then watches): a look is taken as
soon as a watch reports a change, and every ``interval`` seconds for the actions that fell
due; it judges again only what may have changed, and one equal to the one before is not a
new version, so an idle cluster pushes nothing. A request whose ``Host`` is not the console's
own loopback address is refused (403), so another site the browser visits cannot read the
cluster through it (DNS rebinding).
"""

from __future__ import annotations

import asyncio
import contextlib
import ipaddress
import json
from collections.abc import Awaitable, Callable
from dataclasses import asdict
from importlib import resources
from typing import Any, Final

from aiohttp import web

from lifecycle_controller.core.text.timestamps import format_rfc3339_nano
from lifecycle_controller.kube import KubeClient, KubeError
from lifecycle_controller.machinery.clock import Clock
from lifecycle_controller.tools.console.snapshot import ConsoleView, Following, Snapshot
from lifecycle_controller.tools.console.timeline import (
    CATEGORIES,
    Query,
    QueryError,
    axis_start,
    cell_rows,
    timeline,
    window_spans,
)

__all__ = ["AddressError", "Console", "parse_address"]

#: The page's files, by the name it asks for them.
_ASSETS: Final = {
    "console.html": "text/html",
    "console.js": "text/javascript",
    "console.css": "text/css",
}
_KEEPALIVE_S: Final = 15.0
_SHUTDOWN_S: Final = 1.0
#: Counted views kept for the current version (the spans, groupings and a few filters).
_VIEWS_KEPT: Final = 32
#: What the page may load: only the console's own files (no CDN, no inline script).
_POLICY: Final = (
    "default-src 'self'; img-src 'self' data:; style-src 'self'; script-src 'self'; "
    "connect-src 'self'; frame-ancestors 'none'"
)
_NS_PER_MS: Final = 1_000_000


class AddressError(ValueError):
    """``--address`` is not a loopback HOST:PORT."""


def parse_address(value: str) -> tuple[str, int]:
    """``HOST:PORT`` (``[::1]:PORT`` for IPv6) with a loopback host: the console serves the
    user's own rights and must not be reachable from another machine."""
    host, separator, port_text = value.rpartition(":")
    host = host.removeprefix("[").removesuffix("]")
    if not separator or not port_text.isdigit() or not 0 <= int(port_text) <= 65535:
        raise AddressError(f"expected HOST:PORT, got {value!r}")
    if host != "localhost":
        try:
            loopback = ipaddress.ip_address(host).is_loopback
        except ValueError:
            loopback = False
        if not loopback:
            raise AddressError(
                f"{host!r} is not a loopback address: the console serves only this machine "
                "(127.0.0.1, ::1 or localhost)"
            )
    return host, int(port_text)


def _asset(name: str) -> bytes:
    return (resources.files("lifecycle_controller.tools.console") / "static" / name).read_bytes()


class _Versions:
    """The latest snapshot and its version; a waiter wakes when the version moves."""

    def __init__(self) -> None:
        self.snapshot: Snapshot | None = None
        self.version = 0
        self.error = ""
        self._moved = asyncio.Event()

    def publish(self, snapshot: Snapshot) -> None:
        changed = self.snapshot is None or (
            snapshot is not self.snapshot and snapshot.content() != self.snapshot.content()
        )
        self.snapshot = snapshot
        self.error = ""
        if changed:
            self.version += 1
            self._moved.set()
            self._moved = asyncio.Event()

    async def after(self, version: int, timeout: float) -> int:
        """The version once it differs from ``version`` (or after ``timeout``)."""
        moved = self._moved
        if self.version == version:
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(moved.wait(), timeout)
        return self.version


Explainer = Callable[[str, str, str, str], Awaitable[str]]


class Console:
    """The server and its looks at the cluster; :meth:`start`, then :meth:`stop`."""

    def __init__(
        self,
        kube: KubeClient,
        view: ConsoleView,
        *,
        clock: Clock,
        interval: float,
        explainer: Explainer,
        title: str = "",
    ) -> None:
        self._kube = kube
        self._view = view
        self._clock = clock
        self._interval = interval
        self._explainer = explainer
        self._title = title
        self._versions = _Versions()
        self._following: Following | None = None
        self._looking: asyncio.Task[None] | None = None
        self._views: dict[tuple[Query, int], dict[str, Any]] = {}
        self._runner: web.AppRunner | None = None
        self._hosts: set[str] = set()
        self.url = ""

    @property
    def version(self) -> int:
        return self._versions.version

    @property
    def error(self) -> str:
        """Why the last look failed ("" it did not)."""
        return self._versions.error

    async def look(self) -> None:
        """Judge again what changed, published (a new version if anything shown changed);
        the first look lists everything, then starts following. The default view is counted
        at once, so that a page opened now draws without waiting."""
        if self._following is None:
            following = Following(self._kube, self._view, clock=self._clock)
            try:
                await following.start()
            except BaseException:
                await following.stop()
                raise
            self._following = following
        snapshot = await self._following.snapshot()
        before = self._versions.version
        self._versions.publish(snapshot)
        if self._versions.version != before:
            self._views.clear()
            self._counted(snapshot, Query())

    def lists(self) -> dict[str, int]:
        """How many times each followed type was listed (the first list included)."""
        return {} if self._following is None else self._following.lists()

    def _counted(self, snapshot: Snapshot, query: Query) -> dict[str, Any]:
        """:func:`~.timeline.timeline` of ``query``, kept until the version or the axis
        moves (a page asks again for every change; several pages ask for the same)."""
        now = self._now_ns()
        key = (query, axis_start(query.span, now))
        found = self._views.get(key)
        if found is None:
            if len(self._views) >= _VIEWS_KEPT:
                self._views.clear()
            found = self._views[key] = timeline(snapshot.rows, snapshot.marks, query, now)
        return found

    async def _look_forever(self) -> None:
        while True:
            try:
                await self.look()
            except Exception as error:  # shown on the page; the next look tries again
                self._versions.error = f"{type(error).__name__}: {error}"
            if self._following is None:
                await self._clock.sleep(self._interval)
            else:
                await self._following.wait(self._interval)

    async def start(self, host: str, port: int) -> str:
        """Serve on ``host:port`` (0: any free port) and start looking; the page's URL."""
        app = web.Application(middlewares=[self._same_host])
        app.router.add_get("/", self._page)
        app.router.add_get("/static/{name}", self._static)
        app.router.add_get("/api/overview", self._overview)
        app.router.add_get("/api/timeline", self._timeline)
        app.router.add_get("/api/cell", self._cell)
        app.router.add_get("/api/explain", self._explain)
        app.router.add_get("/api/stream", self._stream)
        runner = web.AppRunner(app, access_log=None, shutdown_timeout=_SHUTDOWN_S)
        await runner.setup()
        try:
            await web.TCPSite(runner, host, port).start()
        except BaseException:
            await runner.cleanup()
            raise
        self._runner = runner
        bound = int(runner.addresses[0][1])
        shown = f"[{host}]" if ":" in host else host
        self.url = f"http://{shown}:{bound}/"
        self._hosts = {f"{shown}:{bound}", f"localhost:{bound}"}
        self._looking = asyncio.create_task(self._look_forever())
        return self.url

    async def stop(self) -> None:
        if self._looking is not None:
            self._looking.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await self._looking
        if self._following is not None:
            await self._following.stop()
        if self._runner is not None:
            await self._runner.cleanup()

    # --- handlers ------------------------------------------------------------------------

    @web.middleware
    async def _same_host(
        self, request: web.Request, handler: Callable[[web.Request], Awaitable[web.StreamResponse]]
    ) -> web.StreamResponse:
        if request.host not in self._hosts:
            return web.Response(status=403, text="the console answers its own address only\n")
        response = await handler(request)
        response.headers["Cache-Control"] = "no-store"
        response.headers["X-Content-Type-Options"] = "nosniff"
        return response

    async def _page(self, request: web.Request) -> web.Response:
        response = web.Response(body=_asset("console.html"), content_type="text/html")
        response.headers["Content-Security-Policy"] = _POLICY
        return response

    async def _static(self, request: web.Request) -> web.Response:
        name = request.match_info["name"]
        if name not in _ASSETS:
            raise web.HTTPNotFound()
        return web.Response(body=_asset(name), content_type=_ASSETS[name])

    def _now_ns(self) -> int:
        return self._clock.now_ns()

    async def _overview(self, request: web.Request) -> web.Response:
        snapshot = self._versions.snapshot
        body: dict[str, Any] = {
            "version": self._versions.version,
            "ready": snapshot is not None,
            "error": self._versions.error,
            "title": self._title,
            "namespace": self._view.namespace or "",
            "categories": list(CATEGORIES),
            "nowMs": self._now_ns() // _NS_PER_MS,
        }
        if snapshot is not None:
            body |= {
                "collectedAt": format_rfc3339_nano(snapshot.collected_ns),
                "objects": len(snapshot.rows),
                "problems": sum(1 for row in snapshot.rows if row.problems),
                "breaker": {"open": snapshot.breaker_open, "text": snapshot.breaker},
                "guard": snapshot.guard,
                "windows": [
                    {"text": text, "from": source} for text, source in snapshot.windows.items()
                ],
                "unreadable": list(snapshot.unreadable),
                "policies": [_policy(row, snapshot) for row in snapshot.policies],
                "actions": [done.document() for done in snapshot.actions],
            }
        return web.json_response(body, dumps=_dumps)

    def _query(self, request: web.Request) -> tuple[Snapshot, Query]:
        snapshot = self._versions.snapshot
        if snapshot is None:
            raise web.HTTPServiceUnavailable(text="the first look at the cluster is not done yet")
        try:
            return snapshot, Query.parse(request.query)
        except QueryError as error:
            raise web.HTTPBadRequest(text=str(error)) from error

    async def _timeline(self, request: web.Request) -> web.Response:
        snapshot, query = self._query(request)
        body = dict(self._counted(snapshot, query))
        start, end = body["startMs"] * _NS_PER_MS, body["endMs"] * _NS_PER_MS
        body["windows"] = [
            {
                "text": text,
                "from": source,
                "spans": [
                    [opens // _NS_PER_MS, closes // _NS_PER_MS]
                    for opens, closes in window_spans(text, start, end)
                ],
            }
            for text, source in snapshot.windows.items()
        ]
        body["version"] = self._versions.version
        return web.json_response(body, dumps=_dumps)

    async def _cell(self, request: web.Request) -> web.Response:
        snapshot, query = self._query(request)
        try:
            bucket = int(request.query.get("bucket", ""))
        except ValueError:
            raise web.HTTPBadRequest(text="bucket: expected a number") from None
        groups = request.query.getall("group", [])
        found, total = cell_rows(
            snapshot.rows, snapshot.marks, query, self._now_ns(), groups=groups, bucket=bucket
        )
        items = [
            {**asdict(row), "atMs": at // _NS_PER_MS, "category": category}
            for row, at, category in found
        ]
        return web.json_response({"total": total, "items": items}, dumps=_dumps)

    async def _explain(self, request: web.Request) -> web.Response:
        query = request.query
        try:
            text = await self._explainer(
                query.get("apiVersion", ""),
                query.get("kind", ""),
                query.get("namespace", ""),
                query.get("name", ""),
            )
        except (KubeError, ValueError) as error:
            text = f"cannot explain it: {error}"
        return web.json_response({"text": text}, dumps=_dumps)

    async def _stream(self, request: web.Request) -> web.StreamResponse:
        response = web.StreamResponse(headers={"Content-Type": "text/event-stream"})
        await response.prepare(request)
        shown = -1
        while True:
            version = await self._versions.after(shown, _KEEPALIVE_S)
            if version == shown:
                await response.write(b": still here\n\n")
                continue
            shown = version
            await response.write(f"event: version\ndata: {version}\n\n".encode())


def _policy(row: Any, snapshot: Snapshot) -> dict[str, Any]:
    ref = "/".join(part for part in (row.kind, row.namespace, row.name) if part)
    following = snapshot.policy_next.get(ref)
    status = row.status
    return {
        **{key: value for key, value in asdict(row).items() if key != "status"},
        "ref": ref,
        "held": status.get("held") if row.reported else None,
        "protected": status.get("protected") if row.reported else None,
        "decides": following.decides if following else 0,
        "nextAt": following.next_at if following else "",
        "nextObject": following.next_object if following else "",
    }


def _dumps(value: Any) -> str:
    return json.dumps(value, separators=(",", ":"))
