"""The metadata cache: projection of PartialObjectMetadata, keys, and synced flags."""

from __future__ import annotations

from typing import Any

import pytest

from lifecycle_controller.controller.watch.cache import (
    CachedObject,
    MetadataCache,
    RestartFact,
    RestartFacts,
)
from lifecycle_controller.core.objects.resources import ObjectKey
from lifecycle_controller.kube import NAMESPACES, ResourceType

CONFIGMAPS = ResourceType("", "v1", "configmaps", "ConfigMap", namespaced=True)
DEPLOYMENTS = ResourceType("apps", "v1", "deployments", "Deployment", namespaced=True)


def metadata(name: str = "a", namespace: str | None = "ns", **extra: Any) -> dict[str, Any]:
    meta: dict[str, Any] = {
        "name": name,
        "uid": f"uid-{name}",
        "resourceVersion": "7",
        "creationTimestamp": "2026-01-01T00:00:00Z",
    }
    if namespace is not None:
        meta["namespace"] = namespace
    meta.update(extra)
    return meta


def cached(name: str = "a", namespace: str | None = "ns", **annotations: str) -> CachedObject:
    return CachedObject.from_metadata(metadata(name, namespace, annotations=annotations))


class TestCachedObject:
    def test_keeps_only_lifecycle_annotations_and_drops_managed_fields(self) -> None:
        obj = CachedObject.from_metadata(
            metadata(
                annotations={
                    "lifecycle.cezary.dev/delete-after": "1h",
                    "kubectl.kubernetes.io/last-applied-configuration": "{...}",
                    "lifecycle.cezary.dev.evil/x": "no",
                },
                managedFields=[{"manager": "kubectl"}],
                labels={"app": "x"},
                generation=3,
                deletionTimestamp="2026-01-02T00:00:00Z",
            )
        )
        assert dict(obj.annotations) == {"lifecycle.cezary.dev/delete-after": "1h"}
        assert obj.annotated
        assert obj.uid == "uid-a"
        assert obj.resource_version == "7"
        assert obj.name == "a"
        assert obj.namespace == "ns"
        assert obj.creation_timestamp == "2026-01-01T00:00:00Z"
        assert obj.deletion_timestamp == "2026-01-02T00:00:00Z"
        assert obj.generation == 3
        assert not hasattr(obj, "__dict__")  # slotted: small per object

    def test_unannotated_and_cluster_scoped(self) -> None:
        obj = CachedObject.from_metadata(metadata(namespace=None, annotations=None))
        assert not obj.annotated
        assert obj.namespace is None
        assert obj.deletion_timestamp is None
        assert obj.generation is None

    def test_is_frozen_and_annotations_read_only(self) -> None:
        obj = cached(**{"lifecycle.cezary.dev/delete-at": "2026-01-01T00:00:00Z"})
        with pytest.raises(AttributeError):
            obj.uid = "x"  # type: ignore[misc]
        with pytest.raises(TypeError):
            obj.annotations["lifecycle.cezary.dev/x"] = "y"  # type: ignore[index]

    def test_equality_by_value(self) -> None:
        a = cached(**{"lifecycle.cezary.dev/delete-after": "1h"})
        b = cached(**{"lifecycle.cezary.dev/delete-after": "1h"})
        assert a == b
        assert a != cached(**{"lifecycle.cezary.dev/delete-after": "2h"})


class TestObjectKey:
    def test_hashable_and_equal_by_value(self) -> None:
        a = ObjectKey(CONFIGMAPS, "ns", "a")
        assert a == ObjectKey(CONFIGMAPS, "ns", "a")
        assert len({a, ObjectKey(CONFIGMAPS, "ns", "a"), ObjectKey(DEPLOYMENTS, "ns", "a")}) == 2

    def test_log_context(self) -> None:
        assert ObjectKey(DEPLOYMENTS, "ns", "web").log_context() == {
            "kind": "Deployment",
            "api_version": "apps/v1",
            "namespace": "ns",
            "name": "web",
        }
        assert ObjectKey(NAMESPACES, None, "prod").log_context() == {
            "kind": "Namespace",
            "api_version": "v1",
            "namespace": "",
            "name": "prod",
        }

    def test_str(self) -> None:
        assert str(ObjectKey(DEPLOYMENTS, "ns", "web")) == "Deployment.apps/v1 ns/web"
        assert str(ObjectKey(NAMESPACES, None, "prod")) == "Namespace.v1 prod"


