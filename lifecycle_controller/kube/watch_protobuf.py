"""Reading a metadata-only watch that the API server sends as protobuf.

For built-in types the API server encodes a watch (and a streaming list) about twice as fast
in protobuf as in JSON, and sends about half the bytes (docs/architecture.md#protobuf-watches).
The informers ask for protobuf first and JSON second; :mod:`.client` reads whichever the
server chose. A protobuf watch is a sequence of frames, each a 4-byte big-endian length and a
``meta.k8s.io/v1`` WatchEvent: ``type`` (1) and ``object`` (2, a RawExtension whose ``raw``
(1) is the object, wrapped as ``k8s\\0`` and a ``runtime.Unknown``: ``typeMeta`` (1) with
``apiVersion`` (1) and ``kind`` (2), and ``raw`` (2)).

Only what the controller reads is decoded, into the dicts a JSON watch gives: an object's
``ObjectMeta`` (name, namespace, uid, resourceVersion, generation, the two timestamps, labels,
annotations, owner references, finalizers; managed fields are skipped by length), and a
``Status`` for ERROR events. A frame that does not parse ends the stream with
:class:`ProtobufError` (a TransportError); the client then reads that resource as JSON.
"""

from __future__ import annotations

import asyncio
import struct
import time
from collections.abc import AsyncIterator, Iterator
from functools import lru_cache
from typing import Any

from lifecycle_controller.kube.errors import TransportError
from lifecycle_controller.kube.transport import ResponseBody
from lifecycle_controller.kube.watch_lines import EVENTS_PER_STEP, EventFilter, next_chunk

__all__ = [
    "PROTOBUF",
    "ProtobufError",
    "decode_watch_event",
    "protobuf_events",
]

#: The media type of a protobuf answer (a watch adds ``;stream=watch``).
PROTOBUF = "application/vnd.kubernetes.protobuf"
#: The largest frame accepted (the API server limits one object to about 1.5 MB).
MAX_FRAME_BYTES = 64 * 1024 * 1024
_MAGIC = b"k8s\x00"
_ADDED = b"\n\x05ADDED"  # field 1 (type), length 5, "ADDED": how every ADDED event starts

_Fields = Iterator[tuple[int, int, int, int]]
Buffer = bytes | bytearray
_LENGTH = struct.Struct(">I")


class ProtobufError(TransportError):
    """A watch frame that is not the protobuf the API server sends."""


def is_added_frame(raw: bytes | bytearray, start: int = 0) -> bool:
    """True when the frame body at ``start`` is an ADDED event (nothing decoded)."""
    return raw.startswith(_ADDED, start)


async def protobuf_events(
    content: ResponseBody, *, what: str, decode_if: EventFilter | None = None
) -> AsyncIterator[dict[str, Any]]:
    """Yield each event of a protobuf watch until the server ends the stream.

    ``decode_if`` is asked about each frame first, in place; a frame it refuses is dropped
    undecoded (and never copied). Every network chunk, and every :data:`EVENTS_PER_STEP`
    frames, ends with a yield to the event loop (buffered data never suspends
    ``readany()``). Raises TransportError when reading fails, a frame grows past
    MAX_FRAME_BYTES or the stream ends inside a frame, and ProtobufError for a bad frame.
    """
    buffer = bytearray()
    while True:
        chunk = await next_chunk(content, what)
        if not chunk:
            break
        buffer += chunk
        start = frames = 0
        while len(buffer) - start >= 4:
            (length,) = _LENGTH.unpack_from(buffer, start)
            if length > MAX_FRAME_BYTES:
                raise TransportError(f"{what}: a frame is longer than {MAX_FRAME_BYTES} bytes")
            body, end = start + 4, start + 4 + length
            if end > len(buffer):
                break
            start = end
            if decode_if is None or decode_if(buffer, body, end):
                yield decode_watch_event(buffer, body, end, what=what)
            frames += 1
            if frames % EVENTS_PER_STEP == 0:
                await asyncio.sleep(0)
        del buffer[:start]
        await asyncio.sleep(0)  # buffered chunks never suspend readany(): let the loop run
    if buffer:
        raise TransportError(f"{what}: the stream ended inside a frame")


