"""Turning one flag's text into its typed value, with one message per invalid value.

Every parser takes the option (``--workers``) and the raw value (a string, or the strings of
a repeated flag) and returns the typed value or raises :class:`ConfigError` naming the flag.
The flag table (``flags.py``) says which parser each flag uses.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Sequence
from fractions import Fraction
from typing import Any, TypeVar

from lifecycle_controller.core.policy.limit import PolicyLimit, parse_limit_flag
from lifecycle_controller.core.schedule.catchup import CatchUpRule, parse_catch_up_rule
from lifecycle_controller.core.schedule.windows import MaintenanceWindows, parse_windows
from lifecycle_controller.core.text.durations import DurationError
from lifecycle_controller.core.text.gotext import go_parse_bool
from lifecycle_controller.core.text.units import (
    NS_PER_DAY,
    NS_PER_HOUR,
    NS_PER_MINUTE,
    NS_PER_SECOND,
)

T = TypeVar("T")

#: One flag's parser: ``(option, raw value) -> typed value``; raises ConfigError.
Parser = Callable[[str, Any], Any]


class ConfigError(ValueError):
    """One invalid setting; ``str()`` names the flag and what is wrong with it."""


_GO_DURATION_PART = re.compile(r"([0-9]*)(?:\.([0-9]*))?(ns|us|µs|μs|ms|s|m|h|d)")
_UNIT_NS = {
    "ns": 1,
    "us": 1_000,
    "µs": 1_000,
    "μs": 1_000,
    "ms": 1_000_000,
    "s": NS_PER_SECOND,
    "m": NS_PER_MINUTE,
    "h": NS_PER_HOUR,
    "d": NS_PER_DAY,
}


def parse_flag_duration_ns(value: str) -> int:
    """Nanoseconds of a duration flag: Go's ``time.ParseDuration`` plus a ``d`` (24h) unit.

    The one grammar of every duration flag (``15s``, ``1m30s``, ``500ms``, ``1.5h``, ``30d``,
    ``1d12h``; ``0`` alone is zero); annotation values keep the strict grammar of the core.
    Raises ValueError.
    """
    text = value.strip()
    if text in ("0", "+0", "-0"):
        return 0
    sign = -1 if text.startswith("-") else 1
    body = text[1:] if text[:1] in "+-" else text
    position, total = 0, Fraction(0)
    while position < len(body):
        match = _GO_DURATION_PART.match(body, position)
        whole, fraction, unit = match.groups() if match else ("", None, "")
        if match is None or not (whole or fraction):
            raise ValueError(
                f"invalid duration {value!r} (expected e.g. 15s, 1m30s, 500ms, 1.5h, 30d)"
            )
        number = Fraction(int(whole or "0"))
        if fraction:
            number += Fraction(int(fraction), 10 ** len(fraction))
        total += number * _UNIT_NS[unit]
        position = match.end()
    if position == 0:
        raise ValueError(f"invalid duration {value!r} (expected e.g. 15s, 1m30s, 500ms, 30d)")
    if total >= 2**63:
        raise ValueError(f"invalid duration {value!r}: out of range")
    return sign * int(total)


def parse_flag_duration(value: str) -> float:
    """Seconds of a duration flag (:func:`parse_flag_duration_ns`); empty means zero."""
    return parse_flag_duration_ns(value.strip() or "0") / NS_PER_SECOND


def parse_go_bool(value: str, *, flag: str) -> bool:
    parsed = go_parse_bool(value)
    if parsed is None:
        raise ConfigError(f"{flag}: invalid boolean {value!r}")
    return parsed


def parse_bind_address(value: str) -> tuple[str | None, int] | None:
    """Parse a Go-style listen address: ``0`` → None (disabled); ``:8081`` → (None, 8081)
    (every interface); ``127.0.0.1:0``; ``[::1]:8080``; ``localhost:9090``.

    Raises ValueError with a clear message otherwise.
    """
    text = value.strip()
    if text == "0":
        return None
    host, sep, port_text = text.rpartition(":")
    if not sep or not port_text.isdigit() or int(port_text) > 65535:
        raise ValueError(f"invalid bind address {value!r}: expected [host]:port or 0")
    if host.startswith("[") and host.endswith("]"):
        host = host[1:-1]
    elif ":" in host:
        raise ValueError(f"invalid bind address {value!r}: put IPv6 hosts in brackets")
    return (host or None), int(port_text)


def _checked(flag: str, parse: Callable[[str], T], value: str) -> T:
    try:
        return parse(value)
    except (ValueError, DurationError) as error:
        raise ConfigError(f"{flag}: {error}") from error


# --------------------------------------------------------------------------- the parsers


def text(flag: str, value: str) -> str:
    """The value as typed."""
    return value


def text_or(default: str) -> Parser:
    """The value as typed; ``default`` when empty."""

    def parse(flag: str, value: str) -> str:
        return value or default

    return parse


def optional_text(flag: str, value: str) -> str | None:
    """The stripped value; None when empty."""
    return value.strip() or None


def required_text(flag: str, value: str) -> str:
    """The stripped value, which must not be empty."""
    if not value.strip():
        raise ConfigError(f"{flag} must not be empty")
    return value.strip()


def boolean(flag: str, value: str) -> bool:
    """Go ``strconv.ParseBool`` spellings."""
    return parse_go_bool(value, flag=flag)


def globs(flag: str, values: Sequence[str]) -> tuple[str, ...]:
    """Repeated flag values, stripped, empty entries dropped.

    Values are not split on commas here (a glob such as ``[a,b]*`` contains one); only the
    ``LIFECYCLE_*`` environment variables are comma-separated lists.
    """
    return tuple(value.strip() for value in values if value.strip())


def catch_up_rule(flag: str, value: str) -> CatchUpRule:
    """``always``, ``never`` or a positive duration of the annotation grammar."""
    return _checked(flag, parse_catch_up_rule, value)


def _non_negative_ns(flag: str, value: str) -> int:
    """Nanoseconds of a duration flag, never negative; 0 when empty."""
    nanoseconds = _checked(flag, parse_flag_duration_ns, value.strip() or "0")
    if nanoseconds < 0:
        raise ConfigError(f"{flag}: must not be negative, got {value!r}")
    return nanoseconds


def max_delete_ttl(flag: str, value: str) -> int | None:
    """Nanoseconds of a duration flag; None (off) when empty or zero."""
    return _non_negative_ns(flag, value) or None


def maintenance_windows(flag: str, value: str) -> MaintenanceWindows | None:
    """The ``maintenance-window`` grammar; None (always open) when empty."""
    if not value.strip():
        return None
    return _checked(flag, parse_windows, value)


def lead_time(flag: str, value: str) -> int:
    """Nanoseconds of a duration flag; 0 (off) when empty or zero."""
    return _non_negative_ns(flag, value)


def duration_or_zero(flag: str, value: str) -> float:
    """Seconds of a duration flag that may be ``0s`` (off), never negative."""
    return _non_negative_ns(flag, value) / NS_PER_SECOND


def count(minimum: int) -> Parser:
    """A whole number of at least ``minimum``."""

    def parse(flag: str, value: str) -> int:
        try:
            number = int(value.strip())
        except ValueError:
            raise ConfigError(f"{flag}: expected a whole number, got {value!r}") from None
        if number < minimum:
            raise ConfigError(f"{flag}: must be at least {minimum}, got {number}")
        return number

    return parse


def positive_duration(flag: str, value: str) -> float:
    """Seconds of a positive Go duration."""
    seconds = _checked(flag, parse_flag_duration, value)
    if seconds <= 0:
        raise ConfigError(f"{flag}: must be a positive duration, got {value!r}")
    return seconds


def optional_positive_duration(flag: str, value: str) -> float | None:
    """Seconds of a positive Go duration; None when empty."""
    return positive_duration(flag, value) if value.strip() else None


def address(flag: str, value: str) -> str:
    """A listen address, checked now and kept as text for the server that binds it."""
    _checked(flag, parse_bind_address, value)
    return value.strip()


def choice(*choices: str) -> Parser:
    """One of ``choices``, case-insensitive."""

    def parse(flag: str, value: str) -> str:
        for option in choices:
            if value.strip().lower() == option:
                return option
        raise ConfigError(f"{flag}: expected one of {', '.join(choices)}, got {value!r}")

    return parse


def policy_limit(flag: str, value: str) -> PolicyLimit | None:
    """``ACTIONS/WINDOW`` (``100/1h``); ``0`` or empty: none."""
    try:
        return parse_limit_flag(value)
    except ValueError as error:
        raise ConfigError(f"{flag}: {error}") from None
