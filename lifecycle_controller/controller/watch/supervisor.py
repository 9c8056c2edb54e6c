"""One supervisor for every informer task: start, stop, the 403/404 retry and the synced signal.

Six owners run informers (:class:`~lifecycle_controller.controller.watch.reflector.Informer`): the
annotated types (:mod:`~lifecycle_controller.controller.watch.informers`), the Namespaces
(:mod:`~lifecycle_controller.controller.namespace.defaults`), the CRDs (rediscovery), the lifecycle
policies, the reference index and the rollout watch. The reflector owns list/watch
correctness; what is left around :meth:`Informer.run` is the same for all of them and is
written here once (docs/architecture.md#informer-supervisor):

* **Start.** :meth:`InformerSupervisor.start` runs one *watch* (a key the owner picks: a
  type and scope, a policy kind) in an asyncio task of its own, named, so one failing
  informer never stops another. The owner's ``make`` builds its informer (what to watch, the
  projection, the keeper, the purpose: configuration only); :meth:`InformerSupervisor.
  informer` fills in what every informer of an owner shares (clock, metrics, settings, a
  seeded random source). A task that ends with an exception (never expected: the reflector
  recovers from every failure it can name) is logged.
* **Stop.** :meth:`~InformerSupervisor.stop` cancels watches and waits for them;
  :meth:`~InformerSupervisor.cancel` cancels at once and leaves the waiting to
  :meth:`~InformerSupervisor.aclose`. A watch started with ``relists`` is listed again from
  scratch (a new informer from ``make``) by :meth:`~InformerSupervisor.relist`.
* **403 and 404.** ``Informer.run`` returns when the API no longer serves the type (404) and
  raises :class:`~lifecycle_controller.kube.Forbidden` when its settings say
  ``stop_when_forbidden``. Either is a :class:`Stopped`, told to ``on_stop`` (the owner logs
  once, marks the scope unavailable or refused: readiness and the metrics read those as
  before); then ``gone`` or ``forbidden`` of that watch says what follows: a wait (a backoff,
  a fixed recheck) after which ``make`` is asked again, or None: the watch ends
  (:meth:`~InformerSupervisor.ended` says why, :meth:`~InformerSupervisor.first_ended` waits
  for one).
* **Synced.** :meth:`~InformerSupervisor.listed` is the callback a keeper calls after each
  full list; :meth:`~InformerSupervisor.wait_synced` waits on it, with a timeout on the
  clock, until the owner's rule of "synced" holds (by default: every running watch's
  informer has listed once).
"""

from __future__ import annotations

import asyncio
import enum
import random
from collections.abc import Awaitable, Callable, Hashable, Iterable
from dataclasses import dataclass
from typing import Any, Generic, TypeVar

import structlog

from lifecycle_controller.controller.watch.ports import (
    InformerMetrics,
    InformerSettings,
    Keeper,
    ResourceGoneHandler,
)
from lifecycle_controller.controller.watch.projection import Projection
from lifecycle_controller.controller.watch.reflector import Informer
from lifecycle_controller.kube import Forbidden, ResourceType
from lifecycle_controller.machinery.clock import Clock
from lifecycle_controller.machinery.tasks import run_or_wake, sleep_or_wake

__all__ = ["InformerSupervisor", "RetryAfter", "Stop", "Stopped"]

_log = structlog.get_logger(__name__)

K = TypeVar("K", bound=Hashable)

#: What a watch waits for after its informer stopped, before ``make`` is asked again.
RetryAfter = Callable[[], Awaitable[object]]


class Stop(enum.Enum):
    """Why an informer stopped."""

    GONE = "gone"  # 404: the API server no longer serves the type
    FORBIDDEN = "forbidden"  # 403, with ``stop_when_forbidden``


@dataclass(frozen=True, slots=True)
class Stopped(Generic[K]):
    """One informer of watch ``key`` stopped, and why (``error``: the 403's)."""

    key: K
    why: Stop
    error: Forbidden | None = None


class _Watch(Generic[K]):
    """One supervised watch: how to make its informer, what a stop means, its task."""

    __slots__ = ("forbidden", "gone", "informer", "key", "make", "relists", "task")

    def __init__(
        self,
        key: K,
        make: Callable[[], Informer],
        gone: RetryAfter | None,
        forbidden: RetryAfter | None,
        relists: asyncio.Event | None,
    ) -> None:
        self.key = key
        self.make = make
        self.gone = gone
        self.forbidden = forbidden
        self.relists = relists
        self.informer: Informer | None = None
        self.task: asyncio.Task[Stopped[K]] | None = None


