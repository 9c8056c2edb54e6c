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
import time
from collections.abc import AsyncIterator
from functools import lru_cache
from typing import Any, Protocol, runtime_checkable

from lifecycle_controller.kube.errors import TransportError
from lifecycle_controller.kube.protobuf_wire import (
    ADDED,
    LENGTH,
    MAGIC,
    int64,
    past_end,
    read_field,
)
from lifecycle_controller.kube.transport import ResponseBody, RestingBody
from lifecycle_controller.kube.watch_lines import (
    EVENTS_PER_STEP,
    EventFilter,
    RestingFilter,
    next_chunk,
)

__all__ = [
    "PROTOBUF",
    "FrameSkipper",
    "ProtobufError",
    "SkippingFilter",
    "decode_watch_event",
    "protobuf_events",
]

#: The media type of a protobuf answer (a watch adds ``;stream=watch``).
PROTOBUF = "application/vnd.kubernetes.protobuf"
#: The largest frame accepted (the API server limits one object to about 1.5 MB).
MAX_FRAME_BYTES = 64 * 1024 * 1024
#: The most bytes read between two yields to the event loop (see :func:`protobuf_events`).
BYTES_PER_STEP = 64 * 1024


class ProtobufError(TransportError):
    """A watch frame that is not the protobuf the API server sends."""


class FrameSkipper(Protocol):
    """Drops a run of whole frames undecoded, in one call (see :class:`SkippingFilter`)."""

    def __call__(self, buffer: bytearray, start: int, stop: int, most: int) -> tuple[int, int]: ...


@runtime_checkable
class SkippingFilter(Protocol):
    """An :data:`~.watch_lines.EventFilter` that can also pass over many frames in one call:
    while ``skipper`` is not None, :func:`protobuf_events` hands it the frames at ``start``
    in ``buffer[:stop]``; it drops at most ``most`` of them and returns where it stopped
    (the next frame, whole or not) and how many it dropped. It stops at a frame it would not
    drop, which the filter itself is then asked about. Asked again after each decoded frame,
    so its owner may change it while the stream is read (a streaming list's filter has one
    until its initial events end, docs/performance.md#many-policies)."""

    @property
    def skipper(self) -> FrameSkipper | None: ...

    def __call__(self, raw: bytes | bytearray, start: int, end: int) -> bool: ...


def is_added_frame(raw: bytes | bytearray, start: int = 0) -> bool:
    """True when the frame body at ``start`` is an ADDED event (nothing decoded)."""
    return raw.startswith(ADDED, start)


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
    skipping = decode_if if isinstance(decode_if, SkippingFilter) else None
    while True:
        chunk = await next_chunk(content, what)
        if not chunk:
            break
        buffer += chunk
        start = frames = decoded = 0
        while len(buffer) - start >= 4:
            skip = None if skipping is None else skipping.skipper
            if skip is not None:
                start, skipped = skip(
                    buffer, start, len(buffer), EVENTS_PER_STEP - frames % EVENTS_PER_STEP
                )
                if skipped:
                    frames += skipped
                    if frames % EVENTS_PER_STEP == 0:
                        await asyncio.sleep(0)
                    continue
                if len(buffer) - start < 4:
                    break
            (length,) = LENGTH.unpack_from(buffer, start)
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


# ---------------------------------------------------------------------- messages
#
# Every loop starts the same way: ``key`` and ``a`` as _field gives them, ``pos`` the field's
# end (the next field's start). A field past ``end`` is an error, so a loop ends at ``end``.
# ObjectMeta, where most of an event's fields are, reads the common field itself (see there).


def _watch_event(buf: bytes, pos: int, end: int) -> dict[str, Any]:
    kind = ""
    obj: dict[str, Any] = {}
    while pos < end:
        key, a, pos = read_field(buf, pos)
        if pos > end:
            raise past_end(pos, end)
        if key == 0x0A:
            kind = buf[a:pos].decode()
        elif key == 0x12:  # a RawExtension: the object is its raw (1)
            while a < pos:
                key, c, a = read_field(buf, a)
                if a > pos:
                    raise past_end(a, pos)
                if key == 0x0A:
                    obj = _unknown(buf, c, a)
    if pos != end:  # an empty range the wrong way round
        raise past_end(pos, end)
    return {"type": kind, "object": obj}


def _unknown(buf: bytes, pos: int, end: int) -> dict[str, Any]:
    """``k8s\\0`` + runtime.Unknown → the object's dict (apiVersion, kind, its fields)."""
    if buf[pos : pos + 4] != MAGIC:
        raise ValueError("an embedded object without the k8s protobuf magic")
    api_version = kind = ""
    raw: tuple[int, int] | None = None
    pos += 4
    while pos < end:
        key, a, pos = read_field(buf, pos)
        if pos > end:
            raise past_end(pos, end)
        if key == 0x0A:
            api_version, kind = _two_strings(buf, a, pos, api_version, kind)
        elif key == 0x12:
            raw = (a, pos)
    if pos != end:  # the magic ran past the end
        raise past_end(pos, end)
    obj: dict[str, Any] = {"apiVersion": api_version, "kind": kind}
    if raw is None:
        return obj
    if kind == "Status":
        obj.update(_status(buf, *raw))
        return obj
    pos, end = raw
    while pos < end:  # every Kubernetes object has its metadata at 1
        key, a, pos = read_field(buf, pos)
        if pos > end:
            raise past_end(pos, end)
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
        key, a, pos = read_field(buf, pos)
        if pos > end:
            raise past_end(pos, end)
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
            key, a, pos = read_field(buf, pos)
        if pos > end:
            raise past_end(pos, end)
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
                meta["generation"] = int64(a)
        elif key == 0x50:
            meta["deletionGracePeriodSeconds"] = int64(a)
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
        key, a, pos = read_field(buf, pos)
        if pos > end:
            raise past_end(pos, end)
        if key == 0x08:
            seconds = int64(a)
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
        key, a, pos = read_field(buf, pos)
        if pos > end:
            raise past_end(pos, end)
        if key in _OWNER_TEXT:
            owner[_OWNER_TEXT[key]] = buf[a:pos].decode()
        elif key in _OWNER_BOOL:
            owner[_OWNER_BOOL[key]] = bool(a)
    return owner


_STATUS_TEXT = {0x12: "status", 0x1A: "message", 0x22: "reason"}


def _status(buf: bytes, pos: int, end: int) -> dict[str, Any]:
    status: dict[str, Any] = {}
    while pos < end:
        key, a, pos = read_field(buf, pos)
        if pos > end:
            raise past_end(pos, end)
        if key in _STATUS_TEXT:
            status[_STATUS_TEXT[key]] = buf[a:pos].decode()
        elif key == 0x30:
            status["code"] = int64(a)
    return status
