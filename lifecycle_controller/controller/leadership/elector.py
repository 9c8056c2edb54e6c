"""Lease-based leader election to the client-go ``tools/leaderelection`` contract.

Only the leader may reconcile, so this module is where split-brain bugs would live. It is our
own port of client-go (kubernetes-asyncio's bundled elector has no per-request timeout, crashes
on transport errors and never releases; docs/architecture.md#leader-elector), with these properties:

* **Acquire**: try every ``retry_period * (1 + rand * 1.2)`` until it works or the caller is
  cancelled. ``try_acquire_or_renew`` is client-go's: fast path update when we lead; else GET,
  CREATE on 404; a changed record is stamped with the *local monotonic* observation time, and
  another holder's lease counts as valid while ``observed_time + leaseDurationSeconds > now``
  (other replicas' ``renewTime`` is never compared with our clock, so clock skew is harmless);
  else an optimistic UPDATE (PUT with ``resourceVersion``) that keeps ``acquireTime`` and
  ``leaseTransitions`` when we already led, or increments the transitions when we take over.
* **Renew**: every ``retry_period``; leadership is lost when no renewal succeeded within
  ``renew_deadline`` of the start of the last successful one, or as soon as the API shows another
  valid holder. Every request runs under a timeout that ends at that deadline, so a hung API
  cannot keep us "leading" past it (stricter than client-go, which counts the deadline from the
  start of the failing round).
* **Fencing**: :meth:`LeaderElector.may_write` is true only while
  ``monotonic() - last_renew < renew_deadline``, which also covers event-loop stalls where the
  renew task could not run. Check it before each side-effecting write.
* **Hand-over**: :meth:`LeaderElector.run` stops the leader's work first, then the renewals, then
  (``release_on_cancel``) writes an empty holder with ``leaseDurationSeconds: 1`` so a follower
  takes over within one retry period instead of a whole lease duration.
* Every API error (transport, 5xx, 409, 429, even 403) fails one attempt; none crashes the loop.
* ``renewTime``/``acquireTime`` are MicroTime: UTC with exactly six fractional digits.
* ``leaseDurationSeconds`` is ``ceil(lease_duration)`` (client-go truncates; rounding up only
  makes followers wait longer, never shorter than the leader believes).

The configuration is the settings' :class:`~lifecycle_controller.config.LeaderElectionSettings`
(validated there); the Lease record and its encoding are in ``lease.py``.
"""

from __future__ import annotations

import asyncio
import copy
import math
import random
from collections.abc import Awaitable, Callable, Coroutine
from dataclasses import dataclass, replace
from typing import Any, TypeVar

import structlog

from lifecycle_controller.config import JITTER_FACTOR, LeaderElectionSettings
from lifecycle_controller.controller.leadership.lease import (
    LeaseApi,
    LeaseRecord,
    default_identity,
    new_lease,
)
from lifecycle_controller.kube import (
    LEASES,
    Conflict,
    KubeError,
    NotFound,
    ServerError,
    TooManyRequests,
    TransportError,
)
from lifecycle_controller.kube.microtime import micro_time
from lifecycle_controller.machinery.clock import Clock, RealClock

__all__ = [
    "DEFAULT_HEALTH_TOLERANCE",
    "LeaderElector",
    "LeadershipLost",
    "default_identity",
    "micro_time",
]

_log = structlog.get_logger(__name__)

T = TypeVar("T")

#: Extra seconds past the lease duration before :meth:`LeaderElector.healthy` fails
#: (kube-controller-manager passes 20 s to ``NewLeaderHealthzAdaptor``).
DEFAULT_HEALTH_TOLERANCE = 20.0
#: Bounded attempts of the release UPDATE when it meets 409 Conflict.
_RELEASE_ATTEMPTS = 3
#: Errors the API may well stop returning on the next attempt; others are logged louder.
_TRANSIENT = (TransportError, ServerError, Conflict, TooManyRequests, TimeoutError)


class LeadershipLost(Exception):
    """The lease could not be renewed within the renew deadline, or another holder took it.

    The leader's work has been cancelled (and awaited) when this is raised. Like
    controller-runtime, the process should exit non-zero and let Kubernetes restart it.
    """


@dataclass(slots=True)
class _Observation:
    """What we last saw of the Lease, and when (local monotonic seconds)."""

    lease: dict[str, Any] | None = None
    record: LeaseRecord | None = None
    time: float = -math.inf
    renewed: float = -math.inf  # start of our last successful acquire/renew


