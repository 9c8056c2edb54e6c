"""Decoding and storing a list page with the cyclic garbage collector paused.

A page of 500 whole Pods is some 1.5 MB of JSON and 30,000 dicts and lists, all allocated at
once and, once the informer has kept its part of each object, all garbage at once. The
collector counts allocations: with its default threshold of 700 a page sets off some forty
young collections while it is decoded, each walking the half-built page and promoting it,
and their cascade ends in full collections that walk the whole cache, again and again while a
type of 20,000 objects is listed (a tenth of the time to ready of a whole-object list; see
docs/performance.md#since). Nothing in a decoded JSON document is a reference cycle, so the
collector has nothing to find in it: the page is decoded (:func:`decode_json`) and stored and
dropped (the informers' lists, :mod:`~lifecycle_controller.controller.watch.reflector`) with the
collector paused, and it sees only what was kept.
"""

from __future__ import annotations

import gc
import json
from contextlib import AbstractContextManager
from typing import Any

__all__ = ["collector_paused", "decode_json"]


class _Paused:
    """The pause itself: a class, not a generator, so that leaving it allocates nothing that
    would set off a collection of what was just decoded."""

    __slots__ = ("_enabled",)

    def __enter__(self) -> None:
        self._enabled = gc.isenabled()
        gc.disable()

    def __exit__(self, *exc_info: object) -> None:
        if self._enabled:
            gc.enable()


def collector_paused() -> AbstractContextManager[None]:
    """The cyclic collector off for a stretch of synchronous work (never across an
    ``await``: the pause would last as long as the wait), then as it was."""
    return _Paused()


def decode_json(raw: bytes) -> Any:
    """``json.loads`` with the collector paused (raises ``json.JSONDecodeError``)."""
    with collector_paused():
        return json.loads(raw)
