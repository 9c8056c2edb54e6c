"""What the fake API server records and the faults a test arms on it.

Every request is kept as a :class:`RecordedRequest` (method, path, query, headers, decoded
body, the status answered), so a test asserts on what the controller *sent*, not only on the
state it left. A :class:`Fault` answers the next ``times`` requests matching a method and a
path pattern with an error status (``Retry-After`` included for 429), or holds them unanswered
until :meth:`Fault.release` (a hung API server), before the request reaches the store.
"""

from __future__ import annotations

import asyncio
import re
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any

__all__ = ["DEFAULT_REASONS", "Fault", "RecordedRequest"]

DEFAULT_REASONS: Mapping[int, str] = {
    400: "BadRequest",
    401: "Unauthorized",
    403: "Forbidden",
    404: "NotFound",
    409: "Conflict",
    410: "Expired",
    422: "Invalid",
    429: "TooManyRequests",
    500: "InternalError",
    503: "ServiceUnavailable",
    504: "Timeout",
}


@dataclass
class RecordedRequest:
    """One request as the fake received it; ``status`` is filled in once answered."""

    method: str
    path: str
    query: tuple[tuple[str, str], ...]
    headers: Mapping[str, str]
    body: Any
    status: int | None = None

    def param(self, name: str) -> str | None:
        """The first value of query parameter ``name``, or None."""
        return next((value for key, value in self.query if key == name), None)

    @property
    def is_watch(self) -> bool:
        return self.param("watch") in ("true", "1")


@dataclass(eq=False)
class Fault:
    """Answer the next ``times`` matching requests with ``status`` (or hang them).

    ``method`` None matches every method; ``path`` is a regular expression searched in the
    path (None matches every path); ``when`` is an extra predicate on the request. ``hits``
    counts the requests this fault answered.
    """

    status: int
    method: str | None = None
    path: str | None = None
    times: int = 1
    retry_after: int | None = None
    reason: str | None = None
    message: str | None = None
    hang: bool = False
    when: Callable[[RecordedRequest], bool] | None = None
    hits: int = 0
    _released: asyncio.Event = field(default_factory=asyncio.Event, repr=False)

    def matches(self, request: RecordedRequest) -> bool:
        if self.hits >= self.times:
            return False
        if self.method is not None and self.method.upper() != request.method:
            return False
        if self.path is not None and re.search(self.path, request.path) is None:
            return False
        return self.when is None or self.when(request)

    @property
    def exhausted(self) -> bool:
        return self.hits >= self.times

    def release(self) -> None:
        """Let every request held by a ``hang`` fault go on (it then gets ``status``)."""
        self._released.set()

    async def held(self) -> None:
        """Wait until released (hang faults only)."""
        await self._released.wait()

    def status_body(self) -> dict[str, Any]:
        reason = self.reason or DEFAULT_REASONS.get(self.status, "")
        return {
            "kind": "Status",
            "apiVersion": "v1",
            "metadata": {},
            "status": "Failure",
            "message": self.message or f"injected fault: HTTP {self.status}",
            "reason": reason,
            "code": self.status,
        }
