"""The fields every log line of one work item carries (its key and its reconcile id).

A worker binds them once per item. structlog's own ``bound_contextvars`` keeps one context
variable per field and sets and resets each of them per item, which is a measurable share
of a short reconcile's CPU when thousands of items are due at once. Here all of an item's
fields live in one context variable: one set and one reset per item, and the
:func:`merge_item_fields` processor adds them to each line actually written. Like structlog's
context variables, tasks started inside an item inherit its fields; fields bound explicitly
on a line win over the item's. The fields may be given as :class:`LazyFields`, built only
when a line is written: most items write none at the usual levels.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator, Mapping
from contextvars import ContextVar, Token
from typing import Any

from structlog.typing import EventDict

__all__ = ["LazyFields", "current_item_fields", "item_fields", "merge_item_fields"]

_fields: ContextVar[Mapping[str, Any] | None] = ContextVar("lifecycle_item_fields", default=None)


class LazyFields(Mapping[str, Any]):
    """The mapping ``build()`` returns, built on first use (and only then)."""

    __slots__ = ("_build", "_built")

    def __init__(self, build: Callable[[], Mapping[str, Any]]) -> None:
        self._build = build
        self._built: Mapping[str, Any] | None = None

    def _fields(self) -> Mapping[str, Any]:
        built = self._built
        if built is None:
            built = self._built = self._build()
        return built

    def __getitem__(self, name: str) -> Any:
        return self._fields()[name]

    def __iter__(self) -> Iterator[str]:
        return iter(self._fields())

    def __len__(self) -> int:
        return len(self._fields())


class item_fields:  # lower case: used like the function-style context manager it replaced
    """``with item_fields(fields):`` every log line written inside the block (and in tasks it
    starts) carries ``fields``. A plain class: a generator-based context manager costs more
    than the rest of a short item's bookkeeping."""

    __slots__ = ("_fields", "_token")

    def __init__(self, fields: Mapping[str, Any]) -> None:
        self._fields = fields
        self._token: Token[Mapping[str, Any] | None] | None = None

    def __enter__(self) -> None:
        self._token = _fields.set(self._fields)

    def __exit__(self, *exc: object) -> None:
        if self._token is not None:
            _fields.reset(self._token)
            self._token = None


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
