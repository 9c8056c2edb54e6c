"""Every page of a list: the one loop that follows ``continue`` tokens.

The API server answers a list with a ``limit`` one page at a time; a list that stops after
its first page silently leaves out whatever did not fit (a cluster with 501 lifecycle
policies would ignore one). Every caller that needs the whole collection walks it here:

* :func:`pages` yields each page as it comes (the informers store a page before reading the
  next, so a large list is never held whole), and holds no reference to a page it handed
  over: a caller that drops its own frees the page there and then (the informers do, with the
  garbage collector paused: :mod:`.collector`). With ``ahead``, the next page is asked for
  as soon as a page's continue token is known, before that page is handed over: the API
  server reads and encodes it while the caller stores the current one (the informers' lists;
  docs/performance.md#since). At most one page is in flight beside the one handed over, so
  at most two are held; closing the iteration (or cancelling its task) cancels the one in
  flight and waits for it, so nothing of it outlives the list;
* :func:`list_whole` gathers the items of every page, with the resourceVersion of the last
  page, the one a watch continues from (every page of one list is one snapshot).

An expired continue token (410 Gone, after an etcd compaction) is raised as it is: the
caller starts the list again, from the first page.
"""

from __future__ import annotations

import asyncio
from collections.abc import AsyncGenerator, Awaitable, Callable, Mapping
from typing import Any

__all__ = ["PageFetch", "list_whole", "pages"]

#: Fetches one page: called with the continue token (None for the first page).
PageFetch = Callable[[str | None], Awaitable[Mapping[str, Any]]]


async def pages(
    fetch: PageFetch, *, ahead: bool = False
) -> AsyncGenerator[Mapping[str, Any], None]:
    """Each page of one list, the first one first, until a page has no continue token.

    ``ahead``: the next page is fetched (in a task of its own) while the caller holds the
    current one; an error of that fetch (an expired continue token's 410 Gone) is raised
    where the caller asks for the next page, as without ``ahead``. Close the iteration
    (``contextlib.aclosing``) when leaving it early, so that the page in flight is cancelled
    at once rather than when the generator is collected."""
    token: str | None = None
    upcoming: asyncio.Task[list[Mapping[str, Any]]] | None = None
    try:
        while True:
            if upcoming is None:
                page = [await fetch(token)]
            else:
                page, upcoming = await upcoming, None
            token = (page[0].get("metadata") or {}).get("continue") or None
            if token and ahead:
                upcoming = asyncio.ensure_future(_fetched(fetch, token))
                await asyncio.sleep(0)  # let it send its request before the caller stores
            yield page.pop()  # the caller's reference is the only one
            if not token:
                return
    finally:
        if upcoming is not None:
            await _cancelled(upcoming)


async def _fetched(fetch: PageFetch, token: str) -> list[Mapping[str, Any]]:
    """A page fetched ahead, in a list: the task that fetched it keeps its result until it is
    freed, and popping the page out leaves that task holding nothing of it."""
    return [await fetch(token)]


async def _cancelled(task: asyncio.Task[list[Mapping[str, Any]]]) -> None:
    """Cancel a page in flight and wait until it has ended; its answer or error is dropped
    (nobody asked for that page). Cancelled itself while it waits, it raises at once: the
    page's task still ends at its next step, its error retrieved."""
    task.cancel()
    task.add_done_callback(_retrieved)
    await asyncio.wait([task])


def _retrieved(task: asyncio.Task[list[Mapping[str, Any]]]) -> None:
    """Mark an unwanted page's error as seen (asyncio would log it as never retrieved)."""
    if not task.cancelled():
        task.exception()


async def list_whole(fetch: PageFetch) -> tuple[list[Mapping[str, Any]], str]:
    """The items of every page and the list's resourceVersion (the last page's)."""
    items: list[Mapping[str, Any]] = []
    version = ""
    async for page in pages(fetch):
        items.extend(item for item in page.get("items") or () if isinstance(item, Mapping))
        version = str((page.get("metadata") or {}).get("resourceVersion", version))
    return items, version
