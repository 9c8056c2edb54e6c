"""Fault injection around the in-process controller, and a spy on what it writes.

Conflicts and vanished objects are produced on the real API server at a chosen moment: a
wrapper around the controller's own client first changes (or deletes) the object through the
API and then lets the controller's guarded request go out, so the 409 or 404 it meets is a
real answer of the API server, not a mock. What the real server cannot be told to do (delay
one watch event) is done by setting the controller's cache entry back (:func:`lag_cache`).
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from typing import Any

import pytest

from lifecycle_controller.controller.watch.cache import CachedObject
from lifecycle_controller.core.objects.resources import ObjectKey
from lifecycle_controller.kube import Conflict, KubeClient, KubeError, ResourceType
from tests.integration.controller import RunningController
from tests.integration.scenario_support import patch
from tests.integration.support import CONFIGMAPS

#: In the API server's 409 message about an outdated resourceVersion.
MODIFIED = "the object has been modified"


# --------------------------------------------------------------------------- DELETE


class DeleteInterference:
    """Wraps ``KubeClient.delete``: run ``before`` ahead of the next ``times`` DELETEs.

    ``before`` talks to the real API server (edits or deletes the object), so the guarded
    DELETE that follows meets a real 409 or 404. Conflicts seen are counted.
    """

    def __init__(
        self,
        kube: KubeClient,
        before: Callable[[str | None, str], Awaitable[None]],
        *,
        times: int,
    ) -> None:
        self._delete = kube.delete
        self._before = before
        self.remaining = times
        self.calls = 0
        self.conflicts = 0

    async def delete(
        self,
        resource: ResourceType,
        namespace: str | None,
        name: str,
        *,
        uid: str | None = None,
        resource_version: str | None = None,
        answer: bool = True,
        propagation: str | None = None,
    ) -> dict[str, Any]:
        self.calls += 1
        if self.remaining > 0:
            self.remaining -= 1
            await self._before(namespace, name)
        try:
            return await self._delete(
                resource,
                namespace,
                name,
                uid=uid,
                resource_version=resource_version,
                answer=answer,
                propagation=propagation,
            )
        except Conflict:
            self.conflicts += 1
            raise


def interfere(
    monkeypatch: pytest.MonkeyPatch,
    running: RunningController,
    before: Callable[[str | None, str], Awaitable[None]],
    *,
    times: int,
) -> DeleteInterference:
    """Wrap the controller's DELETEs in a :class:`DeleteInterference` for this test."""
    wrapper = DeleteInterference(running.kube, before, times=times)
    monkeypatch.setattr(running.kube, "delete", wrapper.delete)
    return wrapper


def configmap_edit(
    kube: KubeClient, edit_body: Callable[[int], dict[str, Any]]
) -> Callable[[str | None, str], Awaitable[None]]:
    """An edit of a ConfigMap through the API; ``edit_body(n)`` builds the n-th merge patch."""
    count = 0

    async def edit(namespace: str | None, name: str) -> None:
        nonlocal count
        count += 1
        await patch(kube, CONFIGMAPS, namespace, name, edit_body(count))

    return edit


def label_bump(n: int) -> dict[str, Any]:
    return {"metadata": {"labels": {"busy": str(n)}}}


# --------------------------------------------------------------------------- every write


@dataclass(frozen=True)
class Write:
    """One write the controller sent, and how the server answered (None = success)."""

    method: str
    path: str
    body: Any
    error: str | None

    @property
    def conflict(self) -> bool:
        return self.error is not None and "Conflict" in self.error


class WriteLog:
    """Every non-Event write request of one controller, in order."""

    def __init__(self) -> None:
        self.writes: list[Write] = []

    def to(self, name: str) -> list[Write]:
        """Writes whose path ends with the object ``name``."""
        return [w for w in self.writes if w.path.rstrip("/").endswith(f"/{name}")]


def committed(writes: list[Write]) -> list[Write]:
    """The writes the server accepted; every other one must have been a 409 (nothing applied).

    A status update by kube-controller-manager between the controller's read and its write is
    an ordinary conflict, retried quietly on fresh state (docs/behaviour.md#quiet-conflict-retries).
    """
    rejected = [w for w in writes if w.error is not None]
    assert all(w.conflict for w in rejected), rejected
    return [w for w in writes if w.error is None]


BeforeWrite = Callable[[str, str, Any], Awaitable[None]]


def spy_writes(
    monkeypatch: pytest.MonkeyPatch,
    running: RunningController,
    *,
    before: BeforeWrite | None = None,
) -> WriteLog:
    """Record what the controller's client writes (it still goes to the real API server).

    ``before(method, path, body)`` runs just before each write is sent: a test uses it to make
    a concurrent change land exactly between the controller's read and its write.
    """
    log = WriteLog()
    real: Callable[..., Awaitable[Any]] = running.kube.request

    async def request(method: str, path: str, *args: Any, **kwargs: Any) -> Any:
        if method == "GET" or "/events" in path:
            return await real(method, path, *args, **kwargs)
        body = kwargs.get("body")
        if before is not None:
            await before(method, path, body)
        try:
            result = await real(method, path, *args, **kwargs)
        except KubeError as error:
            log.writes.append(Write(method, path, body, f"{type(error).__name__}: {error}"))
            raise
        log.writes.append(Write(method, path, body, None))
        return result

    monkeypatch.setattr(running.kube, "request", request)
    return log


def conflicting_writer(
    kube: KubeClient, resource: ResourceType, namespace: str, name: str, *, times: int
) -> BeforeWrite:
    """A concurrent writer that changes the object just before each of the controller's first
    ``times`` writes to it, so each of them is rejected with 409 Conflict."""
    remaining = [times]

    async def edit(method: str, path: str, body: Any) -> None:
        if method == "PATCH" and path.endswith(f"/{name}") and remaining[0] > 0:
            remaining[0] -= 1
            label = {"concurrent": str(remaining[0])}
            await kube.merge_patch(resource, namespace, name, {"metadata": {"labels": label}})

    return edit


# --------------------------------------------------------------------------- the cache


def lag_cache(
    running: RunningController,
    resource: ResourceType,
    namespace: str,
    name: str,
    stale: CachedObject,
    *,
    enqueue: bool = False,
) -> None:
    """Fault injection: the controller's watch lags, its cache still holds ``stale``.

    The real API server cannot be told to delay one watch event, so the cache entry is set
    back; every write the controller then makes is still judged by the real server.
    """
    pipeline = running.controller.pipeline
    assert pipeline is not None
    key = ObjectKey(resource, namespace, name)
    pipeline.reconciler.cache.put(key, stale)
    if enqueue:
        pipeline.queue.add(key)
