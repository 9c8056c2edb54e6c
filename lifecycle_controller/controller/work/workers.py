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

An exception with a positive numeric ``retry_after`` attribute (the API server's 429 with
``Retry-After``, :class:`lifecycle_controller.kube.TooManyRequests`) is retried no sooner than
that many seconds, as client-go's REST client waits before it retries a 429.

``done(key)`` is always called, even on cancellation. The queue guarantees a key is never
reconciled by two workers at once. A failing reconcile never kills its worker; workers exit
when the queue is shut down and empty. Every log line of an item carries its key (as the
item's fields of :mod:`~lifecycle_controller.machinery.log_context`: ``key.log_context()`` if
the key offers it, else ``key=str(key)``), plus a ``reconcile_id`` shared by every line of
that one reconcile.
"""

from __future__ import annotations

import asyncio
import itertools
from collections.abc import Hashable, Mapping
from functools import partial
from typing import Any, Protocol, TypeVar

import structlog

from lifecycle_controller.controller.work.result import (
    ReconcileFunc,
    ReconcileOutcome,
    Result,
    TerminalError,
)
from lifecycle_controller.machinery.log_context import LazyFields, item_fields
from lifecycle_controller.machinery.tasks import being_cancelled
from lifecycle_controller.machinery.workqueue import QueueShutDown, WorkQueue

__all__ = [
    "NoopReconcileObserver",
    "ReconcileObserver",
    "process_next_item",
    "run_workers",
]

K = TypeVar("K", bound=Hashable)

_log = structlog.get_logger(__name__)
#: Numbers every reconcile, so all log lines of one reconcile share a ``reconcile_id``.
_reconcile_ids = itertools.count(1)


class ReconcileObserver(Protocol):
    """Hook for reconcile metrics (e.g. ``controller_runtime_reconcile_total{result}`` and
    ``controller_runtime_reconcile_time_seconds``)."""

    def observe(self, outcome: ReconcileOutcome, seconds: float) -> None:
        """One reconcile ended with ``outcome`` after ``seconds`` (queue clock)."""
        ...


class NoopReconcileObserver:
    """The default :class:`ReconcileObserver`: records nothing."""

    __slots__ = ()

    def observe(self, outcome: ReconcileOutcome, seconds: float) -> None:
        """Ignore."""


async def run_workers(
    queue: WorkQueue[K],
    reconcile: ReconcileFunc[K],
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
    reconcile: ReconcileFunc[K],
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
        fields = LazyFields(partial(_item_log_fields, name, key, next(_reconcile_ids)))
        with item_fields(fields):
            await _reconcile_one(queue, reconcile, key, obs)
    finally:
        queue.done(key)
    return True


async def _worker(
    queue: WorkQueue[K],
    reconcile: ReconcileFunc[K],
    name: str,
    observer: ReconcileObserver,
) -> None:
    while True:
        if not await process_next_item(queue, reconcile, name=name, observer=observer):
            return
        # A reconcile that decides to wait never suspends, and neither does get() while keys
        # are queued: without this yield, thousands of keys queued by an initial list would
        # be reconciled in one go while the probes and the informers wait.
        await asyncio.sleep(0)


async def _reconcile_one(
    queue: WorkQueue[K],
    reconcile: ReconcileFunc[K],
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
        outcome = ReconcileOutcome.TERMINAL
        _log.error("reconcile failed permanently; not retrying", error=str(err), exc_info=err)
    except asyncio.CancelledError as err:
        if being_cancelled():
            raise
        # A CancelledError that is not ours (e.g. from a task the reconciler awaited):
        # a failure like any other.
        outcome = _retry_after_error(queue, key, err)
    except Exception as err:
        outcome = _retry_after_error(queue, key, err)
    else:
        queue.forget(key)
        if result is not None and result.requeue_after:
            queue.add_after(key, result.requeue_after, order=result.order)
            outcome = ReconcileOutcome.REQUEUE_AFTER
            _log.debug("reconciled; requeue after", requeue_after=result.requeue_after)
        else:
            outcome = ReconcileOutcome.SUCCESS
            _log.debug("reconciled")
    try:
        observer.observe(outcome, clock.monotonic() - started)
    except Exception:
        _log.exception("reconcile observer failed")


def _retry_after_error(queue: WorkQueue[K], key: K, err: BaseException) -> ReconcileOutcome:
    asked = getattr(err, "retry_after", None)
    wait = float(asked) if isinstance(asked, int | float) and asked > 0 else 0.0
    queue.add_rate_limited(key, at_least=wait)
    _log.error(
        "reconcile failed; retrying with backoff",
        error=str(err) or type(err).__name__,
        requeues=queue.num_requeues(key),
        exc_info=err,
    )
    return ReconcileOutcome.ERROR


def _item_log_fields(name: str, key: Hashable, reconcile_id: int) -> dict[str, Any]:
    """The fields of a work item's log lines (built only when one of them is written)."""
    context = {"controller": name, **_log_context(key)} if name else dict(_log_context(key))
    context["reconcile_id"] = f"{reconcile_id:x}"
    return context


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