def decode_watch_event(
    raw: bytes | bytearray, start: int = 0, end: int | None = None, *, what: str = "watch"
) -> dict[str, Any]:
    """The WatchEvent in ``raw[start:end]`` as the dict a JSON watch gives."""
    try:
        return _watch_event(raw, start, len(raw) if end is None else end)
    except (IndexError, ValueError) as error:  # truncated varints, bad UTF-8, bad time
        raise ProtobufError(f"{what}: a frame is not a protobuf watch event") from error


# ---------------------------------------------------------------------- wire format


def _varint(buf: Buffer, pos: int) -> tuple[int, int]:
    byte = buf[pos]
    if byte < 0x80:
        return byte, pos + 1
    result, shift = byte & 0x7F, 7
    pos += 1
    while True:
        byte = buf[pos]
        pos += 1
        result |= (byte & 0x7F) << shift
        if byte < 0x80:
            return result, pos
        shift += 7
        if shift > 63:
            raise ValueError("varint longer than 10 bytes")


def _fields(buf: Buffer, pos: int, end: int) -> _Fields:
    """``(number, wire type, a, b)`` per field: a varint's value in ``a``, else a slice.

    One-byte keys, lengths and values (almost all of them) are read inline.
    """
    while pos < end:
        key = buf[pos]
        if key < 0x80:
            pos += 1
        else:
            key, pos = _varint(buf, pos)
        wire = key & 7
        if wire == 2:
            length = buf[pos]
            if length < 0x80:
                pos += 1
            else:
                length, pos = _varint(buf, pos)
            stop = pos + length
            if stop > end:
                raise ValueError("a field runs past its message")
            yield key >> 3, 2, pos, stop
            pos = stop
        elif wire == 0:
            value = buf[pos]
            if value < 0x80:
                pos += 1
            else:
                value, pos = _varint(buf, pos)
            yield key >> 3, 0, value, 0
        elif wire == 1:
            pos += 8
        elif wire == 5:
            pos += 4
        else:
            raise ValueError(f"wire type {wire} is not used by the API server")
    if pos != end:
        raise ValueError("a field runs past its message")


def _text(buf: Buffer, a: int, b: int) -> str:
    return buf[a:b].decode()


def _int64(value: int) -> int:
    return value - (1 << 64) if value >= 1 << 63 else value


# ---------------------------------------------------------------------- messages


def _watch_event(raw: Buffer, start: int, end: int) -> dict[str, Any]:
    kind = ""
    obj: dict[str, Any] = {}
    for number, wire, a, b in _fields(raw, start, end):
        if number == 1 and wire == 2:
            kind = _text(raw, a, b)
        elif number == 2 and wire == 2:
            for inner, inner_wire, c, d in _fields(raw, a, b):
                if inner == 1 and inner_wire == 2:
                    obj = _unknown(raw, c, d)
    return {"type": kind, "object": obj}


def _unknown(buf: Buffer, a: int, b: int) -> dict[str, Any]:
    """``k8s\\0`` + runtime.Unknown → the object's dict (apiVersion, kind, its fields)."""
    if buf[a : a + 4] != _MAGIC:
        raise ValueError("an embedded object without the k8s protobuf magic")
    api_version = kind = ""
    raw: tuple[int, int] | None = None
    for number, wire, c, d in _fields(buf, a + 4, b):
        if number == 1 and wire == 2:
            for meta, meta_wire, e, f in _fields(buf, c, d):
                if meta == 1 and meta_wire == 2:
                    api_version = _text(buf, e, f)
                elif meta == 2 and meta_wire == 2:
                    kind = _text(buf, e, f)
        elif number == 2 and wire == 2:
            raw = (c, d)
    obj: dict[str, Any] = {"apiVersion": api_version, "kind": kind}
    if raw is None:
        return obj
    if kind == "Status":
        obj.update(_status(buf, *raw))
        return obj
    for number, wire, c, d in _fields(buf, *raw):
        if number == 1 and wire == 2:  # every Kubernetes object has its metadata at 1
            obj["metadata"] = _object_meta(buf, c, d)
    return obj