class LeaderElector:
    """One candidate in the election for the Lease ``config.namespace/config.name``.

    Use :meth:`run` (acquire, lead, hand over). The state accessors (:attr:`is_leader`,
    :meth:`may_write`, :meth:`healthy`) are safe to call from any task on the same loop.
    ``on_status(True/False)`` is called on every change of leadership (and ``False`` once when
    :meth:`run` starts), for a ``leader_election_master_status`` gauge.
    """

    def __init__(
        self,
        kube: LeaseApi,
        config: LeaderElectionSettings,
        *,
        identity: str | None = None,
        clock: Clock | None = None,
        on_status: Callable[[bool], None] | None = None,
        rng: random.Random | None = None,
    ) -> None:
        if config.namespace is None:
            raise ValueError("the Lease namespace must be resolved before electing a leader")
        self.config = config
        self.namespace: str = config.namespace
        self.identity = identity or default_identity()
        self._kube = kube
        self._clock: Clock = clock or RealClock()
        self._on_status = on_status
        self._rng = rng or random.Random()
        self._seen = _Observation()
        self._leading = False
        self._started = False
        self._log = _log.bind(
            kind="Lease", namespace=self.namespace, name=config.name, identity=self.identity
        )

    # ------------------------------------------------------------------ state

    @property
    def is_leader(self) -> bool:
        """True from a successful acquire until leadership is lost or handed over."""
        return self._leading

    @property
    def last_renew_monotonic(self) -> float | None:
        """Monotonic start time of the last successful acquire/renew (None before any)."""
        return self._seen.renewed if math.isfinite(self._seen.renewed) else None

    @property
    def holder(self) -> str | None:
        """The holder identity last observed on the Lease ("" when released, None if unseen)."""
        return None if self._seen.record is None else self._seen.record.holder

    def may_write(self) -> bool:
        """Fencing check before a side-effecting write: leading and renewed within the deadline."""
        elapsed = self._clock.monotonic() - self._seen.renewed
        return self._leading and elapsed < self.config.renew_deadline

    def healthy(self, tolerance: float = DEFAULT_HEALTH_TOLERANCE) -> bool:
        """client-go's healthz adaptor: a follower is healthy; a leader is unhealthy only when
        its renewals are wedged for longer than ``lease_duration + tolerance``."""
        if not self._leading:
            return True
        elapsed = self._clock.monotonic() - self._seen.renewed
        return elapsed <= self.config.lease_duration + tolerance

    # ------------------------------------------------------------------ the app's API

    async def run(self, leading: Callable[[], Awaitable[None]]) -> None:
        """Acquire the lease, run ``leading()`` while renewing it, then hand it over.

        * Waits (possibly forever) until this replica acquires the lease.
        * Then runs ``leading()`` next to the renew loop. Whatever ends leadership, the order
          is: ``leading`` is cancelled and awaited (the workers stop), then renewals stop,
          then, if ``release_on_cancel`` and we still hold it, the Lease is released.
        * Renewal failure: :class:`LeadershipLost` is raised (``may_write()`` turned false at
          the deadline, before ``leading`` was cancelled).
        * ``run`` cancelled (SIGTERM): the CancelledError is re-raised after the hand-over.
        * ``leading()`` raises: its exception is re-raised after the hand-over.
        * ``leading()`` returns: leadership is handed over and ``run`` returns ``None``.

        An elector runs once (a second call raises RuntimeError): build a new one, or better
        exit the process, after it returns or raises.
        """
        if self._started:
            raise RuntimeError("LeaderElector.run() may be called only once")
        self._started = True
        self._notify(False)
        await self._acquire()
        lead = asyncio.create_task(_call(leading), name=f"leader:{self.config.name}:leading")
        renew = asyncio.create_task(self._renew_loop(), name=f"leader:{self.config.name}:renew")
        try:
            await asyncio.wait((lead, renew), return_when=asyncio.FIRST_COMPLETED)
        finally:
            try:
                await _stop(lead)
            finally:
                await _stop(renew)
            self._set_leading(False, reason="stepped down")
            if self.config.release_on_cancel:
                await self._release()
        _raise_outcome(lead=lead, renew=renew)

    # ------------------------------------------------------------------ loops

    async def _acquire(self) -> None:
        self._log.info("attempting to acquire leader lease")
        while True:
            start = self._clock.monotonic()
            if await self._try_acquire_or_renew(deadline=start + self.config.renew_deadline):
                self._set_leading(True, reason="acquired")
                return
            jitter = 1 + self._rng.random() * JITTER_FACTOR
            await self._clock.sleep(self.config.retry_period * jitter)

    async def _renew_loop(self) -> None:
        while True:
            await self._clock.sleep(self.config.retry_period)
            await self._renew()

    async def _renew(self) -> None:
        """Retry every retry period until renewed; raise LeadershipLost at the deadline."""
        while True:
            deadline = self._seen.renewed + self.config.renew_deadline
            if self._clock.monotonic() >= deadline:
                raise self._lost(f"not renewed within {self.config.renew_deadline}s")
            if await self._try_acquire_or_renew(deadline=deadline):
                return
            holder = self.holder
            if holder and holder != self.identity:
                raise self._lost(f"the lease is now held by {holder}")
            remaining = deadline - self._clock.monotonic()
            await self._clock.sleep(min(self.config.retry_period, max(0.0, remaining)))

    def _lost(self, why: str) -> LeadershipLost:
        self._log.warning("leader election lost", reason=why)
        self._set_leading(False, reason=why)
        return LeadershipLost(f"leader election lost: {why}")

    # ------------------------------------------------------------------ one attempt

    async def _try_acquire_or_renew(self, *, deadline: float) -> bool:
        """client-go ``tryAcquireOrRenew``; every request ends by ``deadline`` (monotonic)."""
        start = self._clock.monotonic()
        stamp = micro_time(self._clock.now_ns())
        mine = LeaseRecord(
            holder=self.identity,
            duration_seconds=self.config.lease_duration_seconds,
            acquire_time=stamp,
            renew_time=stamp,
            transitions=0,
        )
        seen = self._seen.record
        # 1. Fast path: we hold a lease that is still valid locally; update what we last wrote.
        if seen is not None and seen.holder == self.identity and self._valid(start):
            kept = replace(mine, acquire_time=seen.acquire_time, transitions=seen.transitions)
            try:
                await self._update(kept, deadline=deadline, started=start)
                return True
            except (KubeError, TimeoutError) as error:
                self._log.info("optimistic lease renewal failed, re-reading", error=str(error))
        # 2. Read the Lease; create it when missing.
        try:
            lease = await self._bounded(deadline, self._get)
        except NotFound:
            return await self._create(mine, deadline=deadline, started=start)
        except (KubeError, TimeoutError) as error:
            self._attempt_failed("reading the lease failed", error)
            return False
        # 3. A changed record is stamped with the local observation time.
        record = self._observe(lease)
        # 4. Held by someone else whose lease we saw renewed recently: wait.
        if record.holder and record.holder != self.identity and self._valid(start):
            return False
        # 5. Take it over (or renew it after a failed fast path).
        if record.holder == self.identity:
            update = replace(mine, acquire_time=record.acquire_time, transitions=record.transitions)
        else:
            update = replace(mine, transitions=record.transitions + 1)
        try:
            await self._update(update, deadline=deadline, started=start)
        except (KubeError, TimeoutError) as error:
            self._attempt_failed("updating the lease failed", error)
            return False
        return True

    def _valid(self, now: float) -> bool:
        """client-go ``isLeaseValid``: observed locally less than its duration ago."""
        record = self._seen.record
        return record is not None and self._seen.time + record.duration_seconds > now

    def _observe(self, lease: dict[str, Any]) -> LeaseRecord:
        record = LeaseRecord.from_lease(lease)
        self._seen.lease = lease
        if record != self._seen.record:
            self._remember(record, at=self._clock.monotonic())
        return record

    def _remember(self, record: LeaseRecord, *, at: float) -> None:
        previous = self._seen.record
        self._seen.record = record
        self._seen.time = at
        if record.holder and (previous is None or previous.holder != record.holder):
            self._log.info("new leader observed", holder=record.holder)

    async def _create(self, record: LeaseRecord, *, deadline: float, started: float) -> bool:
        body = new_lease(self.namespace, self.config.name, record)

        async def create(timeout: float) -> dict[str, Any]:
            return await self._kube.create(
                LEASES, self.namespace, body, pool="leases", timeout=timeout
            )

        try:
            created = await self._bounded(deadline, create)
        except (KubeError, TimeoutError) as error:
            self._attempt_failed("creating the lease failed", error)
            return False
        self._wrote(created, started=started)
        return True

    async def _update(self, record: LeaseRecord, *, deadline: float, started: float) -> None:
        """PUT ``record`` onto the last Lease object seen (optimistic: its resourceVersion)."""
        if self._seen.lease is None:
            raise TransportError("no Lease observed yet to update")
        body = copy.deepcopy(self._seen.lease)
        body["spec"] = {**(body.get("spec") or {}), **record.to_spec()}

        async def put(timeout: float) -> dict[str, Any]:
            return await self._kube.replace(
                LEASES,
                self.namespace,
                self.config.name,
                body,
                pool="leases",
                timeout=timeout,
            )

        self._wrote(await self._bounded(deadline, put), started=started)

    def _wrote(self, lease: dict[str, Any], *, started: float) -> None:
        """Our write succeeded: it counts from when the attempt started (the safe side)."""
        self._seen.lease = lease
        record = LeaseRecord.from_lease(lease)
        self._remember(record, at=started)
        if record.holder == self.identity:
            self._seen.renewed = started

    async def _get(self, timeout: float) -> dict[str, Any]:
        return await self._kube.get(
            LEASES, self.namespace, self.config.name, pool="leases", timeout=timeout
        )

    async def _bounded(self, deadline: float, call: Callable[[float], Coroutine[Any, Any, T]]) -> T:
        """Run ``call(timeout)`` so that it ends by ``deadline`` on the injected clock."""
        remaining = deadline - self._clock.monotonic()
        if remaining <= 0:
            raise TimeoutError("renew deadline reached")
        return await _within(self._clock, remaining, call(remaining))

    def _attempt_failed(self, what: str, error: BaseException) -> None:
        log = self._log.info if isinstance(error, _TRANSIENT) else self._log.warning
        log(what, error=str(error) or type(error).__name__, error_type=type(error).__name__)

    # ------------------------------------------------------------------ hand-over

    async def _release(self) -> bool:
        """client-go ``release``: empty holder, 1 s duration; bounded retries on 409."""
        deadline = self._clock.monotonic() + self.config.renew_deadline
        for _ in range(_RELEASE_ATTEMPTS):
            seen = self._seen.record
            if seen is None or seen.holder != self.identity:
                return True
            stamp = micro_time(self._clock.now_ns())
            released = LeaseRecord("", 1, stamp, stamp, seen.transitions)
            try:
                await self._update(released, deadline=deadline, started=self._clock.monotonic())
            except Conflict:
                try:
                    self._observe(await self._bounded(deadline, self._get))
                except (KubeError, TimeoutError) as error:
                    self._attempt_failed("re-reading the lease to release it failed", error)
                    return False
                continue
            except (KubeError, TimeoutError) as error:
                self._attempt_failed("releasing the lease failed", error)
                return False
            self._log.info("released leader lease")
            return True
        self._log.warning("releasing the lease kept conflicting; leaving it to expire")
        return False

    def _set_leading(self, leading: bool, *, reason: str) -> None:
        if leading == self._leading:
            return
        self._leading = leading
        if leading:
            self._log.info("started leading", reason=reason)
        else:
            self._log.info("stopped leading", reason=reason)
        self._notify(leading)

    def _notify(self, leading: bool) -> None:
        if self._on_status is not None:
            self._on_status(leading)


