"""Cutting text that people or the API read to a bound, on a UTF-8 character boundary.

Annotation values are the user's and may be huge (a 100 KB ``delete-after``); they show up in
Event notes and in the tools' output, both of which cut them to :data:`TEXT_LIMIT` bytes.
"""

from __future__ import annotations

from typing import Final

__all__ = ["TEXT_LIMIT", "shorten"]

#: The bound of an Event note, and of every value the tools print.
TEXT_LIMIT: Final = 1024


def shorten(text: str, limit: int = TEXT_LIMIT) -> str:
    """``text`` cut to at most ``limit`` UTF-8 bytes on a character boundary, with "...".

    Bytes, not characters: the API server measures an Event's note in bytes, so a note cut
    by characters could still be too long when it holds multi-byte characters.
    """
    encoded = text.encode("utf-8")
    if len(encoded) <= limit:
        return text
    return encoded[: limit - 3].decode("utf-8", errors="ignore") + "..."
