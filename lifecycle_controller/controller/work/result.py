"""The contract between a reconcile function and the workers that run it.

controller-runtime's shape: a reconcile returns a :class:`Result` (or ``None``) or raises.
The workers (:mod:`~lifecycle_controller.controller.work.workers`) map each ending to a queue
action and a :class:`ReconcileOutcome` label for the reconcile metrics.
"""

from __future__ import annotations

import enum
import math
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from typing import TypeVar

__all__ = ["NotLeading", "ReconcileFunc", "ReconcileOutcome", "Result", "TerminalError"]

K = TypeVar("K")


@dataclass(frozen=True, slots=True)
class Result:
    """What a successful reconcile asks for next (controller-runtime ``reconcile.Result``).

    ``requeue_after``: seconds after which the key must be reconciled again, or ``None`` (or
    0) for "only when something changes". Must be finite and ``>= 0``. ``order`` ranks keys
    whose requeues come due together (smaller first): the due time of the action waited for,
    so actions deferred to one maintenance-window opening run in due-time order.
    """

    requeue_after: float | None = None
    order: int = field(default=0, compare=False)  # a scheduling hint, not part of the answer

    def __post_init__(self) -> None:
        value = self.requeue_after
        if value is not None and not (math.isfinite(value) and value >= 0):
            raise ValueError(f"requeue_after must be None or finite and >= 0, got {value}")


class TerminalError(Exception):
    """A reconcile failure that retrying cannot fix: logged, counted, never retried.

    Raise it directly or wrap the cause: ``raise TerminalError("bad spec") from err``.
    """


class NotLeading(Exception):
    """A write was about to happen without a fresh leader lease; retried with backoff."""


class ReconcileOutcome(enum.StrEnum):
    """How one reconcile ended (the ``result`` label of controller-runtime's metrics)."""

    SUCCESS = "success"
    REQUEUE_AFTER = "requeue_after"
    ERROR = "error"
    TERMINAL = "terminal"


#: The reconcile function: one key in, a :class:`Result` (or ``None`` = success) out.
ReconcileFunc = Callable[[K], Awaitable[Result | None]]