async def _call(function: Callable[[], Awaitable[None]]) -> None:
    await function()


async def _stop(task: asyncio.Task[None]) -> None:
    """Cancel ``task`` and wait until it has finished (its outcome is read later)."""
    task.cancel()
    await asyncio.wait((task,))


def _raise_outcome(*, lead: asyncio.Task[None], renew: asyncio.Task[None]) -> None:
    """Re-raise why leadership ended: a renew failure first, else ``leading``'s outcome."""
    lead_error = None if lead.cancelled() else lead.exception()
    if not renew.cancelled() and (renew_error := renew.exception()) is not None:
        raise renew_error from lead_error
    lead.result()


async def _within(clock: Clock, seconds: float, work: Coroutine[Any, Any, T]) -> T:
    """Await ``work`` for at most ``seconds`` of ``clock`` time; TimeoutError after that.

    ``asyncio.timeout`` would follow the loop's clock; this follows the injected one, so a
    hung request is cut at the deadline under a fake clock too.
    """
    task = asyncio.ensure_future(work)
    timer = asyncio.ensure_future(clock.sleep(seconds))
    try:
        await asyncio.wait((task, timer), return_when=asyncio.FIRST_COMPLETED)
    finally:
        timer.cancel()
        task.cancel()
        await asyncio.wait((task, timer))
    if task.cancelled():
        raise TimeoutError(f"no answer within {seconds:.3f}s")
    return task.result()
