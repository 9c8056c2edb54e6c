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
from typing import cast

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


class _Family:
    """Children by label values, created on first use and kept until removed."""

    def __init__(
        self, name: str, documentation: str, labelnames: Sequence[str], registry: CollectorRegistry
    ) -> None:
        self._name = name
        self._documentation = documentation
        self._labelnames = tuple(labelnames)
        registry.register(self)

    def _check(self, values: tuple[str, ...]) -> None:
        if len(values) != len(self._labelnames):
            raise ValueError(f"{self._name}: expected labels {self._labelnames}, got {values}")

    def describe(self) -> list[Metric]:
        return [self._empty()]

    def _empty(self) -> Metric:
        raise NotImplementedError

    def collect(self) -> Iterator[Metric]:
        raise NotImplementedError


class LoopCounter(_Family):
    """A counter family (``NAME_total``) whose children are plain floats."""

    def __init__(
        self,
        name: str,
        documentation: str,
        labelnames: Sequence[str],
        *,
        registry: CollectorRegistry,
    ) -> None:
        super().__init__(name, documentation, labelnames, registry)
        self._children: dict[tuple[str, ...], _Count] = {}

    def labels(self, *values: str) -> _Count:
        child = self._children.get(values)
        if child is None:
            self._check(values)
            child = self._children[values] = _Count()
        return child

    def remove(self, *values: str) -> None:
        self._children.pop(values, None)

    def _empty(self) -> Metric:
        return CounterMetricFamily(self._name, self._documentation, labels=self._labelnames)

    def collect(self) -> Iterator[Metric]:
        family = CounterMetricFamily(self._name, self._documentation, labels=self._labelnames)
        for values, child in list(self._children.items()):
            family.add_metric(values, child.value)
        yield family


class LoopGauge(_Family):
    """A gauge family whose children are plain floats (set on every change, read on scrape)."""

    def __init__(
        self,
        name: str,
        documentation: str,
        labelnames: Sequence[str],
        *,
        registry: CollectorRegistry,
    ) -> None:
        super().__init__(name, documentation, labelnames, registry)
        self._children: dict[tuple[str, ...], _Value] = {}

    def labels(self, *values: str) -> _Value:
        child = self._children.get(values)
        if child is None:
            self._check(values)
            child = self._children[values] = _Value()
        return child

    def remove(self, *values: str) -> None:
        self._children.pop(values, None)

    def _empty(self) -> Metric:
        return GaugeMetricFamily(self._name, self._documentation, labels=self._labelnames)

    def collect(self) -> Iterator[Metric]:
        family = GaugeMetricFamily(self._name, self._documentation, labels=self._labelnames)
        for values, child in list(self._children.items()):
            family.add_metric(values, child.value)
        yield family


class LoopHistogram(_Family):
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
        super().__init__(name, documentation, labelnames, registry)
        self._bounds = bounds
        self._les = (*(_go_float(b) for b in bounds), "+Inf")
        self._children: dict[tuple[str, ...], _Observations] = {}

    def labels(self, *values: str) -> _Observations:
        child = self._children.get(values)
        if child is None:
            self._check(values)
            child = self._children[values] = _Observations(self._bounds)
        return child

    def remove(self, *values: str) -> None:
        self._children.pop(values, None)

    def _empty(self) -> Metric:
        return HistogramMetricFamily(self._name, self._documentation, labels=self._labelnames)

    def collect(self) -> Iterator[Metric]:
        family = HistogramMetricFamily(self._name, self._documentation, labels=self._labelnames)
        for values, child in list(self._children.items()):
            cumulative, buckets = 0, []
            for le, count in zip(self._les, list(child.counts), strict=True):
                cumulative += count
                buckets.append((le, float(cumulative)))
            family.add_metric(list(values), buckets, child.total)
        yield family
