"""Writing the persisted ``never`` observation (docs/behaviour.md#persisted-observations).

Under ``--persist-observations`` a :class:`~lifecycle_controller.core.Wait` decision may
carry one merge patch that records, on the object, that the waiting occurrence was observed
before it was due. This module sends it, guarded like every other write (the
resourceVersion it was decided on, plus the UID), and makes sure it never changes anything
else: a refused write (403, 409, 422, a transport error) is logged and counted, the
in-memory observation stays, the Wait's requeue stands, and the next pass tries again (after
a conflict the reconciler re-reads the object and decides again at once, a few times, as for
any write). The reconciler calls it; nothing here decides.

The writer (:mod:`~lifecycle_controller.controller.act.writes`) hands the response back to the
metadata cache, so the next pass does not decide on the old state; the watch event of the
write is not relevant
(:func:`~lifecycle_controller.core.should_enqueue_on_update` ignores the ``observed`` key),
so the controller's own write never enqueues the object again.
"""

from __future__ import annotations

import enum
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any, Protocol

import structlog

from lifecycle_controller.controller.act.writes import ObjectWriter
from lifecycle_controller.controller.watch.cache import CachedObject
from lifecycle_controller.controller.work.result import NotLeading
from lifecycle_controller.core import ObjectKey
from lifecycle_controller.core.decision.observed import ObservationError, decode_observation
from lifecycle_controller.core.objects import keys
from lifecycle_controller.kube import (
    Conflict,
    Forbidden,
    KubeError,
    NotFound,
    Unprocessable,
)

__all__ = ["ObservationMetrics", "ObservationWriter", "RecordResult", "garbled_observation"]

_log = structlog.get_logger(__name__)


class RecordResult(enum.StrEnum):
    """How writing a record ended (the ``result`` label of its counter)."""

    WRITTEN = "written"
    CONFLICT = "conflict"
    FORBIDDEN = "forbidden"
    INVALID = "invalid"
    GONE = "gone"
    ERROR = "error"
    NOT_LEADING = "not_leading"


class ObservationMetrics(Protocol):
    """``lifecycle_observations_persisted_total{result}``."""

    def count_observation_persisted(self, result: str) -> None: ...


def garbled_observation(annotations: Mapping[str, str]) -> str | None:
    """Why the object's ``observed`` value is not a record (None: absent or valid)."""
    value = annotations.get(keys.OBSERVED)
    if value is None:
        return None
    try:
        decode_observation(value)
    except ObservationError as error:
        return str(error)
    return None


@dataclass
class ObservationWriter:
    """Sends the record patch of a Wait; see the module docstring."""

    writer: ObjectWriter
    metrics: ObservationMetrics | None = None

    def check(self, obj: CachedObject) -> None:
        """Log a garbled record once per pass; it is ignored, never acted on."""
        problem = garbled_observation(obj.annotations)
        if problem is not None:
            _log.warning("ignoring an invalid observed annotation", error=problem)

    async def write(
        self, key: ObjectKey, obj: CachedObject, body: Mapping[str, Any]
    ) -> RecordResult:
        """One guarded merge patch of the record (resourceVersion and UID), and its result."""
        try:
            patched = await self.writer.patch(key, obj, body, with_uid=True)
        except NotLeading:
            _log.debug("not leading; observation not persisted")
            return RecordResult.NOT_LEADING
        except KubeError as error:
            result = _result_of(error)
            self._count(result)
            _log.warning(
                "observation not persisted; the in-memory observation still counts",
                result=result.value,
                error=str(error),
            )
            return result
        if patched is None:
            self._count(RecordResult.GONE)
            _log.warning("observation not persisted; the object is gone")
            return RecordResult.GONE
        self._count(RecordResult.WRITTEN)
        _log.info(
            "observation persisted",
            observed=(body.get("metadata") or {}).get("annotations", {}).get(keys.OBSERVED),
        )
        return RecordResult.WRITTEN

    def _count(self, result: RecordResult) -> None:
        if self.metrics is not None:
            self.metrics.count_observation_persisted(result.value)


def _result_of(error: KubeError) -> RecordResult:
    if isinstance(error, Conflict):
        return RecordResult.CONFLICT
    if isinstance(error, Forbidden):
        return RecordResult.FORBIDDEN
    if isinstance(error, Unprocessable):
        return RecordResult.INVALID
    if isinstance(error, NotFound):
        return RecordResult.GONE
    return RecordResult.ERROR
