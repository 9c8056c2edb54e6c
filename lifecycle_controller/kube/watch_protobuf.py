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
import re
import struct
import time
from collections.abc import AsyncIterator
from functools import lru_cache
from typing import Any

from lifecycle_controller.kube.errors import TransportError
from lifecycle_controller.kube.transport import ResponseBody, RestingBody
from lifecycle_controller.kube.watch_lines import (
    EVENTS_PER_STEP,
    EventFilter,
    RestingFilter,
    next_chunk,
)

__all__ = [
    "PROTOBUF",
    "ProtobufError",
    "decode_watch_event",
    "object_identity",
    "object_names",
    "protobuf_events",
]

#: The media type of a protobuf answer (a watch adds ``;stream=watch``).
PROTOBUF = "application/vnd.kubernetes.protobuf"
#: The largest frame accepted (the API server limits one object to about 1.5 MB).
MAX_FRAME_BYTES = 64 * 1024 * 1024
#: The most bytes read between two yields to the event loop (see :func:`protobuf_events`).
BYTES_PER_STEP = 64 * 1024
_MAGIC = b"k8s\x00"
_ADDED = b"\n\x05ADDED"  # field 1 (type), length 5, "ADDED": how every ADDED event starts

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
    undecoded (and never copied). After a read whose every frame it refused, a
    :class:`~.watch_lines.RestingFilter` may have the connection left unread a while (when
    the body can rest): in a busy cluster the events of objects nobody acts on then come a
    batch per wake-up instead of one each (docs/performance.md#the-cost-of-churn).

    Every :data:`EVENTS_PER_STEP` frames, and every :data:`BYTES_PER_STEP` bytes read, end
    with a yield to the event loop: buffered data never suspends ``readany()``, while a watch
    whose events trickle in, one small chunk at a time, suspends on every read anyway (a
    yield after each of its chunks was a fifth of the CPU of an event dropped undecoded).
    Raises TransportError when reading fails, a frame grows past MAX_FRAME_BYTES or the
    stream ends inside a frame, and ProtobufError
    for a bad frame.
    """
    buffer = bytearray()
    unyielded = 0
    resting = decode_if if isinstance(decode_if, RestingFilter) else None
    restful = content if resting is not None and isinstance(content, RestingBody) else None
    while True:
        chunk = await next_chunk(content, what)
        if not chunk:
            break
        buffer += chunk
        start = frames = decoded = 0
        while len(buffer) - start >= 4:
            (length,) = _LENGTH.unpack_from(buffer, start)
            if length > MAX_FRAME_BYTES:
                raise TransportError(f"{what}: a frame is longer than {MAX_FRAME_BYTES} bytes")
            body, end = start + 4, start + 4 + length
            if end > len(buffer):
                break
            start = end
            if decode_if is None or decode_if(buffer, body, end):
                decoded += 1
                yield decode_watch_event(buffer, body, end, what=what)
            frames += 1
            if frames % EVENTS_PER_STEP == 0:
                await asyncio.sleep(0)
        del buffer[:start]
        if restful is not None and resting is not None and frames and not decoded:
            seconds = resting.rest_after_refused
            if seconds > 0:
                unyielded = 0
                await restful.rest(seconds)  # a yield to the loop too
                continue
        unyielded += len(chunk)
        if unyielded >= BYTES_PER_STEP:
            unyielded = 0
            await asyncio.sleep(0)  # buffered chunks never suspend readany(): let the loop run
    if buffer:
        raise TransportError(f"{what}: the stream ended inside a frame")


def decode_watch_event(
    raw: bytes | bytearray, start: int = 0, end: int | None = None, *, what: str = "watch"
) -> dict[str, Any]:
    """The WatchEvent in ``raw[start:end]`` as the dict a JSON watch gives."""
    end = len(raw) if end is None else end
    frame = bytes(memoryview(raw)[start:end])  # one copy: bytes slice faster than a bytearray
    try:
        return _watch_event(frame, 0, end - start)
    except (IndexError, ValueError) as error:  # truncated varints, bad UTF-8, bad time
        raise ProtobufError(f"{what}: a frame is not a protobuf watch event") from error


def object_identity(raw: bytes | bytearray, start: int, end: int) -> tuple[str, str, str] | None:
    """The name, namespace and resourceVersion of the object in the frame ``raw[start:end]``,
    read in place without decoding anything else (an informer's test of an event it may drop,
    docs/architecture.md#informer-loop).

    None when the frame does not hold them where the API server writes them (no object, no
    resourceVersion, a frame that does not parse): the caller then decodes the frame, which
    reports a broken one.
    """
    try:
        return _identity(raw, start, end)
    except (IndexError, ValueError):
        return None


#: How Go writes the start of a metadata-only frame, up to the key of the object's selfLink,
#: matched in one call while the names are DNS names (as most types' are): the event type,
#: the object and its raw bytes (their lengths), the magic, the TypeMeta of
#: PartialObjectMetadata, the object and its ObjectMeta (their lengths), then name (groups
#: 1, 2: its one-byte length, its bytes), generateName (3, 4) and namespace (5, 6). The
#: lengths are checked after the match (:func:`object_names`), so a name holding a byte the
#: pattern takes for the next key cannot be misread.
_NAMES_AS_GO_WRITES_THEM = re.compile(
    rb"\n[\x01-\x7f][A-Z]+\x12[\x80-\xff]{0,4}[\x00-\x7f]\n[\x80-\xff]{0,4}[\x00-\x7f]k8s\x00"
    rb"\n'\n\x0emeta\.k8s\.io/v1\x12\x15PartialObjectMetadata"
    rb"\x12[\x80-\xff]{0,4}[\x00-\x7f]\n[\x80-\xff]{0,4}[\x00-\x7f]"
    rb"\n([\x01-\x7f])([a-z0-9.\-]+)\x12([\x00-\x7f])([a-z0-9.\-]*)\x1a([\x00-\x7f])([a-z0-9\-]*)\"",
    re.DOTALL,
)


def object_names(raw: bytes | bytearray, start: int, end: int) -> tuple[str, str] | None:
    """The namespace (empty for a cluster-scoped object) and name of the object in the frame
    ``raw[start:end]``: :func:`object_identity` without the resourceVersion, in one pattern
    match when the frame is a metadata-only one laid out as Go writes it (a streaming list
    asks this of every object without a lifecycle annotation: docs/performance.md#many-policies).
    None as for :func:`object_identity`."""
    found = _NAMES_AS_GO_WRITES_THEM.match(raw, start, end)
    if found is not None:
        name, generate, namespace = found.span(2), found.span(4), found.span(6)
        if (
            raw[name[0] - 1] == name[1] - name[0]
            and raw[generate[0] - 1] == generate[1] - generate[0]
            and raw[namespace[0] - 1] == namespace[1] - namespace[0]
        ):
            return raw[namespace[0] : namespace[1]].decode(), raw[name[0] : name[1]].decode()
    identity = object_identity(raw, start, end)
    return None if identity is None else (identity[1], identity[0])


def _inside(buf: bytes | bytearray, pos: int, end: int, wanted: int) -> tuple[int, int]:
    """The bounds of the first field ``wanted`` (a length-delimited key) in ``buf[pos:end]``."""
    while pos < end:
        key, a, pos = _next(buf, pos)
        if key == wanted:
            if pos > end:
                raise _past(pos, end)
            return a, pos
    raise ValueError(f"no field {wanted >> 3}")


def _next(buf: bytes | bytearray, pos: int) -> tuple[int, int, int]:
    """:func:`_field`, without a call for a one-byte key of a field with a one-byte length."""
    key, size = buf[pos], buf[pos + 1]
    if key & 0x87 == 2 and size < 0x80:
        return key, pos + 2, pos + 2 + size
    return _field(buf, pos)


#: How Go writes a frame up to the object's TypeMeta, matched in one call: the event type
#: (field 1, a short upper-case string), the object (2, a RawExtension: its length), its raw
#: bytes (1: their length), the magic, then field 1 of the runtime.Unknown (the TypeMeta) and
#: its one-byte length, which is group 1.
_GO_PREFIX = re.compile(
    rb"\n[\x01-\x7f][A-Z]+\x12[\x80-\xff]{0,4}[\x00-\x7f]\n[\x80-\xff]{0,4}[\x00-\x7f]k8s\x00\n([\x00-\x7f])",
    re.DOTALL,
)


def _metadata_as_go_writes_it(buf: bytes | bytearray, pos: int, end: int) -> tuple[int, int] | None:
    """The bounds of the object's metadata when the frame is laid out as Go writes it (each
    message's fields in order: the type, then the object; the magic; a short TypeMeta, then
    the object; its metadata first), found without a loop; None otherwise."""
    found = _GO_PREFIX.match(buf, pos, end)
    if found is None:
        return None
    pos = found.end() + buf[found.start(1)]  # past the TypeMeta
    if buf[pos] != 0x12:  # Unknown.raw: the object (its length skipped)
        return None
    pos += 1
    while buf[pos] >= 0x80:
        pos += 1
    if buf[pos + 1] != 0x0A:  # ObjectMeta, the object's first field
        return None
    size, pos = _varint(buf, pos + 2)
    return (pos, pos + size) if pos + size <= end else None


def _identity(buf: bytes | bytearray, pos: int, end: int) -> tuple[str, str, str] | None:
    located = _metadata_as_go_writes_it(buf, pos, end)
    if located is None:
        pos, end = _inside(buf, pos, end, 0x12)  # WatchEvent.object, a RawExtension
        pos, end = _inside(buf, pos, end, 0x0A)  # its raw: k8s\0 and a runtime.Unknown
        if buf[pos : pos + 4] != _MAGIC:
            return None
        pos, end = _inside(buf, pos + 4, end, 0x12)  # Unknown.raw: the object
        pos, end = _inside(buf, pos, end, 0x0A)  # its metadata
        return _identity_fields(buf, pos, end)
    return _identity_as_go_writes_it(buf, *located) or _identity_fields(buf, *located)


def _identity_fields(buf: bytes | bytearray, pos: int, end: int) -> tuple[str, str, str] | None:
    """The name, namespace and resourceVersion among the ObjectMeta fields in
    ``buf[pos:end]``, read field by field."""
    name = namespace = version = ""
    while pos < end:  # name (1), namespace (3), resourceVersion (6): Go writes them in order
        key, size = buf[pos], buf[pos + 1]
        if key & 0x87 == 2 and size < 0x80:
            a, pos = pos + 2, pos + 2 + size
        else:
            key, a, pos = _field(buf, pos)
        if pos > end:
            return None
        if key == 0x0A:
            name = buf[a:pos].decode()
        elif key == 0x1A:
            namespace = buf[a:pos].decode()
        elif key == 0x32:
            version = buf[a:pos].decode()
            break
        elif key > 0x32:
            break
    return (name, namespace, version) if version and name else None


def _identity_as_go_writes_it(
    buf: bytes | bytearray, pos: int, end: int
) -> tuple[str, str, str] | None:
    """:func:`_identity_fields` without a loop, for an ObjectMeta that starts as Go writes
    every one: name (1), generateName (2), namespace (3), selfLink (4), uid (5) and
    resourceVersion (6), each present (Go writes empty strings too) and shorter than 128
    bytes; None for any other (the listing reads every unannotated object's identity)."""
    if buf[pos] != 0x0A or buf[pos + 1] >= 0x80:  # name
        return None
    start = pos + 2
    pos = start + buf[pos + 1]
    name = buf[start:pos]
    if buf[pos] != 0x12 or buf[pos + 1] >= 0x80:  # generateName
        return None
    pos += 2 + buf[pos + 1]
    if buf[pos] != 0x1A or buf[pos + 1] >= 0x80:  # namespace
        return None
    start = pos + 2
    pos = start + buf[pos + 1]
    namespace = buf[start:pos]
    if buf[pos] != 0x22 or buf[pos + 1] >= 0x80:  # selfLink
        return None
    pos += 2 + buf[pos + 1]
    if buf[pos] != 0x2A or buf[pos + 1] >= 0x80:  # uid
        return None
    pos += 2 + buf[pos + 1]
    if buf[pos] != 0x32 or buf[pos + 1] >= 0x80:  # resourceVersion
        return None
    start = pos + 2
    pos = start + buf[pos + 1]
    if pos > end or pos == start or not name:
        return None
    return name.decode(), namespace.decode(), buf[start:pos].decode()


# ---------------------------------------------------------------------- wire format
#
# Each message is read by a loop of its own that compares whole keys (``number << 3 | wire
# type``: 0x0A is field 1 as bytes, 0x38 field 7 as a varint) and calls _field per field: one
# generator for every message, yielding a tuple per field, cost a fifth of the decode.


def _varint(buf: bytes | bytearray, pos: int) -> tuple[int, int]:
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


def _field(buf: bytes | bytearray, pos: int) -> tuple[int, int, int]:
    """The key, value and end of the field at ``pos``.

    The value is a varint's, 0 for a fixed-size field, and the start of a length-delimited
    field (which ends at the end).
    """
    key = buf[pos]
    if key < 0x80:
        pos += 1
    else:
        key, pos = _varint(buf, pos)
    wire = key & 7
    if wire == 2 or wire == 0:
        value = buf[pos]
        if value < 0x80:
            pos += 1
        elif buf[pos + 1] < 0x80:
            value, pos = (value & 0x7F) | buf[pos + 1] << 7, pos + 2
        else:
            value, pos = _varint(buf, pos)
        return (key, pos, pos + value) if wire == 2 else (key, value, pos)
    if wire == 1:
        return key, 0, pos + 8
    if wire == 5:
        return key, 0, pos + 4
    raise ValueError(f"wire type {wire} is not used by the API server")


def _past(pos: int, end: int) -> ValueError:
    return ValueError(f"a field runs past its message (to {pos}, the message ends at {end})")


def _int64(value: int) -> int:
    return value - (1 << 64) if value >= 1 << 63 else value


# ---------------------------------------------------------------------- messages
#
# Every loop starts the same way: ``key`` and ``a`` as _field gives them, ``pos`` the field's
# end (the next field's start). A field past ``end`` is an error, so a loop ends at ``end``.
# ObjectMeta, where most of an event's fields are, reads the common field itself (see there).


def _watch_event(buf: bytes, pos: int, end: int) -> dict[str, Any]:
    kind = ""
    obj: dict[str, Any] = {}
    while pos < end:
        key, a, pos = _field(buf, pos)
        if pos > end:
            raise _past(pos, end)
        if key == 0x0A:
            kind = buf[a:pos].decode()
        elif key == 0x12:  # a RawExtension: the object is its raw (1)
            while a < pos:
                key, c, a = _field(buf, a)
                if a > pos:
                    raise _past(a, pos)
                if key == 0x0A:
                    obj = _unknown(buf, c, a)
    if pos != end:  # an empty range the wrong way round
        raise _past(pos, end)
    return {"type": kind, "object": obj}


def _unknown(buf: bytes, pos: int, end: int) -> dict[str, Any]:
    """``k8s\\0`` + runtime.Unknown → the object's dict (apiVersion, kind, its fields)."""
    if buf[pos : pos + 4] != _MAGIC:
        raise ValueError("an embedded object without the k8s protobuf magic")
    api_version = kind = ""
    raw: tuple[int, int] | None = None
    pos += 4
    while pos < end:
        key, a, pos = _field(buf, pos)
        if pos > end:
            raise _past(pos, end)
        if key == 0x0A:
            api_version, kind = _two_strings(buf, a, pos, api_version, kind)
        elif key == 0x12:
            raw = (a, pos)
    if pos != end:  # the magic ran past the end
        raise _past(pos, end)
    obj: dict[str, Any] = {"apiVersion": api_version, "kind": kind}
    if raw is None:
        return obj
    if kind == "Status":
        obj.update(_status(buf, *raw))
        return obj
    pos, end = raw
    while pos < end:  # every Kubernetes object has its metadata at 1
        key, a, pos = _field(buf, pos)
        if pos > end:
            raise _past(pos, end)
        if key == 0x0A:
            obj["metadata"] = _object_meta(buf, a, pos)
    return obj


def _map_entry(buf: bytes, pos: int, end: int) -> tuple[str, str]:
    """A map entry's key (1) and value (2), read at once when laid out as Go writes them."""
    if end - pos >= 4 and buf[pos] == 0x0A and (size := buf[pos + 1]) < 0x80:
        middle = pos + 2 + size  # 0x0A, a length, the key; 0x12, a length, the value
        if (
            middle + 2 <= end
            and buf[middle] == 0x12
            and (size := buf[middle + 1]) < 0x80
            and middle + 2 + size == end
        ):
            return buf[pos + 2 : middle].decode(), buf[middle + 2 : end].decode()
    return _two_strings(buf, pos, end, "", "")


def _two_strings(buf: bytes, pos: int, end: int, one: str, two: str) -> tuple[str, str]:
    """Fields 1 and 2 as text: a TypeMeta's apiVersion and kind, a map entry's key and value."""
    while pos < end:
        key, a, pos = _field(buf, pos)
        if pos > end:
            raise _past(pos, end)
        if key == 0x0A:
            one = buf[a:pos].decode()
        elif key == 0x12:
            two = buf[a:pos].decode()
    return one, two


_META_TEXT = {
    0x0A: "name",
    0x12: "generateName",
    0x1A: "namespace",
    0x2A: "uid",
    0x32: "resourceVersion",
}
_META_MAP = {0x5A: "labels", 0x62: "annotations"}
_META_TIME = {0x42: "creationTimestamp", 0x4A: "deletionTimestamp"}


def _object_meta(buf: bytes, pos: int, end: int) -> dict[str, Any]:
    meta: dict[str, Any] = {}
    while pos < end:
        # ``key & 0x87 == 2``: a one-byte key (the top bit clear) of a length-delimited field,
        # read here without a call when its length is one byte too. The byte after a key is
        # read before it is known to exist: a message that ends in a key is broken anyway.
        key, a = buf[pos], buf[pos + 1]
        if key & 0x87 == 2 and a < 0x80:
            pos += 2
            a, pos = pos, pos + a
        else:  # managedFields (17) too: skipped by its length
            key, a, pos = _field(buf, pos)
        if pos > end:
            raise _past(pos, end)
        if key in _META_TEXT:
            if pos > a:  # JSON leaves empty strings out
                meta[_META_TEXT[key]] = buf[a:pos].decode()
        elif key in _META_MAP:
            name, value = _map_entry(buf, a, pos)
            meta.setdefault(_META_MAP[key], {})[name] = value
        elif key == 0x6A:
            meta.setdefault("ownerReferences", []).append(_owner_reference(buf, a, pos))
        elif key in _META_TIME:
            stamp = _time(buf[a:pos])
            if stamp is not None:
                meta[_META_TIME[key]] = stamp
        elif key == 0x38:
            if a:  # JSON leaves a zero generation out
                meta["generation"] = _int64(a)
        elif key == 0x50:
            meta["deletionGracePeriodSeconds"] = _int64(a)
        elif key == 0x72:
            meta.setdefault("finalizers", []).append(buf[a:pos].decode())
    return meta


@lru_cache(maxsize=64)  # the objects of a burst share their creation times
def _time(buf: bytes) -> str | None:
    """A metav1.Time (all of ``buf``) as JSON gives it: RFC 3339 in UTC, whole seconds.

    None when zero; ValueError when out of range.
    """
    seconds = nanos = pos = 0
    end = len(buf)
    while pos < end:
        key, a, pos = _field(buf, pos)
        if pos > end:
            raise _past(pos, end)
        if key == 0x08:
            seconds = _int64(a)
        elif key == 0x10:
            nanos = a
    if seconds == 0 and nanos == 0:
        return None
    try:
        year, month, day, hour, minute, second = time.gmtime(seconds)[:6]
    except (OverflowError, OSError) as error:
        raise ValueError(f"a timestamp out of range: {seconds}") from error
    return f"{year:04d}-{month:02d}-{day:02d}T{hour:02d}:{minute:02d}:{second:02d}Z"


_OWNER_TEXT = {0x0A: "kind", 0x1A: "name", 0x22: "uid", 0x2A: "apiVersion"}
_OWNER_BOOL = {0x30: "controller", 0x38: "blockOwnerDeletion"}


def _owner_reference(buf: bytes, pos: int, end: int) -> dict[str, Any]:
    owner: dict[str, Any] = {}
    while pos < end:
        key, a, pos = _field(buf, pos)
        if pos > end:
            raise _past(pos, end)
        if key in _OWNER_TEXT:
            owner[_OWNER_TEXT[key]] = buf[a:pos].decode()
        elif key in _OWNER_BOOL:
            owner[_OWNER_BOOL[key]] = bool(a)
    return owner


_STATUS_TEXT = {0x12: "status", 0x1A: "message", 0x22: "reason"}


def _status(buf: bytes, pos: int, end: int) -> dict[str, Any]:
    status: dict[str, Any] = {}
    while pos < end:
        key, a, pos = _field(buf, pos)
        if pos > end:
            raise _past(pos, end)
        if key in _STATUS_TEXT:
            status[_STATUS_TEXT[key]] = buf[a:pos].decode()
        elif key == 0x30:
            status["code"] = _int64(a)
    return status
