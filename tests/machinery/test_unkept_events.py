"""Watch events of objects the informer keeps nothing of are dropped undecoded (churn).

The filters (``UnkeptEvents`` for watches, ``UnkeptListed`` for a streaming list's initial
events, controller/watch/cache_writer.py) are checked frame by frame against a scripted keeper,
``object_identity`` and ``object_names`` against the full decoder on random metadata (and
names built to mislead the one-pattern read), and the informer end to
end on protobuf frames read by the real frame reader: what it drops still moves its
resourceVersion and its counts, and an object that loses its last lifecycle annotation, an
object a policy could keep, and a keeper that hears of every change still see every event.
"""

from __future__ import annotations

import asyncio
import random
from collections.abc import AsyncIterator, Awaitable, Callable, Mapping
from dataclasses import dataclass, field
from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st

from lifecycle_controller.controller.watch.cache import MetadataCache
from lifecycle_controller.controller.watch.cache_writer import (
    CacheWriter,
    UnkeptEvents,
    UnkeptListed,
)
from lifecycle_controller.controller.watch.projection import MetadataProjection
from lifecycle_controller.controller.watch.reflector import Informer
from lifecycle_controller.core.objects.keys import PREFIX
from lifecycle_controller.core.policy.in_force import NameTest, never_kept, object_view
from lifecycle_controller.core.policy.match import ObjectView
from lifecycle_controller.kube import EventFilter, ResourceType, frame_names
from lifecycle_controller.kube.frame_names import object_identity, object_names
from lifecycle_controller.kube.watch_protobuf import decode_watch_event, protobuf_events
from tests.doubles.fakeclock import FakeClock
from tests.machinery.test_informers import CONFIGMAPS, SETTINGS, CountingMetrics, Recorder
from tests.machinery.test_watch_lines import reader
from tests.machinery.test_watch_protobuf import REAL_BOOKMARK, frame, metadata_frame

ANNOTATION = PREFIX + "delete-after"


def body(raw: bytes) -> tuple[bytearray, int, int]:
    """A frame as the reader offers it: the buffer and the body's bounds (past the length)."""
    return bytearray(raw), 4, len(raw)


def plain(name: str, rv: str, ns: str = "ns", **annotations: str) -> dict[str, Any]:
    return {"name": name, "namespace": ns, "uid": f"uid-{name}", "resourceVersion": rv,
            "annotations": annotations, "labels": {"churn": rv}}  # fmt: skip


# ---------------------------------------------------------------------- object_identity

#: A ConfigMap's ADDED frame of a streaming list of metadata, as a real API server sent it.
REAL_CONFIGMAP_ADDED = bytes.fromhex(
    "000000f00a05414444454412e6010ae3016b3873000a270a0e6d6574612e6b38732e696f2f76311215506172"
    "7469616c4f626a6563744d6574616461746112af010aac010a09636d2d30303032353012001a0862656e6368"
    "2d303022002a2434653236633633312d636166362d343736652d396234622d35313833366333373163636432"
    "033532323800420808d0d8d1d80610008a01590a0f6c6966656379636c652d62656e63681206557064617465"
    "1a027631220808d0d8d1d806100032084669656c647356313a240a227b22663a64617461223a7b222e223a7b"
    "7d2c22663a7061796c6f6164223a7b7d7d7d42001a002200"
)

names = st.text(alphabet="abcdefghijklmnopqrstuvwxyz0123456789-.", min_size=1, max_size=300)


@given(name=names, ns=st.text(max_size=70), rv=st.integers(1, 2**63).map(str))
def test_identity_is_what_the_decoder_reads(name: str, ns: str, rv: str) -> None:
    raw = metadata_frame("MODIFIED", {"name": name, "namespace": ns, "resourceVersion": rv})
    metadata = decode_watch_event(*body(raw))["object"]["metadata"]
    assert object_identity(*body(raw)) == (
        metadata["name"],
        metadata.get("namespace", ""),
        metadata["resourceVersion"],
    )


