"""Which change becomes work: each rule of ``controller/reconcile/requeue.py`` as a table of
(change → keys enqueued), over one cache of a few objects."""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterable, Set
from dataclasses import dataclass, field
from typing import Any

import pytest

from lifecycle_controller.controller.reconcile.requeue import ChangeFilter, PolicyRequeue, Requeue
from lifecycle_controller.controller.watch.cache import CachedObject, MetadataCache
from lifecycle_controller.controller.watch.ports import ChangeKind
from lifecycle_controller.core.objects.pod_references import ORDINAL_CLAIMS
from lifecycle_controller.core.objects.resources import ObjectKey, ResourceType
from lifecycle_controller.core.objects.scope import ScopeConfig
from lifecycle_controller.core.policy.in_force import PolicySet, object_view
from tests.core.test_policy_set import CONFIGMAPS, NAMESPACES, manifest, parsed

PVCS = ResourceType("", "v1", "persistentvolumeclaims", "PersistentVolumeClaim", True)
WIDGETS = ResourceType("x.io", "v1", "configmaps", "ConfigMap", True)  # not the core group
DEPLOYMENTS = ResourceType("apps", "v1", "deployments", "Deployment", True)
DELETE = {"delete-after": "1h"}


def key(resource: ResourceType, namespace: str | None, name: str) -> ObjectKey:
    return ObjectKey(resource, namespace, name)


def cached(
    k: ObjectKey,
    *,
    viewed: bool = True,
    annotations: dict[str, str] | None = None,
    owner: dict[str, Any] | None = None,
) -> CachedObject:
    """The cache's projection of ``k``; ``viewed``: a policy could match it."""
    metadata: dict[str, Any] = {"name": k.name, "namespace": k.namespace, "uid": k.name}
    if annotations:
        metadata["annotations"] = annotations
    if owner:
        metadata["ownerReferences"] = [owner]
    view = object_view(k.resource, metadata) if viewed else None
    return CachedObject.from_metadata(metadata, view=view)


A_CM = key(CONFIGMAPS, "a", "cm")
A_PLAIN = key(CONFIGMAPS, "a", "annotated-only")  # annotated, not viewed by a policy
OUT = key(CONFIGMAPS, "ignored", "cm")  # outside the scope (its namespace is ignored)
B_CM = key(CONFIGMAPS, "b", "cm")
A_CLAIM0 = key(PVCS, "a", "data-db-0")
A_CLAIM1 = key(PVCS, "a", "data-db-1")
A_OTHER_CLAIM = key(PVCS, "a", "logs-db-0")
A_WIDGET = key(WIDGETS, "a", "cm")
A_DEPLOY = key(DEPLOYMENTS, "a", "web")
NS = key(NAMESPACES, None, "a")  # cluster-scoped

DELETE_AT = {"lifecycle.cezary.dev/delete-at": "2030-01-01T00:00:00Z"}


def _cache() -> MetadataCache:
    cache = MetadataCache()
    for k in (A_CM, OUT, B_CM, A_CLAIM0, A_CLAIM1, A_OTHER_CLAIM, A_WIDGET, A_DEPLOY, NS):
        cache.put(k, cached(k))
    cache.put(A_PLAIN, cached(A_PLAIN, viewed=False, annotations=DELETE_AT))
    return cache


#: Every rule's scope: nothing in namespace "ignored".
SCOPE = ScopeConfig(ignore_namespaces=("ignored",))
NO_POLICIES = PolicySet()
BY_LABEL = parsed(
    manifest(
        "p",
        {
            "resources": ["configmaps"],
            "namespaceSelector": {"matchLabels": {"env": "preview"}},
            "lifecycle": DELETE,
        },
    )
)


@dataclass
class Rules:
    """A :class:`Requeue` over :func:`_cache` whose queue is a list."""

    policies: PolicySet = NO_POLICIES
    enqueued: list[ObjectKey] = field(default_factory=list)

    def __post_init__(self) -> None:
        self.cache = _cache()
        self.requeue = Requeue(
            cache=self.cache,
            scope=SCOPE,
            enqueue=self.enqueued.append,
            policies=lambda: self.policies,
        )


def test_the_scope_ignores_what_the_tables_say_it_does() -> None:
    rules = Rules().requeue
    assert rules.allows(A_CM)
    assert rules.allows(NS)
    assert not rules.allows(OUT)


def same(enqueued: list[ObjectKey], expected: list[ObjectKey]) -> bool:
    """The same keys, each as many times (in any order)."""
    return Counter(enqueued) == Counter(expected)


# ---------------------------------------------------------------------- namespaces


