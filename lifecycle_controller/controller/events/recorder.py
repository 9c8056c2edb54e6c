"""Kubernetes Events about the objects the controller acts on, through ``events.k8s.io/v1``.

Every Event names the object (``regarding``), the reporting controller ``lifecycle-controller``
and the action ``Reconcile``, and lives in the object's namespace (``default`` for
cluster-scoped objects). Two kinds of repetition are folded:

* warnings the core marks with a dedupe key (``IgnoredAnnotation`` and the
  ``reference-point`` fallback) are sent once per object and annotation value
  (docs/behaviour.md#repeated-warnings);
* an Event identical to one sent recently for the same object (same type, reason and note)
  is not created again: its ``series`` count is bumped instead, as client-go's events
  library does.

An Event with a stable ``name`` (the warnings before acting) is created once under
``<object>.<name>`` and never folded: an AlreadyExists answer means it was already posted,
by this process or an earlier one.

:meth:`KubeEventRecorder.record` answers what became of the Event (:class:`Recorded`), so a
decorator such as the webhook notifier (``controller/events/notify.py``) can tell a new Event from
one folded away as a repeat.

Writing an Event never fails a reconcile: errors are logged and dropped. Transient ones
(429, 5xx, a lost connection) are retried first, a few times within about 4 s
(:data:`RETRY_DELAYS`, ``Retry-After`` honoured up to :data:`MAX_RETRY_AFTER`): under API
errors an Event used to be lost at the first failure although its action was done
(docs/reliability.md, scenario 4). A retried create keeps its name, so a create whose answer
was lost comes back AlreadyExists, which means it was posted.
"""

from __future__ import annotations

import contextlib
import enum
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from typing import Any, Protocol, TypeVar

import structlog
from cachetools import LRUCache

from lifecycle_controller.core.decision.events import Event, EventType
from lifecycle_controller.core.objects.resources import ObjectRef
from lifecycle_controller.core.text.shorten import TEXT_LIMIT, shorten
from lifecycle_controller.core.text.units import NS_PER_MINUTE
from lifecycle_controller.kube import (
    EVENTS,
    AlreadyExists,
    Conflict,
    KubeError,
    NotFound,
    ServerError,
    TooManyRequests,
    TransportError,
)
from lifecycle_controller.kube.api_ports import ObjectWrites
from lifecycle_controller.kube.microtime import micro_time
from lifecycle_controller.machinery.clock import Clock

REPORTING_CONTROLLER = "lifecycle-controller"
ACTION = "Reconcile"
NOTE_LIMIT = TEXT_LIMIT
SERIES_WINDOW_NS = 30 * NS_PER_MINUTE

#: Waits before the retries of a transient failure (then the Event is dropped).
RETRY_DELAYS = (0.25, 0.75, 2.0)
MAX_RETRY_AFTER = 5.0
_TRANSIENT = (TransportError, ServerError, TooManyRequests, TimeoutError)
_T = TypeVar("_T")

_log = structlog.get_logger(__name__)


def regarding(ref: ObjectRef) -> dict[str, str]:
    """The Event's ``regarding`` reference to ``ref``."""
    key = ref.key
    reference = {
        "apiVersion": key.resource.api_version,
        "kind": key.resource.kind,
        "name": key.name,
    }
    if key.namespace:
        reference["namespace"] = key.namespace
    if ref.uid:
        reference["uid"] = ref.uid
    if ref.resource_version:
        reference["resourceVersion"] = ref.resource_version
    return reference


def truncate_note(message: str, limit: int = NOTE_LIMIT) -> str:
    """``message`` cut to at most ``limit`` UTF-8 bytes, as every shown value is cut."""
    return shorten(message, limit)


class Recorded(enum.Enum):
    """What became of one recorded Event."""

    CREATED = "created"  # a new Event object
    SERIES = "series"  # one more occurrence counted on a recent identical Event
    SUPPRESSED = "suppressed"  # sent before: a deduped warning or a stable name posted already
    FAILED = "failed"  # the API refused it (logged and dropped)


