"""The latched circuit breaker (docs/behaviour.md#circuit-breaker).

``--breaker-max-actions N`` / ``--breaker-window W``: before each deletion or restart the
guardrails (:func:`lifecycle_controller.core.decision.guardrails.check`) read :meth:`facts`; an
action
they let go takes its place in the window with :meth:`reserve`. When N actions already fall
within the last W the breaker **trips** instead: the state is written to a small ConfigMap
beside the Lease
(``<lease name>-breaker`` in the Lease's namespace, keys ``state``, ``trippedAt``,
``actions``, ``window``, ``trips``, ``resetAt``) and stays open, across restarts and
failovers, until ``lifecycle-controller breaker reset`` closes it. While open nothing is
sent; each due object is held (Warning ``ActionsHalted`` once per trip; the ConfigMap counts
them and names the first few) and the breaker requeues every held object as soon as it sees
the reset. Every action held at the reset then goes, outside the window: the operator who
reset the breaker reviewed them; the window counts only the actions that were not held.

The window itself is counted in memory by the leader (a new leader starts an empty window);
the latch is what must survive, and it lives in the cluster.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Protocol

import structlog

from lifecycle_controller.controller.events.recorder import EventRecorder
from lifecycle_controller.core.decision import events as catalogue
from lifecycle_controller.core.decision.breaker import HELD_NAMED, ActionWindow, BreakerState
from lifecycle_controller.core.decision.guardrails import BreakerFacts
from lifecycle_controller.core.objects.resources import ObjectKey, ObjectRef
from lifecycle_controller.core.text.durations import NS_PER_SECOND
from lifecycle_controller.core.text.gotext import format_go_duration
from lifecycle_controller.kube import KubeError
from lifecycle_controller.kube.api_ports import ConfigMapStore
from lifecycle_controller.kube.breaker_store import (
    read_breaker,
    write_breaker,
    write_breaker_keys,
)
from lifecycle_controller.kube.resources import CONFIGMAPS
from lifecycle_controller.machinery.clock import Clock

__all__ = ["BreakerMetrics", "CircuitBreaker"]

_log = structlog.get_logger(__name__)


class BreakerMetrics(Protocol):
    def set_breaker_open(self, open_: bool) -> None: ...
    def count_breaker_trip(self) -> None: ...


class CircuitBreaker:
    """The leader's breaker: the window, the latched state and the objects it holds."""

    def __init__(
        self,
        kube: ConfigMapStore,
        *,
        namespace: str,
        name: str,
        limit: int,
        window: float,
        clock: Clock,
        metrics: BreakerMetrics,
        poll_interval: float = 5.0,
        recorder: EventRecorder | None = None,
        reset_command: str = "lifecycle-controller breaker reset",
        on_release: Callable[[ObjectKey], None] = lambda key: None,
    ) -> None:
        self.kube = kube
        self.namespace = namespace
        self.name = name
        self.limit = limit
        self.window_ns = int(window * NS_PER_SECOND)
        self.clock = clock
        self.metrics = metrics
        self.poll_interval = poll_interval
        self.recorder = recorder
        self.reset_command = reset_command
        self._announce = False  # a trip whose Event waits for its ConfigMap to be written
        self.state = BreakerState()
        #: Told each object a reset lets go (the work queue's, through the requeue rules).
        self.on_release = on_release
        self._window = ActionWindow(limit, max(self.window_ns, 1))
        self._held: dict[ObjectKey, None] = {}
        #: Held when the breaker was last reset: let go outside the window (the operator
        #: reviewed them), until each one's action is carried out.
        self._released: dict[ObjectKey, None] = {}
        self._unsaved = False  # a trip not yet latched in the cluster
        self._held_changed = False  # the held objects changed since they were last written
        self._in_flight = 0

    @property
    def enabled(self) -> bool:
        return self.limit > 0

    @property
    def is_open(self) -> bool:
        return self.enabled and self.state.open

    # ------------------------------------------------------------------ the decision's side

    def facts(self, key: ObjectKey) -> BreakerFacts | None:
        """What :func:`lifecycle_controller.core.decision.guardrails.check` needs (None: no
        breaker)."""
        if not self.enabled:
            return None
        return BreakerFacts(
            open=self.state.open,
            limit=self.limit,
            window_ns=self.window_ns,
            in_window=self._window.count(self.clock.now_ns()),
            in_flight=self._in_flight,
            tripped_at=self.state.tripped_at,
            tripped_actions=self.state.actions,
            released=key in self._released,
        )

    def reserve(self, key: ObjectKey) -> bool:
        """Take a place in the window for ``key``'s action, which the guardrails let go.

        An action released by a reset takes none (it is not counted). Returns whether a place
        was taken; hand it to :meth:`settle` when the write ends.
        """
        if not self.enabled or key in self._released:
            return False
        if not self._window.admit(self.clock.now_ns()):
            raise RuntimeError("breaker window full: the guardrails should have held this action")
        self._in_flight += 1
        return True

    def settle(self, key: ObjectKey, *, counted: bool, carried_out: bool) -> None:
        """An action let go ended: carried out, or not (its write failed: place given back)."""
        if carried_out:
            self._released.pop(key, None)
        if not counted:
            return
        self._in_flight = max(0, self._in_flight - 1)
        if not carried_out:
            self._window.refund()

    def hold(self, key: ObjectKey) -> None:
        """``key`` waits for the reset; it is requeued, and let go, when the breaker closes."""
        if key not in self._held:
            self._held[key] = None
            self._held_changed = True  # the ConfigMap names what is held

    def release(self, key: ObjectKey) -> None:
        """``key`` is gone: it waits for nothing any more."""
        if self._held.pop(key, 0) is None:
            self._held_changed = True
        self._released.pop(key, None)

    async def trip(self, at: str) -> None:
        """Open the breaker now, tripped at ``at`` (in memory at once, then in the cluster)."""
        if self.open_now(at):
            await self.save()

    def open_now(self, at: str) -> bool:
        """Open the breaker in memory, tripped at ``at``; True when it opened now (its state
        is then to be saved with :meth:`save`)."""
        if self.state.open:
            return False
        self.state = self.state.tripped(
            at=at,
            actions=self.limit,
            window=format_go_duration(self.window_ns),
        )
        self._unsaved = self._announce = True
        self.metrics.count_breaker_trip()
        self.metrics.set_breaker_open(True)
        _log.warning(
            "circuit breaker tripped",
            actions=self.limit,
            window=self.state.window,
            configmap=f"{self.namespace}/{self.name}",
        )
        return True

    async def save(self) -> None:
        """Write the breaker's state to its ConfigMap (when it has changed)."""
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
                    if self.state.open and self._held_changed:
                        await self._save_held()
            except KubeError as error:
                _log.warning("circuit breaker state unreadable", error=str(error))

    def _with_held(self) -> BreakerState:
        held = [f"{key.resource.kind}/{key.namespace or ''}/{key.name}" for key in self._held]
        self._held_changed = False
        return self.state.holding(len(held), held[:HELD_NAMED])

    async def _save_held(self) -> None:
        """Write only what is held (a patch of two keys can never reopen a reset breaker)."""
        self.state = self._with_held()
        await write_breaker_keys(self.kube, self.namespace, self.name, self.state.held_data())

    async def _save(self) -> None:
        self.state = self._with_held()
        try:
            configmap = await write_breaker(self.kube, self.namespace, self.name, self.state)
        except KubeError as error:
            _log.error("circuit breaker state not saved; retrying", error=str(error))
            return
        self._unsaved = False
        if self._announce and self.recorder is not None:
            self._announce = False
            uid = str((configmap.get("metadata") or {}).get("uid", ""))
            ref = ObjectRef(ObjectKey(CONFIGMAPS, self.namespace, self.name), uid, "")
            event = catalogue.breaker_tripped(
                self.state.actions, self.window_ns, self.reset_command
            )
            await self.recorder.record(ref, event)

    def _apply(self, state: BreakerState) -> None:
        was_open = self.state.open
        self.state = state
        self.metrics.set_breaker_open(state.open)
        if was_open and not state.open:
            self._window.clear()
            held, self._held = list(self._held), {}
            self._released.update(dict.fromkeys(held))
            _log.info("circuit breaker reset; every held action goes", released=len(held))
            for key in held:
                self.on_release(key)
        elif state.open and not was_open:
            _log.warning("circuit breaker is open", tripped_at=state.tripped_at)
