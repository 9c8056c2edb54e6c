"""The compact record of ``matchedAt`` instants kept under ``--persist-observations``.

One policy generation's instants are stored as fixed-size binary entries: the object's UID
(16 bytes: Kubernetes UIDs are UUIDs) and the instant in whole seconds (4 bytes, big
endian), base64-encoded into one ConfigMap key (docs/policies.md#matchedat). An instant is
rounded **up** to the second: a reloaded ``matchedAt`` may be later than the one seen, never
earlier, so an object is never deleted before its grace.

A ConfigMap holds at most 1 MiB, so a record keeps at most :data:`MAX_ENTRIES` entries: the
oldest instants (the ones closest to falling due), the newer ones starting again after a
restart, like everything when the option is off. A UID that is not a UUID cannot be stored
compactly and is left out the same way. Decoding garbled text raises
:class:`RecordError`: the caller ignores such a record (nothing is learnt from it).
"""

from __future__ import annotations

import base64
import binascii
import struct
import uuid
from collections.abc import Iterable
from dataclasses import dataclass

__all__ = ["ENTRY_BYTES", "MAX_ENTRIES", "Encoded", "RecordError", "decode", "encode"]

_ENTRY = struct.Struct(">16sI")
#: Bytes per entry before base64 (which adds a third).
ENTRY_BYTES = _ENTRY.size
#: At most this many entries: 27 base64 bytes each, about 900 kB, under the 1 MiB limit of a
#: ConfigMap with room for its metadata.
MAX_ENTRIES = 33_000
_NS = 1_000_000_000
_MAX_SECONDS = 2**32 - 1


class RecordError(ValueError):
    """The stored text is not a record."""


@dataclass(frozen=True, slots=True)
class Encoded:
    """The record's text, and how many entries were left out (too many, or not a UUID)."""

    text: str
    left_out: int


def _seconds_up(instant_ns: int) -> int:
    return -(-instant_ns // _NS)


def encode(entries: Iterable[tuple[str, int]], *, limit: int = MAX_ENTRIES) -> Encoded:
    """``(uid, instant in ns)`` pairs as a record, the oldest ``limit`` kept."""
    packed: list[tuple[int, bytes]] = []
    left_out = 0
    for uid, instant_ns in entries:
        seconds = _seconds_up(instant_ns)
        try:
            raw = uuid.UUID(uid).bytes
        except ValueError:
            left_out += 1
            continue
        if not 0 <= seconds <= _MAX_SECONDS:
            left_out += 1
            continue
        packed.append((seconds, raw))
    packed.sort()
    left_out += max(0, len(packed) - limit)
    body = b"".join(_ENTRY.pack(raw, seconds) for seconds, raw in packed[:limit])
    return Encoded(base64.b64encode(body).decode("ascii"), left_out)


def decode(text: str) -> dict[str, int]:
    """A record's entries: UID → instant in ns (whole seconds)."""
    try:
        body = base64.b64decode(text.encode("ascii"), validate=True)
    except (binascii.Error, UnicodeEncodeError) as error:
        raise RecordError(f"not base64: {error}") from None
    if len(body) % ENTRY_BYTES:
        raise RecordError(f"{len(body)} bytes is not a whole number of entries")
    return {str(uuid.UUID(bytes=raw)): seconds * _NS for raw, seconds in _ENTRY.iter_unpack(body)}