class TestMetadataCache:
    def test_put_get_delete(self) -> None:
        cache = MetadataCache()
        key = ObjectKey(CONFIGMAPS, "ns", "a")
        obj = cached(**{"lifecycle.cezary.dev/delete-after": "1h"})
        assert cache.get(key) is None
        cache.put(key, obj)
        assert cache.get(key) is obj
        assert cache.delete(key) is obj
        assert cache.delete(key) is None
        assert cache.delete(ObjectKey(DEPLOYMENTS, "ns", "a")) is None
        assert len(cache) == 0

    def test_keys_by_type_and_namespace(self) -> None:
        cache = MetadataCache()
        keys = [
            ObjectKey(CONFIGMAPS, "ns1", "a"),
            ObjectKey(CONFIGMAPS, "ns2", "b"),
            ObjectKey(DEPLOYMENTS, "ns1", "c"),
        ]
        for key in keys:
            cache.put(key, cached(key.name, key.namespace))
        assert set(cache.keys(CONFIGMAPS)) == set(keys[:2])
        assert cache.keys(CONFIGMAPS, namespace="ns1") == [keys[0]]
        assert cache.keys(NAMESPACES) == []
        assert [k for k, _ in cache.items(DEPLOYMENTS)] == [keys[2]]
        assert cache.counts() == {CONFIGMAPS: 2, DEPLOYMENTS: 1}
        assert cache.count(NAMESPACES) == 0
        assert len(cache) == 3

    def test_synced_per_scope(self) -> None:
        cache = MetadataCache()
        assert not cache.type_synced(CONFIGMAPS)  # nothing registered: not synced
        assert cache.all_synced([])
        cache.register_scope(CONFIGMAPS, "ns1")
        cache.register_scope(CONFIGMAPS, "ns2")
        cache.register_scope(NAMESPACES, None)
        cache.mark_synced(CONFIGMAPS, "ns1")
        assert cache.is_synced(CONFIGMAPS, "ns1")
        assert not cache.type_synced(CONFIGMAPS)
        cache.mark_synced(CONFIGMAPS, "ns2")
        assert cache.type_synced(CONFIGMAPS)
        assert not cache.all_synced([CONFIGMAPS, NAMESPACES])
        cache.mark_synced(NAMESPACES, None)
        assert cache.all_synced([CONFIGMAPS, NAMESPACES])
        cache.register_scope(CONFIGMAPS, "ns1")  # registering again keeps the flag
        assert cache.type_synced(CONFIGMAPS)
        assert cache.counts() == {CONFIGMAPS: 0, NAMESPACES: 0}

    def test_drop_type(self) -> None:
        cache = MetadataCache()
        cache.register_scope(CONFIGMAPS, None)
        cache.mark_synced(CONFIGMAPS, None)
        cache.put(ObjectKey(CONFIGMAPS, "ns", "a"), cached())
        cache.put(ObjectKey(DEPLOYMENTS, "ns", "a"), cached())
        cache.drop_type(CONFIGMAPS)
        assert cache.keys(CONFIGMAPS) == []
        assert not cache.type_synced(CONFIGMAPS)
        assert cache.types() == {DEPLOYMENTS}
        cache.drop_type(CONFIGMAPS)  # idempotent


class TestRestartFacts:
    """The restart facts remembered per UID are bounded: the least recently used go first."""

    @pytest.fixture
    def facts(self, monkeypatch: pytest.MonkeyPatch) -> RestartFacts:
        monkeypatch.setattr(RestartFacts, "MAX", 3)
        return RestartFacts()

    @pytest.mark.parametrize(
        ("used", "kept"),
        [
            ([], {"b", "c", "d"}),  # "a", written first, goes when "d" comes
            (["put a"], {"a", "c", "d"}),  # written again: "b" is now the oldest
            (["get a"], {"a", "c", "d"}),  # read: kept as long as one written then
            (["anchor a"], {"a", "c", "d"}),
            (["acknowledge a"], {"a", "c", "d"}),
            (["forget b"], {"a", "c", "d"}),  # room made: nothing else goes
        ],
        ids=["written-first", "rewritten", "read", "anchored", "acknowledged", "forgotten"],
    )
    def test_the_least_recently_used_goes_first(
        self, facts: RestartFacts, used: list[str], kept: set[str]
    ) -> None:
        for uid in "abc":
            facts.put(uid, RestartFact(marker=f"m-{uid}"))
        for step in used:
            verb, uid = step.split()
            if verb == "put":
                facts.put(uid, RestartFact(marker="again"))
            elif verb == "acknowledge":
                facts.acknowledge(uid, 1)
            else:
                getattr(facts, verb)(uid)
        facts.put("d", RestartFact(marker="m-d"))
        assert {uid for uid in "abcd" if facts.get(uid) is not None} == kept
        assert len(facts) == len(kept)

    def test_facts_and_acknowledgements_of_one_uid_live_and_go_together(
        self, facts: RestartFacts
    ) -> None:
        facts.acknowledge("a", 1_800_000_000 * 10**9)
        facts.put("a", RestartFact(marker=None))
        assert facts.anchor("a") == "2027-01-15T08:00:00Z"
        for uid in "bcd":
            facts.put(uid, RestartFact(marker=None))
        assert (facts.get("a"), facts.anchor("a")) == (None, None)
