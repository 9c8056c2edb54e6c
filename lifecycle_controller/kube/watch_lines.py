"""Splitting a watch response into its events, one network chunk at a time.

JSON lines are split here, protobuf frames in :mod:`.watch_protobuf`;
:mod:`.watch_events` reads an answer in whichever encoding the server chose.

A watch answers with one JSON document per line. Reading it line by line with
``StreamReader.readline()`` has two costs that matter for a streaming list (the initial
events of tens of thousands of objects, docs/architecture.md#informer-loop):

* buffered data never suspends ``readline()``, so while the API server sends faster than the
  informer applies, the event loop would not run anything else (probes, workers, the Lease)
  until the stream stalls; here every chunk ends with a yield to the loop;
* every line is decoded, although the informer ignores most of them: ``decode_if`` is asked
  about each raw line first, and a line it refuses is dropped undecoded.

Lines longer than :data:`MAX_LINE_BYTES` end the stream with a TransportError (the API server
limits one object to about 1.5 MB, so that is a broken stream, not data).
"""

from __future__ import annotations

import asyncio
import json
from collections.abc import AsyncIterator, Callable
from typing import Any

import aiohttp

from lifecycle_controller.kube.errors import TransportError

__all__ = ["MAX_LINE_BYTES", "LineFilter", "is_added_line", "json_lines", "next_chunk"]

#: An event is decoded only when this returns True for its raw bytes (None: every event).
LineFilter = Callable[[bytes], bool]
_ADDED_LINE = b'{"type":"ADDED"'  # how Go's encoder starts every ADDED line


def is_added_line(line: bytes) -> bool:
    """True when ``line`` is an ADDED event (checked on the raw bytes, nothing decoded)."""
    return line.startswith(_ADDED_LINE)


async def next_chunk(content: aiohttp.StreamReader, what: str) -> bytes:
    """The next network chunk of a streamed answer (empty at its end); TransportError."""
    try:
        return await content.readany()
    except (aiohttp.ClientError, TimeoutError, ValueError) as error:
        raise TransportError(f"{what}: {error or type(error).__name__}") from error


MAX_LINE_BYTES = 64 * 1024 * 1024


async def json_lines(
    content: aiohttp.StreamReader, *, what: str, decode_if: LineFilter | None = None
) -> AsyncIterator[dict[str, Any]]:
    """Yield each JSON object line of ``content`` until the server ends the stream.

    ``what`` names the stream in errors. Raises TransportError when reading fails (broken
    connection, idle timeout), a line is not JSON, or a line grows past MAX_LINE_BYTES.
    """
    pending: list[bytes] = []
    pending_bytes = 0
    while True:
        chunk = await next_chunk(content, what)
        if not chunk:
            break
        end = chunk.rfind(b"\n")
        if end < 0:
            pending.append(chunk)
            pending_bytes += len(chunk)
            if pending_bytes > MAX_LINE_BYTES:
                raise TransportError(f"{what}: a line is longer than {MAX_LINE_BYTES} bytes")
            continue
        if pending:
            pending.append(chunk[:end])
            complete = b"".join(pending)
            pending.clear()
        else:
            complete = chunk[:end]
        tail = chunk[end + 1 :]
        if tail:
            pending.append(tail)
        pending_bytes = len(tail)
        for line in complete.split(b"\n"):
            event = _decoded(line, what, decode_if)
            if event is not None:
                yield event
        await asyncio.sleep(0)  # buffered chunks never suspend readany(): let the loop run
    event = _decoded(b"".join(pending), what, decode_if)  # a last line without its newline
    if event is not None:
        yield event


def _decoded(line: bytes, what: str, decode_if: LineFilter | None) -> dict[str, Any] | None:
    if not line or line.isspace():
        return None
    if decode_if is not None and not decode_if(line):
        return None
    try:
        event = json.loads(line)
    except json.JSONDecodeError as error:
        raise TransportError(f"{what}: a line is not JSON") from error
    return event if isinstance(event, dict) else None
