"""Reading protobuf watch frames (kube.watch_protobuf): messages, framing, broken input.

The frames are built with the local control plane's small encoder
(``devcluster/storage_encoding.py``),
following the field numbers of Kubernetes' generated.proto files; one frame is a bookmark
captured from a real API server. Random metadata is checked against its JSON form, and
corrupted frames against a plain reference decoder written here (every message parsed whole
into a list of fields). The integration test
(tests/integration/test_protobuf_watch.py) compares the decoder with the JSON encoding of the
same objects on a real API server.
"""

from __future__ import annotations

import asyncio
import json
import time
from datetime import UTC, datetime, timedelta
from typing import Any

import aiohttp
import pytest
from aiohttp.base_protocol import BaseProtocol
from hypothesis import given, settings
from hypothesis import strategies as st

from lifecycle_controller.devcluster.storage_encoding import field_bytes, field_varint, varint
from lifecycle_controller.kube import TransportError, is_added_event
from lifecycle_controller.kube.watch_lines import EVENTS_PER_STEP
from lifecycle_controller.kube.watch_protobuf import (
    MAX_FRAME_BYTES,
    ProtobufError,
    decode_watch_event,
    protobuf_events,
)
from tests.machinery.loop_ticks import LoopTicks
from tests.machinery.test_watch_lines import reader

# ---------------------------------------------------------------------- frames


def field(number: int, payload: bytes | str | int | bool) -> bytes:
    if isinstance(payload, bool | int):
        return field_varint(number, int(payload))
    return field_bytes(number, payload.encode() if isinstance(payload, str) else payload)


def timestamp(seconds: int) -> bytes:
    return field(1, seconds) + field(2, 0)


def object_meta(meta: dict[str, Any]) -> bytes:
    out = b""
    for number, key in ((1, "name"), (2, "generateName"), (3, "namespace"), (4, "selfLink")):
        out += field(number, meta.get(key, ""))
    out += field(5, meta.get("uid", "")) + field(6, meta.get("resourceVersion", ""))
    out += field(7, meta.get("generation", 0))
    out += field(8, timestamp(meta.get("created", 0)))
    if "deleted" in meta:
        out += field(9, timestamp(meta["deleted"]))
    for number, key in ((11, "labels"), (12, "annotations")):
        for k, v in meta.get(key, {}).items():
            out += field(number, field(1, k) + field(2, v))
    for owner in meta.get("ownerReferences", []):
        ref = field(1, owner["kind"]) + field(3, owner["name"]) + field(4, owner["uid"])
        ref += field(5, owner["apiVersion"])
        if "controller" in owner:
            ref += field(6, owner["controller"])
        out += field(13, ref)
    for finalizer in meta.get("finalizers", []):
        out += field(14, finalizer)
    managed = field(1, "kubectl") + field(2, "Update") + field(7, b"\x0a" * 300)
    return out + field(17, managed)  # managedFields: skipped by its length


def unknown(api_version: str, kind: str, raw: bytes) -> bytes:
    return b"k8s\x00" + field(1, field(1, api_version) + field(2, kind)) + field(2, raw)


def frame(event_type: str, embedded: bytes) -> bytes:
    body = field(1, event_type) + field(2, field(1, embedded))
    return len(body).to_bytes(4, "big") + body


def metadata_frame(event_type: str, meta: dict[str, Any]) -> bytes:
    embedded = unknown("meta.k8s.io/v1", "PartialObjectMetadata", field(1, object_meta(meta)))
    return frame(event_type, embedded)


#: A bookmark ending a streaming list's initial events, as a real API server sent it.
REAL_BOOKMARK = bytes.fromhex(
    "0000007b0a08424f4f4b4d41524b126f0a6d6b3873000a270a0e6d6574612e6b38732e696f2f763112155061"
    "727469616c4f626a6563744d65746164617461123a0a380a0012001a0022002a00320536323238383800420062"
    "210a196b38732e696f2f696e697469616c2d6576656e74732d656e641204747275651a002200"
)


async def collect(stream: aiohttp.StreamReader, **kwargs: Any) -> list[dict[str, Any]]:
    return [event async for event in protobuf_events(stream, what="watch x", **kwargs)]