@given(name=names, ns=st.text(max_size=70), rv=st.integers(1, 2**63).map(str))
def test_the_unrolled_read_agrees_with_the_field_loop(name: str, ns: str, rv: str) -> None:
    """The listing's read of an ObjectMeta laid out as Go writes it, without a loop, gives
    what the loop over its fields gives, and declines (None) only for a field of 128 bytes or
    more."""
    raw = metadata_frame("ADDED", {"name": name, "namespace": ns, "resourceVersion": rv})
    located = frame_names._metadata_as_go_writes_it(*body(raw))
    assert located is not None
    fast = frame_names._identity_as_go_writes_it(bytearray(raw), *located)
    assert fast == frame_names._identity_fields(bytearray(raw), *located) or fast is None
    short = len(name.encode()) < 128 and len(ns.encode()) < 128
    assert (fast is not None) == short


def test_the_unrolled_read_takes_a_real_api_server_frame() -> None:
    """A ConfigMap's ADDED frame of a streaming list, as a real API server sent it."""
    raw = REAL_CONFIGMAP_ADDED
    located = frame_names._metadata_as_go_writes_it(*body(raw))
    assert located is not None
    unrolled = frame_names._identity_as_go_writes_it(bytearray(raw), *located)
    assert unrolled == ("cm-000250", "bench-00", "522")
    assert object_identity(*body(raw)) == ("cm-000250", "bench-00", "522")


@pytest.mark.parametrize(
    "raw",
    [
        metadata_frame("MODIFIED", {"name": "a", "namespace": "ns"}),  # no resourceVersion
        metadata_frame("MODIFIED", {"namespace": "ns", "resourceVersion": "5"}),  # no name
        frame("MODIFIED", b"k9s\x00" + b"\x0a\x00"),  # not the protobuf magic
        metadata_frame("MODIFIED", {"name": "a", "resourceVersion": "5"})[:30],  # cut short
        len(b"\x0a\x08MODIFIED").to_bytes(4, "big") + b"\x0a\x08MODIFIED",  # no object
        REAL_BOOKMARK,  # a bookmark has no name
    ],
)
def test_identity_is_none_unless_the_frame_holds_it(raw: bytes) -> None:
    assert object_identity(*body(raw)) is None


# ---------------------------------------------------------------------- object_names

#: Strings a name, generateName or namespace may hold in a frame, DNS names and others: upper
#: case, the bytes of the keys that follow a name ("\x12", "\x1a", '"'), any text.
any_text = st.one_of(names, st.text(max_size=140), st.sampled_from(["a\x12\x00\x1a", 'b"', "X"]))


@given(name=any_text, generate=any_text | st.just(""), ns=any_text | st.just(""))
def test_names_are_what_the_decoder_reads(name: str, generate: str, ns: str) -> None:
    """``object_names`` (one pattern match for DNS names, the field read otherwise) gives
    the namespace and name the full decoder reads, or None exactly when ``object_identity``
    does."""
    meta = {"name": name, "generateName": generate, "namespace": ns, "resourceVersion": "9"}
    raw = metadata_frame("ADDED", meta)
    identity = object_identity(*body(raw))
    if identity is None:
        assert object_names(*body(raw)) is None
        return
    metadata = decode_watch_event(*body(raw))["object"]["metadata"]
    assert object_names(*body(raw)) == (metadata.get("namespace", ""), metadata["name"])


def test_names_of_a_real_api_server_frame_take_one_match() -> None:
    raw = REAL_CONFIGMAP_ADDED
    assert frame_names._NAMES_AS_GO_WRITES_THEM.match(*body(raw)) is not None
    assert object_names(*body(raw)) == ("bench-00", "cm-000250")


@pytest.mark.parametrize(
    ("name", "generate", "ns"),
    [
        ('ab\x12\x00\x1a\x02cd"x', "", "ns"),  # reads as name "ab", namespace "cd"
        ("web", 'x\x1a\x01y"', "ns"),  # reads as generateName "x", namespace "y"
        ("web", "", 'a"b'),  # reads as namespace "a"
    ],
)
def test_a_name_that_looks_like_the_next_key_is_read_field_by_field(
    name: str, generate: str, ns: str
) -> None:
    """The pattern matches these frames with the wrong bounds; the lengths it checks tell."""
    meta = {"name": name, "generateName": generate, "namespace": ns, "resourceVersion": "9"}
    raw = metadata_frame("ADDED", meta)
    assert frame_names._NAMES_AS_GO_WRITES_THEM.match(*body(raw)) is not None
    assert object_names(*body(raw)) == (ns, name)


