"""``lifecycle.cezary.dev/`` keys the controller does not read, with the nearest known one.

A misspelt key (``delete-afer``) is silently inert, so both the ``plan`` linter and the
controller (one warning per object) name it and suggest the key it was probably meant to be.
"""

from __future__ import annotations

import difflib
from collections.abc import Iterable

from lifecycle_controller.core.objects import keys

__all__ = ["describe_unknown", "unknown_keys"]

_KNOWN_SHORT = [key.removeprefix(keys.PREFIX) for key in keys.KNOWN_KEYS]


def unknown_keys(annotations: Iterable[str]) -> list[tuple[str, str | None]]:
    """``(key, nearest known key or None)`` for each lifecycle key nothing reads, sorted."""
    found: list[tuple[str, str | None]] = []
    for key in sorted(annotations):
        if not key.startswith(keys.PREFIX) or key in keys.KNOWN_KEYS:
            continue
        near = difflib.get_close_matches(key.removeprefix(keys.PREFIX), _KNOWN_SHORT, n=1)
        found.append((key, near[0] if near else None))
    return found


def describe_unknown(key: str, nearest: str | None) -> str:
    """``KEY is not a key the controller reads; did you mean NEAREST?``"""
    hint = f"; did you mean {nearest}?" if nearest else ""
    return f"{key} is not a key the controller reads{hint}"
