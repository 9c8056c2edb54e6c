"""The connection pools' connector, and closing it without leaking sockets.

Python before 3.12.8 (and 3.13.0) loses the raw socket under a TLS connection that is
closed while its TLS goodbye is still under way: a request cancelled mid-response (a watch
timing out, a reconcile cut by shutdown, a lost Lease) closes its connection that way, and
if the pool is closed soon after, that socket stays open until the garbage collector finds
it (``ResourceWarning: unclosed transport``). aiohttp's ``enable_cleanup_closed`` keeps such
connections and aborts them when the pool closes (and every 2 s); it is needed only on those
Python versions, and aiohttp warns when it is asked for elsewhere.
"""

from __future__ import annotations

import asyncio
import ssl
import sys

import aiohttp

__all__ = ["close_pool", "new_connector"]

#: Python versions whose TLS transports can leak their socket on close (CPython gh-118960).
LEAKS_TLS_SOCKETS = sys.version_info < (3, 12, 8) or (3, 13, 0) <= sys.version_info < (3, 13, 1)


def new_connector(*, limit: int, ssl_context: ssl.SSLContext | bool) -> aiohttp.TCPConnector:
    """A pool of at most ``limit`` connections that never leaks a closed TLS socket."""
    if LEAKS_TLS_SOCKETS:
        return aiohttp.TCPConnector(limit=limit, ssl=ssl_context, enable_cleanup_closed=True)
    return aiohttp.TCPConnector(limit=limit, ssl=ssl_context)


async def close_pool(session: aiohttp.ClientSession) -> None:
    """Close a session and let the sockets it aborted finish closing."""
    await session.close()
    # Aborted transports report connection_lost on the next loop iteration.
    await asyncio.sleep(0)
