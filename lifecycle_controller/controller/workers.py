"""Reconcile workers: turn queued keys into reconcile calls, and results into queue actions.

``run_workers`` runs N worker tasks over one
:class:`~lifecycle_controller.machinery.workqueue.WorkQueue`.
Each worker loops ``get -> reconcile(key) -> done`` and maps the outcome exactly like
controller-runtime's ``processNextWorkItem``:

====================================  ===========================================
reconcile outcome                     queue action
====================================  ===========================================
returns ``None`` or ``Result()``      ``forget(key)`` (success: backoff reset)
returns ``Result(requeue_after=s)``   ``forget(key)`` then ``add_after(key, s)``
raises :class:`TerminalError`         nothing: logged, no retry (no ``forget``)
raises any other ``Exception``        ``add_rate_limited(key)`` (logged)
====================================  ===========================================

``done(key)`` is always called, even on cancellation. The queue guarantees a key is never
reconciled by two workers at once. A failing reconcile never kills its worker; workers exit
when the queue is shut down and empty. Each item is logged with its key bound into structlog's
context variables (``key.log_context()`` if the key offers it, else ``key=str(key)``).
"""

from __future__ import annotations

import asyncio
import enum
import math
from collections.abc import Awaitable, Callable, Hashable, Mapping
from dataclasses import dataclass
from typing import Any, Protocol, TypeVar

import structlog

from lifecycle_controller.machinery.workqueue import QueueShutDown, WorkQueue

__all__ = [
    "NoopReconcileObserver",
    "Outcome",
    "ReconcileObserver",
    "Reconciler",
    "Result",
    "TerminalError",
    "process_next_item",
    "run_workers",
]

K = TypeVar("K", bound=Hashable)

_log = structlog.get_logger(__name__)


@dataclass(frozen=True, slots=True)
class Result:
    """What a successful reconcile asks for next (controller-runtime ``reconcile.Result``).

    ``requeue_after``: seconds after which the key must be reconciled again, or ``None`` (or
    0) for "only when something changes". Must be finite and ``>= 0``.
    """

    requeue_after: float | None = None

    def __post_init__(self) -> None:
        value = self.requeue_after
        if value is not None and not (math.isfinite(value) and value >= 0):
            raise ValueError(f"requeue_after must be None or finite and >= 0, got {value}")


class TerminalError(Exception):
    """A reconcile failure that retrying cannot fix: logged, counted, never retried.

    Raise it directly or wrap the cause: ``raise TerminalError("bad spec") from err``.
    """


class Outcome(enum.StrEnum):
    """How one reconcile ended (the ``result`` label of controller-runtime's metrics)."""

    SUCCESS = "success"
    REQUEUE_AFTER = "requeue_after"
    ERROR = "error"
    TERMINAL = "terminal"


class ReconcileObserver(Protocol):
    """Hook for reconcile metrics (e.g. ``controller_runtime_reconcile_total{result}`` and
    ``controller_runtime_reconcile_time_seconds``)."""

    def observe(self, outcome: Outcome, seconds: float) -> None:
        """One reconcile ended with ``outcome`` after ``seconds`` (queue clock)."""
        ...


class NoopReconcileObserver:
    """The default :class:`ReconcileObserver`: records nothing."""

    __slots__ = ()

    def observe(self, outcome: Outcome, seconds: float) -> None:
        """Ignore."""


#: The reconcile function: one key in, a :class:`Result` (or ``None`` = success) out.
Reconciler = Callable[[K], Awaitable[Result | None]]