class InformerSupervisor(Generic[K]):
    """The informer tasks of one owner, by key; see the module docstring."""

    def __init__(
        self,
        *,
        clock: Clock,
        metrics: InformerMetrics | None = None,
        settings: InformerSettings | None = None,
        rng: random.Random | None = None,
        on_stop: Callable[[Stopped[K]], None] | None = None,
    ) -> None:
        self._clock = clock
        self._metrics = metrics
        self._settings = settings
        self._rng = random.Random() if rng is None else rng
        self._on_stop = on_stop
        self._watches: dict[K, _Watch[K]] = {}
        #: Cancelled, not finished yet (:meth:`aclose` waits for them).
        self._ending: set[asyncio.Task[Stopped[K]]] = set()
        #: Set after every full list (:meth:`wait_synced` checks again).
        self._listed = asyncio.Event()

    # ------------------------------------------------------------------ configuration

    def informer(
        self,
        resource: ResourceType,
        *,
        projection: Projection,
        keeper: Keeper,
        purpose: str,
        namespace: str | None = None,
        settings: InformerSettings | None = None,
        field_selector: str | None = None,
        resource_version: str | None = None,
        gate: Callable[[], Awaitable[object]] | None = None,
        on_resource_gone: ResourceGoneHandler | None = None,
        on_answered_again: Callable[[], None] | None = None,
    ) -> Informer:
        """A new informer of ``resource`` (the rest as :class:`Informer` takes it) with what
        every informer of this owner shares: the clock, the metrics, the settings (unless
        given), a random source seeded from the supervisor's."""
        return Informer(
            resource=resource,
            namespace=namespace,
            projection=projection,
            keeper=keeper,
            clock=self._clock,
            purpose=purpose,
            metrics=self._metrics,
            settings=self._settings if settings is None else settings,
            on_resource_gone=on_resource_gone,
            rng=random.Random(self._rng.random()),
            field_selector=field_selector,
            on_answered_again=on_answered_again,
            resource_version=resource_version,
            gate=gate,
        )

    # ------------------------------------------------------------------ start and stop

    def start(
        self,
        key: K,
        make: Informer | Callable[[], Informer],
        *,
        name: str,
        gone: RetryAfter | None = None,
        forbidden: RetryAfter | None = None,
        relists: bool = False,
    ) -> None:
        """Run watch ``key`` in a task named ``name``: ``make()``'s informer, and after it
        stopped (404: ``gone``, 403: ``forbidden``) that wait and a new ``make()``, or (None)
        the end of the watch. An informer given as ``make`` is run again after the wait (from
        the resourceVersion it reached). With ``relists``, :meth:`relist` may start it over.
        A watch still running under ``key`` must be stopped first; an ended one is
        replaced."""
        if self.running(key):
            raise RuntimeError(f"watch {key!r} is running: stop it first")
        if isinstance(make, Informer):
            make = _again(make)
        watch = _Watch(key, make, gone, forbidden, asyncio.Event() if relists else None)
        watch.informer = make()  # now: the owner reads it before the task first runs
        watch.task = asyncio.create_task(self._supervise(watch), name=name)
        watch.task.add_done_callback(_log_unexpected_exit)
        self._watches[key] = watch

    def relist(self, key: K) -> None:
        """Start watch ``key`` (started with ``relists``) over with a new informer, which
        lists from scratch; a watch waiting after a stop is left to its wait."""
        watch = self._watches.get(key)
        if watch is not None and watch.relists is not None:
            watch.relists.set()

    def cancel(self, *keys: K) -> None:
        """Cancel watches ``keys`` and forget them now; :meth:`aclose` waits for their
        tasks."""
        for key in keys:
            watch = self._watches.pop(key, None)
            task = None if watch is None else watch.task
            if task is not None and not task.done():
                task.cancel()
                self._ending.add(task)
                task.add_done_callback(self._ending.discard)

    async def stop(self, *keys: K) -> None:
        """Cancel watches ``keys`` and wait until their tasks have finished."""
        tasks = [w.task for key in keys if (w := self._watches.get(key)) and w.task is not None]
        self.cancel(*keys)
        pending = [task for task in tasks if not task.done()]
        if pending:
            await asyncio.wait(pending)

    async def aclose(self) -> None:
        """Cancel every watch and wait for every task cancelled. Idempotent."""
        self.cancel(*self._watches)
        ending = list(self._ending)
        if ending:
            await asyncio.gather(*ending, return_exceptions=True)

    # ------------------------------------------------------------------ the supervised loop

    async def _supervise(self, watch: _Watch[K]) -> Stopped[K]:
        while True:
            informer = watch.informer
            if informer is None:
                informer = watch.informer = watch.make()
            try:
                if watch.relists is None:
                    await informer.run()
                elif await run_or_wake(informer.run(), watch.relists):
                    watch.relists.clear()
                    watch.informer = None  # a new one lists first
                    continue
                stopped = Stopped(watch.key, Stop.GONE)
            except Forbidden as error:
                stopped = Stopped(watch.key, Stop.FORBIDDEN, error)
            if self._on_stop is not None:
                self._on_stop(stopped)
            wait = watch.gone if stopped.why is Stop.GONE else watch.forbidden
            if wait is None:
                return stopped
            await wait()
            if watch.relists is not None:
                watch.relists.clear()  # the new informer lists anyway
            watch.informer = None

    # ------------------------------------------------------------------ reading

    def running_keys(self) -> list[K]:
        """The watches that have not ended (some may be waiting after a stop)."""
        return [key for key in self._watches if self.running(key)]

    def informer_of(self, key: K) -> Informer | None:
        """The latest informer of watch ``key`` (None: no such watch)."""
        watch = self._watches.get(key)
        return None if watch is None else watch.informer

    def informers(self) -> dict[K, Informer]:
        """The latest informer of every watch, by key."""
        return {
            key: watch.informer
            for key, watch in self._watches.items()
            if watch.informer is not None
        }

    def running(self, key: K) -> bool:
        """Watch ``key`` exists and has not ended (it may be waiting after a stop)."""
        watch = self._watches.get(key)
        return watch is not None and watch.task is not None and not watch.task.done()

    def ended(self, key: K) -> Stopped[K] | None:
        """Why watch ``key`` ended (None: it runs, or there is none)."""
        watch = self._watches.get(key)
        task = None if watch is None else watch.task
        if task is None or not task.done() or task.cancelled() or task.exception() is not None:
            return None
        return task.result()

    async def first_ended(self) -> Stopped[K]:
        """Wait until a watch has ended (at once when one has); why it did (what its task
        raised is raised). Only a watch whose ``gone`` or ``forbidden`` is None ever ends."""
        tasks = [w.task for w in self._watches.values() if w.task is not None]
        if not tasks:
            raise RuntimeError("no watch to wait for")
        done, _ = await asyncio.wait(tasks, return_when=asyncio.FIRST_COMPLETED)
        return next(iter(done)).result()

    def disconnected(self) -> list[K]:
        """The running watches whose informer cannot reach the API server (or is refused)
        right now (:attr:`Informer.disconnected`), in the order started."""
        return [
            key
            for key, watch in self._watches.items()
            if self.running(key) and watch.informer is not None and watch.informer.disconnected
        ]

    # ------------------------------------------------------------------ synced

    def listed(self) -> None:
        """A keeper completed a full list (hand this to keepers): wake :meth:`wait_synced`."""
        self._listed.set()

    def synced(self, keys: Iterable[K] | None = None) -> bool:
        """Every watch of ``keys`` (all when None) has an informer whose keeper has listed
        once (:attr:`Informer.synced`); False for a key that is no watch."""
        wanted = self._watches if keys is None else keys
        return all(
            (informer := self.informer_of(key)) is not None and informer.synced for key in wanted
        )

    async def wait_synced(
        self, timeout: float | None = None, synced: Callable[[], bool] | None = None
    ) -> bool:
        """Return once ``synced()`` (default :meth:`synced`) holds, checked again after each
        :meth:`listed`, or after ``timeout`` seconds of the clock (None: no limit); True when
        it holds."""
        holds = self.synced if synced is None else synced
        deadline = None if timeout is None else self._clock.monotonic() + timeout
        while not holds():
            self._listed.clear()
            if deadline is None:
                await self._listed.wait()
                continue
            remaining = deadline - self._clock.monotonic()
            if remaining <= 0:
                return False
            await sleep_or_wake(self._clock, remaining, self._listed)
        return True


def _again(informer: Informer) -> Callable[[], Informer]:
    """``make`` of a watch that runs the one informer it was given."""
    return lambda: informer


def _log_unexpected_exit(task: asyncio.Task[Any]) -> None:
    if task.cancelled():
        return
    error = task.exception()
    if error is not None:
        _log.error("informer task crashed", task=task.get_name(), exc_info=error)
