"""The connection pools' connector, and closing it without leaking sockets.

Python before 3.12.8 (and 3.13.0) loses the raw socket under a TLS connection that is
closed while its TLS goodbye is still under way: if the event loop ends before the goodbye
does, that socket stays open until the garbage collector finds it (``ResourceWarning:
unclosed transport``). Two ways a connection gets there:

* a request cancelled mid-response (a watch timing out, a reconcile cut by shutdown, a lost
  Lease) hands its connection back to the pool, closed; aiohttp's ``enable_cleanup_closed``
  keeps such connections and aborts them when the pool closes (and every minute here:
  aiohttp's own 2 s timer fires whether or not anything waits, and on an idle controller its
  sixty wake-ups a minute per pool were most of the event loop's turns);
* a request cancelled just after its TLS handshake, before the pool has handed the
  connection to it: the connection is closed where it was being opened and the pool never
  learns of it. The connector here remembers every connection it opens and, when the pool
  closes, aborts the ones still open.

Both are needed only on those Python versions (aiohttp warns when ``enable_cleanup_closed``
is asked for elsewhere).
"""

from __future__ import annotations

import asyncio
import functools
import ssl
import sys
import weakref
from collections.abc import Callable
from typing import Any

import aiohttp
from aiohttp.client_proto import ResponseHandler

__all__ = ["close_pool", "new_connector"]

#: Python versions whose TLS transports can leak their socket on close (CPython gh-118960).
LEAKS_TLS_SOCKETS = sys.version_info < (3, 12, 8) or (3, 13, 0) <= sys.version_info < (3, 13, 1)


class _RememberingConnector(aiohttp.TCPConnector):
    """A TCPConnector that can abort every connection it opened that is still open."""

    #: Seconds between aborts of the closed connections kept (aiohttp: 2 s). A connection
    #: whose TLS goodbye completes is closed already; one whose goodbye stalls keeps its
    #: socket this long at most, and the pool's close aborts whatever is left at once.
    _cleanup_closed_period = 60.0

    def __init__(self, **kwargs: Any) -> None:
        super().__init__(enable_cleanup_closed=True, **kwargs)
        self._opened: weakref.WeakSet[ResponseHandler] = weakref.WeakSet()
        self._factory = functools.partial(self._remembered, self._factory)

    def _remembered(self, make: Callable[[], ResponseHandler]) -> ResponseHandler:
        handler = make()
        self._opened.add(handler)
        return handler

    def abort_open(self) -> None:
        """Abort the connections still open (their sockets close on the next loop turn)."""
        for handler in list(self._opened):
            if handler.transport is not None:
                handler.transport.abort()


def new_connector(
    *, limit: int, ssl_context: ssl.SSLContext | bool, keepalive: float | None = None
) -> aiohttp.TCPConnector:
    """A pool of at most ``limit`` connections that never leaks a closed TLS socket; an idle
    connection is kept ``keepalive`` seconds (None: aiohttp's default, 15 s)."""
    options: dict[str, Any] = {"limit": limit, "ssl": ssl_context}
    if keepalive is not None:
        options["keepalive_timeout"] = keepalive
    if LEAKS_TLS_SOCKETS:
        return _RememberingConnector(**options)
    return aiohttp.TCPConnector(**options)


async def close_pool(session: aiohttp.ClientSession) -> None:
    """Close a session and let the sockets it aborted finish closing."""
    connector = session.connector
    await session.close()
    if isinstance(connector, _RememberingConnector):
        connector.abort_open()
    # Aborted transports report connection_lost on the next loop iteration.
    await asyncio.sleep(0)
