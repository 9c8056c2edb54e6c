"""A metric family's labelled children, looked up once per combination of label values.

``family.labels(...)`` validates and stringifies the values and takes the family's lock on
every call; on the per-action path (every request, reconcile, deletion and cache event)
that is a measurable share of a burst's CPU. The child of a combination never changes
while it exists, so it is kept here after the first lookup. A combination removed from the
family must be removed through :meth:`Children.remove`, or the kept child would go on
being updated without being exported.
"""

from __future__ import annotations

from typing import Generic, TypeVar

from prometheus_client.metrics import MetricWrapperBase

__all__ = ["Children"]

M = TypeVar("M", bound=MetricWrapperBase)


class Children(Generic[M]):
    """``children(*values)`` is ``family.labels(*values)``, looked up once."""

    __slots__ = ("_children", "_family")

    def __init__(self, family: M) -> None:
        self._family = family
        self._children: dict[tuple[str, ...], M] = {}

    def __call__(self, *values: str) -> M:
        child = self._children.get(values)
        if child is None:
            child = self._children[values] = self._family.labels(*values)
        return child

    def remove(self, *values: str) -> None:
        """Drop the combination from the family (its series is no longer exported)."""
        self._children.pop(values, None)
        self._family.remove(*values)