# ---------------------------------------------------------------------- the filter


@dataclass
class NameKeeper:
    kept: set[tuple[str, str]] = field(default_factory=set)
    skips: bool = True

    def kept_test(self) -> Callable[[str, str], bool] | None:
        return (lambda namespace, name: (namespace, name) in self.kept) if self.skips else None


CASES = [
    # (what, frame, keeper, dropped)
    ("modified, unannotated", metadata_frame("MODIFIED", plain("a", "7")), NameKeeper(), True),
    ("added, unannotated", metadata_frame("ADDED", plain("a", "7")), NameKeeper(), True),
    ("deleted", metadata_frame("DELETED", plain("a", "7")), NameKeeper(), False),
    ("bookmark", REAL_BOOKMARK, NameKeeper(), False),
    (
        "annotated",
        metadata_frame("MODIFIED", plain("a", "7", **{ANNOTATION: "1h"})),
        NameKeeper(),
        False,
    ),
    ("stored", metadata_frame("MODIFIED", plain("a", "7")), NameKeeper({("ns", "a")}), False),
    (
        "stored elsewhere",
        metadata_frame("MODIFIED", plain("a", "7")),
        NameKeeper({("b", "a")}),
        True,
    ),
    (
        "a policy selects",
        metadata_frame("MODIFIED", plain("a", "7")),
        NameKeeper(skips=False),
        False,
    ),
    ("a JSON line", b'....{"type":"MODIFIED","object":{}}', NameKeeper(), False),
    ("broken", metadata_frame("MODIFIED", plain("a", "7"))[:40], NameKeeper(), False),
]


@pytest.mark.parametrize(("what", "raw", "keeper", "dropped"), CASES, ids=[c[0] for c in CASES])
def test_the_filter_drops_only_events_that_change_nothing_kept(
    what: str, raw: bytes, keeper: NameKeeper, dropped: bool
) -> None:
    skipped: list[tuple[str, str]] = []
    decode = UnkeptEvents(keeper, lambda kind, rv: skipped.append((kind, rv)))(*body(raw))
    assert decode is not dropped
    if dropped:
        assert skipped == [(raw[6 : 6 + raw[5]].decode(), "7")]
    else:
        assert skipped == []


@pytest.mark.parametrize(("what", "raw", "keeper", "dropped"), CASES, ids=[c[0] for c in CASES])
def test_the_list_filter_drops_what_the_watch_filter_drops_of_added_frames(
    what: str, raw: bytes, keeper: NameKeeper, dropped: bool
) -> None:
    """``UnkeptListed`` refuses the ADDED frames ``UnkeptEvents`` refuses, and passes every
    other frame (a streaming list's initial events are ADDED; a MODIFIED one is decoded)."""
    added = raw.startswith(b"\x0a\x05ADDED", 4)
    assert UnkeptListed(keeper)(*body(raw)) is not (dropped and added)


def test_the_list_filter_asks_the_keeper_once_per_list() -> None:
    """One list keeps the test it was given at its first frame: a change that could change
    what it drops lists the type again, with a new filter."""
    asked: list[bool] = []

    @dataclass
    class Counting(NameKeeper):
        def kept_test(self) -> Callable[[str, str], bool] | None:
            asked.append(True)
            return super().kept_test()

    keeper = Counting(kept={("ns", "kept")})
    listed = UnkeptListed(keeper)
    frames = [metadata_frame("ADDED", plain(name, "1")) for name in ("a", "kept", "b")]
    assert [listed(*body(raw)) for raw in frames] == [False, True, False]
    keeper.skips = False  # would decode everything from now on
    assert listed(*body(frames[0])) is False
    assert asked == [True]
    assert UnkeptListed(keeper)(*body(frames[0])) is True  # the next list asks again


# ---------------------------------------------------------------------- the informer


