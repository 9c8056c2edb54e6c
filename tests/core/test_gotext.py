"""The Go text helpers behind the user-visible messages."""

from __future__ import annotations

import pytest

from lifecycle_controller.core.text.gotext import (
    GoNumError,
    go_atoi,
    go_fields,
    go_parse_bool,
    go_quote,
    go_time_quote,
    go_trim_space,
)


@pytest.mark.parametrize(
    ("value", "quoted"),
    [
        ("", '""'),
        ("abc", '"abc"'),
        ('a"b\\c', '"a\\"b\\\\c"'),
        ("tab\there", '"tab\\there"'),
        ("\a\b\f\n\r\v", '"\\a\\b\\f\\n\\r\\v"'),
        ("\x00\x1f\x7f", '"\\x00\\x1f\\x7f"'),
        ("\u00b5s", '"\u00b5s"'),  # printable non-ASCII stays as is
        ("\u00a0", '"\\u00a0"'),  # a non-breaking space is not printable for Go
        ("\u200b", '"\\u200b"'),
        ("\U000e0001", '"\\U000e0001"'),
        ("\ud800", '"\\ufffd"'),
        ("50% off", '"50% off"'),
    ],
)
def test_go_quote_matches_strconv_quote(value: str, quoted: str) -> None:
    assert go_quote(value) == quoted


def test_go_time_quote_escapes_bytes_of_non_ascii_and_controls() -> None:
    assert go_time_quote('a"\\\u00e9\n\x7f') == '"a\\"\\\\\\xc3\\xa9\\x0a\x7f"'


@pytest.mark.parametrize(
    ("value", "expected"),
    [("5", 5), ("+5", 5), ("-5", -5), ("007", 7), ("9223372036854775807", (1 << 63) - 1)],
)
def test_go_atoi_accepts(value: str, expected: int) -> None:
    assert go_atoi(value) == expected


@pytest.mark.parametrize(
    ("value", "message"),
    [
        ("", 'strconv.Atoi: parsing "": invalid syntax'),
        ("+", 'strconv.Atoi: parsing "+": invalid syntax'),
        ("1_000", 'strconv.Atoi: parsing "1_000": invalid syntax'),
        ("L", 'strconv.Atoi: parsing "L": invalid syntax'),
        ("9223372036854775808", 'strconv.Atoi: parsing "9223372036854775808": value out of range'),
        (
            "-9223372036854775809",
            'strconv.Atoi: parsing "-9223372036854775809": value out of range',
        ),
        # Overflow is noticed before the stray letter, as in Go's ParseUint.
        (
            "99999999999999999999x",
            'strconv.Atoi: parsing "99999999999999999999x": value out of range',
        ),
        ("9x9999999999999999999", 'strconv.Atoi: parsing "9x9999999999999999999": invalid syntax'),
    ],
)
def test_go_atoi_errors(value: str, message: str) -> None:
    with pytest.raises(GoNumError) as caught:
        go_atoi(value)
    assert str(caught.value) == message


def test_go_atoi_accepts_the_most_negative_int64() -> None:
    assert go_atoi("-9223372036854775808") == -(1 << 63)


def test_go_fields_splits_on_go_white_space_only() -> None:
    assert go_fields(" a\tb\u00a0c\u3000d  ") == ["a", "b", "c", "d"]
    # U+001C..U+001F are white space for Python but not for Go.
    assert go_fields("a\x1cb c") == ["a\x1cb", "c"]
    assert go_fields("") == []
    assert go_trim_space("\u2003 x y \n") == "x y"
    assert go_trim_space("\x1fx") == "\x1fx"


@pytest.mark.parametrize("value", ["1", "t", "T", "TRUE", "true", "True"])
def test_go_parse_bool_true(value: str) -> None:
    assert go_parse_bool(value) is True


@pytest.mark.parametrize("value", ["0", "f", "F", "FALSE", "false", "False"])
def test_go_parse_bool_false(value: str) -> None:
    assert go_parse_bool(value) is False


@pytest.mark.parametrize("value", ["", "yes", "tRUE", " true", "2", "on"])
def test_go_parse_bool_rejects(value: str) -> None:
    assert go_parse_bool(value) is None
