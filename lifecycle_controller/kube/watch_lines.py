"""Splitting a watch response into its events, one network chunk at a time.

JSON lines are split here, protobuf frames in :mod:`.watch_protobuf`;
:func:`.exchanges.watch_events` reads an answer in whichever encoding the server chose.

A watch answers with one JSON document per line. Reading it line by line with
``StreamReader.readline()`` has two costs that matter for a streaming list (the initial
events of tens of thousands of objects, docs/architecture.md#informer-loop):

* buffered data never suspends ``readline()``, so while the API server sends faster than the
  informer applies, the event loop would not run anything else (probes, workers, the Lease)
  until the stream stalls; here every chunk ends with a yield to the loop;
* every line is decoded, although the informer ignores most of them: ``decode_if`` is asked
  about each raw line first, and a line it refuses is dropped undecoded;
* a chunk can hold thousands of lines when the loop was busy while it arrived, so the
  splitter also yields after every :data:`EVENTS_PER_STEP` lines.

Lines longer than :data:`MAX_LINE_BYTES` end the stream with a TransportError (the API server
limits one object to about 1.5 MB, so that is a broken stream, not data).
"""

from __future__ import annotations

import asyncio
import json
from collections.abc import AsyncIterator, Callable
from typing import Any, Protocol, runtime_checkable

from lifecycle_controller.kube.errors import TransportError
from lifecycle_controller.kube.transport import ConnectionFailed, ResponseBody

__all__ = [
    "EVENTS_PER_STEP",
    "MAX_LINE_BYTES",
    "EventFilter",
    "RestingFilter",
    "is_added_line",
    "json_lines",
    "next_chunk",
]

#: Asked about each raw event before it is decoded, with the bytes that hold it and its
#: bounds in them (nothing is copied); an event it refuses is dropped undecoded.
EventFilter = Callable[[bytes | bytearray, int, int], bool]


@runtime_checkable
class RestingFilter(Protocol):
    """An :data:`EventFilter` that also says how long a watch leaves its connection unread
    after a read whose every event it refused (0: not at all). Asked after each such read, so
    its owner may change it while the stream is read (docs/performance.md#the-cost-of-churn)."""

    @property
    def rest_after_refused(self) -> float: ...

    def __call__(self, raw: bytes | bytearray, start: int, end: int) -> bool: ...


#: The most events split between two yields to the event loop (a network chunk can hold
#: thousands when the loop was busy while it arrived).
EVENTS_PER_STEP = 256
_ADDED_LINE = b'{"type":"ADDED"'  # how Go's encoder starts every ADDED line


def is_added_line(raw: bytes | bytearray, start: int = 0) -> bool:
    """True when the line at ``start`` is an ADDED event (nothing decoded)."""
    return raw.startswith(_ADDED_LINE, start)


async def next_chunk(content: ResponseBody, what: str) -> bytes:
    """The next network chunk of a streamed answer (empty at its end); TransportError."""
    try:
        return await content.readany()
    except (ConnectionFailed, TimeoutError, ValueError) as error:
        raise TransportError(f"{what}: {error or type(error).__name__}") from error


MAX_LINE_BYTES = 64 * 1024 * 1024


async def json_lines(
    content: ResponseBody, *, what: str, decode_if: EventFilter | None = None
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
        for count, line in enumerate(complete.split(b"\n"), 1):
            event = _decoded(line, what, decode_if)
            if event is not None:
                yield event
            if count % EVENTS_PER_STEP == 0:
                await asyncio.sleep(0)
        await asyncio.sleep(0)  # buffered chunks never suspend readany(): let the loop run
    event = _decoded(b"".join(pending), what, decode_if)  # a last line without its newline
    if event is not None:
        yield event


def _decoded(line: bytes, what: str, decode_if: EventFilter | None) -> dict[str, Any] | None:
    if not line or line.isspace():
        return None
    if decode_if is not None and not decode_if(line, 0, len(line)):
        return None
    try:
        event = json.loads(line)
    except json.JSONDecodeError as error:
        raise TransportError(f"{what}: a line is not JSON") from error
    return event if isinstance(event, dict) else None
