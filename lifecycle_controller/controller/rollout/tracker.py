"""Following the rollouts that restarts start, and limiting how many run at once.

docs/behaviour.md#rollout-verification. After every restart patch the executor hands the
workload to :meth:`RolloutTracker.follow`: a task reads that one workload (a plain GET; the
metadata-only informers stay as they are) when it is given a turn, until its status says the
rollout is complete (:func:`~lifecycle_controller.core.objects.rollout_progress.rollout_progress`),
then records Normal ``RolloutCompleted`` with the duration, or, after ``--rollout-timeout``,
Warning ``RolloutStalled`` with the status fields. Turns come from one ticker for all
followers (multiples of ``poll_interval``, so the reads of one tick are batched:
controller/rollout/reads.py); a follower with nothing to do is not woken. A tick gives no
turn while the workload's resourceVersion in the informer cache
(:attr:`RolloutTracker.version_of`) is still the one of the state last evaluated: every
status update changes it and the metadata-only watch delivers that change, so an unchanged
version means an unchanged status. After :data:`FORCED_READ_TICKS` unchanged ticks it is
read anyway (an informer that lost its watch must not stall a rollout); a forced read that
finds the cache was right doubles that wait, up to :data:`MAX_FORCED_READ_TICKS`, so
workloads that wait long for the workload controller (hundreds restarted at once) are not
read over and over. Most turns read nothing: the
:class:`~lifecycle_controller.controller.rollout.watch.RolloutWatch` keeps the followed
workloads' states from one watch per kind, a turn evaluates the kept state when it is new
and, while that watch delivers, waits up to :data:`MAX_WATCH_WAITS` turns for it before it
reads; a forced turn reads only while the watch does not deliver (a delivering watch sends
every change, so the forced read is the safety net of a lost watch, not of a live one). A
follower's versions are compared only after :meth:`RolloutTracker.moved` said its workload
changed in the cache (the informers' change handler) or in the watch, so a tick looks at the
few that moved, not at every follower. While keys wait for a worker
(:attr:`RolloutTracker.busy`: a storm of due actions), reads wait too, for at most
:data:`MAX_DEFERRED_TICKS` ticks in a row: verification must not take the API server's
capacity from actions that are due (their ``RolloutCompleted`` Events follow the reads).
``lifecycle_rollouts_total{kind,result}`` and ``lifecycle_rollout_duration_seconds`` count
them.

With ``--max-concurrent-rollouts N`` the guardrails
(:mod:`lifecycle_controller.core.decision.guardrails`)
ask :meth:`has_turn` before a restart, and the controller takes the slot with :meth:`reserve`
only for a restart that goes: at most N workloads are mid-rollout (or about to be patched) at
once, and further due restarts wait (:meth:`wait`) in due-time order; when a rollout ends,
the earliest waiters are requeued at
once (:attr:`RolloutTracker.wake`). The tracker lives in the leader's memory: a new leader
starts with no rollout in progress.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable
from functools import partial
from typing import Any, Protocol

import structlog

from lifecycle_controller.controller.events.recorder import EventRecorder
from lifecycle_controller.controller.rollout.reads import RolloutReads
from lifecycle_controller.controller.rollout.watch import RolloutWatch
from lifecycle_controller.core import ObjectKey, ObjectRef
from lifecycle_controller.core.decision import events as catalogue
from lifecycle_controller.core.decision.guardrails import RolloutQueue
from lifecycle_controller.core.objects.rollout_progress import rollout_progress
from lifecycle_controller.core.text.durations import NS_PER_SECOND
from lifecycle_controller.kube import KubeError, NotFound
from lifecycle_controller.kube.api_ports import ObjectReads
from lifecycle_controller.machinery.clock import Clock

__all__ = ["RolloutMetrics", "RolloutTracker"]

_log = structlog.get_logger(__name__)
#: A followed workload whose cached resourceVersion has not moved is read after this many
#: ticks anyway; each forced read that finds the cache was right doubles the wait, up to
#: :data:`MAX_FORCED_READ_TICKS`.
FORCED_READ_TICKS = 10
MAX_FORCED_READ_TICKS = 60
#: A tick's read waits for the work queue to empty at most this many ticks in a row.
MAX_DEFERRED_TICKS = 30
#: Turns in a row a follower waits for a delivering rollout watch before it reads anyway.
MAX_WATCH_WAITS = 3


class RolloutMetrics(Protocol):
    def observe_rollout(self, kind: str, result: str, seconds: float) -> None: ...
    def set_rollouts_in_progress(self, count: int) -> None: ...
    def count_rollout_state(self, source: str) -> None: ...


class RolloutTracker:
    """Rollouts in progress (followed by tasks), slots and the due-ordered waiters."""

    def __init__(
        self,
        kube: ObjectReads,
        recorder: EventRecorder,
        clock: Clock,
        metrics: RolloutMetrics,
        *,
        limit: int = 0,
        timeout: float = 900.0,
        poll_interval: float = 1.0,
        waiter_ttl: float = 120.0,
        watch: RolloutWatch | None = None,
        wake: Callable[[ObjectKey], None] = lambda key: None,
        version_of: Callable[[ObjectKey], str | None] = lambda key: None,
        busy: Callable[[], bool] = lambda: False,
    ) -> None:
        self.kube = kube
        self.recorder = recorder
        self.clock = clock
        self.metrics = metrics
        self.limit = limit
        self.timeout = timeout
        self.poll_interval = poll_interval
        self.waiter_ttl = waiter_ttl
        #: Requeues a waiting key (the work queue's, through the requeue rules).
        self.wake = wake
        #: The resourceVersion the informer cache holds for a key (None: not cached); wired
        #: to the cache. Unchanged since the last evaluated state: the read is skipped.
        self.version_of = version_of
        #: True while keys wait for a worker (wired to the work queue's length).
        self.busy = busy
        self._slots: set[ObjectKey] = set()  # reserved or rolling out (counted against limit)
        self._tasks: dict[ObjectKey, asyncio.Task[None]] = {}
        self._waiting: dict[ObjectKey, tuple[int, str, float]] = {}  # due, id, last seen
        self._reads = RolloutReads(kube)
        #: The followed workloads' states from a watch (None: every state is read).
        self._watch = watch
        self._turns: dict[ObjectKey, _Turns] = {}  # the followers' read turns, by key
        self._ticker: asyncio.Task[None] | None = None
        if watch is not None:
            watch.on_state = self.moved

    @property
    def in_progress(self) -> int:
        return len(self._tasks)

    @property
    def awaiting_turn(self) -> int:
        """Followers waiting for their next turn (not reading or recording right now)."""
        return sum(1 for turn in self._turns.values() if turn.waiting)

    # ------------------------------------------------------------------ slots

    def has_turn(self, key: ObjectKey, due_ns: int | None) -> bool:
        """May ``key``'s restart due at ``due_ns`` take a slot now? (Nothing is reserved.)

        True without a limit, or when ``key`` already holds a slot it has not used (kept
        across a conflict); otherwise when a slot is free and ``key`` is among the earliest
        due waiters that fit into the free slots, and its own previous rollout has ended.
        """
        return self.queue(key).turn(due_ns)

    def queue(self, key: ObjectKey) -> RolloutQueue:
        """The queue as ``key`` sees it now (what the guardrails decide its turn on)."""
        if self.limit <= 0:
            return RolloutQueue()
        waiting = self._live_waiters()
        own = waiting.pop(key, None)
        return RolloutQueue(
            limit=self.limit,
            rolling=key in self._tasks,
            holds_slot=key in self._slots,
            free=self.limit - len(self._slots),
            key_id=key.id,
            waited_since_ns=None if own is None else own[0],
            others=tuple(entry[:2] for entry in waiting.values()),
        )

    def wait(self, key: ObjectKey, due_ns: int | None) -> None:
        """``key``'s due restart waits for its turn; wake those whose turn it is."""
        if self.limit <= 0:
            return
        self._waiting = self._live_waiters()
        self._waiting[key] = self._entry(key, due_ns)
        self._wake_waiters()

    def reserve(self, key: ObjectKey) -> None:
        """Take the slot :meth:`has_turn` found free (give it back with :meth:`abandon`)."""
        if self.limit <= 0:
            return
        self._waiting.pop(key, None)
        self._slots.add(key)

    def _entry(self, key: ObjectKey, due_ns: int | None) -> tuple[int, str, float]:
        due = due_ns if due_ns is not None else 0
        previous = self._waiting.get(key)
        if previous is not None:
            due = min(due, previous[0])
        return (due, key.id, self.clock.monotonic())

    def _live_waiters(self) -> dict[ObjectKey, tuple[int, str, float]]:
        now = self.clock.monotonic()
        return {k: entry for k, entry in self._waiting.items() if now - entry[2] <= self.waiter_ttl}

    def abandon(self, key: ObjectKey) -> None:
        """A reserved slot was not used (the restart was not written); nothing when ``key``
        holds no slot or its rollout is followed."""
        if key in self._slots and key not in self._tasks:
            self._slots.discard(key)
            self._wake_waiters()

    def object_gone(self, key: ObjectKey) -> None:
        """``key`` is gone: it waits no more."""
        self._waiting.pop(key, None)
        self.abandon(key)

    def _wake_waiters(self) -> None:
        if self.limit <= 0:
            return
        free = self.limit - len(self._slots)
        for key in sorted(self._waiting, key=lambda k: self._waiting[k][:2])[: max(free, 0)]:
            self.wake(key)

    # ------------------------------------------------------------------ following

    def follow(self, ref: ObjectRef, response: dict[str, Any]) -> None:
        """Follow the rollout the restart patch (whose answer is ``response``) started."""
        key = ref.key
        previous = self._tasks.pop(key, None)
        if previous is not None:
            previous.cancel()  # superseded by a newer restart of the same workload
        if self.limit > 0:
            self._slots.add(key)
        metadata = response.get("metadata") or {}
        generation = metadata.get("generation")
        if self._watch is not None:
            self._watch.follow(key, ref.uid, str(metadata.get("resourceVersion") or ""))
        task = asyncio.create_task(
            self._follow(
                ref,
                generation if isinstance(generation, int) else 0,
                str(metadata.get("resourceVersion") or ""),
            ),
            name=f"rollout {key.id}",
        )
        self._tasks[key] = task
        self.metrics.set_rollouts_in_progress(len(self._tasks))

        def done(finished: asyncio.Task[None]) -> None:
            if self._tasks.get(key) is finished:
                del self._tasks[key]
                if self._watch is not None:
                    self._watch.unfollow(key)
                self._slots.discard(key)
                if not self._tasks:
                    self._reads.forget_namespace_sizes()
                self.metrics.set_rollouts_in_progress(len(self._tasks))
                self._wake_waiters()

        task.add_done_callback(done)

    async def _follow(self, ref: ObjectRef, generation: int, evaluated: str) -> None:
        """``evaluated``: the resourceVersion of the state the patch answered with."""
        key = ref.key
        kind = key.resource.kind
        turn = _Turns(self.clock.monotonic(), evaluated)
        self._turns[key] = turn
        self._start_ticker()
        detail = "no status read yet"
        try:
            while await turn.next():  # False: the timeout has passed
                try:
                    obj = await self._state(key, turn)
                except NotFound:
                    _log.info("restarted workload is gone; rollout no longer followed")
                    return
                except KubeError as error:
                    _log.warning("rollout status unreadable", error=str(error))
                    continue
                if obj is None:
                    continue  # the rollout watch has not caught up yet: look again next turn
                metadata = obj.setdefault("metadata", {})
                turn.read(str(metadata.get("resourceVersion") or ""))
                version = metadata.get("generation")
                if isinstance(version, int) and version < generation:
                    metadata["generation"] = generation
                progress = rollout_progress(obj)
                detail = progress.detail
                if progress.complete:
                    seconds = self.clock.monotonic() - turn.started
                    self.metrics.observe_rollout(kind, "completed", seconds)
                    _log.info("rollout completed", seconds=round(seconds, 3))
                    await self.recorder.record(
                        ref, catalogue.rollout_completed(int(seconds * NS_PER_SECOND))
                    )
                    return
        finally:
            if self._turns.get(key) is turn:
                del self._turns[key]
        self.metrics.observe_rollout(kind, "stalled", self.clock.monotonic() - turn.started)
        _log.warning("rollout stalled", detail=detail)
        await self.recorder.record(
            ref, catalogue.rollout_stalled(int(self.timeout * NS_PER_SECOND), detail)
        )

    async def _state(self, key: ObjectKey, turn: _Turns) -> dict[str, Any] | None:
        """The state to evaluate on this turn: the latest the rollout watch kept, when it is
        one not evaluated yet; else, while that watch is delivering, None on a forced turn
        (nothing moved, and the watch would have said so) and at most
        :data:`MAX_WATCH_WAITS` turns in a row on the others (the watch has not caught up
        with the cache yet); else the workload read from the API."""
        watch = self._watch
        if watch is not None and watch.streaming(key):
            kept = watch.state(key)
            if kept is not None and kept["metadata"].get("resourceVersion") != turn.evaluated:
                turn.watch_waits = 0
                self.metrics.count_rollout_state("watch")
                return kept
            if turn.forced:
                # Nothing moved, and the watch delivers every change of the workload: a read
                # would find the state already evaluated (a storm's forced reads all did).
                turn.watch_waits = 0
                return None
            if turn.watch_waits < MAX_WATCH_WAITS:
                turn.watch_waits += 1
                return None
        turn.watch_waits = 0
        obj = await self._reads.read(key)
        self.metrics.count_rollout_state("read")
        return obj

    def moved(self, key: ObjectKey) -> None:
        """``key``'s state changed in the informer cache or the rollout watch: its follower's
        versions are compared on the next tick (the others' are not looked at)."""
        turn = self._turns.get(key)
        if turn is not None:
            turn.moved = True

    def _start_ticker(self) -> None:
        if self._ticker is None or self._ticker.done():
            self._ticker = asyncio.create_task(self._tick_loop(), name="rollout ticks")

    async def _tick_loop(self) -> None:
        """The one timer of every follower: on each tick, the followers whose workload moved
        in the cache (or is due a forced read, or has timed out) are given their turn; the
        rest are not woken at all."""
        while self._turns:
            await self.clock.sleep(self._until_tick())
            now = self.clock.monotonic()
            busy = self.busy()
            for key, turn in list(self._turns.items()):
                if turn.waiting:  # not one that is reading (its versions are not even looked at)
                    turn.tick(
                        now - turn.started >= self.timeout,
                        busy,
                        partial(self._unchanged, key, turn) if turn.moved else _unmoved,
                    )

    def _unchanged(self, key: ObjectKey, turn: _Turns) -> bool:
        """Neither the informer cache nor the rollout watch has a state of ``key`` other
        than the one last evaluated."""
        evaluated = turn.evaluated
        try:
            kept = None if self._watch is None else self._watch.version(key)
            unchanged = (
                evaluated != "" and self.version_of(key) == evaluated and kept in (None, evaluated)
            )
        except Exception:  # a broken cache lookup must not stop every follower
            _log.exception("cached version unreadable; reading the workload")
            return False
        turn.moved = not unchanged  # compared again on each tick until nothing is new
        return unchanged

    def _until_tick(self) -> float:
        """Seconds to the next shared tick (a multiple of the poll interval)."""
        interval = self.poll_interval
        if interval <= 0:
            return 0.0
        return interval - (self.clock.monotonic() % interval)

    async def aclose(self) -> None:
        """Stop following (the leader's work ends)."""
        tasks = list(self._tasks.values())
        if self._ticker is not None:
            tasks.append(self._ticker)
        for task in tasks:
            task.cancel()
        await asyncio.gather(*tasks, return_exceptions=True)
        self._ticker = None
        self._turns.clear()
        await self._reads.aclose()
        if self._watch is not None:
            await self._watch.aclose()
        self._tasks.clear()
        self._slots.clear()
        self._waiting.clear()