@pytest.mark.parametrize(
    ("change", "policies", "namespace", "enqueued"),
    [
        # Defaults: every namespaced object of the namespace in scope, viewed or not.
        (
            "defaults",
            NO_POLICIES,
            "a",
            [A_DEPLOY, A_CM, A_PLAIN, A_CLAIM0, A_CLAIM1, A_OTHER_CLAIM, A_WIDGET],
        ),
        ("defaults", NO_POLICIES, "b", [B_CM]),
        ("defaults", NO_POLICIES, "empty", []),
        ("defaults", NO_POLICIES, "ignored", []),
        # Labels: the same, but only while a policy selects namespaces by label.
        ("labels", NO_POLICIES, "a", []),
        (
            "labels",
            BY_LABEL,
            "a",
            [A_DEPLOY, A_CM, A_PLAIN, A_CLAIM0, A_CLAIM1, A_OTHER_CLAIM, A_WIDGET],
        ),
        ("labels", BY_LABEL, "b", [B_CM]),
    ],
)
def test_a_namespace_change_enqueues_its_objects_in_scope(
    change: str, policies: PolicySet, namespace: str, enqueued: list[ObjectKey]
) -> None:
    rules = Rules(policies=policies)
    if change == "defaults":
        rules.requeue.namespace_defaults_changed(namespace)
    else:
        rules.requeue.namespace_labels_changed(namespace)
    assert same(rules.enqueued, enqueued)


def test_a_namespace_change_enqueues_types_in_their_sorted_order() -> None:
    rules = Rules()
    rules.requeue.namespace_defaults_changed("a")
    types = [k.resource for k in rules.enqueued]
    assert types == sorted(types)
    assert len(set(types)) > 1


# ---------------------------------------------------------------------- references


@pytest.mark.parametrize(
    ("target", "enqueued"),
    [
        # One object named: the kept, viewed one of each core-group type of that kind.
        (("a", "ConfigMap", "cm"), [A_CM]),
        # A claim template: every kept claim of its ordinals in that namespace.
        (("a", ORDINAL_CLAIMS, "data-db"), [A_CLAIM0, A_CLAIM1]),
        # Not viewed by a policy (annotations alone decide it): not re-evaluated.
        (("a", "ConfigMap", "annotated-only"), []),
        # Out of scope, not kept, or in another namespace: nothing.
        (("ignored", "ConfigMap", "cm"), []),
        (("a", "ConfigMap", "absent"), []),
        (("c", "ConfigMap", "cm"), []),
        (("a", "Secret", "s"), []),
    ],
)
def test_a_reference_target_enqueues_the_kept_objects_it_names(
    target: tuple[str, str, str], enqueued: list[ObjectKey]
) -> None:
    rules = Rules()
    rules.requeue.reference_changed(*target)
    assert same(rules.enqueued, enqueued)


def test_the_reference_index_synced_enqueues_the_viewed_objects_of_the_referenced_kinds() -> None:
    rules = Rules()
    rules.requeue.references_synced()
    # ConfigMaps and claims of the core group, viewed, in scope; not the x.io "ConfigMap",
    # not a Deployment, not the one only its annotations decide, not one out of scope.
    assert same(rules.enqueued, [A_CM, B_CM, A_CLAIM0, A_CLAIM1, A_OTHER_CLAIM])


# ---------------------------------------------------------------------- waiters


def test_a_waiter_freed_enqueues_that_key_whatever_it_is() -> None:
    rules = Rules()
    rules.requeue.waiter_freed(OUT)  # it was reconciled: the scope allowed it then
    rules.requeue.waiter_freed(A_CM)
    assert rules.enqueued == [OUT, A_CM]


# ---------------------------------------------------------------------- object events


@dataclass
class Heard:
    moved: list[ObjectKey] = field(default_factory=list)
    gone: list[ObjectKey] = field(default_factory=list)
    noted: list[ObjectKey] = field(default_factory=list)

    def note(self, k: ObjectKey, uid: str, annotations: Iterable[str]) -> None:
        self.noted.append(k)


COPY_OWNER = {
    "apiVersion": "apps/v1",
    "kind": "Deployment",
    "name": "web",
    "uid": "web",
    "controller": True,
}
REPLICASETS = ResourceType("apps", "v1", "replicasets", "ReplicaSet", True)
COPIED = key(REPLICASETS, "a", "web-1")
ANNOTATED = cached(A_PLAIN, viewed=False, annotations=DELETE_AT)
PLAIN = cached(A_PLAIN, viewed=False)
VIEWED = cached(A_CM)
OWNED = cached(A_CM, owner={"apiVersion": "v1", "kind": "Pod", "name": "p", "uid": "p"})
COPY = cached(COPIED, viewed=False, annotations=DELETE_AT, owner=COPY_OWNER)


