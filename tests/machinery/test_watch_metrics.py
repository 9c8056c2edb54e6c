"""The watch family counts every watch by purpose; the older informer families keep counting
the annotated types' watches only, as before (the chart's alerts and dashboard read them)."""

from __future__ import annotations

import pytest
from prometheus_client import generate_latest

from lifecycle_controller.app.informer_metrics import InformerMetricsAdapter
from lifecycle_controller.kube import NAMESPACES
from lifecycle_controller.kube.resources import CONFIGMAPS, POLICIES
from lifecycle_controller.serving.metrics import Metrics


def sample(metrics: Metrics, name: str, **labels: str) -> float | None:
    return metrics.registry.get_sample_value(name, labels)


def test_every_purpose_counts_in_the_watch_family_and_only_objects_in_the_old_ones() -> None:
    metrics = Metrics(process_collectors=False)
    objects = InformerMetricsAdapter(metrics)
    policies = InformerMetricsAdapter(metrics, purpose="policies")
    defaults = InformerMetricsAdapter(metrics, purpose="namespace-defaults")
    for adapter, resource in ((objects, CONFIGMAPS), (policies, POLICIES), (defaults, NAMESPACES)):
        adapter.watch_restarted(resource, "expired")
        adapter.relisted(resource)
        adapter.event_received(resource, "MODIFIED")
        adapter.cache_objects(resource, 3)
    for purpose, resource in (
        ("objects", CONFIGMAPS),
        ("policies", POLICIES),
        ("namespace-defaults", NAMESPACES),
    ):
        labels = {"resource": resource.key, "purpose": purpose}
        assert sample(metrics, "lifecycle_watch_ends_total", **labels, reason="expired") == 1
        assert sample(metrics, "lifecycle_watch_relists_total", **labels) == 1
        assert sample(metrics, "lifecycle_watch_events_total", **labels, type="MODIFIED") == 1
    restarts = "lifecycle_watch_restarts_total"
    assert sample(metrics, restarts, resource="configmaps", reason="expired") == 1
    assert sample(metrics, restarts, resource=POLICIES.key, reason="expired") is None
    assert sample(metrics, restarts, resource="namespaces", reason="expired") is None
    assert sample(metrics, "lifecycle_relists_total", resource="namespaces") is None
    assert sample(metrics, "lifecycle_cache_objects", resource="configmaps") == 3
    assert sample(metrics, "lifecycle_cache_objects", resource="namespaces") is None


def test_the_watch_family_is_declared_and_has_no_created_series() -> None:
    metrics = Metrics(process_collectors=False)
    InformerMetricsAdapter(metrics, purpose="rollouts").watch_restarted(CONFIGMAPS, "closed")
    text = generate_latest(metrics.registry).decode()
    for family in ("ends", "relists", "events"):
        assert f"# TYPE lifecycle_watch_{family}_total counter" in text
    assert "_created" not in text


def test_an_unknown_purpose_is_refused() -> None:
    with pytest.raises(ValueError, match="purpose"):
        InformerMetricsAdapter(Metrics(process_collectors=False), purpose="misc")
