"""The strict duration grammar (REFERENCE §1.3, §4) and Go's Duration.String()."""

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

from .support import DAY, HOUR, MINUTE, SECOND

# Every value REFERENCE §1.3 lists as rejected, with the text the reference produces.
REJECTED = [
    ("", 'invalid duration format: ""'),
    ("0", 'invalid duration format: "0"'),
    ("0s", "duration must be positive"),
    ("0d", "duration must be positive"),
    ("-1h", "duration must be positive and unsigned"),
    ("+1h", "duration must be positive and unsigned"),
    ("-1d2h", "duration must be positive and unsigned"),
    ("+1d", "duration must be positive and unsigned"),
    ("1d-25h", "duration must be positive and unsigned"),
    ("1d-24h", "duration must be positive and unsigned"),
    ("1d-1h", "duration must be positive and unsigned"),
    ("1d+1h", "duration must be positive and unsigned"),
    ("1h-1d", "duration must be positive and unsigned"),
    ("1.5d", 'invalid duration format: "1.5d"'),
    ("1.5d2h", 'invalid duration format: "1.5d2h"'),
    (".5d2h", 'invalid duration format: ".5d2h"'),
    ("1h2", 'invalid duration format: "1h2"'),
    ("1dgarbage", 'invalid duration format: "1dgarbage"'),
    ("1w", 'invalid duration format: "1w"'),
    ("1d2h", 'invalid duration format: "1d2h"'),
    ("2h30m", 'invalid duration format: "2h30m"'),
    ("1d0.5h", 'invalid duration format: "1d0.5h"'),
    ("0d1h", 'invalid duration format: "0d1h"'),
    ("1d2d", 'invalid duration format: "1d2d"'),
    ("1h0s", 'invalid duration format: "1h0s"'),
    (" 1d", 'invalid duration format: " 1d"'),
    ("1d ", 'invalid duration format: "1d "'),
    ("1 d", 'invalid duration format: "1 d"'),
    ("1d 2h", 'invalid duration format: "1d 2h"'),
    ("1\th", 'invalid duration format: "1\\th"'),
    ("1\nd", 'invalid duration format: "1\\nd"'),
    ("1e3s", 'invalid duration format: "1e3s"'),
    ("768614336404564651d", "number of days is too large: 768614336404564651d"),
    ("106752d", "number of days is too large: 106752d"),
    ("2562048h", 'time: invalid duration "2562048h"'),
    ("153722868m", 'time: invalid duration "153722868m"'),
    ("106751d24h", 'invalid duration format: "106751d24h"'),
    ("106751d1d", 'invalid duration format: "106751d1d"'),
    ("9223372037s", 'time: invalid duration "9223372037s"'),
    ("500ms", 'invalid duration format: "500ms"'),
    ("1us", 'invalid duration format: "1us"'),
    ("1\u00b5s", 'invalid duration format: "1\u00b5s"'),
    ("1\u03bcs", 'invalid duration format: "1\u03bcs"'),
    ("1ns", 'invalid duration format: "1ns"'),
    ("1.5s", 'invalid duration format: "1.5s"'),
    ("1.5m", 'invalid duration format: "1.5m"'),
    ("1.5h", 'invalid duration format: "1.5h"'),
    (".5s", 'invalid duration format: ".5s"'),
    (".5h", 'invalid duration format: ".5h"'),
    ("1.h", 'invalid duration format: "1.h"'),
    ("60000ms", 'invalid duration format: "60000ms"'),
    ("1D", 'invalid duration format: "1D"'),
    ("\u0661s", 'invalid duration format: "\u0661s"'),  # Arabic-Indic digit is not [0-9]
    ("1s\n", 'invalid duration format: "1s\\n"'),  # Go's `$` is end of text, not of line
    ("9" * 5000 + "d", "number of days is too large: " + "9" * 5000 + "d"),
    ("9" * 5000 + "s", 'time: invalid duration "' + "9" * 5000 + 's"'),
]


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
