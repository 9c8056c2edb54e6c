"""The latched circuit breaker (docs/behaviour.md#circuit-breaker).

``--breaker-max-actions N`` / ``--breaker-window W``: the executor asks :meth:`admit` right
before each deletion or restart it sends; when N actions already fall within the last W the
breaker **trips** instead: the state is written to a small ConfigMap beside the Lease
(``<lease name>-breaker`` in the Lease's namespace, keys ``state``, ``trippedAt``,
``actions``, ``window``, ``trips``, ``resetAt``) and stays open, across restarts and
failovers, until ``lifecycle-controller breaker reset`` closes it. While open nothing is
sent; the executor holds each due object (Warning ``ActionsHalted`` once per trip) and the
breaker requeues every held object as soon as it sees the reset.

The window itself is counted in memory by the leader (a new leader starts an empty window);
the latch is what must survive, and it lives in the cluster.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Protocol

import structlog

from lifecycle_controller.core.breaker import ActionWindow, BreakerState
from lifecycle_controller.core.gotext import format_go_duration
from lifecycle_controller.core.resources import ObjectKey
from lifecycle_controller.core.timestamps import format_rfc3339_seconds
from lifecycle_controller.kube import KubeClient, KubeError
from lifecycle_controller.kube.breaker_store import read_breaker, write_breaker
from lifecycle_controller.machinery.clock import Clock

__all__ = ["BreakerMetrics", "CircuitBreaker"]

_log = structlog.get_logger(__name__)
_NS_PER_S = 1_000_000_000


class BreakerMetrics(Protocol):
    def set_breaker_open(self, open_: bool) -> None: ...
    def count_breaker_trip(self) -> None: ...


class CircuitBreaker:
    """The leader's breaker: the window, the latched state and the objects it holds."""

    def __init__(
        self,
        kube: KubeClient,
        *,
        namespace: str,
        name: str,
        limit: int,
        window: float,
        clock: Clock,
        metrics: BreakerMetrics,
        poll_interval: float = 5.0,
    ) -> None:
        self.kube = kube
        self.namespace = namespace
        self.name = name
        self.limit = limit
        self.window_ns = int(window * _NS_PER_S)
        self.clock = clock
        self.metrics = metrics
        self.poll_interval = poll_interval
        self.state = BreakerState()
        self.on_release: Callable[[ObjectKey], None] = lambda key: None
        self._window = ActionWindow(limit, max(self.window_ns, 1))
        self._held: dict[ObjectKey, None] = {}
        self._unsaved = False
        self._in_flight = 0

    @property
    def enabled(self) -> bool:
        return self.limit > 0

    @property
    def is_open(self) -> bool:
        return self.enabled and self.state.open

    # ------------------------------------------------------------------ the executor's side

    def admit(self) -> bool | None:
        """Reserve one action now.

        True: go ahead, then report with :meth:`settle`. False: it would be the (N+1)th in
        the window, so the breaker must trip. None: the window is full only counting
        actions still in flight; ask again shortly, since one of them may fail and give its
        place back (tripping now would halt an action the limit allows).
        """
        if not self.enabled:
            return True
        if self.state.open:
            return False
        if self._window.admit(self.clock.now_ns()):
            self._in_flight += 1
            return True
        return None if self._in_flight else False

    def settle(self, *, carried_out: bool) -> None:
        """An admitted action ended: carried out, or not (its write failed: place given back)."""
        if not self.enabled:
            return
        self._in_flight = max(0, self._in_flight - 1)
        if not carried_out:
            self._window.refund()

    def hold(self, key: ObjectKey) -> None:
        """``key`` waits for the reset; it is requeued when the breaker closes."""
        self._held[key] = None

    async def trip(self) -> None:
        """Open the breaker now (in memory at once, then in the cluster)."""
        if self.state.open:
            return
        self.state = self.state.tripped(
            at=format_rfc3339_seconds(self.clock.now_ns()),
            actions=self.limit,
            window=format_go_duration(self.window_ns),
        )
        self._unsaved = True
        self.metrics.count_breaker_trip()
        self.metrics.set_breaker_open(True)
        _log.warning(
            "circuit breaker tripped",
            actions=self.limit,
            window=self.state.window,
            configmap=f"{self.namespace}/{self.name}",
        )
        await self._save()

    # ------------------------------------------------------------------ the cluster's side

    async def load(self) -> None:
        """Read the latched state (at start, before any worker runs)."""
        if not self.enabled:
            return
        try:
            self._apply(await read_breaker(self.kube, self.namespace, self.name))
        except KubeError as error:
            _log.error("circuit breaker state unreadable", error=str(error))

    async def run(self) -> None:
        """Follow the latched state until cancelled (a reset is seen within a poll)."""
        if not self.enabled:
            return
        while True:
            await self.clock.sleep(self.poll_interval)
            try:
                if self._unsaved:
                    await self._save()
                else:
                    self._apply(await read_breaker(self.kube, self.namespace, self.name))
            except KubeError as error:
                _log.warning("circuit breaker state unreadable", error=str(error))

    async def _save(self) -> None:
        try:
            await write_breaker(self.kube, self.namespace, self.name, self.state)
        except KubeError as error:
            _log.error("circuit breaker state not saved; retrying", error=str(error))
            return
        self._unsaved = False

    def _apply(self, state: BreakerState) -> None:
        was_open = self.state.open
        self.state = state
        self.metrics.set_breaker_open(state.open)
        if was_open and not state.open:
            self._window.clear()
            held, self._held = list(self._held), {}
            _log.info("circuit breaker reset", released=len(held))
            for key in held:
                self.on_release(key)
        elif state.open and not was_open:
            _log.warning("circuit breaker is open", tripped_at=state.tripped_at)