@dataclass
class FrameSource:
    """A metadata source whose watches are protobuf frames read by the real reader."""

    lists: list[dict[str, Any]]
    watches: list[list[bytes]]
    decoded: list[str] = field(default_factory=list)
    #: Streaming lists, each a body read by the real reader.
    streams: list[ScriptedBody] = field(default_factory=list)
    #: Streaming lists opened (answered, not necessarily read).
    opened: int = 0

    async def list_metadata(self, resource: ResourceType, **kwargs: Any) -> dict[str, Any]:
        return self.lists.pop(0)

    def watch_metadata(
        self, resource: ResourceType, *, decode_if: EventFilter | None = None, **kwargs: Any
    ) -> AsyncIterator[dict[str, Any]]:
        return self._read(self.watches.pop(0), decode_if)

    def watch_list_metadata(
        self,
        resource: ResourceType,
        *,
        decode_if: EventFilter | None = None,
        before_reading: Callable[[], Awaitable[None]] | None = None,
        **kwargs: Any,
    ) -> AsyncIterator[dict[str, Any]]:
        assert self.streams, "paged lists only"
        return self._stream(self.streams.pop(0), decode_if, before_reading)

    async def _stream(
        self,
        body: ScriptedBody,
        decode_if: EventFilter | None,
        before_reading: Callable[[], Awaitable[None]] | None = None,
    ) -> AsyncIterator[dict[str, Any]]:
        self.opened += 1  # the request is answered: as the client does, then wait
        if before_reading is not None:
            await before_reading()
        async for event in protobuf_events(body, what="watch", decode_if=decode_if):
            self.decoded.append(event["object"].get("metadata", {}).get("name", ""))
            yield event

    async def _read(
        self, frames: list[bytes], decode_if: EventFilter | None
    ) -> AsyncIterator[dict[str, Any]]:
        events = protobuf_events(reader(*frames), what="watch", decode_if=decode_if)
        async for event in events:
            self.decoded.append(event["object"].get("metadata", {}).get("name", ""))
            yield event


class Selecting:
    """Policy views that select ConfigMaps (judging no object a candidate)."""

    def watches(self, resource: ResourceType) -> bool:
        return resource == CONFIGMAPS

    def view(
        self,
        resource: ResourceType,
        metadata: Mapping[str, Any],
        fields: Mapping[str, Any] | None = None,
        read: frozenset[tuple[str, ...]] | None = None,
    ) -> ObjectView | None:
        return None

    def reads(self, resource: ResourceType) -> frozenset[tuple[str, ...]]:
        return frozenset()

    def name_test(self, resource: ResourceType) -> NameTest | None:
        return None if self.watches(resource) else never_kept  # as a label selector


@dataclass
class Naming(Selecting):
    """Policy views whose policies name objects: those are kept, no other may be."""

    names: frozenset[str]

    def view(
        self,
        resource: ResourceType,
        metadata: Mapping[str, Any],
        fields: Mapping[str, Any] | None = None,
        read: frozenset[tuple[str, ...]] | None = None,
    ) -> ObjectView | None:
        if not self.watches(resource) or metadata["name"] not in self.names:
            return None
        return object_view(resource, metadata)

    def name_test(self, resource: ResourceType) -> NameTest | None:
        names = self.names if self.watches(resource) else frozenset()
        return lambda namespace, name: name in names


@dataclass
class Arriving(Naming):
    """Policies that name objects, in force once they have :attr:`arrived`."""

    arrived: bool = False

    def watches(self, resource: ResourceType) -> bool:
        return self.arrived and super().watches(resource)


def informer_on(
    source: FrameSource,
    cache: MetadataCache,
    recorder: Recorder,
    seen: list[int] | None = None,
    gate: Callable[[], Awaitable[object]] | None = None,
) -> tuple[Informer, CountingMetrics]:
    metrics = CountingMetrics()
    on_seen = None if seen is None else (lambda: seen.append(1))
    keeper = CacheWriter(CONFIGMAPS, None, cache, recorder, on_seen)
    informer = Informer(
        resource=CONFIGMAPS,
        namespace=None,
        projection=MetadataProjection(source),
        keeper=keeper,
        clock=FakeClock(),
        metrics=metrics,
        settings=SETTINGS,
        rng=random.Random(1),
        gate=gate,
    )
    return informer, metrics


