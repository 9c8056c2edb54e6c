"""The reference index in the controller: held until synced, why when forbidden, changes."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from typing import Any

from lifecycle_controller.controller.policy.references import ReferenceWatch
from lifecycle_controller.core.objects.pod_references import ORDINAL_CLAIMS
from lifecycle_controller.core.objects.resources import ResourceType
from lifecycle_controller.core.policy.match import REFERENCES_NOT_SYNCED, ObjectView
from lifecycle_controller.kube import Forbidden
from tests.doubles.fakeclock import FakeClock

PODS = ResourceType("", "v1", "pods", "Pod", True)
DEPLOYMENTS = ResourceType("apps", "v1", "deployments", "Deployment", True)
STATEFULSETS = ResourceType("apps", "v1", "statefulsets", "StatefulSet", True)
CONFIGMAPS = ResourceType("", "v1", "configmaps", "ConfigMap", True)
PVCS = ResourceType("", "v1", "persistentvolumeclaims", "PersistentVolumeClaim", True)
VIEW = ObjectView(resource=CONFIGMAPS, namespace="a", name="cfg")


def _pod(name: str, uses: str) -> dict[str, Any]:
    volume = {"name": "v", "configMap": {"name": uses}}
    return {"metadata": {"name": name, "namespace": "a"}, "spec": {"volumes": [volume]}}


def _statefulset(name: str, template: str) -> dict[str, Any]:
    claims = [{"metadata": {"name": template}}]
    spec = {"replicas": 0, "template": {"spec": {}}, "volumeClaimTemplates": claims}
    return {"metadata": {"name": name, "namespace": "a", "resourceVersion": "2"}, "spec": spec}


class _Source:
    """Lists Pods from ``pods``; forbids ``forbidden``; lists stall until ``release``; the
    Pods' and StatefulSets' watches deliver what is put in ``events``."""

    def __init__(self, pods: list[dict[str, Any]], forbidden: frozenset[str] = frozenset()):
        self.pods = pods
        self.forbidden = forbidden
        self.release = asyncio.Event()
        self.events: dict[ResourceType, asyncio.Queue[dict[str, Any]]] = {
            PODS: asyncio.Queue(),
            STATEFULSETS: asyncio.Queue(),
        }

    async def list_objects(self, resource: ResourceType, **_: Any) -> dict[str, Any]:
        if resource.resource in self.forbidden:
            raise Forbidden(403)
        await self.release.wait()
        items = self.pods if resource == PODS else []
        return {"metadata": {"resourceVersion": "1"}, "items": items}

    async def watch_objects(
        self, resource: ResourceType, **_: Any
    ) -> AsyncIterator[dict[str, Any]]:
        events = self.events.get(resource)
        while True:
            if events is None:
                await asyncio.Event().wait()
            else:
                yield await events.get()


async def _settle() -> None:
    for _ in range(50):
        await asyncio.sleep(0)


async def test_references_are_unknown_until_every_type_is_listed() -> None:
    source = _Source([_pod("p", "cfg")])
    watch = ReferenceWatch(source, FakeClock(), types=(PODS, DEPLOYMENTS))
    assert watch.view_of(VIEW).referenced_by is None  # not even open
    changed: list[tuple[str, str, str]] = []
    synced: list[bool] = []
    watch.on_target = lambda *target: changed.append(target)
    watch.on_synced = lambda: synced.append(True)
    watch.want(True)
    await _settle()
    held = watch.view_of(VIEW)
    assert held.referenced_by is None
    assert held.references_missing == REFERENCES_NOT_SYNCED
    source.release.set()
    await _settle()
    assert watch.view_of(VIEW).referenced_by == ("Pod/p",)
    assert changed == []  # the objects it held are all re-queued: on_synced
    assert synced == [True]
    source.events[PODS].put_nowait({"type": "DELETED", "object": _pod("p", "cfg")})
    await _settle()
    assert watch.view_of(VIEW).referenced_by == ()
    assert changed == [("a", "ConfigMap", "cfg")]  # once synced, every change is told
    watch.want(False)
    assert watch.view_of(VIEW).referenced_by is None
    await watch.aclose()


async def test_a_forbidden_type_holds_and_says_which() -> None:
    source = _Source([], forbidden=frozenset({"deployments"}))
    source.release.set()
    watch = ReferenceWatch(source, FakeClock(), types=(PODS, DEPLOYMENTS))
    watch.want(True)
    await _settle()
    held = watch.view_of(VIEW)
    assert held.referenced_by is None
    assert "deployments.apps" in held.references_missing
    await watch.aclose()


async def test_a_statefulset_uses_its_claims_and_says_so_by_their_template() -> None:
    """A StatefulSet scaled to zero uses ``data-db-0``; its template's target is told when
    it goes (the listener finds the claims it names), and the claim is unused then."""
    source = _Source([])
    watch = ReferenceWatch(source, FakeClock(), types=(PODS, STATEFULSETS))
    changed: list[tuple[str, str, str]] = []
    watch.on_target = lambda *target: changed.append(target)
    watch.want(True)
    source.release.set()
    await _settle()
    claim = ObjectView(resource=PVCS, namespace="a", name="data-db-0")
    source.events[STATEFULSETS].put_nowait({"type": "ADDED", "object": _statefulset("db", "data")})
    await _settle()
    assert watch.view_of(claim).referenced_by == ("StatefulSet/db",)
    assert changed == [("a", ORDINAL_CLAIMS, "data-db")]
    source.events[STATEFULSETS].put_nowait(
        {"type": "DELETED", "object": _statefulset("db", "data")}
    )
    await _settle()
    assert watch.view_of(claim).referenced_by == ()
    assert changed == [("a", ORDINAL_CLAIMS, "data-db")] * 2


class _Scoped:
    """Lists, per namespace, the Pods of that namespace (every one cluster-wide); records the
    namespace of every list (None: cluster-wide); forbids ``forbidden`` namespaces."""

    def __init__(self, pods: list[dict[str, Any]], forbidden: frozenset[str] = frozenset()):
        self.pods = pods
        self.forbidden = forbidden
        self.listed: list[str | None] = []

    async def list_objects(
        self, resource: ResourceType, *, namespace: str | None = None, **_: Any
    ) -> dict[str, Any]:
        if namespace in self.forbidden:
            raise Forbidden(403)
        if resource == PODS:
            self.listed.append(namespace)
        items = [
            pod
            for pod in self.pods
            if resource == PODS and namespace in (None, pod["metadata"]["namespace"])
        ]
        return {"metadata": {"resourceVersion": "1"}, "items": items}

    async def watch_objects(
        self, resource: ResourceType, **_: Any
    ) -> AsyncIterator[dict[str, Any]]:
        await asyncio.Event().wait()
        yield {}


def _in(namespace: str, name: str, uses: str) -> dict[str, Any]:
    pod = _pod(name, uses)
    pod["metadata"]["namespace"] = namespace
    return pod


def _view(namespace: str) -> ObjectView:
    return ObjectView(resource=CONFIGMAPS, namespace=namespace, name="cfg")


async def test_lifecycle_policies_open_their_namespaces_only() -> None:
    """While only LifecyclePolicies read referencedBy, each of their namespaces is watched
    alone; an object elsewhere is held; a namespace no longer wanted is closed and its
    references forgotten; a cluster policy reading it watches cluster-wide."""
    source = _Scoped([_in("a", "p", "cfg"), _in("b", "q", "cfg")])
    watch = ReferenceWatch(source, FakeClock(), types=(PODS, DEPLOYMENTS))
    synced: list[bool] = []
    watch.on_synced = lambda: synced.append(True)
    watch.want(True, frozenset({"a"}))
    await _settle()
    assert source.listed == ["a"]
    assert watch.scopes == {"a"}
    assert watch.synced
    assert watch.missing() is None
    assert watch.view_of(_view("a")).referenced_by == ("Pod/p",)
    elsewhere = watch.view_of(_view("b"))
    assert elsewhere.referenced_by is None
    assert elsewhere.references_missing == REFERENCES_NOT_SYNCED
    watch.want(True, frozenset({"a", "b"}))  # "a" stays open: not listed again
    await _settle()
    assert source.listed == ["a", "b"]
    assert watch.view_of(_view("b")).referenced_by == ("Pod/q",)
    assert synced == [True, True]  # each scope, once synced
    watch.want(True, frozenset({"b"}))
    assert watch.scopes == {"b"}
    assert watch.referenced_by("a", "ConfigMap", "cfg") == ()  # forgotten
    assert watch.referenced_by("b", "ConfigMap", "cfg") == ("Pod/q",)
    watch.want(True)  # a ClusterLifecyclePolicy reads it too
    await _settle()
    assert watch.scopes == {None}
    assert source.listed == ["a", "b", None]
    assert watch.view_of(_view("a")).referenced_by == ("Pod/p",)
    await watch.aclose()
    assert not watch.running


async def test_exact_watch_namespaces_bound_the_scopes_and_a_forbidden_one_holds_alone() -> None:
    source = _Scoped([_in("a", "p", "cfg")], forbidden=frozenset({"c"}))
    watch = ReferenceWatch(source, FakeClock(), namespaces=("a", "c"), types=(PODS,))
    watch.want(True, frozenset({"a", "b", "c"}))  # "b" is outside --watch-namespace
    await _settle()
    assert watch.scopes == {"a", "c"}
    assert watch.missing("a") is None
    assert "pods" in (watch.missing("c") or "")
    assert "pods" in (watch.missing() or "")
    assert not watch.synced
    watch.want(True)  # cluster-wide means the --watch-namespace names
    assert watch.scopes == {"a", "c"}
    watch.want(False)
    assert watch.missing("c") == REFERENCES_NOT_SYNCED
    await watch.aclose()