async def run_workers(
    queue: WorkQueue[K],
    reconcile: Callable[[K], Awaitable[Result | None]],
    n: int,
    *,
    name: str = "",
    observer: ReconcileObserver | None = None,
) -> None:
    """Run ``n`` workers over ``queue`` until it is shut down and empty, then return.

    Shutting the queue down (``shutdown`` or ``shutdown_with_drain``) is the way to stop
    them: each worker finishes its current key, keeps taking keys still queued, and exits
    when ``get`` raises :class:`QueueShutDown`. Cancelling ``run_workers`` cancels the
    workers (their in-flight keys are still marked done). ``name`` is bound into every log
    line as ``controller``.
    """
    if n < 1:
        raise ValueError(f"need at least one worker, got {n}")
    obs = observer if observer is not None else NoopReconcileObserver()
    async with asyncio.TaskGroup() as tg:
        for i in range(n):
            tg.create_task(_worker(queue, reconcile, name, obs), name=f"worker[{name}]-{i}")


async def process_next_item(
    queue: WorkQueue[K],
    reconcile: Callable[[K], Awaitable[Result | None]],
    *,
    name: str = "",
    observer: ReconcileObserver | None = None,
) -> bool:
    """Take one key, reconcile it, apply the result, mark it done.

    Returns False (without reconciling) once the queue is shut down and empty, True
    otherwise. Reconcile errors never escape; cancellation does (after ``done``).
    """
    try:
        key = await queue.get()
    except QueueShutDown:
        return False
    obs = observer if observer is not None else NoopReconcileObserver()
    try:
        context = {"controller": name, **_log_context(key)} if name else _log_context(key)
        with structlog.contextvars.bound_contextvars(**context):
            await _reconcile_one(queue, reconcile, key, obs)
    finally:
        queue.done(key)
    return True


async def _worker(
    queue: WorkQueue[K],
    reconcile: Callable[[K], Awaitable[Result | None]],
    name: str,
    observer: ReconcileObserver,
) -> None:
    while await process_next_item(queue, reconcile, name=name, observer=observer):
        pass


async def _reconcile_one(
    queue: WorkQueue[K],
    reconcile: Callable[[K], Awaitable[Result | None]],
    key: K,
    observer: ReconcileObserver,
) -> None:
    clock = queue.clock
    started = clock.monotonic()
    try:
        result = await reconcile(key)
        if result is not None and not isinstance(result, Result):
            raise TypeError(f"reconcile must return Result or None, got {type(result).__name__}")
    except TerminalError as err:
        outcome = Outcome.TERMINAL
        _log.error("reconcile failed permanently; not retrying", error=str(err), exc_info=err)
    except asyncio.CancelledError as err:
        if _being_cancelled():
            raise
        # A CancelledError that is not ours (e.g. from a task the reconciler awaited):
        # a failure like any other.
        outcome = _retry_after_error(queue, key, err)
    except Exception as err:
        outcome = _retry_after_error(queue, key, err)
    else:
        queue.forget(key)
        if result is not None and result.requeue_after:
            queue.add_after(key, result.requeue_after)
            outcome = Outcome.REQUEUE_AFTER
            _log.debug("reconciled; requeue after", requeue_after=result.requeue_after)
        else:
            outcome = Outcome.SUCCESS
            _log.debug("reconciled")
    try:
        observer.observe(outcome, clock.monotonic() - started)
    except Exception:
        _log.exception("reconcile observer failed")


def _retry_after_error(queue: WorkQueue[K], key: K, err: BaseException) -> Outcome:
    queue.add_rate_limited(key)
    _log.error(
        "reconcile failed; retrying with backoff",
        error=str(err) or type(err).__name__,
        requeues=queue.num_requeues(key),
        exc_info=err,
    )
    return Outcome.ERROR


def _being_cancelled() -> bool:
    task = asyncio.current_task()
    return task is not None and task.cancelling() > 0


def _log_context(key: Hashable) -> Mapping[str, Any]:
    """Return the structlog context for ``key``: its ``log_context()`` or ``{"key": str(key)}``."""
    method = getattr(key, "log_context", None)
    if callable(method):
        try:
            context = method()
        except Exception:
            _log.exception("key.log_context() failed", key=str(key))
        else:
            if isinstance(context, Mapping):
                return {str(k): v for k, v in context.items()}
    return {"key": str(key)}
