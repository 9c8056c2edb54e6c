"""The fields every log line of one work item carries (its key and its reconcile id).

A worker binds them once per item. structlog's own ``bound_contextvars`` keeps one context
variable per field and sets and resets each of them per item, which is a measurable share
of a short reconcile's CPU when thousands of items are due at once. Here all of an item's
fields live in one context variable: one set and one reset per item, and the
:func:`merge_item_fields` processor adds them to each line actually written. Like structlog's
context variables, tasks started inside an item inherit its fields; fields bound explicitly
on a line win over the item's.
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping
from contextlib import contextmanager
from contextvars import ContextVar
from typing import Any

from structlog.typing import EventDict

__all__ = ["current_item_fields", "item_fields", "merge_item_fields"]

_fields: ContextVar[Mapping[str, Any] | None] = ContextVar("lifecycle_item_fields", default=None)


@contextmanager
def item_fields(fields: Mapping[str, Any]) -> Iterator[None]:
    """Every log line written inside the block (and in tasks it starts) carries ``fields``."""
    token = _fields.set(fields)
    try:
        yield
    finally:
        _fields.reset(token)


def current_item_fields() -> dict[str, Any]:
    """A copy of the fields of the item being worked on ({} outside any item)."""
    return dict(_fields.get() or {})


def merge_item_fields(_logger: object, _method: str, event: EventDict) -> EventDict:
    """A structlog processor: the item's fields, under those the line binds itself."""
    fields = _fields.get()
    if fields:
        for name, value in fields.items():
            event.setdefault(name, value)
    return event
