"""Splitting a watch response into JSON events (kube.watch_lines), chunk boundaries anywhere.

An aiohttp StreamReader fed by hand: the chunking of a real response is the network's
choice, so the tests choose it.
"""

from __future__ import annotations

import asyncio
import json

import aiohttp
import pytest
from aiohttp.base_protocol import BaseProtocol
from hypothesis import given
from hypothesis import strategies as st

from lifecycle_controller.kube import TransportError, watch_lines
from lifecycle_controller.kube.watch_lines import json_lines
from tests.machinery.loop_ticks import LoopTicks


def reader(*chunks: bytes) -> aiohttp.StreamReader:
    loop = asyncio.get_running_loop()
    stream = aiohttp.StreamReader(BaseProtocol(loop), 2**16, loop=loop)
    for chunk in chunks:
        stream.feed_data(chunk)
    stream.feed_eof()
    return stream


async def collect(stream: aiohttp.StreamReader, **kwargs: object) -> list[dict[str, object]]:
    return [event async for event in json_lines(stream, what="watch x", **kwargs)]  # type: ignore[arg-type]


def encoded(events: list[dict[str, object]]) -> bytes:
    return b"".join(json.dumps(e, separators=(",", ":")).encode() + b"\n" for e in events)


EVENTS: list[dict[str, object]] = [
    {"type": "ADDED", "object": {"metadata": {"name": f"o{i}", "resourceVersion": str(i)}}}
    for i in range(6)
]


@given(cuts=st.lists(st.integers(min_value=0, max_value=len(encoded(EVENTS))), max_size=12))
def test_any_chunking_yields_every_event_in_order(cuts: list[int]) -> None:
    data = encoded(EVENTS)
    points = sorted(set(cuts))
    chunks = [data[a:b] for a, b in zip([0, *points], [*points, len(data)], strict=True)]

    async def run() -> list[dict[str, object]]:
        return await collect(reader(*[c for c in chunks if c]))

    assert asyncio.run(run()) == EVENTS


async def test_blank_lines_are_skipped_and_a_last_line_needs_no_newline() -> None:
    data = b'\n{"type":"ADDED"}\r\n  \n{"type":"BOOKMARK"}'
    assert await collect(reader(data[:5], data[5:])) == [{"type": "ADDED"}, {"type": "BOOKMARK"}]


async def test_refused_lines_are_not_decoded() -> None:
    seen: list[bytes] = []

    def decode_if(raw: bytes | bytearray, start: int, end: int) -> bool:
        seen.append(bytes(raw[start:end]))
        return raw.find(b"o3", start, end) >= 0

    events = await collect(reader(encoded(EVENTS)), decode_if=decode_if)
    assert events == [EVENTS[3]]
    assert len(seen) == len(EVENTS)
    # A refused line is never parsed: garbage passes when the filter drops it.
    assert await collect(
        reader(b"not json\n{}\n"), decode_if=lambda raw, a, b: raw[a:b] == b"{}"
    ) == [{}]


async def test_a_line_that_is_not_json_breaks_the_stream() -> None:
    with pytest.raises(TransportError, match="watch x: a line is not JSON"):
        await collect(reader(b'{"type":"ADDED"}\n{oops\n'))


async def test_an_endless_line_breaks_the_stream(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(watch_lines, "MAX_LINE_BYTES", 100)
    with pytest.raises(TransportError, match="longer than 100 bytes"):
        await collect(reader(*[b"x" * 40] * 5))


async def test_the_loop_runs_between_buffered_chunks() -> None:
    loop = asyncio.get_running_loop()
    stream = aiohttp.StreamReader(BaseProtocol(loop), 2**16, loop=loop)
    stream.feed_data(encoded(EVENTS[:1]))
    events = json_lines(stream, what="watch x")
    assert await anext(events) == EVENTS[0]
    stream.feed_data(encoded(EVENTS[1:]))  # already buffered when the next chunk is read
    stream.feed_eof()
    async with LoopTicks() as ticks:
        before = ticks.count
        assert await anext(events) == EVENTS[1]
        # readline() would hand out a buffered line without suspending: no tick in between.
        assert ticks.count > before
