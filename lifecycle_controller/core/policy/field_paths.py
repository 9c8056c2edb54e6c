"""The field paths a policy's condition reads beyond metadata: cutting an object down to them,
and saying what was read.

A condition's :attr:`~lifecycle_controller.core.policy.condition.Condition.reads` are paths
under ``object`` (``("spec", "replicas")``; ``()`` is the whole object). The controller's
informers keep only those of an object (:func:`pick`), ``plan`` gives a manifest's whole
object (:func:`fields_of`), and ``explain`` says what the condition saw (:func:`read_values`:
``object.spec.replicas = 0``), so the field that decided is shown.

A path's steps are field names, and two list steps (never field names: a field a condition
selects is an identifier): ``[0]`` (:func:`element`), the element at a literal index
(``object.status.containerStatuses[0].state``), and ``[*]`` (:data:`EVERY_ELEMENT`), every
element, as a macro's variable reads it (``object.spec.containers.all(c, c.image != "")``
reads ``("spec", "containers", "[*]", "image")``). :func:`pick` keeps of a list only those
elements, each cut down to the paths read below it: a list read at ``[1]`` alone is kept as
``[None, <element 1>]``, so index 1 still names it; the ``null`` in front stands for an element
no path reads (a field of it is a type error in CEL, never data). Where a path's step does not
fit the value (a list step on a map, a field of a list), the value is kept whole: a projection
may keep more than a condition reads, never less.
"""

from __future__ import annotations

import functools
import json
import re
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import Any, Final

__all__ = [
    "EVERY_ELEMENT",
    "READ_KEY",
    "UNREAD_ELEMENT",
    "FieldInterner",
    "dotted",
    "element",
    "fields_of",
    "pick",
    "read_values",
    "split_read",
    "unread",
]

_ABSENT: Final = object()
#: Where a field projection says which paths it read, beside an object it cut down (a key no
#: Kubernetes object has at its top level): the paths a condition may trust there.
READ_KEY: Final = "lifecycle.cezary.dev/read"
#: The longest value :func:`read_values` prints (a whole ``spec`` is cut short).
_SHOWN_CHARACTERS: Final = 60
#: The step of a path through every element of a list (a macro's variable).
EVERY_ELEMENT: Final = "[*]"
#: What :func:`pick` keeps of a list's element that no path reads, in front of one that is.
UNREAD_ELEMENT: Final = None
_ELEMENT: Final = re.compile(r"\[(0|[1-9][0-9]*)\]")


def element(position: int) -> str:
    """The step of a path through a list's element at ``position`` (``[0]``)."""
    return f"[{position}]"


def _position(step: str) -> int | None:
    """The position of an :func:`element` step (None: another step)."""
    found = _ELEMENT.fullmatch(step)
    return int(found.group(1)) if found else None


def _is_list_step(step: str) -> bool:
    return step == EVERY_ELEMENT or _position(step) is not None


def dotted(path: tuple[str, ...]) -> str:
    """How a condition writes ``path``: ``object.status.containerStatuses[0].state``."""
    return "object" + "".join(step if _is_list_step(step) else f".{step}" for step in path)


def fields_of(obj: Mapping[str, Any]) -> dict[str, Any]:
    """An object's top-level fields other than ``metadata`` (what a condition may read)."""
    return {str(key): value for key, value in obj.items() if key != "metadata"}


def split_read(
    obj: Mapping[str, Any],
) -> tuple[dict[str, Any], frozenset[tuple[str, ...]] | None]:
    """An object's fields other than metadata, and the paths they were read with (None: the
    whole object was read; see :data:`READ_KEY`)."""
    fields = fields_of(obj)
    read = fields.pop(READ_KEY, None)
    return fields, read if isinstance(read, frozenset) else None


def unread(
    reads: Iterable[tuple[str, ...]], read: frozenset[tuple[str, ...]] | None
) -> list[tuple[str, ...]]:
    """The paths of ``reads`` not under any path of ``read`` (None: everything was read;
    ``()`` covers every path): what a condition would read that was never fetched, where a
    missing field would look absent without being so."""
    if read is None or () in read:
        return []
    return sorted(p for p in reads if not any(p[: len(q)] == q for q in read))


def pick(obj: Mapping[str, Any], paths: Iterable[tuple[str, ...]]) -> dict[str, Any]:
    """A copy of ``obj`` with only ``paths`` (an absent one stays absent, so ``has()`` is
    false); a path through a value it does not fit (a field of a list, an element of a map,
    a field of a string) stops there and keeps that value whole."""
    cut = _compiled(paths if isinstance(paths, frozenset) else frozenset(paths))
    if isinstance(cut, _Fields):
        return _cut_fields(obj, cut)
    return dict(obj)


@dataclass(frozen=True, slots=True)
class _Fields:
    """Keep these fields of a map, each cut down by its own cut (None: whole)."""

    fields: tuple[tuple[str, _Cut], ...]