# ---------------------------------------------------------------------- messages

FULL = {
    "name": "web",
    "namespace": "team",
    "uid": "0b7e6a52-1f0c-4c86-9d0a-6c1b0f3b1d11",
    "resourceVersion": "4242",
    "generation": 3,
    "created": 1_796_000_000,
    "deleted": 1_796_000_100,
    "labels": {"app": "web"},
    "annotations": {"lifecycle.cezary.dev/delete-after": "1h", "note": "ünïcode ✓"},
    "ownerReferences": [
        {"apiVersion": "apps/v1", "kind": "ReplicaSet", "name": "web-1", "uid": "u1"},
        {
            "apiVersion": "apps/v1",
            "kind": "Deployment",
            "name": "web",
            "uid": "u2",
            "controller": True,
        },
    ],
    "finalizers": ["example.com/keep"],
}


def test_object_meta_reads_as_its_json_encoding() -> None:
    event = decode_watch_event(metadata_frame("MODIFIED", FULL)[4:])
    assert event == {
        "type": "MODIFIED",
        "object": {
            "apiVersion": "meta.k8s.io/v1",
            "kind": "PartialObjectMetadata",
            "metadata": {
                "name": "web",
                "namespace": "team",
                "uid": "0b7e6a52-1f0c-4c86-9d0a-6c1b0f3b1d11",
                "resourceVersion": "4242",
                "generation": 3,
                "creationTimestamp": "2026-11-30T00:53:20Z",
                "deletionTimestamp": "2026-11-30T00:55:00Z",
                "labels": {"app": "web"},
                "annotations": {"lifecycle.cezary.dev/delete-after": "1h", "note": "ünïcode ✓"},
                "ownerReferences": FULL["ownerReferences"],
                "finalizers": ["example.com/keep"],
            },
        },
    }


def test_empty_strings_zero_generation_and_zero_times_are_left_out_as_in_json() -> None:
    event = decode_watch_event(metadata_frame("ADDED", {"name": "a"})[4:])
    assert event["object"]["metadata"] == {"name": "a"}


def test_a_real_bookmark_frame() -> None:
    (event,) = asyncio.run(_collect_all(REAL_BOOKMARK))
    assert event == {
        "type": "BOOKMARK",
        "object": {
            "apiVersion": "meta.k8s.io/v1",
            "kind": "PartialObjectMetadata",
            "metadata": {
                "resourceVersion": "62288",
                "annotations": {"k8s.io/initial-events-end": "true"},
            },
        },
    }


async def _collect_all(data: bytes) -> list[dict[str, Any]]:
    return await collect(reader(data))


def test_an_error_event_carries_its_status() -> None:
    status = field(2, "Failure") + field(3, "too old resource version: 1 (4242)")
    status += field(4, "Expired") + field(6, 410)
    event = decode_watch_event(frame("ERROR", unknown("v1", "Status", status))[4:])
    assert event == {
        "type": "ERROR",
        "object": {
            "apiVersion": "v1",
            "kind": "Status",
            "status": "Failure",
            "message": "too old resource version: 1 (4242)",
            "reason": "Expired",
            "code": 410,
        },
    }


def test_added_events_are_recognised_undecoded_in_both_encodings() -> None:
    assert is_added_event(metadata_frame("ADDED", {"name": "a"}), 4)
    assert not is_added_event(metadata_frame("MODIFIED", {"name": "a"}), 4)
    assert not is_added_event(REAL_BOOKMARK, 4)
    assert is_added_event(b'{"type":"ADDED","object":{}}')
    assert not is_added_event(b'{"type":"DELETED","object":{}}')