def _unmoved() -> bool:
    """The answer for a follower whose workload did not move since its versions matched."""
    return True


class _Turns:
    """When one follower reads: the ticker's verdict on each tick, handed to the follower's
    task through one future, so a follower with nothing to read is never woken."""

    def __init__(self, started: float, evaluated: str) -> None:
        self.started = started
        #: The resourceVersion of the state last evaluated ("" before the first read).
        self.evaluated = evaluated
        self.unchanged_ticks = 0
        self.deferred_ticks = 0
        self.forced_every = FORCED_READ_TICKS
        self.forced = False
        #: Turns in a row the rollout watch had nothing new while it was delivering.
        self.watch_waits = 0
        #: The cache or the watch may hold a state not evaluated yet: compare the versions
        #: on the next tick (set by :meth:`RolloutTracker.moved`, cleared when they match).
        self.moved = True
        self._waiter: asyncio.Future[bool] | None = None

    @property
    def waiting(self) -> bool:
        return self._waiter is not None and not self._waiter.done()

    async def next(self) -> bool:
        """Wait for the next turn: True to read, False once the timeout has passed."""
        self._waiter = asyncio.get_running_loop().create_future()
        try:
            return await self._waiter
        finally:
            self._waiter = None

    def read(self, version: str) -> None:
        """A read returned ``version``; a forced read that found the cache right backs off."""
        if self.forced and version == self.evaluated:
            self.forced_every = min(self.forced_every * 2, MAX_FORCED_READ_TICKS)
        else:
            self.forced_every = FORCED_READ_TICKS
        self.evaluated = version

    def tick(self, timed_out: bool, busy: bool, unchanged: Callable[[], bool]) -> None:
        """One shared tick: wake the follower when it has something to do (``unchanged`` is
        asked only when the answer matters)."""
        waiter = self._waiter
        if waiter is None or waiter.done():
            return  # reading (or already woken on this iteration)
        if timed_out:
            waiter.set_result(False)
            return
        if busy and self.deferred_ticks < MAX_DEFERRED_TICKS:
            self.deferred_ticks += 1
            return  # due actions first
        self.deferred_ticks = 0
        still = unchanged()
        if still:
            self.unchanged_ticks += 1
            if self.unchanged_ticks < self.forced_every:
                return  # nothing changed since the state last evaluated
        self.forced = still
        self.unchanged_ticks = 0
        waiter.set_result(True)
