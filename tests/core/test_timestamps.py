"""RFC 3339 parsing like Go's time.Parse, and the formats the controller writes.

See docs/annotations.md#timestamps and docs/annotations.md#annotations-the-controller-writes.
"""

from __future__ import annotations

import datetime as dt

import pytest
from hypothesis import given
from hypothesis import strategies as st

from lifecycle_controller.core import (
    TimestampError,
    format_rfc3339_nano,
    format_rfc3339_seconds,
    parse_rfc3339,
)
from lifecycle_controller.core.text.timestamps import GO_ZERO_TIME_NS, days_from_civil

LAYOUT = '"2006-01-02T15:04:05Z07:00"'

# The instant 2026-10-10T03:00:00Z, checked against Python's datetime independently.
OCT_10 = int(dt.datetime(2026, 10, 10, 3, tzinfo=dt.UTC).timestamp()) * 1_000_000_000


@pytest.mark.parametrize(
    ("value", "expected"),
    [
        ("2026-10-10T03:00:00Z", OCT_10),
        ("2026-10-10T05:00:00+02:00", OCT_10),
        ("2026-10-09T23:30:00-03:30", OCT_10),
        ("2026-10-10T03:00:00.5Z", OCT_10 + 500_000_000),
        ("2026-10-10T03:00:00.123456789Z", OCT_10 + 123_456_789),
        # Go keeps nine digits and ignores the rest (no rounding).
        ("2026-10-10T03:00:00.1234567899999Z", OCT_10 + 123_456_789),
        ("2026-10-10T03:00:00,25Z", OCT_10 + 250_000_000),  # Go accepts a comma too
        ("2026-10-10T3:00:00Z", OCT_10),  # and a one-digit hour
        ("2026-10-11T03:00:00+24:00", OCT_10),  # and offsets up to 24 hours
        ("2028-02-29T00:00:00Z", int(dt.datetime(2028, 2, 29, tzinfo=dt.UTC).timestamp()) * 10**9),
        ("0001-01-01T00:00:00Z", GO_ZERO_TIME_NS),
        ("1970-01-01T00:00:00Z", 0),
        ("1969-12-31T23:59:59.999999999Z", -1),
    ],
)
def test_as_03_valid_offsets_and_fractions_are_absolute_instants(value: str, expected: int) -> None:
    assert parse_rfc3339(value) == expected


