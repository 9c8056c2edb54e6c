"""The namespace store keeps every Namespace's labels for ``namespaceSelector`` while a
policy has one, and says when they change; unknown until listed (over the real client
against the fake API server)."""

from __future__ import annotations

import asyncio
import random
from dataclasses import replace

from lifecycle_controller.controller.namespace.defaults import NamespaceDefaultsStore
from lifecycle_controller.controller.policy.store import PolicyStore
from lifecycle_controller.core.objects.resources import ResourceType
from lifecycle_controller.core.policy.in_force import PolicySet
from lifecycle_controller.core.policy.match import ObjectView
from lifecycle_controller.core.policy.model import Policy, PolicyKind, parse_policy
from lifecycle_controller.kube import KubeClient
from lifecycle_controller.kube.resources import NAMESPACES
from lifecycle_controller.machinery.tasks import cancel_and_wait
from tests.doubles.fakeapi import FakeApiServer
from tests.doubles.fakeclock import FakeClock
from tests.unit.support import annotated, eventually

CONFIGMAPS = ResourceType("", "v1", "configmaps", "ConfigMap", True)


def labelled_namespace(name: str, **labels: str) -> dict[str, object]:
    body = annotated(name, {})
    body["metadata"]["labels"] = labels
    return body


async def test_labels_are_known_once_listed_and_a_relabel_is_reported(
    api: FakeApiServer, kube: KubeClient, clock: FakeClock
) -> None:
    api.store.create(NAMESPACES, None, labelled_namespace("previews", env="preview"))
    api.store.create(NAMESPACES, None, labelled_namespace("plain"))
    relabelled: list[str] = []
    defaults: list[str] = []
    store = NamespaceDefaultsStore(
        source=kube,
        clock=clock,
        on_change=defaults.append,
        on_labels_change=relabelled.append,
        rng=random.Random(1),
    )
    store.keep_labels(True)  # a policy has a namespaceSelector
    assert store.labels("previews") is None  # not listed yet: unknown
    task = asyncio.create_task(store.run())
    try:
        await asyncio.wait_for(store.wait_synced(), 5)
        assert store.labels("previews") == {"env": "preview"}
        assert store.labels("plain") == {}
        assert store.labels("absent") is None
        assert relabelled == []  # the first list: no worker acted yet, nothing to redo
        api.store.create(NAMESPACES, None, labelled_namespace("late", env="preview"))
        await eventually(lambda: relabelled == ["late"])  # a new one after the list: yes
        relabelled.clear()

        api.store.patch(NAMESPACES, None, "plain", {"metadata": {"labels": {"env": "preview"}}})
        await eventually(lambda: relabelled == ["plain"])
        assert store.labels("plain") == {"env": "preview"}
        api.store.patch(NAMESPACES, None, "plain", {"metadata": {"annotations": {"a": "b"}}})
        api.store.patch(NAMESPACES, None, "plain", {"metadata": {"labels": {"env": None}}})
        await eventually(lambda: relabelled == ["plain", "plain"])  # the annotation: no
        assert store.labels("plain") == {}
        assert defaults == []  # labels are not defaults
    finally:
        await cancel_and_wait(task)


async def test_labels_are_kept_only_while_a_policy_selects_namespaces_by_label(
    api: FakeApiServer, kube: KubeClient, clock: FakeClock
) -> None:
    """No policy with a namespaceSelector: only the Namespace with defaults is cached. One
    appears: the Namespaces are listed again and each one's objects are decided again with
    its labels (one relabelled while they were not kept included). None any more: the labels
    go."""
    api.store.create(NAMESPACES, None, labelled_namespace("previews", env="preview"))
    api.store.create(NAMESPACES, None, labelled_namespace("plain"))
    defaults = annotated("capped", {"lifecycle.cezary.dev/max-delete-ttl": "24h"})
    defaults["metadata"]["labels"] = {"env": "prod"}
    api.store.create(NAMESPACES, None, defaults)
    relabelled: list[str] = []
    store = NamespaceDefaultsStore(
        source=kube, clock=clock, on_labels_change=relabelled.append, rng=random.Random(1)
    )
    task = asyncio.create_task(store.run())
    try:
        await asyncio.wait_for(store.wait_synced(), 5)
        assert store.cached() == 1  # the one with defaults, without its labels
        assert store.labels("previews") is None
        assert store.labels("capped") is None
        api.store.patch(NAMESPACES, None, "plain", {"metadata": {"labels": {"env": "preview"}}})
        await clock.settle()
        assert relabelled == []  # not kept: not a change anybody reads

        store.keep_labels(True)
        await eventually(lambda: store.cached() == 3)
        assert store.labels("plain") == {"env": "preview"}  # the relabel is not missed
        assert store.labels("capped") == {"env": "prod"}
        assert sorted(relabelled) == ["capped", "plain", "previews"]
        relabelled.clear()
        api.store.patch(NAMESPACES, None, "plain", {"metadata": {"labels": {"env": None}}})
        await eventually(lambda: relabelled == ["plain"])

        store.keep_labels(False)
        await eventually(lambda: store.cached() == 1)
        assert store.labels("previews") is None
        assert store.get("capped") is not None  # its defaults stay
    finally:
        await cancel_and_wait(task)


def _policy(**fields: object) -> Policy:
    spec = {"resources": ["configmaps"], "lifecycle": {"delete-after": "1h"}, **fields}
    parsed = parse_policy(PolicyKind.CLUSTER, None, "p", 1, spec)
    assert isinstance(parsed, Policy)
    return parsed


def test_the_policy_store_adds_the_namespace_labels_only_when_a_policy_reads_them(
    kube: KubeClient, clock: FakeClock
) -> None:
    store = PolicyStore(kube, clock=clock)
    store.namespace_labels = {"team-a": {"env": "preview"}}.get
    view = ObjectView(resource=CONFIGMAPS, namespace="team-a", name="cfg")
    store.current = PolicySet.of([_policy()])
    assert store.with_namespace(view) is view
    store.current = PolicySet.of([_policy(namespaceSelector={"matchLabels": {"env": "x"}})])
    assert store.with_namespace(view).namespace_labels == {"env": "preview"}
    assert store.with_namespace(replace(view, namespace="other")).namespace_labels is None
    cluster_scoped = ObjectView(resource=NAMESPACES, namespace=None, name="team-a")
    assert store.with_namespace(cluster_scoped) is cluster_scoped


def test_the_policy_store_says_whether_the_namespace_is_exempt(
    kube: KubeClient, clock: FakeClock
) -> None:
    store = PolicyStore(kube, clock=clock)
    store.namespace_exempt = {"team-a"}.__contains__
    view = ObjectView(resource=CONFIGMAPS, namespace="team-a", name="cfg")
    other = replace(view, namespace="other")
    for selects_by_label in (False, True):
        selector = {"namespaceSelector": {"matchLabels": {"env": "x"}}} if selects_by_label else {}
        store.current = PolicySet.of([_policy(**selector)])
        assert store.with_namespace(view).namespace_exempt
        assert not store.with_namespace(other).namespace_exempt
    store.current = PolicySet.of([_policy()])
    assert store.with_namespace(other) is other  # nothing to add: the same view
