"""The protobuf wire format as the API server writes a watch, read in place.

A protobuf watch is a sequence of frames, each a 4-byte big-endian length (:data:`LENGTH`)
and a ``meta.k8s.io/v1`` WatchEvent whose object is wrapped as ``k8s\\0`` (:data:`MAGIC`) and a
``runtime.Unknown``. What both readers share lives here: :mod:`.watch_protobuf`, which
decodes the frames it is asked to, and :mod:`.frame_names`, which reads which object a frame
is about without decoding it. Each message is read by a loop of its own that compares whole
keys (``number << 3 | wire type``: 0x0A is field 1 as bytes, 0x38 field 7 as a varint) and
calls :func:`read_field` per field: one generator for every message, yielding a tuple per
field, cost a fifth of the decode.
"""

from __future__ import annotations

import struct

__all__ = ["ADDED", "LENGTH", "MAGIC", "int64", "past_end", "read_field", "read_varint"]

#: How a frame's body is framed: its length, 4 bytes big-endian.
LENGTH = struct.Struct(">I")
#: The bytes before a protobuf-encoded object (then a ``runtime.Unknown``).
MAGIC = b"k8s\x00"
#: Field 1 (type), length 5, "ADDED": how every ADDED event starts.
ADDED = b"\n\x05ADDED"


def read_varint(buf: bytes | bytearray, pos: int) -> tuple[int, int]:
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


def read_field(buf: bytes | bytearray, pos: int) -> tuple[int, int, int]:
    """The key, value and end of the field at ``pos``.

    The value is a varint's, 0 for a fixed-size field, and the start of a length-delimited
    field (which ends at the end).
    """
    key = buf[pos]
    if key < 0x80:
        pos += 1
    else:
        key, pos = read_varint(buf, pos)
    wire = key & 7
    if wire == 2 or wire == 0:
        value = buf[pos]
        if value < 0x80:
            pos += 1
        elif buf[pos + 1] < 0x80:
            value, pos = (value & 0x7F) | buf[pos + 1] << 7, pos + 2
        else:
            value, pos = read_varint(buf, pos)
        return (key, pos, pos + value) if wire == 2 else (key, value, pos)
    if wire == 1:
        return key, 0, pos + 8
    if wire == 5:
        return key, 0, pos + 4
    raise ValueError(f"wire type {wire} is not used by the API server")


def past_end(pos: int, end: int) -> ValueError:
    return ValueError(f"a field runs past its message (to {pos}, the message ends at {end})")


def int64(value: int) -> int:
    return value - (1 << 64) if value >= 1 << 63 else value
