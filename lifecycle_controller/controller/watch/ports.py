"""What an informer talks to: its sources, where it keeps what it reads, its metrics, its tunables.

The ports of :class:`~lifecycle_controller.controller.watch.reflector.Informer` (and of the
:class:`~lifecycle_controller.controller.watch.informers.InformerSet` that runs many of them): the
calls it makes (metadata-only or whole objects; :class:`lifecycle_controller.kube.KubeClient`
has them all), the :class:`Keeper` it hands each object to (the shared cache, through
:class:`~lifecycle_controller.controller.watch.cache_writer.CacheWriter`, the policy store, the
rollout watch), the synchronous handler the cache's keeper reports changes to, what it
counts, and client-go's reflector defaults.
"""

from __future__ import annotations

import random
from collections.abc import AsyncIterator, Awaitable, Callable, Hashable, Mapping
from dataclasses import dataclass
from typing import Any, Literal, Protocol

from lifecycle_controller.controller.watch.cache import CachedObject
from lifecycle_controller.core.objects.resources import ObjectKey
from lifecycle_controller.kube import EventFilter, ResourceType
from lifecycle_controller.machinery.backoff import Backoff
from lifecycle_controller.machinery.clock import Clock

__all__ = [
    "ChangeHandler",
    "ChangeKind",
    "ChangeSeen",
    "InformerMetrics",
    "InformerSettings",
    "Keeper",
    "MetadataSource",
    "NoInformerMetrics",
    "ObjectSource",
    "ResourceGoneHandler",
]

#: How an object changed, as its informer saw it. (In this code base "event" means a
#: Kubernetes Event; what a watch delivers is a change.)
ChangeKind = Literal["add", "update", "delete"]
ChangeHandler = Callable[[ChangeKind, ObjectKey, CachedObject | None, CachedObject | None], None]
"""``on_object_change(kind, key, old, new)``: synchronous, must not block (cache, enqueue)."""

ChangeSeen = Callable[[], None]
"""Called after every completed list and every ADDED/MODIFIED/DELETED event, cached or not."""

Skipped = Callable[[str, str], None]
"""Told of each watch event dropped undecoded: its type and the object's resourceVersion."""

ResourceGoneHandler = Callable[[ResourceType], None]
"""Called when the API server no longer serves a watched type (404): rediscover."""


class MetadataSource(Protocol):
    """The calls an informer makes; :class:`lifecycle_controller.kube.KubeClient` has them."""

    async def list_metadata(
        self,
        resource: ResourceType,
        *,
        namespace: str | None = None,
        limit: int = 500,
        continue_token: str | None = None,
        resource_version: str | None = None,
        field_selector: str | None = None,
        resource_version_match: str | None = None,
    ) -> dict[str, Any]: ...

    def watch_metadata(
        self,
        resource: ResourceType,
        *,
        namespace: str | None = None,
        resource_version: str,
        timeout_seconds: int,
        field_selector: str | None = None,
        decode_if: EventFilter | None = None,
    ) -> AsyncIterator[dict[str, Any]]: ...

    def watch_list_metadata(
        self,
        resource: ResourceType,
        *,
        namespace: str | None = None,
        timeout_seconds: int,
        field_selector: str | None = None,
        decode_if: EventFilter | None = None,
        before_reading: Callable[[], Awaitable[None]] | None = None,
    ) -> AsyncIterator[dict[str, Any]]: ...


class ObjectSource(Protocol):
    """The calls an informer of whole objects makes (``KubeClient`` has them); a namespace, a
    continue token and a line filter are passed only when there is one."""

    async def list_objects(self, resource: ResourceType, *, limit: int = 500) -> dict[str, Any]: ...

    def watch_objects(
        self, resource: ResourceType, *, resource_version: str, timeout_seconds: int
    ) -> AsyncIterator[dict[str, Any]]: ...


class Keeper:
    """Where one informer keeps what it reads, and whom it tells: its scope's share of a store.

    The informer hands each listed or watched object (the part its projection reads) to
    :meth:`upsert` or :meth:`remove`, asks :meth:`listing` when a full list begins and says
    :meth:`listed` when it ended, with the keys the list did not find again. Subclasses keep
    objects (the shared cache's :class:`~lifecycle_controller.controller.watch.cache_writer.
    CacheWriter`, the policy store, the rollout watch); this base keeps nothing.
    """

    #: True: a list reads every object into the keeper. False: the keeper needs no state from
    #: before the watch, so a list only finds where the watch starts (one object asked for,
    #: nothing kept from it).
    full_lists = True

    def __init__(self) -> None:
        self._synced = False

    @property
    def synced(self) -> bool:
        """A full list of the scope has been kept once."""
        return self._synced

    def listing(self) -> set[Hashable]:
        """A full list begins: the keys kept now (those it does not find are gone)."""
        return set()

    def upsert(self, obj: Mapping[str, Any], *, created: bool, listed: bool) -> Hashable:
        """Keep the current state of one object; return its key. ``created``: new to the
        informer (a list or an ADDED event); ``listed``: from a list."""
        raise NotImplementedError

    def remove(self, obj: Mapping[str, Any]) -> None:
        """A DELETED event, with the object's final state."""
        raise NotImplementedError

    def listed(self, stale: set[Hashable]) -> None:
        """A full list is in; ``stale``: keys kept before it that it did not find."""
        self._synced = True

    def change_seen(self) -> None:
        """A list completed, or an ADDED, MODIFIED or DELETED event was kept."""

    def count(self) -> int | None:
        """Objects of the type kept (the shared cache's gauge); None: not counted."""
        return None

    def skips_unannotated(self) -> bool:
        """While a streaming list's initial events come, an ADDED line without a lifecycle
        annotation may be dropped undecoded (it could change nothing kept)."""
        return False

    def watch_filter(self) -> EventFilter | None:
        """Which raw lines of a watch are decoded at all (None: every line)."""
        return None

    def listed_filter(self) -> EventFilter | None:
        """While a streaming list's initial events come (unless :meth:`skips_unannotated`),
        which are decoded: it is asked of every one and passes all but the ADDED frames of
        objects this keeper would keep nothing of
        (:class:`~lifecycle_controller.controller.watch.cache_writer.UnkeptListed`); None: all."""
        return None

    def unkept_filter(self, on_skipped: Skipped, rest: float = 0.0) -> EventFilter | None:
        """A filter that drops, undecoded, the watch events of objects this keeper would keep
        nothing of, telling ``on_skipped`` of each, and has the watch rest ``rest`` seconds
        after a read it dropped whole
        (:class:`~lifecycle_controller.controller.watch.cache_writer.UnkeptEvents`); None: none is
        dropped."""
        return None