@dataclass(frozen=True, slots=True)
class _Elements:
    """Keep these elements of a list in their positions, each cut down by its own cut:
    ``at`` the positions read, ``others`` every other one (``[*]``; :data:`_UNREAD`: none
    but those, the list then ending after the last of them)."""

    at: Mapping[int, _Cut]
    others: _Cut | _Unread


class _Unread:
    """No path reads the element: :data:`UNREAD_ELEMENT` stands in for it."""


_UNREAD: Final = _Unread()
#: How to cut a value down: its fields, its elements, or (None) the value whole.
_Cut = _Fields | _Elements | None


@functools.lru_cache(maxsize=256)
def _compiled(paths: frozenset[tuple[str, ...]]) -> _Cut:
    """The cut that keeps ``paths`` (relative to the value), worked out once per set of paths
    (an informer cuts every object it lists with the same ones)."""
    heads: dict[str, set[tuple[str, ...]]] = {}
    for path in paths:
        if not path:
            return None
        heads.setdefault(path[0], set()).add(path[1:])
    listed = [_is_list_step(head) for head in heads]
    if not any(listed):
        return _Fields(tuple((head, _compiled(frozenset(rests))) for head, rests in heads.items()))
    if not all(listed):
        return None  # both a field and an element: no value fits, so any is kept whole
    every = heads.pop(EVERY_ELEMENT, None)
    at = {
        position: _compiled(frozenset(rests | (every or set())))
        for head, rests in heads.items()
        if (position := _position(head)) is not None
    }
    return _Elements(at, _UNREAD if every is None else _compiled(frozenset(every)))


def _cut(value: object, cut: _Cut) -> object:
    """``value`` cut down by ``cut``, or whole where it does not fit (a field of a list...)."""
    if cut is None:
        return value
    if isinstance(cut, _Fields):
        # A decoded object is dicts: checked first, the ABC's check (slow) only for others.
        return _cut_fields(value, cut) if isinstance(value, (dict, Mapping)) else value
    return _cut_elements(value, cut) if isinstance(value, list) else value


def _cut_fields(value: Mapping[str, Any], cut: _Fields) -> dict[str, Any]:
    return {name: _cut(value[name], below) for name, below in cut.fields if name in value}


def _cut_elements(items: list[Any], cut: _Elements) -> list[Any]:
    """The elements read, in their positions; without ``[*]`` the list ends after the last
    element read (or where ``items`` ends), an element no path reads :data:`UNREAD_ELEMENT`."""
    others = cut.others
    if isinstance(others, _Unread):
        length = min(len(items), max(cut.at) + 1)
        return [
            _cut(items[index], cut.at[index]) if index in cut.at else UNREAD_ELEMENT
            for index in range(length)
        ]
    return [_cut(item, cut.at.get(index, others)) for index, item in enumerate(items)]


class FieldInterner:
    """One shared copy of equal picked fields: ``{"spec": {"replicas": 1}}`` is the same for
    most objects, so 20,000 Deployments keep a handful of dicts, not 40,000. Values handed
    out are shared: never mutate them. Bounded: when ``limit`` distinct values are held, the
    table starts over (values already shared stay valid)."""

    def __init__(self, limit: int = 4096) -> None:
        self._limit = limit
        self._table: dict[str, dict[str, Any]] = {}

    def __call__(self, fields: dict[str, Any]) -> dict[str, Any]:
        try:
            key = json.dumps(fields, sort_keys=True, separators=(",", ":"))
        except (TypeError, ValueError):
            return fields
        if len(key) > 256:
            return fields  # large values are rarely equal: not worth a table entry
        found = self._table.get(key)
        if found is not None:
            return found
        if len(self._table) >= self._limit:
            self._table.clear()
        self._table[key] = fields
        return fields


def _at(value: object, path: tuple[str, ...]) -> object:
    """The value at ``path`` (through :data:`EVERY_ELEMENT`: each element's, as a list, an
    element without it ``None``), or ``_ABSENT``."""
    if not path:
        return value
    step, rest = path[0], path[1:]
    position = _position(step)
    if step == EVERY_ELEMENT and isinstance(value, list):
        return [None if (found := _at(item, rest)) is _ABSENT else found for item in value]
    if position is not None and isinstance(value, list):
        return _at(value[position], rest) if position < len(value) else _ABSENT
    if isinstance(value, Mapping) and not _is_list_step(step) and step in value:
        return _at(value[step], rest)
    return _ABSENT


def _shown(value: object) -> str:
    text = json.dumps(value, sort_keys=True, default=str)
    if len(text) > _SHOWN_CHARACTERS:
        return text[: _SHOWN_CHARACTERS - 1] + "…"
    return text


def read_values(paths: Iterable[tuple[str, ...]], fields: Mapping[str, Any]) -> list[str]:
    """``object.<path> = <value>`` (or ``… is absent``) for each path, sorted."""
    out: list[str] = []
    for path in sorted(paths):
        name = dotted(path)
        value = _at(fields, path)
        out.append(f"{name} is absent" if value is _ABSENT else f"{name} = {_shown(value)}")
    return out
