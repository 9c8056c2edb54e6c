"""A StatefulSet's claim templates through the projection, and which kept objects a changed
reference target names (the pipeline re-queues them)."""

from __future__ import annotations

from typing import Any, cast

from lifecycle_controller.controller.reconcile.requeue import named_by
from lifecycle_controller.controller.watch.cache import CachedObject, MetadataCache
from lifecycle_controller.controller.watch.ports import ObjectSource
from lifecycle_controller.controller.watch.projection import ReferenceFields
from lifecycle_controller.core.objects.pod_references import ORDINAL_CLAIMS
from lifecycle_controller.core.objects.resources import ObjectKey, ResourceType

PVCS = ResourceType("", "v1", "persistentvolumeclaims", "PersistentVolumeClaim", True)
CONFIGMAPS = ResourceType("", "v1", "configmaps", "ConfigMap", True)
CUSTOM_CLAIMS = ResourceType("x.io", "v1", "claims", "PersistentVolumeClaim", True)


def _cache(*keys: ObjectKey) -> MetadataCache:
    cache = MetadataCache()
    for key in keys:
        metadata = {"name": key.name, "namespace": key.namespace, "uid": key.name}
        cache.put(key, CachedObject.from_metadata(metadata))
    return cache


def test_a_claim_template_names_every_kept_claim_of_its_ordinals_in_its_namespace() -> None:
    claims = [
        ObjectKey(PVCS, "a", name)
        for name in ("data-db-0", "data-db-12", "data-db-01", "data-db", "logs-db-0")
    ]
    cache = _cache(
        *claims, ObjectKey(PVCS, "b", "data-db-0"), ObjectKey(CUSTOM_CLAIMS, "a", "data-db-0")
    )
    found = named_by(cache, "a", ORDINAL_CLAIMS, "data-db")
    assert sorted(key.name for key in found) == ["data-db-0", "data-db-12"]
    assert {key.namespace for key in found} == {"a"}
    assert {key.resource for key in found} == {PVCS}


def test_any_other_target_names_its_one_object_of_each_core_type() -> None:
    cache = _cache(ObjectKey(CONFIGMAPS, "a", "cfg"), ObjectKey(PVCS, "a", "data-db-0"))
    assert named_by(cache, "a", "ConfigMap", "cfg") == [ObjectKey(CONFIGMAPS, "a", "cfg")]
    assert named_by(cache, "a", "PersistentVolumeClaim", "data-db-0") == [
        ObjectKey(PVCS, "a", "data-db-0")
    ]
    assert named_by(cache, "a", "Secret", "s") == []  # no Secrets are kept
    assert named_by(_cache(), "a", ORDINAL_CLAIMS, "data-db") == []


def test_the_projection_keeps_a_statefulsets_claim_templates_as_its_references() -> None:
    statefulset: dict[str, Any] = {
        "metadata": {"name": "db", "namespace": "a", "labels": {"x": "y"}},
        "spec": {
            "replicas": 0,
            "template": {"spec": {"containers": [{"name": "c", "image": "i"}]}},
            "volumeClaimTemplates": [{"metadata": {"name": "data"}, "spec": {}}],
        },
    }
    kept = ReferenceFields(cast(ObjectSource, None), "StatefulSet").kept(statefulset)
    assert kept == {
        "metadata": {"namespace": "a", "name": "db"},
        "references": frozenset({(ORDINAL_CLAIMS, "data-db")}),
    }