_text = st.text(min_size=1, max_size=12)
_owner = st.fixed_dictionaries(
    {"apiVersion": _text, "kind": _text, "name": _text, "uid": _text},
    optional={"controller": st.booleans()},
)
_labels = st.dictionaries(st.text(max_size=12), st.text(max_size=40), max_size=4)
_seconds = st.integers(-62_135_596_800, 253_402_300_799)  # years 1 to 9999
_any_meta = st.fixed_dictionaries(
    {
        "name": st.text(max_size=12),
        "namespace": st.text(max_size=12),
        "uid": st.text(max_size=12),
        "resourceVersion": st.text(max_size=12),
        "generation": st.integers(-(2**63), 2**63 - 1),
        "created": _seconds,
        "labels": _labels,
        "annotations": _labels,
        "ownerReferences": st.lists(_owner, max_size=2),
        "finalizers": st.lists(st.text(max_size=12), max_size=2),
    },
    optional={"deleted": _seconds},
)


def as_json(meta: dict[str, Any]) -> dict[str, Any]:
    """``meta`` (as :func:`object_meta` takes it) as the JSON metadata of the same object."""
    out: dict[str, Any] = {
        key: meta[key]
        for key in ("name", "namespace", "uid", "resourceVersion", "generation")
        if meta[key]
    }
    for key, stamp in (("created", "creationTimestamp"), ("deleted", "deletionTimestamp")):
        if meta.get(key):
            moment = datetime(1970, 1, 1, tzinfo=UTC) + timedelta(seconds=meta[key])
            out[stamp] = f"{moment.year:04d}-{moment:%m-%dT%H:%M:%S}Z"
    keys = ("labels", "annotations", "ownerReferences", "finalizers")
    return out | {key: meta[key] for key in keys if meta[key]}


@given(meta=_any_meta)
def test_any_metadata_reads_as_its_json_encoding(meta: dict[str, Any]) -> None:
    event = decode_watch_event(metadata_frame("DELETED", meta)[4:])
    assert event["object"]["metadata"] == as_json(meta)


# ---------------------------------------------------------------------- a reference decoder


class Malformed(Exception):
    """What the reference decoder raises where the decoder must raise ProtobufError."""


def ref_fields(data: bytes) -> list[tuple[int, int, Any]]:
    """A whole message as (number, wire type, the varint or the bytes) per field."""
    fields: list[tuple[int, int, Any]] = []
    pos = 0

    def varint() -> int:
        nonlocal pos
        value = 0
        for shift in range(0, 70, 7):  # ten bytes at most
            if pos >= len(data):
                raise Malformed("a truncated varint")
            value |= (data[pos] & 0x7F) << shift
            pos += 1
            if data[pos - 1] < 0x80:
                return value
        raise Malformed("a varint longer than ten bytes")

    while pos < len(data):
        key = varint()
        number, wire = key >> 3, key & 7
        if wire == 0:
            fields.append((number, 0, varint()))
        elif wire == 2:
            size = varint()
            fields.append((number, 2, data[pos : pos + size]))
            pos += size
        elif wire in (1, 5):
            pos += 8 if wire == 1 else 4
        else:
            raise Malformed(f"wire type {wire}")
        if pos > len(data):
            raise Malformed("a field past the end of its message")
    return fields


def ref_text(data: bytes) -> str:
    try:
        return data.decode()
    except UnicodeDecodeError as error:
        raise Malformed("not UTF-8") from error


def ref_int64(value: int) -> int:
    return value - 2**64 if value >= 2**63 else value


def ref_event(data: bytes) -> dict[str, Any]:
    event: dict[str, Any] = {"type": "", "object": {}}
    for number, wire, value in ref_fields(data):
        if (number, wire) == (1, 2):
            event["type"] = ref_text(value)
        elif (number, wire) == (2, 2):  # a RawExtension
            for inner, inner_wire, raw in ref_fields(value):
                if (inner, inner_wire) == (1, 2):
                    event["object"] = ref_object(raw)
    return event


def ref_object(data: bytes) -> dict[str, Any]:
    if data[:4] != b"k8s\x00":
        raise Malformed("no magic")
    obj: dict[str, Any] = {"apiVersion": "", "kind": ""}
    raw = None
    for number, wire, value in ref_fields(data[4:]):
        if (number, wire) == (1, 2):
            for inner, inner_wire, text in ref_fields(value):
                if inner_wire == 2 and inner in (1, 2):
                    obj["apiVersion" if inner == 1 else "kind"] = ref_text(text)
        elif (number, wire) == (2, 2):
            raw = value
    if raw is None:
        return obj
    status = {(2, 2): "status", (3, 2): "message", (4, 2): "reason", (6, 0): "code"}
    for number, wire, value in ref_fields(raw):
        if obj["kind"] != "Status" and (number, wire) == (1, 2):
            obj["metadata"] = ref_meta(value)
        elif obj["kind"] == "Status" and (number, wire) in status:
            obj[status[number, wire]] = ref_int64(value) if wire == 0 else ref_text(value)
    return obj