@pytest.mark.parametrize(
    ("value", "message"),
    [
        ("x", f'parsing time "x" as {LAYOUT}: cannot parse "x" as "2006"'),
        ("", f'parsing time "" as {LAYOUT}: cannot parse "" as "2006"'),
        (
            "2026-10-10T03:00:00",
            f'parsing time "2026-10-10T03:00:00" as {LAYOUT}: cannot parse "" as "Z07:00"',
        ),
        (
            "2026-10-10 03:00:00Z",
            f'parsing time "2026-10-10 03:00:00Z" as {LAYOUT}: cannot parse " 03:00:00Z" as "T"',
        ),
        (
            "2026-10-10T03:00:00+0000",
            f'parsing time "2026-10-10T03:00:00+0000" as {LAYOUT}: '
            'cannot parse "+0000" as "Z07:00"',
        ),
        ("2026-10-10", f'parsing time "2026-10-10" as {LAYOUT}: cannot parse "" as "T"'),
        (
            "2026-10-10t03:00:00Z",
            f'parsing time "2026-10-10t03:00:00Z" as {LAYOUT}: cannot parse "t03:00:00Z" as "T"',
        ),
        (
            "2026-10-10T03:00:00z",
            f'parsing time "2026-10-10T03:00:00z" as {LAYOUT}: cannot parse "z" as "Z07:00"',
        ),
        (
            "2026-10-10T03:00Z",
            f'parsing time "2026-10-10T03:00Z" as {LAYOUT}: cannot parse "Z" as ":"',
        ),
        (
            "2026-1-10T03:00:00Z",
            f'parsing time "2026-1-10T03:00:00Z" as {LAYOUT}: '
            'cannot parse "1-10T03:00:00Z" as "01"',
        ),
        (
            "26-10-10T03:00:00Z",
            f'parsing time "26-10-10T03:00:00Z" as {LAYOUT}: '
            'cannot parse "26-10-10T03:00:00Z" as "2006"',
        ),
        (
            "2026-aa-10T03:00:00Z",
            f'parsing time "2026-aa-10T03:00:00Z" as {LAYOUT}: '
            'cannot parse "aa-10T03:00:00Z" as "01"',
        ),
        (
            "2026-10-10T03:xx:00Z",
            f'parsing time "2026-10-10T03:xx:00Z" as {LAYOUT}: cannot parse "xx:00Z" as "04"',
        ),
        ("2026-02-30T00:00:00Z", 'parsing time "2026-02-30T00:00:00Z": day out of range'),
        ("2027-02-29T00:00:00Z", 'parsing time "2027-02-29T00:00:00Z": day out of range'),
        ("2026-04-31T00:00:00Z", 'parsing time "2026-04-31T00:00:00Z": day out of range'),
        ("2026-10-00T00:00:00Z", 'parsing time "2026-10-00T00:00:00Z": day out of range'),
        ("2026-13-01T00:00:00Z", 'parsing time "2026-13-01T00:00:00Z": month out of range'),
        ("2026-00-01T00:00:00Z", 'parsing time "2026-00-01T00:00:00Z": month out of range'),
        ("2026-10-10T24:00:00Z", 'parsing time "2026-10-10T24:00:00Z": hour out of range'),
        ("2026-10-10T23:60:00Z", 'parsing time "2026-10-10T23:60:00Z": minute out of range'),
        ("2026-10-10T23:59:60Z", 'parsing time "2026-10-10T23:59:60Z": second out of range'),
        (
            "2026-10-10T03:00:00+25:00",
            'parsing time "2026-10-10T03:00:00+25:00": time zone offset hour out of range',
        ),
        (
            "2026-10-10T03:00:00+25:61",
            'parsing time "2026-10-10T03:00:00+25:61": time zone offset minute out of range',
        ),
        (
            "2026-10-10T03:00:00Z ",
            'parsing time "2026-10-10T03:00:00Z ": extra text: " "',
        ),
        (
            "2026-10-10T03:00:00.Z",
            f'parsing time "2026-10-10T03:00:00.Z" as {LAYOUT}: cannot parse ".Z" as "Z07:00"',
        ),
        (
            "2026-10-10T03:00:00 01:00",
            f'parsing time "2026-10-10T03:00:00 01:00" as {LAYOUT}: '
            'cannot parse " 01:00" as "Z07:00"',
        ),
        (
            "2026-10-10T03:00:00+0a:00",
            f'parsing time "2026-10-10T03:00:00+0a:00" as {LAYOUT}: '
            'cannot parse "+0a:00" as "Z07:00"',
        ),
        (
            "2026-10-10T03:00:00Z\u00e9",
            'parsing time "2026-10-10T03:00:00Z\\xc3\\xa9": extra text: "\\xc3\\xa9"',
        ),
        (
            "\u0662026-10-10T03:00:00Z",
            f'parsing time "\\xd9\\xa2026-10-10T03:00:00Z" as {LAYOUT}: '
            'cannot parse "\\xd9\\xa2026-10-10T03:00:00Z" as "2006"',
        ),
    ],
)
def test_as_03_non_rfc3339_values_are_rejected_with_go_texts(value: str, message: str) -> None:
    with pytest.raises(TimestampError) as caught:
        parse_rfc3339(value)
    assert str(caught.value) == message


