"""The strict duration grammar (docs/annotations.md#durations) and Go's Duration.String()."""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st

from lifecycle_controller.core import (
    DurationError,
    format_go_duration,
    parse_duration,
    parse_max_delete_ttl,
    parse_restart_every,
)
from tests.core.duration_vectors import REJECTED

from .support import DAY, HOUR, MINUTE, SECOND


@pytest.mark.parametrize(("value", "message"), REJECTED, ids=[repr(v)[:40] for v, _ in REJECTED])
def test_ref_036_extended_duration_rejects_invalid_input(value: str, message: str) -> None:
    with pytest.raises(DurationError) as caught:
        parse_duration(value)
    assert str(caught.value) == message


@pytest.mark.parametrize(
    ("value", "expected"),
    [
        ("1d", DAY),
        ("25h", 25 * HOUR),
        ("5m", 5 * MINUTE),
        ("106751d", 106_751 * DAY),
        ("9223372036s", 9_223_372_036 * SECOND),
        ("2562047h", 2_562_047 * HOUR),
        ("153722867m", 153_722_867 * MINUTE),
        ("1m", MINUTE),
        ("15m", 15 * MINUTE),
        ("7d", 7 * DAY),
        ("0001s", SECOND),
        ("00000000000000000000000001h", HOUR),
    ],
)
def test_ref_037_extended_duration_accepts_positive_input(value: str, expected: int) -> None:
    assert parse_duration(value) == expected


@pytest.mark.parametrize(
    ("value", "message"),
    [
        ("0s", "duration must be positive"),
        ("-1m", "duration must be positive and unsigned"),
        ("59s", "duration must be at least 1m0s"),
        ("768614336404564651d", "number of days is too large: 768614336404564651d"),
    ],
)
def test_ref_049_restart_every_validation_messages(value: str, message: str) -> None:
    with pytest.raises(DurationError) as caught:
        parse_restart_every(value)
    assert str(caught.value) == message


def test_ref_050_restart_every_minimum_is_accepted() -> None:
    assert parse_restart_every("1m") == MINUTE
    assert parse_restart_every("60s") == MINUTE


@pytest.mark.parametrize(
    ("value", "expected"),
    [("", None), ("0", None), ("0s", None), ("00d", None), ("30d", 30 * DAY), ("1h", HOUR)],
)
def test_max_delete_ttl_flag_empty_or_zero_disables(value: str, expected: int | None) -> None:
    assert parse_max_delete_ttl(value) == expected


@pytest.mark.parametrize("value", ["-1h", "-0", "+30d", "30 d", "1.5d", "abc"])
def test_max_delete_ttl_flag_rejects_signed_and_malformed_values(value: str) -> None:
    with pytest.raises(DurationError):
        parse_max_delete_ttl(value)


@pytest.mark.parametrize(
    ("nanoseconds", "text"),
    [
        (0, "0s"),
        (1, "1ns"),
        (999, "999ns"),
        (1_000, "1\u00b5s"),
        (1_500, "1.5\u00b5s"),
        (1_000_000, "1ms"),
        (100_000_000, "100ms"),
        (1_500_000_000, "1.5s"),
        (SECOND, "1s"),
        (MINUTE, "1m0s"),
        (HOUR, "1h0m0s"),
        (30 * DAY, "720h0m0s"),
        (31 * DAY, "744h0m0s"),
        (DAY + 2 * MINUTE + 3 * SECOND + 4, "24h2m3.000000004s"),
        (-90 * SECOND, "-1m30s"),
        ((1 << 63) - 1, "2562047h47m16.854775807s"),
    ],
)
def test_go_duration_string(nanoseconds: int, text: str) -> None:
    assert format_go_duration(nanoseconds) == text


@given(st.integers(min_value=1, max_value=106_751), st.sampled_from(["s", "m", "h", "d"]))
def test_durations_in_range_scale_exactly(count: int, unit: str) -> None:
    scale = {"s": SECOND, "m": MINUTE, "h": HOUR, "d": DAY}[unit]
    assert parse_duration(f"{count}{unit}") == count * scale


@given(st.text(max_size=12))
def test_parse_duration_raises_only_duration_error(value: str) -> None:
    try:
        result = parse_duration(value)
    except DurationError:
        return
    assert 0 < result <= (1 << 63) - 1