_REF_META = {1: "name", 2: "generateName", 3: "namespace", 5: "uid", 6: "resourceVersion"}
_REF_OWNER = {1: "kind", 3: "name", 4: "uid", 5: "apiVersion", 6: "controller"}
_REF_OWNER[7] = "blockOwnerDeletion"


def ref_meta(data: bytes) -> dict[str, Any]:
    meta: dict[str, Any] = {}
    for number, wire, value in ref_fields(data):
        if wire == 2 and number in _REF_META:
            if text := ref_text(value):
                meta[_REF_META[number]] = text
        elif wire == 0 and number in (7, 10) and (value or number == 10):
            meta["generation" if number == 7 else "deletionGracePeriodSeconds"] = ref_int64(value)
        elif wire == 2 and number in (8, 9):
            if stamp := ref_time(value):
                meta["creationTimestamp" if number == 8 else "deletionTimestamp"] = stamp
        elif wire == 2 and number in (11, 12):
            entry = {1: "", 2: ""}
            for inner, inner_wire, text in ref_fields(value):
                if inner_wire == 2 and inner in entry:
                    entry[inner] = ref_text(text)
            meta.setdefault("labels" if number == 11 else "annotations", {})[entry[1]] = entry[2]
        elif (number, wire) == (13, 2):
            owner: dict[str, Any] = {}
            for inner, inner_wire, item in ref_fields(value):
                if inner in _REF_OWNER and inner_wire == (0 if inner > 5 else 2):
                    owner[_REF_OWNER[inner]] = bool(item) if inner > 5 else ref_text(item)
            meta.setdefault("ownerReferences", []).append(owner)
        elif (number, wire) == (14, 2):
            meta.setdefault("finalizers", []).append(ref_text(value))
    return meta


def ref_time(data: bytes) -> str | None:
    seconds = nanos = 0
    for number, wire, value in ref_fields(data):
        if (number, wire) == (1, 0):
            seconds = ref_int64(value)
        elif (number, wire) == (2, 0):
            nanos = value
    if seconds == 0 and nanos == 0:
        return None
    try:
        parts = time.gmtime(seconds)[:6]
    except (OverflowError, OSError) as error:
        raise Malformed("a time out of range") from error
    return "{:04d}-{:02d}-{:02d}T{:02d}:{:02d}:{:02d}Z".format(*parts)


def _bytes_field(number: int, payload: bytes, skew: int, padded: bool) -> bytes:
    """``field_bytes``, its length off by ``skew`` or (``padded``) a byte longer than needed."""
    size = varint(max(len(payload) + skew, 0))
    if padded:
        size = size[:-1] + bytes([size[-1] | 0x80, 0])
    return varint(number << 3 | 2) + size + payload


def _fields(payloads: dict[int, st.SearchStrategy[bytes]]) -> st.SearchStrategy[bytes]:
    """A message of random fields, in any order and number, numbered as ``payloads`` says.

    Mostly bytes (a payload drawn), else varints and fixed-size values.
    """
    number = st.sampled_from(sorted(payloads))
    skew = st.sampled_from([0, 0, 0, 0, 0, 0, -1, 1])
    padded = st.sampled_from([False, False, False, True])
    as_bytes = number.flatmap(
        lambda n: st.builds(_bytes_field, st.just(n), payloads[n], skew, padded)
    )
    varints = st.sampled_from([0, 1, 2**63, 2**64 - 1]) | st.integers(0, 2**64 - 1)
    fixed = st.builds(  # fixed64 (wire type 1) or fixed32 (5)
        lambda n, b: varint(n << 3 | (1 if len(b) == 8 else 5)) + b,
        number,
        st.binary(min_size=8, max_size=8) | st.binary(min_size=4, max_size=4),
    )
    one = as_bytes | as_bytes | st.builds(field_varint, number, varints) | fixed
    return st.lists(one, max_size=6).map(b"".join)


