"""A list page is decoded, stored and freed with the cyclic collector paused: the collector
never walks a page, and sees only what the informer kept of it."""

from __future__ import annotations

import gc
import json
import weakref
from collections.abc import Iterator, Mapping
from typing import Any

import pytest

from lifecycle_controller.kube.collector import collector_paused, decode_json
from lifecycle_controller.kube.paging import pages


class _Page(dict[str, Any]):
    """A page that can be weakly referenced (a plain dict cannot)."""


@pytest.fixture
def collecting() -> Iterator[None]:
    enabled = gc.isenabled()
    gc.enable()
    yield
    if not enabled:
        gc.disable()


@pytest.mark.usefixtures("collecting")
def test_the_pause_restores_the_collector_as_it_was() -> None:
    with collector_paused():
        assert not gc.isenabled()
        with collector_paused():
            assert not gc.isenabled()
        assert not gc.isenabled()  # the inner pause leaves the outer one paused
    assert gc.isenabled()
    gc.disable()
    with collector_paused():
        pass
    assert not gc.isenabled()  # it was off: it stays off
    gc.enable()
    with pytest.raises(ValueError, match="boom"), collector_paused():
        raise ValueError("boom")
    assert gc.isenabled()


@pytest.mark.usefixtures("collecting")
def test_a_page_is_decoded_without_a_collection() -> None:
    """30,000 containers decoded at once would set off dozens of young collections."""
    raw = json.dumps({"items": [{"metadata": {"name": f"p{i}"}, "l": [i]} for i in range(15_000)]})
    started: list[int] = []

    def seen(phase: str, info: dict[str, int]) -> None:
        if phase == "start":
            started.append(info["generation"])

    body = raw.encode()
    del raw
    gc.collect()  # what the test built so far is not the decode's to collect
    gc.callbacks.append(seen)
    try:
        decoded = decode_json(body)
        during = len(started)  # read before anything else allocates
    finally:
        gc.callbacks.remove(seen)
    assert len(decoded["items"]) == 15_000
    assert during == 0
    assert gc.isenabled()
    with pytest.raises(json.JSONDecodeError):
        decode_json(b"{")
    assert gc.isenabled()


async def test_pages_holds_no_page_it_handed_over() -> None:
    """The caller's reference is the last one: dropping it frees the page there and then
    (inside the informer's pause), not when the next page arrives."""
    served = [_Page(metadata={"continue": "b"}, items=[1]), _Page(metadata={}, items=[2])]
    freed: list[str] = []

    async def fetch(token: str | None) -> Mapping[str, Any]:
        page = served.pop(0)
        weakref.finalize(page, freed.append, token or "first")
        return page

    seen = 0
    async for page in pages(fetch):
        seen += 1
        del page
        assert len(freed) == seen
    assert freed == ["first", "b"]
