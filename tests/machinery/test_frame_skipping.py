"""A streaming list's frames dropped a run at a time (``skip_unkept_frames``, a
``SkippingFilter``'s ``skipper``) give exactly what asking the filter frame by frame gives.

docs/performance.md#many-policies says why: at 100,000 objects the calls of a per-frame filter
were a tenth of a start's CPU. These tests hold the faster path to the slower one's answers:
the same frames decoded, in the same order, whatever the chunking, the names (DNS names take
the one-match read, others the field-by-field one), the annotations and the event types; the
filter's own answer is asked again once the skipper is gone (after the initial events); and
the event loop still runs every ``EVENTS_PER_STEP`` frames while a whole chunk is dropped.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable
from dataclasses import dataclass, field
from itertools import pairwise
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from lifecycle_controller.controller.watch.cache_writer import UnkeptListed
from lifecycle_controller.core.objects.keys import PREFIX
from lifecycle_controller.kube.frame_names import skip_unkept_frames
from lifecycle_controller.kube.watch_lines import EVENTS_PER_STEP
from lifecycle_controller.kube.watch_protobuf import FrameSkipper, SkippingFilter, protobuf_events
from tests.machinery.loop_ticks import LoopTicks
from tests.machinery.test_unkept_events import ANNOTATION, ScriptedBody, plain
from tests.machinery.test_watch_protobuf import REAL_BOOKMARK, metadata_frame

_MARKER = PREFIX.encode()


@dataclass
class NameKeeper:
    """A keeper whose kept test is a set of (namespace, name)."""

    kept: set[tuple[str, str]] = field(default_factory=set)

    def kept_test(self) -> Callable[[str, str], bool] | None:
        return lambda namespace, name: (namespace, name) in self.kept


@dataclass
class FrameByFrame:
    """The same filter, asked about one frame at a time (not a SkippingFilter)."""

    inner: Callable[[bytes | bytearray, int, int], bool]

    def __call__(self, raw: bytes | bytearray, start: int, end: int) -> bool:
        return self.inner(raw, start, end)


async def decoded(chunks: list[bytes], decode_if: Any) -> list[tuple[str, str]]:
    events = protobuf_events(ScriptedBody(*chunks), what="list", decode_if=decode_if)
    return [(event["type"], event["object"]["metadata"].get("name", "")) async for event in events]


def chunked(data: bytes, cuts: list[int]) -> list[bytes]:
    points = sorted({0, len(data), *(cut % (len(data) + 1) for cut in cuts)})
    return [data[a:b] for a, b in pairwise(points)]


dns = st.text(alphabet="abc-0.", min_size=1, max_size=12)
odd = st.text(alphabet='aZ_"\n\x12é', min_size=1, max_size=12)  # read field by field
frames = st.lists(
    st.tuples(
        st.sampled_from(["ADDED", "ADDED", "ADDED", "MODIFIED", "DELETED", "BOOKMARK"]),
        st.one_of(dns, odd),
        st.sampled_from(["ns", "other", ""]),
        st.booleans(),  # annotated
    ),
    max_size=40,
)


def frame_of(kind: str, name: str, namespace: str, annotated: bool) -> bytes:
    if kind == "BOOKMARK":
        return REAL_BOOKMARK
    annotations = {ANNOTATION: "1h"} if annotated else {}
    return metadata_frame(kind, plain(name, "5", namespace, **annotations))


@settings(max_examples=200, deadline=None)
@given(
    listed=frames,
    stored_picks=st.lists(st.integers(0, 39), max_size=10),
    cuts=st.lists(st.integers(0, 10**6), max_size=8),
)
def test_skipping_decodes_what_asking_frame_by_frame_decodes(
    listed: list[tuple[str, str, str, bool]], stored_picks: list[int], cuts: list[int]
) -> None:
    stored = {(listed[i][2], listed[i][1]) for i in stored_picks if i < len(listed)}
    data = b"".join(frame_of(*one) for one in listed)
    chunks = chunked(data, cuts)
    skipping = UnkeptListed(NameKeeper(stored))
    assert isinstance(skipping, SkippingFilter)
    one_by_one = FrameByFrame(UnkeptListed(NameKeeper(stored)))
    assert not isinstance(one_by_one, SkippingFilter)
    fast = asyncio.run(decoded(chunks, skipping))
    assert fast == asyncio.run(decoded(chunks, one_by_one))
    kept = [
        (kind, name)
        for kind, name, namespace, annotated in listed
        if kind != "ADDED" or annotated or (namespace, name) in stored
    ]
    assert fast == [(kind, "" if kind == "BOOKMARK" else name) for kind, name in kept]


@settings(max_examples=100, deadline=None)
@given(listed=frames, cuts=st.lists(st.integers(0, 10**6), max_size=8))
def test_without_a_kept_test_every_unannotated_added_frame_is_dropped(
    listed: list[tuple[str, str, str, bool]], cuts: list[int]
) -> None:
    """``kept=None``: the first list of a scope nothing selects by name keeps only the
    annotated objects (and every frame that is not an ADDED)."""

    @dataclass
    class Unannotated:
        skipper: FrameSkipper | None = None

        def __post_init__(self) -> None:
            def skip(buffer: bytearray, start: int, stop: int, most: int) -> tuple[int, int]:
                return skip_unkept_frames(buffer, start, stop, most, marker=_MARKER, kept=None)

            self.skipper = skip

        def __call__(self, raw: bytes | bytearray, start: int, end: int) -> bool:
            added = raw.startswith(b"\n\x05ADDED", start)
            return not added or raw.find(_MARKER, start, end) >= 0

    chunks = chunked(b"".join(frame_of(*one) for one in listed), cuts)
    fast = asyncio.run(decoded(chunks, Unannotated()))
    assert fast == asyncio.run(decoded(chunks, FrameByFrame(Unannotated())))
    assert [kind for kind, _ in fast] == [
        kind for kind, _, _, annotated in listed if kind != "ADDED" or annotated
    ]


@pytest.mark.parametrize(
    ("name", "generate", "namespace", "misread"),
    [
        ('ab\x12\x00\x1a\x02cd"x', "", "ns", ("cd", "ab")),
        ("web", 'x\x1a\x01y"', "ns", ("y", "web")),
        ("web", "", 'a"b', ("a", "web")),
    ],
)
@pytest.mark.parametrize("kept_as", ["read", "misread"])
async def test_a_name_that_looks_like_the_next_key_is_judged_by_its_true_names(
    name: str, generate: str, namespace: str, misread: tuple[str, str], kept_as: str
) -> None:
    """The pattern matches these frames with the wrong bounds (test_unkept_events shows it);
    the skipper checks the lengths too, so the keeper is asked about the true names."""
    meta = {"name": name, "generateName": generate, "namespace": namespace, "resourceVersion": "9"}
    raw = metadata_frame("ADDED", meta)
    kept = {(namespace, name)} if kept_as == "read" else {misread}
    expected = [("ADDED", name)] if kept_as == "read" else []
    assert await decoded([raw], UnkeptListed(NameKeeper(kept))) == expected
    assert await decoded([raw], FrameByFrame(UnkeptListed(NameKeeper(kept)))) == expected


async def test_frames_after_the_skipper_goes_are_asked_one_by_one() -> None:
    """The reflector ends the listing at the bookmark, between two frames of one chunk: the
    frames after it are the watch's, judged by the filter itself (here: all kept)."""

    @dataclass
    class Listing:
        listing: bool = True

        @property
        def skipper(self) -> FrameSkipper | None:
            def skip(buffer: bytearray, start: int, stop: int, most: int) -> tuple[int, int]:
                return skip_unkept_frames(buffer, start, stop, most, marker=_MARKER, kept=None)

            return skip if self.listing else None

        def __call__(self, raw: bytes | bytearray, start: int, end: int) -> bool:
            return not self.listing or not raw.startswith(b"\n\x05ADDED", start)

    one_chunk = b"".join(
        [
            metadata_frame("ADDED", plain("listed", "1")),
            REAL_BOOKMARK,
            metadata_frame("ADDED", plain("watched", "2")),
        ]
    )
    listing = Listing()
    seen = []
    async for event in protobuf_events(ScriptedBody(one_chunk), what="x", decode_if=listing):
        seen.append(event["type"])
        if event["type"] == "BOOKMARK":
            listing.listing = False
    assert seen == ["BOOKMARK", "ADDED"]


async def test_a_chunk_dropped_whole_still_lets_the_loop_run() -> None:
    data = b"".join(
        metadata_frame("ADDED", plain(f"n{i}", "1")) for i in range(4 * EVENTS_PER_STEP)
    )
    listed = UnkeptListed(NameKeeper())
    async with LoopTicks() as ticks:
        before = ticks.count
        assert await decoded([data], listed) == []
        after = ticks.count
    assert after - before >= 4  # one chunk, yet the loop ran after every EVENTS_PER_STEP