_strings = st.text(max_size=6).map(str.encode) | st.binary(max_size=3)
_pairs = _fields({1: _strings, 2: _strings, 3: _strings})  # map entries and times
_owners = _fields(dict.fromkeys(range(1, 8), _strings))
_random_meta = _fields(
    dict.fromkeys([1, 2, 3, 4, 5, 6, 7, 10, 14, 17, 2**20], _strings)
    | dict.fromkeys([8, 9, 11, 12], _pairs)
    | {13: _owners}
)
_edits = st.lists(  # what, where (in the first 400 bytes: managedFields fill the end), bytes
    st.tuples(
        st.sampled_from(["cut", "set", "insert", "delete"]), st.integers(0, 400), st.binary()
    ),
    max_size=3,
)


def corrupt(data: bytes, edits: list[tuple[str, int, bytes]]) -> bytes:
    out = bytearray(data)
    for edit, at, extra in edits:
        at %= len(out) + 1
        if edit == "cut":
            del out[at:]
        elif edit == "set" and at < len(out):
            out[at] = extra[0] if extra else 0xFF
        elif edit == "insert":
            out[at:at] = extra or b"\x80"
        else:
            del out[at : at + 1 + len(extra)]
    return bytes(out)


@settings(max_examples=400)
@given(
    content=_any_meta.map(object_meta) | _random_meta,
    kind=st.sampled_from(["PartialObjectMetadata", "PartialObjectMetadata", "Status"]),
    edits=_edits,
    inside=st.booleans(),
    around=st.binary(max_size=4),
    as_bytes=st.booleans(),
)
def test_any_frame_reads_as_the_reference_reads_it_or_is_a_protobuf_error(
    content: bytes,
    kind: str,
    edits: list[tuple[str, int, bytes]],
    inside: bool,
    around: bytes,
    as_bytes: bool,
) -> None:
    """Metadata (or a Status) of random fields, then corrupted, alone or with its envelope."""

    def framed(fields: bytes) -> bytes:  # a Status's fields are the object's own
        embedded = fields if kind == "Status" else field(1, fields)
        return frame("MODIFIED", unknown("v1", kind, embedded))[4:]

    body = framed(corrupt(content, edits)) if inside else corrupt(framed(content), edits)
    assert_read_as_the_reference_reads(body, around, as_bytes)


def assert_read_as_the_reference_reads(
    body: bytes, around: bytes = b"", as_bytes: bool = True
) -> None:
    """The decoder gives what ref_event does (True is not 1), or a ProtobufError for Malformed."""
    raw = around + body + around  # the decoder must not read past its frame either
    buffer = raw if as_bytes else bytearray(raw)
    start, end = len(around), len(around) + len(body)
    try:
        expected = ref_event(body)
    except Malformed:
        with pytest.raises(ProtobufError):
            decode_watch_event(buffer, start, end)
    else:
        decoded = decode_watch_event(buffer, start, end)
        assert json.dumps(decoded, sort_keys=True) == json.dumps(expected, sort_keys=True)


def metadata_body(fields: bytes) -> bytes:
    return frame("ADDED", unknown("meta.k8s.io/v1", "PartialObjectMetadata", field(1, fields)))[4:]


