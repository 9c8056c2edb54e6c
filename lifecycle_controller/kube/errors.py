"""The small error tree every API call raises, so callers never see library exceptions.

Status codes map to classes (404 NotFound, 409 Conflict or AlreadyExists, 410 Gone, 403
Forbidden, 401 Unauthorized, 422 Unprocessable (the API's reason ``Invalid``), 429
TooManyRequests, 5xx ServerError); network failures and timeouts become TransportError.
The original exception is chained.
"""

from __future__ import annotations

import json
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from lifecycle_controller.kube.transport import HttpResponse


class KubeError(Exception):
    """Base class of every error raised by :mod:`lifecycle_controller.kube`."""


class TransportError(KubeError):
    """The request did not get an HTTP answer: connection refused or reset, or a timeout."""


class ApiError(KubeError):
    """The API server answered with a non-success status."""

    def __init__(
        self, status: int, body: dict[str, Any] | None = None, *, method: str = "", path: str = ""
    ) -> None:
        self.status = status
        self.body = body or {}
        self.reason = str(self.body.get("reason", ""))
        self.message = str(self.body.get("message", "")) or f"HTTP {status}"
        self.method = method
        self.path = path
        super().__init__(self.message)

    def __str__(self) -> str:
        return self.message


class NotFound(ApiError):
    """404: the object (or the resource type) does not exist."""


class Conflict(ApiError):
    """409 Conflict: a resourceVersion or UID precondition failed."""


class AlreadyExists(ApiError):
    """409 AlreadyExists: a create met an existing object."""


class Gone(ApiError):
    """410: the requested resourceVersion (or continue token) is too old; relist."""


class Unauthorized(ApiError):
    """401: the credentials were not accepted."""


class Forbidden(ApiError):
    """403: RBAC (or admission) refused the request."""


class Unprocessable(ApiError):
    """422: the object or patch failed validation."""


class TooManyRequests(ApiError):
    """429: throttled by API priority and fairness; ``retry_after`` seconds if given."""

    def __init__(
        self,
        status: int,
        body: dict[str, Any] | None = None,
        *,
        method: str = "",
        path: str = "",
        retry_after: float | None = None,
    ) -> None:
        super().__init__(status, body, method=method, path=path)
        self.retry_after = retry_after


class ServerError(ApiError):
    """5xx: the server failed; usually worth a retry with backoff."""


def error_for_status(
    status: int,
    body: dict[str, Any] | None,
    *,
    method: str = "",
    path: str = "",
    retry_after: float | None = None,
) -> ApiError:
    """Build the error instance for a non-2xx answer."""
    body = body or {}
    if status == 409:
        cls: type[ApiError] = AlreadyExists if body.get("reason") == "AlreadyExists" else Conflict
        return cls(status, body, method=method, path=path)
    if status == 429:
        return TooManyRequests(status, body, method=method, path=path, retry_after=retry_after)
    mapped: dict[int, type[ApiError]] = {
        401: Unauthorized,
        403: Forbidden,
        404: NotFound,
        410: Gone,
        422: Unprocessable,
    }
    cls = mapped.get(status, ServerError if status >= 500 else ApiError)
    return cls(status, body, method=method, path=path)


async def error_of_answer(response: HttpResponse, method: str, path: str) -> ApiError:
    """The error a non-2xx answer stands for, from its ``Status`` body and ``Retry-After``."""
    raw = await response.read()
    try:
        decoded = json.loads(raw) if raw else {}
    except json.JSONDecodeError:
        decoded = {"message": raw.decode(errors="replace")[:500]}
    retry_after = response.header("Retry-After")
    return error_for_status(
        response.status,
        decoded if isinstance(decoded, dict) else {},
        method=method,
        path=path,
        retry_after=float(retry_after) if retry_after and retry_after.isdigit() else None,
    )
