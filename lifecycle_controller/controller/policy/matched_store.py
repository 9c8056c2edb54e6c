"""``matchedAt`` kept across restarts and leader changes (``--persist-observations``).

A policy never writes onto the objects it covers, so its instants live beside the Lease: one
ConfigMap per tracked policy, ``<lease name>-matched-<hash of the policy>`` in the Lease's
namespace, holding the compact record of
:mod:`~lifecycle_controller.core.policy.matched_record` and, in annotations, which policy and
generation it is of (docs/policies.md#matchedat, docs/reliability.md#matchedat-store).

* :meth:`MatchedStore.load` runs once the leader's lists are in, before any worker: every
  tracked policy's ConfigMap is read and its instants of the current generation handed to
  :meth:`.matched_at.MatchedAt.load`. An unreadable or garbled
  record teaches nothing: its objects start again, later, never earlier.
* :meth:`MatchedStore.run` writes what changed, a whole record per policy: new instants
  batched (:data:`BATCH_SECONDS`, losing them only makes an object start again later), a
  removal or a policy gone within :data:`PROMPT_SECONDS` (a stale instant would be an
  *earlier* one); nothing while nothing changes. A failed write stays due and is tried again.
"""

from __future__ import annotations

import asyncio
import contextlib
import hashlib
from collections.abc import Callable, Mapping
from typing import Any, Protocol

import structlog

from lifecycle_controller.controller.policy.matched_at import MatchedAt
from lifecycle_controller.core.policy.matched_record import RecordError, decode, encode
from lifecycle_controller.core.policy.model import PolicyRef
from lifecycle_controller.kube import KubeError, NotFound
from lifecycle_controller.kube.resources import CONFIGMAPS, ResourceType
from lifecycle_controller.machinery.clock import Clock

__all__ = ["BATCH_SECONDS", "PROMPT_SECONDS", "MatchedStore", "record_name"]

_log = structlog.get_logger(__name__)

#: How long new instants wait to be written together.
BATCH_SECONDS = 10.0
#: How long a removal waits (others that come with it go in the same write).
PROMPT_SECONDS = 1.0
_KEY = "entries"
_POLICY = "lifecycle-controller.io/matched-at-policy"
_GENERATION = "lifecycle-controller.io/matched-at-generation"
_SUFFIX = "-matched-"


class RecordApi(Protocol):
    """The ConfigMap requests the store makes (``KubeClient`` has them)."""

    async def get(
        self, resource: ResourceType, namespace: str | None, name: str
    ) -> dict[str, Any]: ...

    async def create(
        self, resource: ResourceType, namespace: str | None, body: Mapping[str, Any]
    ) -> dict[str, Any]: ...

    async def merge_patch(
        self, resource: ResourceType, namespace: str | None, name: str, patch: Mapping[str, Any]
    ) -> dict[str, Any]: ...

    async def delete(
        self, resource: ResourceType, namespace: str | None, name: str
    ) -> dict[str, Any]: ...


def record_name(lease_name: str, ref: PolicyRef) -> str:
    """The ConfigMap that keeps ``ref``'s instants (a hash: a policy name may be long)."""
    digest = hashlib.sha256(str(ref).encode()).hexdigest()[:16]
    return lease_name[: 253 - len(_SUFFIX) - len(digest)] + _SUFFIX + digest


class MatchedStore:
    """See the module docstring; one per leader term, beside its pipeline's ``MatchedAt``."""

    def __init__(
        self,
        api: RecordApi,
        clock: Clock,
        matched: MatchedAt,
        *,
        namespace: str,
        lease: str,
        on_write: Callable[[], None] = lambda: None,
    ) -> None:
        self._api = api
        self._clock = clock
        self._matched = matched
        self._namespace = namespace
        self._lease = lease
        self._due: set[PolicyRef] = set()
        self._prompt = False
        self._wake = asyncio.Event()
        #: Writes sent (records written or deleted), for tests; ``on_write`` is told of each
        #: (``lifecycle_matched_at_writes_total``: a benchmark's idle writes, whose goal is 0).
        self.writes = 0
        self._on_write = on_write
        matched.on_change = self._changed

    @property
    def pending(self) -> bool:
        """Some record is due to be written."""
        return bool(self._due)

    def _changed(self, ref: PolicyRef, removed: bool) -> None:
        self._due.add(ref)
        self._prompt = self._prompt or removed
        self._wake.set()

    async def load(self) -> None:
        """Hand every tracked policy's kept instants to ``MatchedAt`` (see the module)."""
        for ref, track in list(self._matched.tracks.items()):
            name = record_name(self._lease, ref)
            try:
                configmap = await self._api.get(CONFIGMAPS, self._namespace, name)
            except NotFound:
                continue
            except KubeError as error:
                _log.warning("matchedAt record not read", policy=str(ref), error=str(error))
                continue
            annotations = (configmap.get("metadata") or {}).get("annotations") or {}
            if annotations.get(_POLICY) != str(ref):
                continue  # another policy's (a hash collision) or edited by hand
            if annotations.get(_GENERATION) != str(track.generation):
                self._changed(ref, removed=True)  # an older generation's: replaced at once
                continue
            try:
                instants = decode(str((configmap.get("data") or {}).get(_KEY, "")))
            except RecordError as error:
                _log.warning("matchedAt record garbled", policy=str(ref), error=str(error))
                continue
            self._matched.load(ref, track.generation, instants)
            _log.info("matchedAt record loaded", policy=str(ref), entries=len(instants))

    async def run(self) -> None:
        """Write what changed (see the module); returns only when cancelled."""
        while True:
            await self._wake.wait()
            await self._clock.sleep(PROMPT_SECONDS if self._prompt else BATCH_SECONDS)
            await self.flush()

    async def flush(self) -> None:
        """Write every record due now; what fails stays due."""
        self._wake.clear()
        due, self._due, self._prompt = self._due, set(), False
        failed = {ref for ref in due if not await self._write(ref)}
        if failed:
            self._due |= failed
            self._wake.set()

    async def _write(self, ref: PolicyRef) -> bool:
        name = record_name(self._lease, ref)
        track = self._matched.tracks.get(ref)
        self.writes += 1
        self._on_write()
        try:
            if track is None:
                with contextlib.suppress(NotFound):
                    await self._api.delete(CONFIGMAPS, self._namespace, name)
                return True
            encoded = encode(track.instants())
            if encoded.left_out:
                _log.warning(
                    "matchedAt record full: the newest instants are not kept",
                    policy=str(ref),
                    left_out=encoded.left_out,
                )
            metadata = {
                "annotations": {_POLICY: str(ref), _GENERATION: str(track.generation)},
            }
            data = {_KEY: encoded.text}
            try:
                await self._api.merge_patch(
                    CONFIGMAPS, self._namespace, name, {"metadata": metadata, "data": data}
                )
            except NotFound:
                body = {
                    "apiVersion": "v1",
                    "kind": "ConfigMap",
                    "metadata": {
                        "name": name,
                        "namespace": self._namespace,
                        "labels": {"app.kubernetes.io/managed-by": "lifecycle-controller"},
                        **metadata,
                    },
                    "data": data,
                }
                await self._api.create(CONFIGMAPS, self._namespace, body)
        except KubeError as error:
            _log.warning("matchedAt record not written", policy=str(ref), error=str(error))
            return False
        return True
