"""The compact ``matchedAt`` record: round trips, rounding up, the oldest kept, garbage refused."""

from __future__ import annotations

import uuid

import pytest
from hypothesis import given
from hypothesis import strategies as st

from lifecycle_controller.core.policy.matched_record import (
    MAX_ENTRIES,
    RecordError,
    decode,
    encode,
)

S = 1_000_000_000
U1, U2, U3 = (str(uuid.UUID(int=n)) for n in (1, 2, 3))


@pytest.mark.parametrize(
    ("entries", "limit", "expected", "left_out"),
    [
        ([], MAX_ENTRIES, {}, 0),
        ([(U1, 5 * S)], MAX_ENTRIES, {U1: 5 * S}, 0),
        ([(U1, 5 * S + 1)], MAX_ENTRIES, {U1: 6 * S}, 0),  # rounded up: never earlier
        ([(U1, 9 * S), (U2, 3 * S), (U3, 7 * S)], 2, {U2: 3 * S, U3: 7 * S}, 1),  # oldest
        ([("not-a-uuid", S), (U1, S)], MAX_ENTRIES, {U1: S}, 1),
        ([(U1, -S), (U2, 2**33 * S)], MAX_ENTRIES, {}, 2),  # out of the 4-byte range
    ],
)
def test_encode_then_decode(
    entries: list[tuple[str, int]], limit: int, expected: dict[str, int], left_out: int
) -> None:
    encoded = encode(entries, limit=limit)
    assert decode(encoded.text) == expected
    assert encoded.left_out == left_out


@pytest.mark.parametrize("text", ["%%%", "AAAA", "é"])
def test_garbled_text_is_refused(text: str) -> None:
    with pytest.raises(RecordError):
        decode(text)


def test_a_full_record_fits_a_configmap() -> None:
    entries = [(str(uuid.UUID(int=n)), n * S) for n in range(MAX_ENTRIES + 10)]
    encoded = encode(entries)
    assert len(encoded.text) < 920_000
    assert encoded.left_out == 10


@given(st.dictionaries(st.uuids().map(str), st.integers(0, (2**32 - 1) * S)))
def test_a_record_never_gives_back_an_earlier_instant(entries: dict[str, int]) -> None:
    back = decode(encode(entries.items()).text)
    assert back.keys() == entries.keys()
    assert all(0 <= back[uid] - entries[uid] < S for uid in entries)