class InformerMetrics(Protocol):
    """What informers count; the Prometheus side implements it (labels: no per-object ones)."""

    def watch_restarted(self, resource: ResourceType, reason: str) -> None:
        """A watch (or the list before it) ended and is being restarted.

        ``reason``: ``closed`` (normal end), ``closed_early``, ``expired`` (410), ``too_large``
        (504), ``error`` (other ERROR event), ``transport`` (broken or silent stream),
        ``server_error``, ``throttled``, ``forbidden``, ``unauthorized``, ``api_error``,
        ``unexpected``, ``not_found`` (the informer stops).
        """

    def relisted(self, resource: ResourceType) -> None:
        """A full list other than the first one completed."""

    def event_received(self, resource: ResourceType, event_type: str) -> None:
        """One watch event (ADDED, MODIFIED, DELETED, BOOKMARK) arrived."""

    def cache_objects(self, resource: ResourceType, count: int) -> None:
        """The cache now holds ``count`` objects of ``resource``."""


class NoInformerMetrics:
    """The default: counts nothing."""

    def watch_restarted(self, resource: ResourceType, reason: str) -> None:
        pass

    def relisted(self, resource: ResourceType) -> None:
        pass

    def event_received(self, resource: ResourceType, event_type: str) -> None:
        pass

    def cache_objects(self, resource: ResourceType, count: int) -> None:
        pass


@dataclass(frozen=True)
class InformerSettings:
    """Tunables; the defaults are client-go's reflector values."""

    page_size: int = 500
    #: List with a streaming watch (``sendInitialEvents``, client-go's WatchList) and fall
    #: back to paginated lists when the API server refuses it; False: always paginated.
    streaming_list: bool = True
    watch_timeout_min: int = 300
    watch_timeout_max: int = 600
    backoff_initial: float = 0.8
    backoff_max: float = 30.0
    backoff_factor: float = 2.0
    backoff_jitter: float = 1.0
    backoff_reset_after: float = 120.0
    #: The base delay after a connection error (not a 5xx) is capped at this (jitter comes on top:
    #: at most twice this), so a watch resumes within about 2 s of the API server answering
    #: again without retrying a server that is down more than about once a second.
    backoff_transport_max: float = 0.8
    #: An informer counts as disconnected (readiness, docs/behaviour.md#readiness) from its
    #: ``disconnected_after``-th consecutive failed list or watch until its next success.
    disconnected_after: int = 2
    #: A watch that ends sooner than this without a single event counts as a failure (backoff),
    #: so a server that closes streams at once cannot drive a hot reconnect loop.
    min_watch_seconds: float = 1.0
    #: 403 ends the informer (``run()`` raises ``Forbidden``) instead of being retried: for an
    #: optional watch whose owner falls back quietly (discovery's CRD watch, the Namespace
    #: defaults, the policy store), and who also reports a 404 (logged at debug here).
    stop_when_forbidden: bool = False
    #: After the list, how long a watch leaves its connection unread after a read whose every
    #: event was dropped undecoded as one the keeper keeps nothing of: what arrives meanwhile
    #: is read in one wake-up, and an event that matters waits at most this long
    #: (docs/performance.md#the-cost-of-churn). 0: never.
    watch_rest: float = 0.02

    def __post_init__(self) -> None:
        if self.page_size < 1:
            raise ValueError(f"page_size must be at least 1, got {self.page_size}")
        if not 1 <= self.watch_timeout_min <= self.watch_timeout_max:
            raise ValueError("watch timeouts need 1 <= watch_timeout_min <= watch_timeout_max")
        if not 0 < self.backoff_initial <= self.backoff_max:
            raise ValueError("backoff needs 0 < backoff_initial <= backoff_max")

    def backoff(self, clock: Clock, rng: random.Random) -> Backoff:
        """The failure backoff these settings describe (a reflector's and a scoped
        relist's alike)."""
        return Backoff(
            clock,
            initial=self.backoff_initial,
            maximum=self.backoff_max,
            factor=self.backoff_factor,
            jitter=self.backoff_jitter,
            reset_after=self.backoff_reset_after,
            rng=rng,
        )
