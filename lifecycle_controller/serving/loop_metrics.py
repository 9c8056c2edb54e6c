"""Counters and histograms for the per-action path, summed in plain numbers, exported on scrape.

Every request, queued key, reconcile and action moves a few metrics. prometheus_client's
``Counter.inc`` and ``Histogram.observe`` take a lock, check the metric is observable and
(for a histogram) walk the buckets one by one in Python, for every update; on a burst of
deletions that was a tenth of the controller's own work per reconcile. The controller
updates these metrics from its event loop only, so the families here keep a plain float
per child (a histogram: one count per bucket, found by bisection) and build the
exposition when ``/metrics`` is scraped, as a custom collector of the same registry. The
exposition is what prometheus_client's families give, without their ``_created`` series
(client-go's metrics have none either).
"""

from __future__ import annotations

from bisect import bisect_left
from collections.abc import Callable, Iterator, Sequence
from typing import Any, Generic, TypeVar, cast

from prometheus_client import CollectorRegistry
from prometheus_client.metrics_core import (
    CounterMetricFamily,
    GaugeMetricFamily,
    HistogramMetricFamily,
    Metric,
)
from prometheus_client.utils import floatToGoString

__all__ = ["LoopCounter", "LoopGauge", "LoopHistogram"]

#: How prometheus_client writes a bucket's bound (Go's float formatting).
_go_float = cast(Callable[[float], str], floatToGoString)


class _Count:
    __slots__ = ("value",)

    def __init__(self) -> None:
        self.value = 0.0

    def inc(self, amount: float = 1.0) -> None:
        if amount < 0:
            raise ValueError("counters can only be incremented by non-negative amounts")
        self.value += amount


class _Value:
    __slots__ = ("value",)

    def __init__(self) -> None:
        self.value = 0.0

    def set(self, value: float) -> None:
        self.value = float(value)


class _Observations:
    __slots__ = ("_bounds", "counts", "total")

    def __init__(self, bounds: tuple[float, ...]) -> None:
        self._bounds = bounds
        self.counts = [0] * (len(bounds) + 1)  # the last one: above every bound (+Inf)
        self.total = 0.0

    def observe(self, amount: float) -> None:
        self.counts[bisect_left(self._bounds, amount)] += 1
        self.total += amount


C = TypeVar("C", _Count, _Value, _Observations)


class _Family(Generic[C]):
    """Children by label values, created on first use and kept until removed; exported by
    :meth:`collect` into the family :meth:`_family` makes, one :meth:`_add` per child."""

    def __init__(
        self,
        name: str,
        documentation: str,
        labelnames: Sequence[str],
        registry: CollectorRegistry,
        child: Callable[[], C],
        family: type[CounterMetricFamily | GaugeMetricFamily | HistogramMetricFamily],
    ) -> None:
        self._family_type = family
        self._name = name
        self._documentation = documentation
        self._labelnames = tuple(labelnames)
        self._child: Callable[[], C] = child
        self._children: dict[tuple[str, ...], C] = {}
        registry.register(self)

    def labels(self, *values: str) -> C:
        child = self._children.get(values)
        if child is None:
            if len(values) != len(self._labelnames):
                raise ValueError(f"{self._name}: expected labels {self._labelnames}, got {values}")
            child = self._children[values] = self._child()
        return child

    def remove(self, *values: str) -> None:
        self._children.pop(values, None)

    def describe(self) -> list[Metric]:
        return [self._family()]

    def collect(self) -> Iterator[Metric]:
        family = self._family()
        for values, child in list(self._children.items()):
            self._add(family, values, child)
        yield family

    def _family(self) -> Metric:
        return self._family_type(self._name, self._documentation, labels=self._labelnames)

    def _add(self, family: Any, values: tuple[str, ...], child: C) -> None:
        raise NotImplementedError


S = TypeVar("S", _Count, _Value)


class _Scalars(_Family[S]):
    """A family whose children hold one value each (counters, gauges)."""

    def _add(self, family: Any, values: tuple[str, ...], child: S) -> None:
        family.add_metric(values, child.value)


class LoopCounter(_Scalars[_Count]):
    """A counter family (``NAME_total``) whose children are plain floats."""

    def __init__(
        self,
        name: str,
        documentation: str,
        labelnames: Sequence[str],
        *,
        registry: CollectorRegistry,
    ) -> None:
        super().__init__(name, documentation, labelnames, registry, _Count, CounterMetricFamily)


class LoopGauge(_Scalars[_Value]):
    """A gauge family whose children are plain floats (set on every change, read on scrape)."""

    def __init__(
        self,
        name: str,
        documentation: str,
        labelnames: Sequence[str],
        *,
        registry: CollectorRegistry,
    ) -> None:
        super().__init__(name, documentation, labelnames, registry, _Value, GaugeMetricFamily)


class LoopHistogram(_Family[_Observations]):
    """A histogram family with fixed ``buckets`` (upper bounds; +Inf is added)."""

    def __init__(
        self,
        name: str,
        documentation: str,
        labelnames: Sequence[str],
        *,
        buckets: Sequence[float],
        registry: CollectorRegistry,
    ) -> None:
        bounds = tuple(float(b) for b in buckets if b != float("inf"))
        if list(bounds) != sorted(set(bounds)):
            raise ValueError(f"{name}: buckets must be increasing, got {buckets}")
        self._les = (*(_go_float(b) for b in bounds), "+Inf")
        super().__init__(
            name,
            documentation,
            labelnames,
            registry,
            lambda: _Observations(bounds),
            HistogramMetricFamily,
        )

    def _add(self, family: Any, values: tuple[str, ...], child: _Observations) -> None:
        cumulative, buckets = 0, []
        for le, count in zip(self._les, list(child.counts), strict=True):
            cumulative += count
            buckets.append((le, float(cumulative)))
        family.add_metric(list(values), buckets, child.total)
