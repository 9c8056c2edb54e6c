"""Which object a protobuf watch frame is about, read in place without decoding it.

An informer drops, undecoded, the events of objects it would keep nothing of
(docs/architecture.md#informer-loop): it needs their name, namespace and resourceVersion
only (:func:`object_identity`), or during a streaming list their namespace and name
(:func:`object_names`, in one pattern match of a metadata-only frame as Go writes it), and
drops a run of a list's frames in one call (:func:`skip_unkept_frames`,
docs/performance.md#many-policies). Anything laid out otherwise is read field by field; a
frame that does not parse gives None, and the caller then decodes it, which reports it.
"""

from __future__ import annotations

import re
from collections.abc import Callable

from lifecycle_controller.kube.protobuf_wire import (
    ADDED,
    LENGTH,
    MAGIC,
    past_end,
    read_field,
    read_varint,
)

__all__ = ["NamesTest", "object_identity", "object_names", "skip_unkept_frames"]

#: Whether an object, by its namespace (empty when cluster-scoped) and name, is to be decoded.
NamesTest = Callable[[str, str], bool]


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
    found = _names_as_go_writes_them(raw, start, end)
    if found is not None:
        name_at, name_end, namespace_at, namespace_end = found
        return raw[namespace_at:namespace_end].decode(), raw[name_at:name_end].decode()
    identity = object_identity(raw, start, end)
    return None if identity is None else (identity[1], identity[0])


def _names_as_go_writes_them(
    raw: bytes | bytearray, start: int, end: int
) -> tuple[int, int, int, int] | None:
    """Where the name and the namespace of the frame ``raw[start:end]`` are (start and end of
    each), read in one match of :data:`_NAMES_AS_GO_WRITES_THEM` with the three lengths
    checked; None when the frame is laid out otherwise."""
    found = _NAMES_AS_GO_WRITES_THEM.match(raw, start, end)
    if found is None:
        return None
    name_at, name_end = found.span(2)
    generate_at, generate_end = found.span(4)
    namespace_at, namespace_end = found.span(6)
    if (
        raw[name_at - 1] != name_end - name_at
        or raw[generate_at - 1] != generate_end - generate_at
        or raw[namespace_at - 1] != namespace_end - namespace_at
    ):
        return None
    return name_at, name_end, namespace_at, namespace_end


def skip_unkept_frames(
    buffer: bytearray, start: int, stop: int, most: int, *, marker: bytes, kept: NamesTest | None
) -> tuple[int, int]:
    """A :class:`FrameSkipper` of a streaming list's initial events: it drops the ADDED frames
    without ``marker`` whose object ``kept`` refuses (every one when ``kept`` is None), and
    stops at any other frame, at a frame not whole in ``buffer[:stop]`` and after ``most``.

    The loop of :func:`~.watch_protobuf.protobuf_events` and of its filter in one: a list
    of 100,000 objects nobody keeps costs a pattern match each here, without the filter's
    calls. Names are read as :func:`object_names` reads them, and a namespace's bytes are
    decoded once per run of its objects (a list comes namespace by namespace)."""
    unpack = LENGTH.unpack_from
    names_at = _names_as_go_writes_them
    last_namespace = bytearray()
    namespace = ""
    skipped = 0
    while skipped < most and stop - start >= 4:
        (length,) = unpack(buffer, start)
        body = start + 4
        end = body + length
        if end > stop or not buffer.startswith(ADDED, body) or buffer.find(marker, body, end) >= 0:
            break  # not whole (or too long), not an ADDED, or marked: asked alone
        if kept is not None:
            found = names_at(buffer, body, end)
            if found is None:
                break  # laid out otherwise: the filter reads it field by field
            name_at, name_end, namespace_at, namespace_end = found
            namespace_bytes = buffer[namespace_at:namespace_end]
            if namespace_bytes != last_namespace:
                last_namespace, namespace = namespace_bytes, namespace_bytes.decode()
            if kept(namespace, buffer[name_at:name_end].decode()):
                break
        start = end
        skipped += 1
    return start, skipped


def _inside(buf: bytes | bytearray, pos: int, end: int, wanted: int) -> tuple[int, int]:
    """The bounds of the first field ``wanted`` (a length-delimited key) in ``buf[pos:end]``."""
    while pos < end:
        key, a, pos = _next(buf, pos)
        if key == wanted:
            if pos > end:
                raise past_end(pos, end)
            return a, pos
    raise ValueError(f"no field {wanted >> 3}")


def _next(buf: bytes | bytearray, pos: int) -> tuple[int, int, int]:
    """:func:`read_field`, without a call for a one-byte key of a field with a one-byte length."""
    key, size = buf[pos], buf[pos + 1]
    if key & 0x87 == 2 and size < 0x80:
        return key, pos + 2, pos + 2 + size
    return read_field(buf, pos)


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
    size, pos = read_varint(buf, pos + 2)
    return (pos, pos + size) if pos + size <= end else None


def _identity(buf: bytes | bytearray, pos: int, end: int) -> tuple[str, str, str] | None:
    located = _metadata_as_go_writes_it(buf, pos, end)
    if located is None:
        pos, end = _inside(buf, pos, end, 0x12)  # WatchEvent.object, a RawExtension
        pos, end = _inside(buf, pos, end, 0x0A)  # its raw: k8s\0 and a runtime.Unknown
        if buf[pos : pos + 4] != MAGIC:
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
            key, a, pos = read_field(buf, pos)
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
