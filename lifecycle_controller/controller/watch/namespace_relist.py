"""One namespace of a cluster-wide informer listed again, while its watch runs on.

A ``LifecyclePolicy`` reaches its own namespace only, so when a policy change changes which
objects of a type are kept only inside some namespaces
(:func:`~lifecycle_controller.core.policy.read_scope.kept_change`), the type is read again in
those namespaces, not cluster-wide (docs/architecture.md#scoped-relists). For each one,
:class:`NamespaceRelists` sends a namespace-scoped list (``/api/v1/namespaces/<ns>/...``, with
the projection the informer asks with: metadata only, or the fields conditions read) taken
exactly at the resourceVersion the informer's watch has reached
(``resourceVersionMatch=Exact``), and merges it into the cache for that namespace only
through :class:`~lifecycle_controller.controller.watch.cache_writer.NamespaceMerge`, which keeps
what changed since (the watch is newer). The cluster-wide watch is never stopped.

* Requests coalesce: a namespace asked for again before its list began is listed once; one
  asked for while it is being listed is listed once more afterwards (the policies it was
  merged with may be older than the request). Namespaces are listed one at a time.
* A full list of the informer while a namespace is being listed (its own recovery, a 410)
  makes that namespace's list be taken again at the new resourceVersion.
* A failed list (the API server does not answer; 410 Gone when the watch's resourceVersion
  is compacted) is tried again after the informers' backoff, at the watch's resourceVersion
  of that moment.
"""

from __future__ import annotations

import asyncio
import random
from collections.abc import Iterable

import structlog

from lifecycle_controller.controller.watch.cache_writer import CacheWriter
from lifecycle_controller.controller.watch.ports import InformerSettings
from lifecycle_controller.controller.watch.reflector import Informer
from lifecycle_controller.kube import KubeError
from lifecycle_controller.machinery.clock import Clock
from lifecycle_controller.machinery.tasks import being_cancelled

__all__ = ["NamespaceRelists"]

_log = structlog.get_logger(__name__)


class NamespaceRelists:
    """The namespaces of one cluster-wide informer waiting to be listed again, and the task
    that lists them (started on demand, ended when none waits); see the module docstring."""

    def __init__(
        self,
        informer: Informer,
        writer: CacheWriter,
        clock: Clock,
        *,
        settings: InformerSettings | None = None,
        rng: random.Random | None = None,
    ) -> None:
        if informer.namespace is not None:
            raise ValueError("a namespace-scoped informer is listed again whole")
        self._informer = informer
        self._writer = writer
        self._clock = clock
        self._settings = InformerSettings() if settings is None else settings
        self._backoff = self._settings.backoff(clock, random.Random() if rng is None else rng)
        self._pending: set[str] = set()
        self._task: asyncio.Task[None] | None = None
        #: Namespaces listed and merged so far (tests and logs read it).
        self.done = 0
        self._log = _log.bind(resource=str(informer.resource))

    @property
    def pending(self) -> frozenset[str]:
        """The namespaces waiting to be listed (the one being listed is not among them)."""
        return frozenset(self._pending)

    @property
    def idle(self) -> bool:
        """Nothing is waiting or being listed."""
        return self._task is None or self._task.done()

    def request(self, namespaces: Iterable[str]) -> None:
        """List these namespaces again (soon, once each, after any being listed now)."""
        self._pending.update(namespaces)
        if self._pending and self.idle:
            self._task = asyncio.create_task(
                self._run(), name=f"namespace relists {self._informer.resource}"
            )

    async def _run(self) -> None:
        while self._pending:
            namespace = min(self._pending)
            self._pending.discard(namespace)
            try:
                await self.relist(namespace)
            except KubeError as error:
                self._pending.add(namespace)
                delay = self._backoff.next_delay()
                self._log.info(
                    "could not list one namespace again; retrying",
                    namespace=namespace,
                    error=str(error) or type(error).__name__,
                    delay=round(delay, 3),
                )
                await self._clock.sleep(delay)
            except Exception:
                if being_cancelled():
                    raise
                self._log.exception("listing one namespace again failed", namespace=namespace)
            else:
                self._backoff.reset()

    async def relist(self, namespace: str) -> None:
        """List ``namespace`` at the watch's resourceVersion and merge it; again whenever a
        full list of the informer completed meanwhile. Raises KubeError."""
        while True:
            version = self._informer.resource_version
            if version is None:  # not listed yet: its first list reads the policies in force
                return
            lists = self._writer.lists
            merge = self._writer.merge(namespace)
            try:
                await self._informer.list_exactly(namespace, version, merge.put)
                if self._writer.lists != lists:
                    continue
                merge.finish()
            finally:
                merge.close()
            self.done += 1
            self._log.debug("listed one namespace again", namespace=namespace)
            return

    async def aclose(self) -> None:
        """Stop listing (what waits is dropped: the informer is started over, or stopped)."""
        self._pending.clear()
        task, self._task = self._task, None
        if task is not None and not task.done():
            task.cancel()
            await asyncio.gather(task, return_exceptions=True)
