"""Reading the status of the workloads whose rollouts are followed, in batches.

A restart storm (hundreds of Deployments due at once) used to cost one GET per followed
workload per poll: 500 restarts, about 3,500 GETs. The followers here wake on shared ticks
(multiples of the poll interval on the monotonic clock), so their reads arrive together;
:class:`RolloutReads` gathers the reads of one loop iteration and answers those of one
resource type in one namespace with one list when there are several, paging at most four
times as many objects as were asked for. When the namespace holds more than that (the list
would carry many workloads nobody follows), the rest are read one by one, and the size the
API server reported (``remainingItemCount``) decides later ticks: a list again once enough
of that namespace's workloads are followed at once.
"""

from __future__ import annotations

import asyncio
from typing import Any

from lifecycle_controller.core import ObjectKey
from lifecycle_controller.core.objects.resources import ResourceType
from lifecycle_controller.kube import KubeError, NotFound
from lifecycle_controller.kube.api_ports import ObjectReads

__all__ = ["RolloutReads"]

#: A batch list pages at most this many objects per object asked for.
LIST_FACTOR = 4
#: Fewer reads than this in one namespace are single GETs.
LIST_FROM = 2

_Group = tuple[ResourceType, str | None]


class RolloutReads:
    """Coalesces status reads issued in the same loop iteration."""

    def __init__(self, kube: ObjectReads) -> None:
        self.kube = kube
        self._pending: dict[ObjectKey, asyncio.Future[dict[str, Any]]] = {}
        self._flush: asyncio.Handle | None = None
        self._sizes: dict[_Group, int] = {}  # objects in a namespace, where a list was cut
        self._tasks: set[asyncio.Task[None]] = set()

    async def read(self, key: ObjectKey) -> dict[str, Any]:
        """The whole object (raises NotFound or another KubeError, like a GET)."""
        future = self._pending.get(key)
        if future is None:
            future = asyncio.get_running_loop().create_future()
            self._pending[key] = future
            if self._flush is None:
                self._flush = asyncio.get_running_loop().call_soon(self._start_flush)
        return await future

    def forget_namespace_sizes(self) -> None:
        """No rollout is followed any more: the next storm measures namespaces afresh."""
        self._sizes.clear()

    def _start_flush(self) -> None:
        self._flush = None
        pending, self._pending = self._pending, {}
        groups: dict[_Group, dict[ObjectKey, asyncio.Future[dict[str, Any]]]] = {}
        for key, future in pending.items():
            groups.setdefault((key.resource, key.namespace), {})[key] = future
        for group, reads in groups.items():
            task = asyncio.create_task(self._answer(group, reads), name="rollout status reads")
            self._tasks.add(task)
            task.add_done_callback(self._tasks.discard)

    async def _answer(
        self, group: _Group, reads: dict[ObjectKey, asyncio.Future[dict[str, Any]]]
    ) -> None:
        try:
            size = self._sizes.get(group)
            if len(reads) >= LIST_FROM and (size is None or LIST_FACTOR * len(reads) >= size):
                reads = await self._answer_by_list(group, reads)
            await asyncio.gather(*(self._answer_one(key, future) for key, future in reads.items()))
        finally:
            for future in reads.values():
                if not future.done():
                    future.set_exception(KubeError("rollout status read abandoned"))

    async def _answer_by_list(
        self, group: _Group, reads: dict[ObjectKey, asyncio.Future[dict[str, Any]]]
    ) -> dict[ObjectKey, asyncio.Future[dict[str, Any]]]:
        """Answer what one bounded list finds; return the reads still to do one by one."""
        resource, namespace = group
        by_name = {key.name: (key, future) for key, future in reads.items()}
        try:
            listed = await self.kube.list_objects(
                resource, namespace=namespace, limit=LIST_FACTOR * len(reads)
            )
        except KubeError:
            return reads  # the single reads report the problem themselves
        for item in listed.get("items") or ():
            name = (item.get("metadata") or {}).get("name")
            found = by_name.pop(name, None) if isinstance(name, str) else None
            if found is not None and not found[1].done():
                item.setdefault("kind", resource.kind)
                found[1].set_result(item)
        meta = listed.get("metadata") or {}
        if meta.get("continue"):
            remaining = meta.get("remainingItemCount")
            counted = len(listed.get("items") or ()) + (
                remaining if isinstance(remaining, int) else 1_000_000
            )
            self._sizes[group] = counted  # more objects than the bound: lists only when worth it
            return dict(by_name.values())
        for _name, (key, future) in by_name.items():
            if not future.done():
                future.set_exception(NotFound(404, method="LIST", path=key.id))
        return {}

    async def _answer_one(self, key: ObjectKey, future: asyncio.Future[dict[str, Any]]) -> None:
        if future.done():
            return
        try:
            obj = await self.kube.get(key.resource, key.namespace, key.name)
        except KubeError as error:
            if not future.done():
                future.set_exception(error)
        else:
            if not future.done():
                future.set_result(obj)

    async def aclose(self) -> None:
        if self._flush is not None:
            self._flush.cancel()
            self._flush = None
        for future in self._pending.values():
            future.cancel()
        self._pending.clear()
        tasks = list(self._tasks)
        for task in tasks:
            task.cancel()
        await asyncio.gather(*tasks, return_exceptions=True)