@pytest.mark.parametrize(
    ("instant", "seconds", "nano"),
    [
        (OCT_10, "2026-10-10T03:00:00Z", "2026-10-10T03:00:00Z"),
        (OCT_10 + 999_999_999, "2026-10-10T03:00:00Z", "2026-10-10T03:00:00.999999999Z"),
        (OCT_10 + 500_000_000, "2026-10-10T03:00:00Z", "2026-10-10T03:00:00.5Z"),
        (OCT_10 + 120_000, "2026-10-10T03:00:00Z", "2026-10-10T03:00:00.00012Z"),
        (-1, "1969-12-31T23:59:59Z", "1969-12-31T23:59:59.999999999Z"),
        (GO_ZERO_TIME_NS, "0001-01-01T00:00:00Z", "0001-01-01T00:00:00Z"),
        (GO_ZERO_TIME_NS - 86_400 * 10**9 * 366, "0000-01-01T00:00:00Z", "0000-01-01T00:00:00Z"),
        (GO_ZERO_TIME_NS - 86_400 * 10**9 * 731, "-0001-01-01T00:00:00Z", "-0001-01-01T00:00:00Z"),
    ],
)
def test_written_formats(instant: int, seconds: str, nano: str) -> None:
    assert format_rfc3339_seconds(instant) == seconds
    assert format_rfc3339_nano(instant) == nano


def test_calendar_arithmetic_matches_datetime_at_the_edges() -> None:
    for year, month, day in [(1, 1, 1), (1970, 1, 1), (2000, 2, 29), (2100, 3, 1), (9999, 12, 31)]:
        expected = (dt.date(year, month, day) - dt.date(1970, 1, 1)).days
        assert days_from_civil(year, month, day) == expected


# Instants between year 1 and 9999 (the years Go's RFC 3339 parser can read back in UTC).
instants = st.integers(min_value=GO_ZERO_TIME_NS, max_value=253_402_300_799_999_999_999)


@given(instants)
def test_every_anchor_we_write_parses_back_to_the_same_instant(instant: int) -> None:
    assert parse_rfc3339(format_rfc3339_nano(instant)) == instant


@given(instants)
def test_every_deadline_we_write_parses_back_to_its_whole_second(instant: int) -> None:
    written = parse_rfc3339(format_rfc3339_seconds(instant))
    assert written == instant - instant % 1_000_000_000


@given(
    # Naive wall-clock times (hypothesis takes naive bounds); the zone is attached below.
    st.datetimes(
        min_value=dt.datetime(1, 1, 2, tzinfo=dt.UTC).replace(tzinfo=None),
        max_value=dt.datetime(9999, 12, 30, tzinfo=dt.UTC).replace(tzinfo=None),
    ),
    st.integers(min_value=-23 * 60, max_value=23 * 60),
)
def test_offsets_are_honoured_like_datetime(local: dt.datetime, offset_minutes: int) -> None:
    zone = dt.timezone(dt.timedelta(minutes=offset_minutes))
    aware = local.replace(tzinfo=zone)
    sign = "-" if offset_minutes < 0 else "+"
    hours, minutes = divmod(abs(offset_minutes), 60)
    text = (
        f"{local.year:04d}-{local.month:02d}-{local.day:02d}T{local.hour:02d}:{local.minute:02d}"
        f":{local.second:02d}.{local.microsecond:06d}{sign}{hours:02d}:{minutes:02d}"
    )
    expected = (aware - dt.datetime(1970, 1, 1, tzinfo=dt.UTC)) // dt.timedelta(microseconds=1)
    assert parse_rfc3339(text) == expected * 1000


@given(st.text(max_size=40))
def test_parse_raises_only_timestamp_error(value: str) -> None:
    try:
        parse_rfc3339(value)
    except TimestampError as error:
        message = str(error)
    else:
        return
    assert message.startswith("parsing time ")


def test_remembered_instants_and_errors_every_time() -> None:
    """Valid values are remembered (the same instant each time); an invalid value is refused
    every time, with the same text."""
    assert parse_rfc3339("2026-01-01T00:00:00.5Z") == parse_rfc3339("2026-01-01T00:00:00.5Z")
    assert parse_rfc3339("2026-01-01T01:00:00+01:00") == 1_767_225_600 * 10**9
    texts = set()
    for _ in range(3):
        with pytest.raises(TimestampError) as raised:
            parse_rfc3339("2026-13-01T00:00:00Z")
        texts.add(str(raised.value))
    assert texts == {'parsing time "2026-13-01T00:00:00Z": month out of range'}
