"""Go-compatible text: the few pieces of Go's standard library whose output users see.

The reference controller is written in Go, and its Event messages embed the text of Go
errors and values (``%q`` quoting, ``strconv.Atoi`` errors, ``time.Duration`` strings,
``strings.Fields`` splitting). Users and tests compare those messages byte for byte, so
this module reproduces exactly the behaviour we rely on, and nothing more.
"""

from __future__ import annotations

import unicodedata

from lifecycle_controller.core.text.units import NS_PER_SECOND

__all__ = [
    "GoNumError",
    "format_go_duration",
    "go_atoi",
    "go_fields",
    "go_parse_bool",
    "go_quote",
    "go_time_quote",
    "go_trim_space",
]

_LOWER_HEX = "0123456789abcdef"
_INT64_MAX = (1 << 63) - 1

# unicode.IsSpace: the Latin-1 spaces plus the White_Space property beyond Latin-1.
# Python's str.isspace() also counts U+001C..U+001F, which Go does not.
_GO_SPACES = frozenset(
    "\t\n\v\f\r \x85\xa0\u1680\u2000\u2001\u2002\u2003\u2004\u2005\u2006\u2007\u2008"
    "\u2009\u200a\u2028\u2029\u202f\u205f\u3000"
)

_SIMPLE_ESCAPES = {
    "\a": "\\a",
    "\b": "\\b",
    "\f": "\\f",
    "\n": "\\n",
    "\r": "\\r",
    "\t": "\\t",
    "\v": "\\v",
}


def _go_is_print(char: str) -> bool:
    """unicode.IsPrint: letters, marks, numbers, punctuation, symbols and the ASCII space."""
    if char == " ":
        return True
    return unicodedata.category(char)[0] in "LMNPS"


def go_quote(value: str) -> str:
    """strconv.Quote (the ``%q`` verb): a double-quoted Go string literal."""
    out = ['"']
    for char in value:
        code = ord(char)
        if char in ('"', "\\"):
            out.append("\\" + char)
        elif 0xD800 <= code <= 0xDFFF:
            # A lone surrogate cannot be UTF-8; Go would have seen U+FFFD.
            out.append("\\ufffd")
        elif _go_is_print(char):
            out.append(char)
        elif char in _SIMPLE_ESCAPES:
            out.append(_SIMPLE_ESCAPES[char])
        elif code < 0x20 or code == 0x7F:
            out.append("\\x" + _LOWER_HEX[code >> 4] + _LOWER_HEX[code & 0xF])
        elif code < 0x10000:
            out.append(f"\\u{code:04x}")
        else:
            out.append(f"\\U{code:08x}")
    out.append('"')
    return "".join(out)


def go_time_quote(value: str) -> str:
    """The time package's private quote(): non-ASCII and control bytes become ``\\xNN``."""
    out = ['"']
    for char in value:
        code = ord(char)
        if code >= 0x80 or code < 0x20:
            encoded = char.encode("utf-8", errors="replace")
            out.extend("\\x" + _LOWER_HEX[b >> 4] + _LOWER_HEX[b & 0xF] for b in encoded)
        else:
            if char in ('"', "\\"):
                out.append("\\")
            out.append(char)
    out.append('"')
    return "".join(out)


def go_fields(value: str) -> list[str]:
    """strings.Fields: split around runs of Go white space, dropping empty pieces."""
    fields: list[str] = []
    current: list[str] = []
    for char in value:
        if char in _GO_SPACES:
            if current:
                fields.append("".join(current))
                current = []
        else:
            current.append(char)
    if current:
        fields.append("".join(current))
    return fields


def go_trim_space(value: str) -> str:
    """strings.TrimSpace with Go's notion of white space."""
    start, end = 0, len(value)
    while start < end and value[start] in _GO_SPACES:
        start += 1
    while end > start and value[end - 1] in _GO_SPACES:
        end -= 1
    return value[start:end]


class GoNumError(ValueError):
    """A strconv.NumError; ``str()`` gives Go's message."""


def go_atoi(value: str) -> int:
    """strconv.Atoi on a 64-bit platform, with Go's error texts.

    Raises GoNumError: ``strconv.Atoi: parsing "<v>": invalid syntax`` or
    ``... value out of range``.
    """
    syntax = GoNumError(f"strconv.Atoi: parsing {go_quote(value)}: invalid syntax")
    out_of_range = GoNumError(f"strconv.Atoi: parsing {go_quote(value)}: value out of range")
    digits = value
    negative = False
    if digits[:1] in ("+", "-"):
        negative = digits[0] == "-"
        digits = digits[1:]
    if not digits:
        raise syntax
    magnitude = 0
    for char in digits:
        if not "0" <= char <= "9":
            # ParseUint reports a syntax error at the first bad byte, unless the digits
            # before it already overflowed (that is checked below, byte by byte).
            raise syntax
        magnitude = magnitude * 10 + (ord(char) - 48)
        if magnitude > (1 << 64) - 1:
            raise out_of_range
    if (not negative and magnitude > _INT64_MAX) or (negative and magnitude > _INT64_MAX + 1):
        raise out_of_range
    return -magnitude if negative else magnitude


_TRUE_SPELLINGS = frozenset({"1", "t", "T", "TRUE", "true", "True"})
_FALSE_SPELLINGS = frozenset({"0", "f", "F", "FALSE", "false", "False"})


def go_parse_bool(value: str) -> bool | None:
    """strconv.ParseBool; None when the spelling is not one Go accepts."""
    if value in _TRUE_SPELLINGS:
        return True
    if value in _FALSE_SPELLINGS:
        return False
    return None


def _format_fraction(value: int, precision: int) -> tuple[str, int]:
    """fmtFrac: the fraction of value/10**precision without trailing zeros, and the rest."""
    digits: list[str] = []
    printed = False
    for _ in range(precision):
        digit = value % 10
        printed = printed or digit != 0
        if printed:
            digits.append(str(digit))
        value //= 10
    if not printed:
        return "", value
    return "." + "".join(reversed(digits)), value


def format_go_duration(nanoseconds: int) -> str:
    """time.Duration.String(): ``720h0m0s``, ``1.5s``, ``100ms``, ``0s``."""
    if nanoseconds == 0:
        return "0s"
    negative = nanoseconds < 0
    magnitude = -nanoseconds if negative else nanoseconds
    if magnitude < NS_PER_SECOND:
        if magnitude < 1_000:
            text = f"{magnitude}ns"
        else:
            precision, unit = (3, "\u00b5s") if magnitude < 1_000_000 else (6, "ms")
            fraction, whole = _format_fraction(magnitude, precision)
            text = f"{whole}{fraction}{unit}"
    else:
        fraction, seconds = _format_fraction(magnitude, 9)
        text = f"{seconds % 60}{fraction}s"
        minutes = seconds // 60
        if minutes:
            text = f"{minutes % 60}m{text}"
            hours = minutes // 60
            if hours:
                text = f"{hours}h{text}"
    return "-" + text if negative else text
