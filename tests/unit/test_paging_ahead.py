"""A list read one page ahead (``pages(fetch, ahead=True)``, the informers' paged lists):
the next page is asked for before the current one is handed over, an error of that request
is raised where the next page is asked for, and leaving early (closing, or cancelling the
task) cancels the page in flight and waits for it: nothing outlives the list."""

from __future__ import annotations

import asyncio
import contextlib
import gc
import weakref
from collections import defaultdict
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

import pytest

from lifecycle_controller.kube import Gone
from lifecycle_controller.kube.paging import pages


class _Page(dict[str, Any]):
    """A page that can be weakly referenced (a plain dict cannot)."""


def _page(number: int, last: int) -> _Page:
    metadata = {"resourceVersion": "7"} | ({} if number == last else {"continue": f"t{number + 1}"})
    return _Page(metadata=metadata, items=[number])


@dataclass
class Server:
    """Pages ``0..last``; ``hold`` pages are not answered until released; ``gone`` tokens
    answer 410 Gone. Remembers every request, each fetch's end and every page it served."""

    last: int = 2
    hold: set[str] = field(default_factory=set)
    gone: set[str] = field(default_factory=set)
    asked: list[str | None] = field(default_factory=list)
    ended: dict[str, str] = field(default_factory=dict)
    release: asyncio.Event = field(default_factory=asyncio.Event)
    freed: list[int] = field(default_factory=list)
    reached: dict[str, asyncio.Event] = field(default_factory=lambda: defaultdict(asyncio.Event))

    async def fetch(self, token: str | None) -> Mapping[str, Any]:
        self.asked.append(token)
        name = token or "t0"
        self.reached[name].set()
        try:
            if name in self.hold:
                await self.release.wait()
            await asyncio.sleep(0)
            if name in self.gone:
                self.ended[name] = "gone"
                self.reached[f"{name} ended"].set()
                raise Gone(410, {"message": "the continue token expired"})
        except asyncio.CancelledError:
            self.ended[name] = "cancelled"
            raise
        self.ended[name] = "answered"
        page = _page(int(name[1:]), self.last)
        weakref.finalize(page, self.freed.append, int(name[1:]))
        return page


async def test_the_next_page_is_asked_for_before_the_current_one_is_handed_over() -> None:
    server = Server()
    seen: list[tuple[int, list[str | None]]] = []
    async for page in pages(server.fetch, ahead=True):
        seen.append((page["items"][0], list(server.asked)))
    assert seen == [
        (0, [None, "t1"]),
        (1, [None, "t1", "t2"]),
        (2, [None, "t1", "t2"]),  # the last page has no token: nothing more is asked
    ]


@pytest.mark.parametrize("ahead", [False, True])
async def test_every_page_in_order_and_at_most_two_held(ahead: bool) -> None:
    """The caller drops each page it stored: that page is freed there and then; ahead, one
    more is in flight at most."""
    server = Server(last=4)
    numbers = []
    async for page in pages(server.fetch, ahead=ahead):
        number = page["items"][0]
        numbers.append(number)
        del page
        assert server.freed == list(range(number + 1))  # this one freed, none held back
        assert len(server.asked) - len(server.freed) <= (1 if ahead else 0)
    assert numbers == [0, 1, 2, 3, 4]


async def test_an_expired_token_ahead_is_raised_after_the_current_page() -> None:
    """The 410 of the page asked for ahead comes where the next page is asked for, after
    the caller stored the page before it, as it would without ``ahead``."""
    server = Server(gone={"t2"})
    stored: list[int] = []

    async def list_all() -> None:
        async for page in pages(server.fetch, ahead=True):
            stored.append(page["items"][0])

    with pytest.raises(Gone):
        await list_all()
    assert stored == [0, 1]


async def test_leaving_early_cancels_the_page_in_flight_and_waits_for_it() -> None:
    server = Server(hold={"t1"})
    async with contextlib.aclosing(pages(server.fetch, ahead=True)) as listed:
        async for _ in listed:
            break  # the caller fails storing page 0, say
    assert server.ended == {"t0": "answered", "t1": "cancelled"}
    assert _others() == set()


async def test_cancelling_the_list_cancels_the_page_in_flight() -> None:
    server = Server(hold={"t2"})
    stored: list[int] = []

    async def list_all() -> None:
        async with contextlib.aclosing(pages(server.fetch, ahead=True)) as listed:
            async for page in listed:
                stored.append(page["items"][0])

    task = asyncio.create_task(list_all())
    await server.reached["t2"].wait()
    task.cancel()
    with pytest.raises(asyncio.CancelledError):
        await task
    assert stored == [0, 1]
    assert server.ended["t2"] == "cancelled"
    assert _others() == set()


async def test_an_error_of_a_page_nobody_waits_for_is_not_reported() -> None:
    """A page ahead that fails while the caller leaves: its error is dropped quietly (not
    logged by asyncio as never retrieved)."""
    reported: list[dict[str, Any]] = []
    loop = asyncio.get_running_loop()
    loop.set_exception_handler(lambda _, context: reported.append(context))
    server = Server(gone={"t1"})
    try:
        async with contextlib.aclosing(pages(server.fetch, ahead=True)) as listed:
            async for _ in listed:
                await server.reached["t1 ended"].wait()  # the page ahead fails meanwhile
                break
        gc.collect()
        await asyncio.sleep(0)
    finally:
        loop.set_exception_handler(None)
    assert server.ended == {"t0": "answered", "t1": "gone"}
    assert reported == []


def _others() -> set[asyncio.Task[Any]]:
    """The tasks still running beside the test's own."""
    return {t for t in asyncio.all_tasks() if t is not asyncio.current_task() and not t.done()}
