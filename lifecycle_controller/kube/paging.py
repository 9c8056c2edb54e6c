"""Every page of a list: the one loop that follows ``continue`` tokens.

The API server answers a list with a ``limit`` one page at a time; a list that stops after
its first page silently leaves out whatever did not fit (a cluster with 501 lifecycle
policies would ignore one). Every caller that needs the whole collection walks it here:

* :func:`pages` yields each page as it comes (the informers store a page before reading the
  next, so a large list is never held whole), and holds no reference to a page it handed
  over: a caller that drops its own frees the page there and then (the informers do, with the
  garbage collector paused: :mod:`.collector`);
* :func:`list_whole` gathers the items of every page, with the resourceVersion of the last
  page, the one a watch continues from (every page of one list is one snapshot).

An expired continue token (410 Gone, after an etcd compaction) is raised as it is: the
caller starts the list again, from the first page.
"""

from __future__ import annotations

from collections.abc import AsyncIterator, Awaitable, Callable, Mapping
from typing import Any

__all__ = ["PageFetch", "list_whole", "pages"]

#: Fetches one page: called with the continue token (None for the first page).
PageFetch = Callable[[str | None], Awaitable[Mapping[str, Any]]]


async def pages(fetch: PageFetch) -> AsyncIterator[Mapping[str, Any]]:
    """Each page of one list, the first one first, until a page has no continue token."""
    token: str | None = None
    while True:
        page = [await fetch(token)]
        token = (page[0].get("metadata") or {}).get("continue") or None
        yield page.pop()  # the caller's reference is the only one
        if not token:
            return


async def list_whole(fetch: PageFetch) -> tuple[list[Mapping[str, Any]], str]:
    """The items of every page and the list's resourceVersion (the last page's)."""
    items: list[Mapping[str, Any]] = []
    version = ""
    async for page in pages(fetch):
        items.extend(item for item in page.get("items") or () if isinstance(item, Mapping))
        version = str((page.get("metadata") or {}).get("resourceVersion", version))
    return items, version
