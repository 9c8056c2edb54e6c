"""The reference index in the controller: held until synced, why when forbidden, changes."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from typing import Any

from lifecycle_controller.controller.references import ReferenceWatch
from lifecycle_controller.core.objects.resources import ResourceType
from lifecycle_controller.core.policy.match import REFERENCES_NOT_SYNCED, ObjectView
from lifecycle_controller.kube import Forbidden
from tests.doubles.fakeclock import FakeClock

PODS = ResourceType("", "v1", "pods", "Pod", True)
DEPLOYMENTS = ResourceType("apps", "v1", "deployments", "Deployment", True)
CONFIGMAPS = ResourceType("", "v1", "configmaps", "ConfigMap", True)
VIEW = ObjectView(resource=CONFIGMAPS, namespace="a", name="cfg")


def _pod(name: str, uses: str) -> dict[str, Any]:
    volume = {"name": "v", "configMap": {"name": uses}}
    return {"metadata": {"name": name, "namespace": "a"}, "spec": {"volumes": [volume]}}


class _Source:
    """Lists Pods from ``pods``; forbids ``forbidden``; lists stall until ``release``."""

    def __init__(self, pods: list[dict[str, Any]], forbidden: frozenset[str] = frozenset()):
        self.pods = pods
        self.forbidden = forbidden
        self.release = asyncio.Event()

    async def list_objects(self, resource: ResourceType, **_: Any) -> dict[str, Any]:
        if resource.resource in self.forbidden:
            raise Forbidden(403)
        await self.release.wait()
        items = self.pods if resource == PODS else []
        return {"metadata": {"resourceVersion": "1"}, "items": items}

    async def watch_objects(
        self, resource: ResourceType, **_: Any
    ) -> AsyncIterator[dict[str, Any]]:
        await asyncio.Event().wait()
        yield {}


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
    assert changed == [("a", "ConfigMap", "cfg")]
    assert synced == [True]
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