_META_TEXT = {1: "name", 2: "generateName", 3: "namespace", 5: "uid", 6: "resourceVersion"}


def _object_meta(buf: Buffer, a: int, b: int) -> dict[str, Any]:
    meta: dict[str, Any] = {}
    for number, wire, c, d in _fields(buf, a, b):
        if wire == 2 and number in _META_TEXT:
            if d > c:  # JSON leaves empty strings out
                meta[_META_TEXT[number]] = _text(buf, c, d)
        elif number == 7 and wire == 0:
            if c:  # JSON leaves a zero generation out
                meta["generation"] = _int64(c)
        elif number in (8, 9) and wire == 2:
            stamp = _time(buf, c, d)
            if stamp is not None:
                meta["creationTimestamp" if number == 8 else "deletionTimestamp"] = stamp
        elif number == 10 and wire == 0:
            meta["deletionGracePeriodSeconds"] = _int64(c)
        elif number in (11, 12) and wire == 2:
            key, value = _map_entry(buf, c, d)
            meta.setdefault("labels" if number == 11 else "annotations", {})[key] = value
        elif number == 13 and wire == 2:
            meta.setdefault("ownerReferences", []).append(_owner_reference(buf, c, d))
        elif number == 14 and wire == 2:
            meta.setdefault("finalizers", []).append(_text(buf, c, d))
    return meta


def _time(buf: Buffer, a: int, b: int) -> str | None:
    """A metav1.Time as JSON gives it: RFC 3339 in UTC, whole seconds (None when zero)."""
    seconds = nanos = 0
    for number, wire, c, _ in _fields(buf, a, b):
        if number == 1 and wire == 0:
            seconds = _int64(c)
        elif number == 2 and wire == 0:
            nanos = c
    if seconds == 0 and nanos == 0:
        return None
    return _utc_text(seconds)


@lru_cache(maxsize=64)  # the objects of a burst share their creation seconds
def _utc_text(seconds: int) -> str:
    """Unix ``seconds`` as RFC 3339 in UTC, whole seconds (ValueError when out of range)."""
    try:
        year, month, day, hour, minute, second = time.gmtime(seconds)[:6]
    except (OverflowError, OSError) as error:
        raise ValueError(f"a timestamp out of range: {seconds}") from error
    return f"{year:04d}-{month:02d}-{day:02d}T{hour:02d}:{minute:02d}:{second:02d}Z"


def _map_entry(buf: Buffer, a: int, b: int) -> tuple[str, str]:
    key = value = ""
    for number, wire, c, d in _fields(buf, a, b):
        if number == 1 and wire == 2:
            key = _text(buf, c, d)
        elif number == 2 and wire == 2:
            value = _text(buf, c, d)
    return key, value


_OWNER_TEXT = {1: "kind", 3: "name", 4: "uid", 5: "apiVersion"}
_OWNER_BOOL = {6: "controller", 7: "blockOwnerDeletion"}


def _owner_reference(buf: Buffer, a: int, b: int) -> dict[str, Any]:
    owner: dict[str, Any] = {}
    for number, wire, c, d in _fields(buf, a, b):
        if wire == 2 and number in _OWNER_TEXT:
            owner[_OWNER_TEXT[number]] = _text(buf, c, d)
        elif wire == 0 and number in _OWNER_BOOL:
            owner[_OWNER_BOOL[number]] = bool(c)
    return owner


_STATUS_TEXT = {2: "status", 3: "message", 4: "reason"}


def _status(buf: Buffer, a: int, b: int) -> dict[str, Any]:
    status: dict[str, Any] = {}
    for number, wire, c, d in _fields(buf, a, b):
        if wire == 2 and number in _STATUS_TEXT:
            status[_STATUS_TEXT[number]] = _text(buf, c, d)
        elif number == 6 and wire == 0:
            status["code"] = _int64(c)
    return status
