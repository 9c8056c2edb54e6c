"""The API server's MicroTime format (Event ``eventTime``, Lease ``renewTime``)."""

from __future__ import annotations

from datetime import UTC, datetime

from lifecycle_controller.core.units import NS_PER_SECOND


def micro_time(now_ns: int) -> str:
    """Format UTC epoch nanoseconds as a Kubernetes MicroTime: ``2026-01-01T00:00:00.000000Z``.

    Always six fractional digits: the API server rejects MicroTime without them, which
    ``isoformat()`` omits when the microsecond is 0.
    """
    seconds, nanos = divmod(now_ns, NS_PER_SECOND)
    stamp = datetime.fromtimestamp(seconds, UTC).strftime("%Y-%m-%dT%H:%M:%S")
    return f"{stamp}.{nanos // 1000:06d}Z"
