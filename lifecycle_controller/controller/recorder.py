"""Kubernetes Events about the objects the controller acts on, through ``events.k8s.io/v1``.

Every Event names the object (``regarding``), the reporting controller ``lifecycle-controller``
and the action ``Reconcile``, and lives in the object's namespace (``default`` for
cluster-scoped objects). Two kinds of repetition are folded:

* warnings the core marks with a dedupe key (SPEC §2.9: ``IgnoredAnnotation`` and the
  ``reference-point`` fallback) are sent once per object and annotation value;
* an Event identical to one sent recently for the same object (same type, reason and note)
  is not created again: its ``series`` count is bumped instead, as client-go's events
  library does.

Writing an Event never fails a reconcile: errors are logged and dropped.
"""

from __future__ import annotations

from collections import OrderedDict
from dataclasses import dataclass
from typing import Any, Literal, Protocol

import structlog

from lifecycle_controller.kube import EVENTS, KubeClient, KubeError, NotFound
from lifecycle_controller.kube.microtime import micro_time
from lifecycle_controller.machinery.clock import Clock

EventType = Literal["Normal", "Warning"]
REPORTING_CONTROLLER = "lifecycle-controller"
ACTION = "Reconcile"
NOTE_LIMIT = 1024
SERIES_WINDOW_NS = 30 * 60 * 1_000_000_000

_log = structlog.get_logger(__name__)


@dataclass(frozen=True)
class ObjectRef:
    """Enough of an object to name it in an Event."""

    api_version: str
    kind: str
    name: str
    namespace: str | None
    uid: str
    resource_version: str = ""

    def as_reference(self) -> dict[str, str]:
        reference = {"apiVersion": self.api_version, "kind": self.kind, "name": self.name}
        if self.namespace:
            reference["namespace"] = self.namespace
        if self.uid:
            reference["uid"] = self.uid
        if self.resource_version:
            reference["resourceVersion"] = self.resource_version
        return reference


class EventRecorder(Protocol):
    """Where reconciles send their Events."""

    async def record(
        self,
        ref: ObjectRef,
        type: EventType,
        reason: str,
        message: str,
        *,
        dedupe_key: str | None = None,
    ) -> None: ...


class _BoundedSet:
    """A set that forgets its oldest members beyond ``limit`` entries."""

    def __init__(self, limit: int) -> None:
        self._items: OrderedDict[tuple[str, ...], None] = OrderedDict()
        self._limit = limit

    def add(self, item: tuple[str, ...]) -> bool:
        """Add ``item``; False if it was already there."""
        if item in self._items:
            self._items.move_to_end(item)
            return False
        self._items[item] = None
        if len(self._items) > self._limit:
            self._items.popitem(last=False)
        return True


@dataclass
class _Series:
    name: str
    namespace: str
    first_ns: int
    count: int = 1


class KubeEventRecorder:
    """Writes ``events.k8s.io/v1`` Events, folding repeats into a series."""

    def __init__(
        self,
        kube: KubeClient,
        *,
        clock: Clock,
        reporting_instance: str,
        dedupe_limit: int = 100_000,
        series_limit: int = 10_000,
    ) -> None:
        self._kube = kube
        self._clock = clock
        self._instance = reporting_instance[:128]
        self._deduped = _BoundedSet(dedupe_limit)
        self._series: OrderedDict[tuple[str, str, str, str], _Series] = OrderedDict()
        self._series_limit = series_limit

    async def record(
        self,
        ref: ObjectRef,
        type: EventType,
        reason: str,
        message: str,
        *,
        dedupe_key: str | None = None,
    ) -> None:
        if dedupe_key is not None and not self._deduped.add((ref.uid, reason, dedupe_key)):
            return
        note = message if len(message) <= NOTE_LIMIT else message[: NOTE_LIMIT - 3] + "..."
        now_ns = self._clock.now_ns()
        isomorphic = (ref.uid or f"{ref.namespace}/{ref.kind}/{ref.name}", type, reason, note)
        try:
            series = self._series.get(isomorphic)
            recent = series is not None and now_ns - series.first_ns <= SERIES_WINDOW_NS
            if series is not None and recent and await self._bump_series(series, now_ns):
                return
            await self._create(ref, type, reason, note, now_ns, isomorphic)
        except KubeError as error:
            _log.warning(
                "event not recorded",
                reason=reason,
                error=str(error),
                kind=ref.kind,
                namespace=ref.namespace,
                name=ref.name,
            )

    async def _create(
        self,
        ref: ObjectRef,
        type: EventType,
        reason: str,
        note: str,
        now_ns: int,
        isomorphic: tuple[str, str, str, str],
    ) -> None:
        namespace = ref.namespace or "default"
        name = f"{ref.name}.{now_ns:x}"[:253]
        body: dict[str, Any] = {
            "apiVersion": "events.k8s.io/v1",
            "kind": "Event",
            "metadata": {"name": name, "namespace": namespace},
            "eventTime": micro_time(now_ns),
            "reportingController": REPORTING_CONTROLLER,
            "reportingInstance": self._instance,
            "action": ACTION,
            "reason": reason[:128],
            "type": type,
            "note": note,
            "regarding": ref.as_reference(),
        }
        await self._kube.create(EVENTS, namespace, body)
        self._series[isomorphic] = _Series(name=name, namespace=namespace, first_ns=now_ns)
        if len(self._series) > self._series_limit:
            self._series.popitem(last=False)

    async def _bump_series(self, series: _Series, now_ns: int) -> bool:
        """Count one more occurrence on an existing Event; False if it no longer exists."""
        series.count += 1
        patch = {"series": {"count": series.count, "lastObservedTime": micro_time(now_ns)}}
        try:
            await self._kube.merge_patch(EVENTS, series.namespace, series.name, patch)
        except NotFound:
            return False
        return True
