"""The per-action metric families (serving.loop_metrics) export what prometheus_client's do.

Each family is compared with the prometheus_client family it replaced, fed the same
updates, in two registries: the samples (names, labels, values) must be the same, apart
from the ``_created`` series the replacements do not have.
"""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st
from prometheus_client import CollectorRegistry, Counter, Histogram

from lifecycle_controller.serving.loop_metrics import LoopCounter, LoopHistogram

BUCKETS = (1e-8, 1e-4, 0.005, 0.1, 1.0, 2.5, 60.0)


def samples(registry: CollectorRegistry) -> set[tuple[str, tuple[tuple[str, str], ...], float]]:
    return {
        (s.name, tuple(sorted(s.labels.items())), s.value)
        for family in registry.collect()
        for s in family.samples
        if not s.name.endswith("_created")
    }


@given(
    st.lists(
        st.tuples(
            st.sampled_from(["a", "b"]),
            st.floats(min_value=0, max_value=100, allow_nan=False) | st.sampled_from(BUCKETS),
        ),
        max_size=40,
    )
)
def test_a_histogram_exports_what_prometheus_client_s_does(
    observations: list[tuple[str, float]],
) -> None:
    ours, theirs = CollectorRegistry(), CollectorRegistry()
    loop = LoopHistogram("h_seconds", "h", ["name"], buckets=BUCKETS, registry=ours)
    reference = Histogram("h_seconds", "h", ["name"], buckets=BUCKETS, registry=theirs)
    for name in ("a", "b"):
        loop.labels(name)
        reference.labels(name)
    for name, value in observations:
        loop.labels(name).observe(value)
        reference.labels(name).observe(value)
    assert _close(ours, theirs)


def _close(ours: CollectorRegistry, theirs: CollectorRegistry) -> bool:
    """Equal samples; sums compared with a tolerance (the same floats, added in order)."""
    mine = {(n, labels): v for n, labels, v in samples(ours)}
    reference = {(n, labels): v for n, labels, v in samples(theirs)}
    assert mine.keys() == reference.keys()
    for key, value in reference.items():
        assert mine[key] == pytest.approx(value), key
    return True


@given(st.lists(st.tuples(st.sampled_from(["200", "404"]), st.integers(0, 3)), max_size=30))
def test_a_counter_exports_what_prometheus_client_s_does(updates: list[tuple[str, int]]) -> None:
    ours, theirs = CollectorRegistry(), CollectorRegistry()
    loop = LoopCounter("requests", "r", ["code", "method"], registry=ours)
    reference = Counter("requests", "r", ["code", "method"], registry=theirs)
    for code, amount in updates:
        loop.labels(code, "GET").inc(amount)
        reference.labels(code, "GET").inc(amount)
    assert _close(ours, theirs)


def test_a_removed_child_is_no_longer_exported_and_wrong_labels_are_refused() -> None:
    registry = CollectorRegistry()
    counter = LoopCounter("things", "t", ["kind"], registry=registry)
    counter.labels("a").inc()
    counter.labels("b").inc(2)
    counter.remove("a")
    assert {(n, labels, v) for n, labels, v in samples(registry)} == {
        ("things_total", (("kind", "b"),), 2.0)
    }
    with pytest.raises(ValueError, match="expected labels"):
        counter.labels("a", "b")
    with pytest.raises(ValueError, match="non-negative"):
        counter.labels("b").inc(-1)
    with pytest.raises(ValueError, match="increasing"):
        LoopHistogram("bad", "b", [], buckets=(2.0, 1.0), registry=CollectorRegistry())


def test_a_name_taken_in_the_registry_is_refused() -> None:
    registry = CollectorRegistry()
    Counter("taken", "t", registry=registry)
    with pytest.raises(ValueError, match="Duplicated"):
        LoopCounter("taken", "t", [], registry=registry)
