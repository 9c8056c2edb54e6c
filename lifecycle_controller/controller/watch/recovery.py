"""What an informer does after a list or watch ends: the reflector's recovery table.

Kept apart from :mod:`~lifecycle_controller.controller.watch.reflector` (which runs the loop) so the
whole policy reads in one place; the rules are those of the reflector's module docstring
(docs/reliability.md): a normal end re-watches at once, 410 relists, 504 re-watches after a
backoff, a connection error is retried quickly and relists the second time in a row.
"""

from __future__ import annotations

import enum
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

import structlog

from lifecycle_controller.kube import (
    ApiError,
    Forbidden,
    Gone,
    ServerError,
    TooManyRequests,
    TransportError,
    Unauthorized,
)

__all__ = ["Recovery", "Step", "WatchEnd", "recovery_after", "recovery_for", "watch_end_of"]


class WatchEnd(enum.Enum):
    """How one watch stream ended without raising."""

    CLOSED = "closed"  # the server ended it (timeoutSeconds): re-watch from the last RV now
    CLOSED_EARLY = "closed_early"  # ended at once with nothing in it: back off, re-watch
    EXPIRED = "expired"  # ERROR 410: relist
    TOO_LARGE = "too_large"  # ERROR 504 (RV ahead of the cache): back off, same RV
    ERROR = "error"  # another ERROR event: back off, relist


def watch_end_of(status: Mapping[str, Any], log: structlog.typing.FilteringBoundLogger) -> WatchEnd:
    """How a watch ended that sent an ERROR event with this ``Status``."""
    code = status.get("code")
    message = str(status.get("message", ""))
    if code == 410:
        log.info("watch expired; relisting", message=message)
        return WatchEnd.EXPIRED
    if code == 504 or "too large resource version" in message.lower():
        log.info("watch resourceVersion ahead of the server cache", message=message)
        return WatchEnd.TOO_LARGE
    log.warning("watch error event", code=code, message=message)
    return WatchEnd.ERROR


class Step(enum.Enum):
    LIST = "list"
    WATCH = "watch"


@dataclass(frozen=True)
class Recovery:
    """The next step, the metric's reason, and whether (and how long at least) to wait."""

    step: Step
    reason: str
    backoff: bool
    at_least: float = 0.0
    cap: float | None = None


def recovery_after(end: WatchEnd, expired_in_a_row: int) -> Recovery:
    """The next step after a watch that ended without raising."""
    if end is WatchEnd.CLOSED:
        return Recovery(Step.WATCH, end.value, backoff=False)
    if end is WatchEnd.EXPIRED:
        # Relist at once, but a second 410 right after a fresh list waits first.
        return Recovery(Step.LIST, end.value, backoff=expired_in_a_row > 0)
    if end in (WatchEnd.CLOSED_EARLY, WatchEnd.TOO_LARGE):
        return Recovery(Step.WATCH, end.value, backoff=True)
    return Recovery(Step.LIST, end.value, backoff=True)


def recovery_for(
    error: Exception,
    step: Step,
    *,
    has_version: bool,
    failures: int,
    transport_cap: float,
    log: structlog.typing.FilteringBoundLogger,
) -> Recovery:
    """Map a failure in ``step`` to what happens next (404 is handled by the caller).

    ``has_version``: a resourceVersion to watch from is known; ``failures``: consecutive
    failures, this one included.
    """
    after_list = step is Step.LIST or not has_version
    same = Step.LIST if after_list else Step.WATCH
    if isinstance(error, Gone):
        return Recovery(Step.LIST, "expired", backoff=after_list)
    if isinstance(error, Forbidden):
        log.error(
            "access forbidden: grant list and watch on this resource (RBAC)",
            step=step.value,
            error=str(error),
        )
        return Recovery(Step.LIST, "forbidden", backoff=True)
    if isinstance(error, Unauthorized):
        log.error("credentials rejected", step=step.value, error=str(error))
        return Recovery(Step.LIST, "unauthorized", backoff=True)
    if isinstance(error, TooManyRequests):
        log.info("throttled by the API server", step=step.value)
        return Recovery(same, "throttled", backoff=True, at_least=error.retry_after or 0.0)
    if isinstance(error, TransportError | ServerError):
        # Per failure at debug only: the informer logs the outage's start and end once.
        log.debug("connection lost or server error", step=step.value, error=str(error))
        reason = "transport" if isinstance(error, TransportError) else "server_error"
        # Failing again: relist, so the first answer after an outage is a full list.
        retry = Step.LIST if failures > 1 else same
        cap = transport_cap if reason == "transport" else None
        return Recovery(retry, reason, backoff=True, cap=cap)
    if isinstance(error, ApiError):
        log.warning("request refused", step=step.value, error=str(error))
        return Recovery(Step.LIST, "api_error", backoff=True)
    log.exception("unexpected informer failure", step=step.value)
    return Recovery(Step.LIST, "unexpected", backoff=True)
