"""The field paths a policy's condition reads beyond metadata: cutting an object down to them,
and saying what was read.

A condition's :attr:`~lifecycle_controller.core.policy.condition.Condition.reads` are paths
under ``object`` (``("spec", "replicas")``; ``()`` is the whole object). The controller's
informers keep only those of an object (:func:`pick`), ``plan`` gives a manifest's whole
object (:func:`fields_of`), and ``explain`` says what the condition saw (:func:`read_values`:
``object.spec.replicas = 0``), so the field that decided is shown.
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Mapping
from typing import Any, Final

__all__ = [
    "READ_KEY",
    "FieldInterner",
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
    false); a path through a value that is not a map stops there and keeps that value."""
    heads: dict[str, set[tuple[str, ...]]] = {}
    for path in paths:
        if not path:
            return dict(obj)
        heads.setdefault(path[0], set()).add(path[1:])
    picked: dict[str, Any] = {}
    for head, rests in heads.items():
        if head not in obj:
            continue
        value = obj[head]
        if () in rests or not isinstance(value, Mapping):
            picked[head] = value
        else:
            picked[head] = pick(value, rests)
    return picked


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


def _at(fields: Mapping[str, Any], path: tuple[str, ...]) -> object:
    value: object = fields
    for name in path:
        if not isinstance(value, Mapping) or name not in value:
            return _ABSENT
        value = value[name]
    return value


def _shown(value: object) -> str:
    text = json.dumps(value, sort_keys=True, default=str)
    if len(text) > _SHOWN_CHARACTERS:
        return text[: _SHOWN_CHARACTERS - 1] + "…"
    return text


def read_values(paths: Iterable[tuple[str, ...]], fields: Mapping[str, Any]) -> list[str]:
    """``object.<path> = <value>`` (or ``… is absent``) for each path, sorted."""
    out: list[str] = []
    for path in sorted(paths):
        name = ".".join(("object", *path))
        value = fields if not path else _at(fields, path)
        out.append(f"{name} is absent" if value is _ABSENT else f"{name} = {_shown(value)}")
    return out