LISTED = {
    "metadata": {"resourceVersion": "10"},
    "items": [{"metadata": plain("kept", "9", **{ANNOTATION: "1h"})}],
}
CHURN = [
    metadata_frame("MODIFIED", plain("other", "11")),
    metadata_frame("MODIFIED", plain("kept", "12")),  # its last annotation removed
    metadata_frame("MODIFIED", plain("kept", "13")),  # no longer held
    metadata_frame("ADDED", plain("new", "14")),
    metadata_frame("MODIFIED", plain("other", "15")),
]


async def test_dropped_events_move_the_version_and_the_counts_and_nothing_else() -> None:
    source = FrameSource([dict(LISTED)], [CHURN])
    cache, recorder = MetadataCache(), Recorder()
    informer, metrics = informer_on(source, cache, recorder)
    await informer.list_once()
    await informer.watch_once()
    assert source.decoded == ["kept"]  # only the event that drops it from the cache
    assert recorder.summary() == [("add", "kept", None, "9"), ("update", "kept", "9", "12")]
    assert cache.count(CONFIGMAPS) == 0
    assert informer.resource_version == "15"
    assert metrics.events == ["MODIFIED", "MODIFIED", "MODIFIED", "ADDED", "MODIFIED"]
    assert informer.delivering


@pytest.mark.parametrize("who", ["a policy selects the type", "a keeper hears every change"])
async def test_every_event_is_decoded_when_something_could_keep_or_hear_it(who: str) -> None:
    source = FrameSource([dict(LISTED)], [CHURN])
    seen: list[int] = []
    cache = MetadataCache(Selecting()) if who.startswith("a policy") else MetadataCache()
    informer, _ = informer_on(source, cache, Recorder(), seen if "hears" in who else None)
    await informer.list_once()
    await informer.watch_once()
    assert source.decoded == ["other", "kept", "kept", "new", "other"]
    assert informer.resource_version == "15"
    if "hears" in who:
        assert len(seen) == 1 + len(CHURN)  # the list, then every event


async def test_with_policies_only_the_objects_a_policy_may_keep_are_decoded() -> None:
    """A policy that names objects keeps the others' events undecoded, as without policies:
    the held object's, and the named new one's, are decoded; the rest only move the version."""
    source = FrameSource([dict(LISTED)], [CHURN])
    cache, recorder = MetadataCache(Naming(frozenset({"new"}))), Recorder()
    informer, metrics = informer_on(source, cache, recorder)
    await informer.list_once()
    await informer.watch_once()
    assert source.decoded == ["kept", "new"]
    assert cache.contains(CONFIGMAPS, "ns", "new")  # kept for the policy, unannotated
    assert not cache.contains(CONFIGMAPS, "ns", "kept")
    assert informer.resource_version == "15"
    assert metrics.events == ["MODIFIED", "MODIFIED", "MODIFIED", "ADDED", "MODIFIED"]


async def test_a_streaming_list_decodes_only_what_it_may_keep_and_counts_nothing() -> None:
    """With policies that name objects, a streaming list's initial objects that no policy
    may keep are dropped undecoded (and, as listed objects, not counted as watch events);
    annotated ones and named ones are decoded and kept."""
    body = ScriptedBody(
        metadata_frame("ADDED", plain("other", "1")),
        metadata_frame("ADDED", plain("named", "2")),
        metadata_frame("ADDED", plain("annotated", "3", **{ANNOTATION: "1h"})),
        REAL_BOOKMARK,
    )
    source = FrameSource([], [], streams=[body])
    cache = MetadataCache(Naming(frozenset({"named"})))
    informer, metrics = informer_on(source, cache, Recorder())
    await informer.stream_once()
    assert source.decoded == ["named", "annotated", ""]  # "": the bookmark
    assert cache.contains(CONFIGMAPS, "ns", "named")
    assert cache.contains(CONFIGMAPS, "ns", "annotated")
    assert metrics.events == []
    assert informer.resource_version == "62288"  # the bookmark's


