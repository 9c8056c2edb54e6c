"""Writing the persisted ``never`` observation (docs/behaviour.md#persisted-observations).

Under ``--persist-observations`` a :class:`~lifecycle_controller.core.Wait` decision may
carry one merge patch that records, on the object, that the waiting occurrence was observed
before it was due. This module sends it, guarded like every other write (the
resourceVersion it was decided on, plus the UID), and makes sure it never changes anything
else: a refused write (403, 409, 422, a transport error) is logged and counted, the
in-memory observation stays, the Wait's requeue stands, and the next pass tries again (after
a conflict the reconciler re-reads the object and decides again at once, a few times, as for
any write). The reconciler calls it; nothing here decides.

A successful write refreshes the metadata cache with the response, so the next pass does
not decide on the old state; the watch event of the write is not relevant
(:func:`~lifecycle_controller.core.should_enqueue_on_update` ignores the ``observed`` key),
so the controller's own write never enqueues the object again.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any, Protocol

import structlog

from lifecycle_controller.controller.cache import CachedObject, MetadataCache
from lifecycle_controller.controller.execution import guarded
from lifecycle_controller.core import ObjectKey, keys
from lifecycle_controller.core.observed import ObservationError, decode_observation
from lifecycle_controller.kube import (
    Conflict,
    Forbidden,
    KubeClient,
    KubeError,
    NotFound,
    Unprocessable,
)

__all__ = ["ObservationMetrics", "ObservationWriter", "garbled_observation"]

_log = structlog.get_logger(__name__)


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

    kube: KubeClient
    cache: MetadataCache
    may_write: Callable[[], bool]
    metrics: ObservationMetrics | None = None

    def check(self, obj: CachedObject) -> None:
        """Log a garbled record once per pass; it is ignored, never acted on."""
        problem = garbled_observation(obj.annotations)
        if problem is not None:
            _log.warning("ignoring an invalid observed annotation", error=problem)

    async def write(self, key: ObjectKey, obj: CachedObject, body: Mapping[str, Any]) -> str:
        """One guarded merge patch of the record; its result (``written``, ``conflict``, …)."""
        if not self.may_write():
            _log.debug("not leading; observation not persisted")
            return "not_leading"
        patch = guarded(body, obj.resource_version, uid=obj.uid)
        try:
            response = await self.kube.merge_patch(key.resource, key.namespace, key.name, patch)
        except KubeError as error:
            result = _result_of(error)
            self._count(result)
            _log.warning(
                "observation not persisted; the in-memory observation still counts",
                result=result,
                error=str(error),
            )
            return result
        fresh = CachedObject.from_metadata(response.get("metadata") or {})
        self.cache.refresh(key, fresh, decided_on=obj)
        self._count("written")
        _log.info(
            "observation persisted",
            observed=patch["metadata"].get("annotations", {}).get(keys.OBSERVED),
        )
        return "written"

    def _count(self, result: str) -> None:
        if self.metrics is not None:
            self.metrics.count_observation_persisted(result)


def _result_of(error: KubeError) -> str:
    if isinstance(error, Conflict):
        return "conflict"
    if isinstance(error, Forbidden):
        return "forbidden"
    if isinstance(error, Unprocessable):
        return "invalid"
    if isinstance(error, NotFound):
        return "gone"
    return "error"