@pytest.mark.parametrize(
    ("kind", "k", "old", "new", "act_on_copies", "enqueued"),
    [
        # A new object: with a lifecycle annotation, or viewed by a policy.
        ("add", A_PLAIN, None, ANNOTATED, False, True),
        ("add", A_CM, None, VIEWED, False, True),
        ("add", A_PLAIN, None, PLAIN, False, False),
        # An update: its lifecycle annotations, or its policy view, changed.
        ("update", A_PLAIN, PLAIN, ANNOTATED, False, True),
        ("update", A_PLAIN, ANNOTATED, ANNOTATED, False, False),
        ("update", A_CM, VIEWED, OWNED, False, True),  # an owner reference added
        ("update", A_CM, VIEWED, VIEWED, False, False),
        ("update", A_CM, None, VIEWED, False, True),
        # Out of scope: never.
        ("add", OUT, None, cached(OUT), False, False),
        # A Deployment's annotations copied onto its ReplicaSet: only with the flag.
        ("add", COPIED, None, COPY, False, False),
        ("add", COPIED, None, COPY, True, True),
        # A deletion, or nothing new: no work.
        ("delete", A_CM, VIEWED, None, False, False),
        ("update", A_CM, VIEWED, None, False, False),
    ],
)
def test_an_object_event_enqueues_its_key_when_it_can_change_a_decision(
    kind: ChangeKind,
    k: ObjectKey,
    old: CachedObject | None,
    new: CachedObject | None,
    act_on_copies: bool,
    enqueued: bool,
) -> None:
    rules, heard = Rules(), Heard()
    handler = ChangeFilter(
        rules.requeue,
        act_on_copies=act_on_copies,
        moved=heard.moved.append,
        object_gone=heard.gone.append,
        note_unknown_keys=heard.note,
    )
    handler(kind, k, old, new)
    assert rules.enqueued == ([k] if enqueued else [])
    assert heard.moved == [k]  # the rollout tracker hears of every change
    assert heard.gone == ([k] if kind == "delete" else [])
    in_scope = new is not None and kind != "delete" and rules.requeue.allows(k)
    copy_left = new is COPY and not act_on_copies
    assert heard.noted == ([k] if in_scope and not copy_left else [])


# ---------------------------------------------------------------------- policies


@dataclass
class FakeInformers:
    """The informers as the policy rule sees them: the types running, the relists asked."""

    types: frozenset[ResourceType] = frozenset({CONFIGMAPS, PVCS})
    relisted: list[tuple[ResourceType, frozenset[str] | None]] = field(default_factory=list)

    def running(self) -> Set[ResourceType]:
        return self.types

    async def relist(self, resource: ResourceType) -> None:
        self.relisted.append((resource, None))

    async def relist_namespaces(self, resource: ResourceType, namespaces: Iterable[str]) -> None:
        self.relisted.append((resource, frozenset(namespaces)))


def spec(**extra: Any) -> dict[str, Any]:
    return {"resources": ["configmaps"], "lifecycle": DELETE, **extra}


def local(name: str, namespace: str, generation: int = 1, **extra: Any) -> dict[str, Any]:
    return manifest(name, spec(**extra), namespace=namespace, generation=generation)


def cluster(name: str, generation: int = 1, **extra: Any) -> dict[str, Any]:
    return manifest(name, spec(**extra), generation=generation)


VIEWED_CONFIGMAPS = [A_CM, B_CM]  # in scope and viewed: not A_PLAIN, not OUT


@pytest.mark.parametrize(
    ("old", "new", "enqueued", "relisted"),
    [
        # A LifecyclePolicy added or removed: its namespace's objects, listed there again.
        ((), (local("p", "a"),), [A_CM], [(CONFIGMAPS, frozenset({"a"}))]),
        ((local("p", "b"),), (), [B_CM], [(CONFIGMAPS, frozenset({"b"}))]),
        # A new action keeps the same objects: decided again, not listed again.
        ((local("p", "a"),), (local("p", "a", 2, lifecycle={"delete-after": "2h"}),), [A_CM], []),
        # A cluster policy: every viewed object of the type, the type listed again whole.
        ((), (cluster("c"),), VIEWED_CONFIGMAPS, [(CONFIGMAPS, None)]),
        ((cluster("c"),), (cluster("c", 2, priority=3),), VIEWED_CONFIGMAPS, []),
        # Nothing changed for the running types: no work.
        ((cluster("c"),), (cluster("c"),), [], []),
        (
            (),
            (manifest("s", {"resources": ["deployments"], "lifecycle": DELETE}),),
            [],
            [],
        ),
    ],
)
async def test_a_policy_change_enqueues_the_objects_it_may_decide_and_lists_again(
    old: tuple[dict[str, Any], ...],
    new: tuple[dict[str, Any], ...],
    enqueued: list[ObjectKey],
    relisted: list[tuple[ResourceType, frozenset[str] | None]],
) -> None:
    rules, informers = Rules(), FakeInformers()
    await PolicyRequeue(rules.requeue, informers)(parsed(*old), parsed(*new))
    assert same(rules.enqueued, enqueued)
    assert informers.relisted == relisted


async def test_a_policy_change_looks_only_at_the_types_running() -> None:
    rules, informers = Rules(), FakeInformers(types=frozenset({PVCS}))
    await PolicyRequeue(rules.requeue, informers)(parsed(), parsed(cluster("c")))
    assert rules.enqueued == []
    assert informers.relisted == []