class EventRecorder(Protocol):
    """Where reconciles send their Events (None: the recorder does not say what became of it)."""

    async def record(self, ref: ObjectRef, event: Event) -> Recorded | None: ...


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
        kube: ObjectWrites,
        *,
        clock: Clock,
        reporting_instance: str,
        dedupe_limit: int = 100_000,
        series_limit: int = 10_000,
    ) -> None:
        self._kube = kube
        self._clock = clock
        self._instance = reporting_instance[:128]
        # Event names end in a nanosecond stamp, unique per recorder even when two Events of
        # one object share an instant (a coarse or fake clock), which would otherwise collide.
        self._last_name_ns = 0
        # Bounded memories, least recently used entries forgotten first.
        self._deduped: LRUCache[tuple[str, str, str], None] = LRUCache(maxsize=dedupe_limit)
        self._series: LRUCache[tuple[str, str, str, str], _Series] = LRUCache(maxsize=series_limit)
        self._posted: LRUCache[tuple[str, str], None] = LRUCache(maxsize=series_limit)

    async def _retrying(self, write: Callable[[], Awaitable[_T]]) -> _T:
        """``write()``, retried after transient failures (:data:`RETRY_DELAYS`)."""
        for delay in RETRY_DELAYS:
            try:
                return await write()
            except _TRANSIENT as error:
                wait = delay
                if isinstance(error, TooManyRequests) and error.retry_after:
                    wait = max(delay, min(error.retry_after, MAX_RETRY_AFTER))
                await self._clock.sleep(wait)
        return await write()

    async def record(self, ref: ObjectRef, event: Event) -> Recorded:
        reason = event.reason
        if event.dedupe_key is not None:
            once = (ref.uid, reason, event.dedupe_key)
            if once in self._deduped:
                return Recorded.SUPPRESSED
            self._deduped[once] = None
        note = truncate_note(event.message)
        now_ns = self._clock.now_ns() if event.at_ns is None else event.at_ns
        if event.name is not None:
            return await self._create_once(ref, event, note, now_ns, event.name)
        isomorphic = (ref.uid or ref.key.id, event.type.value, reason, note)
        try:
            series = self._series.get(isomorphic)
            recent = series is not None and now_ns - series.first_ns <= SERIES_WINDOW_NS
            if series is not None and recent and await self._bump_series(series, now_ns):
                return Recorded.SERIES
            await self._create(ref, event.type, reason, note, now_ns, isomorphic)
        except KubeError as error:
            _log.warning(
                "event not recorded", reason=reason, error=str(error), **ref.key.log_context()
            )
            return Recorded.FAILED
        return Recorded.CREATED

    async def _create_once(
        self, ref: ObjectRef, event: Event, note: str, now_ns: int, suffix: str
    ) -> Recorded:
        """Create the Event under its stable name unless it exists already."""
        namespace = ref.key.namespace or "default"
        name = f"{ref.key.name[: 252 - len(suffix)]}.{suffix}"
        if (namespace, name) in self._posted:
            return Recorded.SUPPRESSED
        body = self._body(ref, event, note, now_ns, name)
        verdict = Recorded.CREATED
        try:
            await self._retrying(lambda: self._kube.create(EVENTS, namespace, body, answer=False))
        except (AlreadyExists, Conflict):
            verdict = Recorded.SUPPRESSED  # posted before (an earlier pass, process or leader)
        except KubeError as error:
            _log.warning(
                "event not recorded", reason=event.reason, error=str(error), **ref.key.log_context()
            )
            return Recorded.FAILED
        self._posted[(namespace, name)] = None
        return verdict

    def _body(
        self, ref: ObjectRef, event: Event, note: str, now_ns: int, name: str
    ) -> dict[str, Any]:
        return {
            "apiVersion": "events.k8s.io/v1",
            "kind": "Event",
            "metadata": {"name": name, "namespace": ref.key.namespace or "default"},
            "eventTime": micro_time(now_ns),
            "reportingController": REPORTING_CONTROLLER,
            "reportingInstance": self._instance,
            "action": ACTION,
            "reason": event.reason[:128],
            "type": event.type.value,
            "note": note,
            "regarding": regarding(ref),
        }

    async def _create(
        self,
        ref: ObjectRef,
        type: EventType,
        reason: str,
        note: str,
        now_ns: int,
        isomorphic: tuple[str, str, str, str],
    ) -> None:
        namespace = ref.key.namespace or "default"
        self._last_name_ns = max(now_ns, self._last_name_ns + 1)
        name = f"{ref.key.name}.{self._last_name_ns:x}"[:253]
        body: dict[str, Any] = {
            "apiVersion": "events.k8s.io/v1",
            "kind": "Event",
            "metadata": {"name": name, "namespace": namespace},
            "eventTime": micro_time(now_ns),
            "reportingController": REPORTING_CONTROLLER,
            "reportingInstance": self._instance,
            "action": ACTION,
            "reason": reason[:128],
            "type": type.value,
            "note": note,
            "regarding": regarding(ref),
        }
        with contextlib.suppress(AlreadyExists):  # a retried create whose answer was lost
            await self._retrying(lambda: self._kube.create(EVENTS, namespace, body, answer=False))
        self._series[isomorphic] = _Series(name=name, namespace=namespace, first_ns=now_ns)

    async def _bump_series(self, series: _Series, now_ns: int) -> bool:
        """Count one more occurrence on an existing Event; False if it no longer exists."""
        series.count += 1
        patch = {"series": {"count": series.count, "lastObservedTime": micro_time(now_ns)}}
        try:
            await self._retrying(
                lambda: self._kube.merge_patch(EVENTS, series.namespace, series.name, patch)
            )
        except NotFound:
            return False
        return True
