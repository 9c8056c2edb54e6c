"""Time units in nanoseconds, the one spelling of each (instants and durations are integers)."""

from __future__ import annotations

from typing import Final

__all__ = ["NS_PER_DAY", "NS_PER_HOUR", "NS_PER_MINUTE", "NS_PER_SECOND"]

NS_PER_SECOND: Final = 1_000_000_000
NS_PER_MINUTE: Final = 60 * NS_PER_SECOND
NS_PER_HOUR: Final = 60 * NS_PER_MINUTE
NS_PER_DAY: Final = 24 * NS_PER_HOUR