async def test_a_gated_list_opens_its_request_and_reads_once_released() -> None:
    """A gated streaming list (the annotated types' at start, while the policies load)
    opens its request at once, reads nothing until released, and asks the keeper only then
    what the list keeps: here what policies that came in meanwhile name."""
    body = ScriptedBody(
        metadata_frame("ADDED", plain("other", "1")),
        metadata_frame("ADDED", plain("named", "2")),
        REAL_BOOKMARK,
    )
    source = FrameSource([], [], streams=[body])
    policies = Arriving(frozenset({"named"}))
    cache = MetadataCache(policies)  # none yet: no unannotated object would be decoded
    released = asyncio.Event()
    informer, _ = informer_on(source, cache, Recorder(), gate=released.wait)
    listing = asyncio.create_task(informer.stream_once())
    for _ in range(10):
        await asyncio.sleep(0)
    assert (source.opened, body.reads, informer.synced) == (1, 0, False)
    policies.arrived = True
    released.set()
    await asyncio.wait_for(listing, 5)
    assert source.decoded == ["named", ""]  # "": the bookmark
    assert cache.contains(CONFIGMAPS, "ns", "named")
    assert informer.synced


async def test_a_relist_decodes_what_the_cache_holds_and_drops_the_rest() -> None:
    """A streaming list while the cache holds objects (a relist) decodes those, so that the
    list's synthesised deletes see them, and drops the unannotated objects it holds not."""
    first = ScriptedBody(
        metadata_frame("ADDED", plain("kept", "1", **{ANNOTATION: "1h"})), REAL_BOOKMARK
    )
    again = ScriptedBody(
        metadata_frame("ADDED", plain("other", "4")),
        metadata_frame("ADDED", plain("kept", "5")),  # its annotation went meanwhile
        REAL_BOOKMARK,
    )
    source = FrameSource([], [], streams=[first, again])
    cache, recorder = MetadataCache(), Recorder()
    informer, _ = informer_on(source, cache, recorder)
    await informer.stream_once()
    await informer.stream_once()
    assert source.decoded == ["kept", "", "kept", ""]
    assert not cache.contains(CONFIGMAPS, "ns", "kept")
    assert recorder.summary()[-1] == ("update", "kept", "1", "5")


async def test_a_watch_of_dropped_events_only_counts_as_answered() -> None:
    source = FrameSource([dict(LISTED)], [CHURN[:1] * 3])
    informer, _ = informer_on(source, MetadataCache(), Recorder())
    await informer.list_once()
    informer._failures = 2  # as after two failed watches
    await asyncio.wait_for(informer.watch_once(), 5)
    assert informer.failures == 0
    assert source.decoded == []


def test_the_cache_contains_exactly_what_it_stores() -> None:
    from lifecycle_controller.controller.watch.cache import CachedObject
    from lifecycle_controller.core.objects.resources import ObjectKey

    cache = MetadataCache()
    key = ObjectKey(CONFIGMAPS, "ns", "a")
    stored = CachedObject.from_metadata(plain("a", "1", **{ANNOTATION: "1h"}))
    assert not cache.contains(CONFIGMAPS, "ns", "a")
    cache.put(key, stored)
    assert cache.contains(CONFIGMAPS, "ns", "a")
    assert not cache.contains(CONFIGMAPS, "other", "a")
    cache.delete(ObjectKey(CONFIGMAPS, "ns", "b"))  # not stored: changes nothing
    assert cache.contains(CONFIGMAPS, "ns", "a")
    cache.forget(key)
    assert not cache.contains(CONFIGMAPS, "ns", "a")
    cache.put(key, stored)
    cache.drop_type(CONFIGMAPS)
    assert not cache.contains(CONFIGMAPS, "ns", "a")


def test_the_kept_names_follow_the_cache_across_a_dropped_type() -> None:
    """The filters bind the live set of stored names once per policy set: it follows every
    put and delete, and a type dropped and listed again (an informer restarted)."""
    from lifecycle_controller.controller.watch.cache import CachedObject
    from lifecycle_controller.core.objects.resources import ObjectKey

    cache = MetadataCache()
    kept = cache.kept_names(CONFIGMAPS)
    key = ObjectKey(CONFIGMAPS, "ns", "a")
    cache.put(key, CachedObject.from_metadata(plain("a", "1", **{ANNOTATION: "1h"})))
    assert ("ns", "a") in kept
    cache.drop_type(CONFIGMAPS)
    assert ("ns", "a") not in kept
    cache.put(key, CachedObject.from_metadata(plain("a", "2", **{ANNOTATION: "1h"})))
    assert ("ns", "a") in kept
    cache.delete(key)
    assert not kept


