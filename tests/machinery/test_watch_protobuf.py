"""Reading protobuf watch frames (kube.watch_protobuf): messages, framing, broken input.

The frames are built with the benchmarks' small encoder (``benchmarks/protobuf_encode.py``),
following the field numbers of Kubernetes' generated.proto files; one frame is a bookmark
captured from a real API server. The integration test
(tests/integration/test_protobuf_watch.py) compares the decoder with the JSON encoding of the
same objects on a real API server.
"""

from __future__ import annotations

import asyncio
from typing import Any

import aiohttp
import pytest
from aiohttp.base_protocol import BaseProtocol
from hypothesis import given
from hypothesis import strategies as st

from benchmarks.protobuf_encode import field_bytes, field_varint
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
_meta = st.fixed_dictionaries(
    {
        "name": _text,
        "namespace": _text,
        "uid": _text,
        "resourceVersion": st.integers(1, 10**12).map(str),
        "generation": st.integers(1, 2**62),
        "created": st.integers(1, 4_000_000_000),
        "annotations": st.dictionaries(_text, st.text(max_size=40), max_size=4),
    }
)


@given(meta=_meta)
def test_any_metadata_survives_the_round_trip(meta: dict[str, Any]) -> None:
    decoded = decode_watch_event(metadata_frame("ADDED", meta)[4:])["object"]["metadata"]
    assert decoded["name"] == meta["name"]
    assert decoded["namespace"] == meta["namespace"]
    assert decoded["uid"] == meta["uid"]
    assert decoded["resourceVersion"] == meta["resourceVersion"]
    assert decoded["generation"] == meta["generation"]
    assert decoded.get("annotations", {}) == meta["annotations"]
    assert decoded["creationTimestamp"].endswith("Z")


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