@pytest.mark.parametrize(
    "body",
    [
        metadata_body(field(8, field(2, 5))),  # a time of nanoseconds only: 1970-01-01T00:00:00Z
        metadata_body(field(7, 2**64 - 1) + field(10, 2**63)),  # negative int64s
        metadata_body(
            field(11, field(2, "v") + field(1, "k") + field(3, "x"))
        ),  # backwards, a field more
        metadata_body(field(12, b"\x0a\x01k\x12\x81\x00v") + field(11, b"")),  # padded, empty
        metadata_body(field(13, b"\x0a\x05ab") + field(1, "x")),  # past an owner reference
        metadata_body(field(11, b"\x0a\x01k\x12\x05v") + field(1, "x")),  # past a map entry
        metadata_body(field(9, b"\x1a\x05ab") + field(1, "x")),  # past a time
        metadata_body(field(8, field(1, 2**62))),  # a time out of range
        field(1, "ADDED") + field(2, field(1, b"k8s") + b"\x00\x00"),  # the magic cut short
        field(1, "ADDED") + field(2, b"\x0a\x09k8s\x00" + field(3, "x")),  # past a RawExtension
        frame("ERROR", unknown("v1", "Status", field(6, 2**64 - 1)))[4:],  # a negative code
        frame("ERROR", unknown("v1", "Status", b"\x12\x05ab"))[4:] + field(3, "x"),  # past a Status
    ],
)
def test_unusual_frames_read_as_the_reference_reads_them(body: bytes) -> None:
    assert_read_as_the_reference_reads(body)


def test_a_range_the_wrong_way_round_is_a_protobuf_error() -> None:
    with pytest.raises(ProtobufError):
        decode_watch_event(b"\x0a\x00", 2, 1)


# ---------------------------------------------------------------------- framing

STREAM = b"".join(
    metadata_frame("ADDED", {"name": f"o{i}", "resourceVersion": str(i)}) for i in range(5)
)


@given(cuts=st.lists(st.integers(min_value=0, max_value=len(STREAM)), max_size=12))
def test_any_chunking_yields_every_event_in_order(cuts: list[int]) -> None:
    points = sorted(set(cuts))
    chunks = [STREAM[a:b] for a, b in zip([0, *points], [*points, len(STREAM)], strict=True)]

    async def run() -> list[dict[str, Any]]:
        return await collect(reader(*[c for c in chunks if c]))

    events = asyncio.run(run())
    assert [e["object"]["metadata"]["name"] for e in events] == [f"o{i}" for i in range(5)]


async def test_a_chunk_of_many_frames_is_split_in_bounded_steps() -> None:
    data = b"".join(metadata_frame("ADDED", {"name": f"o{i}"}) for i in range(4 * EVENTS_PER_STEP))
    loop = asyncio.get_running_loop()
    one_chunk = aiohttp.StreamReader(BaseProtocol(loop), 2**22, loop=loop)  # never paused
    one_chunk.feed_data(data)
    one_chunk.feed_eof()
    async with LoopTicks() as ticks:
        seen = [ticks.count async for _ in protobuf_events(one_chunk, what="watch x")]
    assert len(seen) == 4 * EVENTS_PER_STEP
    assert len(set(seen)) >= 4  # one chunk, yet the loop ran after every EVENTS_PER_STEP


async def test_refused_frames_are_dropped_undecoded() -> None:
    garbage = b"\x0a\x05ADDED\xff\xff"  # an ADDED frame that would not decode
    data = len(garbage).to_bytes(4, "big") + garbage + metadata_frame("DELETED", {"name": "b"})
    events = await collect(reader(data), decode_if=lambda raw, a, b: raw[b - 1] != 0xFF)
    assert [e["type"] for e in events] == ["DELETED"]


@pytest.mark.parametrize(
    "body",
    [
        b"\x0a\x05ADD",  # a string past the end of its message
        b"\x0a\x05ADDED\x12\x03\x0a\x01x",  # an embedded object without the k8s magic
        b"\x0b",  # wire type 3 (groups) is never sent
        b"\x0a\x02\xff\xfe",  # not UTF-8
        b"\x08" + b"\xff" * 11,  # a varint longer than ten bytes
    ],
)
async def test_a_broken_frame_is_a_protobuf_error(body: bytes) -> None:
    with pytest.raises(ProtobufError, match="watch x: a frame is not a protobuf watch event"):
        await collect(reader(len(body).to_bytes(4, "big") + body))


async def test_a_stream_that_ends_inside_a_frame_is_a_transport_error() -> None:
    with pytest.raises(TransportError, match="ended inside a frame"):
        await collect(reader(STREAM[:-3]))


async def test_an_oversized_frame_length_ends_the_stream() -> None:
    with pytest.raises(TransportError, match="longer than"):
        await collect(reader((MAX_FRAME_BYTES + 1).to_bytes(4, "big")))
