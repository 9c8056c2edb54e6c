"""A watch answer's events, in whichever encoding the API server chose.

Watches ask for protobuf first and JSON second (docs/architecture.md#protobuf-watches); the
answer's ``Content-Type`` says which came back: protobuf frames are read by
:mod:`.watch_protobuf`, JSON lines by :mod:`.watch_lines`. Both yield the same dicts.
"""

from __future__ import annotations

from collections.abc import AsyncIterator
from typing import Any, Protocol

from lifecycle_controller.kube.transport import ResponseBody
from lifecycle_controller.kube.watch_lines import EventFilter, is_added_line, json_lines
from lifecycle_controller.kube.watch_protobuf import PROTOBUF, is_added_frame, protobuf_events

__all__ = ["EventFilter", "StreamedAnswer", "is_added_event", "watch_events"]


class StreamedAnswer(Protocol):
    """What the readers need of an answer (a transport's response; aiohttp's fits too)."""

    @property
    def content_type(self) -> str: ...

    @property
    def content(self) -> ResponseBody: ...


def is_added_event(raw: bytes | bytearray, start: int = 0) -> bool:
    """True when the raw event at ``start`` (a JSON line or a protobuf frame) is an ADDED."""
    return is_added_line(raw, start) or is_added_frame(raw, start)


def watch_events(
    response: StreamedAnswer, *, what: str, decode_if: EventFilter | None = None
) -> AsyncIterator[dict[str, Any]]:
    """The events of a watch answer, read as the server encoded them."""
    if response.content_type == PROTOBUF:
        return protobuf_events(response.content, what=what, decode_if=decode_if)
    return json_lines(response.content, what=what, decode_if=decode_if)