# ---------------------------------------------------------------------- resting after drops


class ScriptedBody:
    """A body that hands over one scripted chunk per read and records each rest."""

    def __init__(self, *chunks: bytes) -> None:
        self._chunks = list(chunks)
        self.rests: list[float] = []
        self.reads = 0

    async def readany(self) -> bytes:
        self.reads += 1
        return self._chunks.pop(0) if self._chunks else b""

    async def rest(self, seconds: float) -> None:
        self.rests.append(seconds)


def churn(name: str, rv: str) -> bytes:
    return metadata_frame("MODIFIED", plain(name, rv))


def drop_unannotated(raw: bytes | bytearray, start: int, end: int) -> bool:
    return raw.find(PREFIX.encode(), start, end) >= 0


@dataclass
class DropUnannotated:
    """A resting filter that drops every frame without a lifecycle annotation."""

    rest_after_refused: float

    def __call__(self, raw: bytes | bytearray, start: int, end: int) -> bool:
        return drop_unannotated(raw, start, end)


@dataclass
class KeepAll:
    """A resting filter that refuses nothing."""

    rest_after_refused: float

    def __call__(self, raw: bytes | bytearray, start: int, end: int) -> bool:
        return True


async def names_read(body: Any, decode_if: EventFilter) -> list[str]:
    events = protobuf_events(body, what="watch", decode_if=decode_if)
    return [event["object"]["metadata"]["name"] async for event in events]


async def test_a_read_whose_every_frame_was_dropped_leaves_the_connection_unread() -> None:
    kept = metadata_frame("MODIFIED", plain("kept", "9", **{ANNOTATION: "1h"}))
    body = ScriptedBody(
        churn("a", "1") + churn("b", "2"),  # all dropped: a rest
        churn("c", "3") + kept,  # one decoded: no rest
        kept,  # decoded: no rest
        churn("d", "4"),  # dropped: a rest
    )
    assert await names_read(body, DropUnannotated(0.02)) == ["kept", "kept"]
    assert body.rests == [0.02, 0.02]


async def test_no_rest_when_the_filter_says_zero_cannot_rest_or_keeps_everything() -> None:
    zero = ScriptedBody(churn("a", "1"), churn("b", "2"))
    assert await names_read(zero, DropUnannotated(0.0)) == []
    plain_filter = ScriptedBody(churn("a", "1"), churn("b", "2"))
    assert await names_read(plain_filter, drop_unannotated) == []
    everything = ScriptedBody(churn("a", "1"), churn("b", "2"))
    assert await names_read(everything, KeepAll(0.02)) == ["a", "b"]
    assert zero.rests == plain_filter.rests == everything.rests == []


async def test_a_body_that_cannot_rest_is_read_as_before() -> None:
    stream = reader(churn("a", "1"), churn("b", "2"))  # aiohttp's StreamReader: no rest()
    assert await names_read(stream, DropUnannotated(0.02)) == []


async def test_a_partial_frame_never_counts_as_a_dropped_read() -> None:
    whole = churn("a", "1")
    body = ScriptedBody(whole[:10], whole[10:])  # nothing complete in the first read
    assert await names_read(body, DropUnannotated(0.02)) == []
    assert body.rests == [0.02]  # only after the read that completed (and dropped) a frame


async def test_a_streaming_list_rests_only_after_its_initial_events() -> None:
    """While a streaming list's initial events come, the stream never rests (a list reads as
    fast as it comes), even when the keeper drops them; after them it rests as the unkept
    filter says."""
    body = ScriptedBody(
        metadata_frame("ADDED", plain("listed", "1")),  # dropped unannotated, listing
        REAL_BOOKMARK,
        churn("later", "3"),  # dropped as unkept: a rest
    )
    source = FrameSource([], [], streams=[body])
    informer, _ = informer_on(source, MetadataCache(), Recorder())
    await informer.stream_once()
    assert source.decoded == [""]  # the bookmark; the listed object was dropped undecoded
    assert SETTINGS.watch_rest > 0
    assert body.rests == [SETTINGS.watch_rest]
