"""The API server's MicroTime format (Event ``eventTime``, Lease ``renewTime``)."""

from __future__ import annotations

import functools
from datetime import UTC, datetime

from lifecycle_controller.core.text.units import NS_PER_SECOND


@functools.lru_cache(maxsize=8)
def _second(seconds: int) -> str:
    """``2026-01-01T00:00:00``: every Event of a burst falls in a few seconds, so the
    formatted second is remembered (formatting it took as long as the rest of the body)."""
    return datetime.fromtimestamp(seconds, UTC).strftime("%Y-%m-%dT%H:%M:%S")


def micro_time(now_ns: int) -> str:
    """Format UTC epoch nanoseconds as a Kubernetes MicroTime: ``2026-01-01T00:00:00.000000Z``.

    Always six fractional digits: the API server rejects MicroTime without them, which
    ``isoformat()`` omits when the microsecond is 0.
    """
    seconds, nanos = divmod(now_ns, NS_PER_SECOND)
    return f"{_second(seconds)}.{nanos // 1000:06d}Z"
