"""Whether a Namespace named by ``--watch-namespace`` exists, seen from its own informer.

With exact ``--watch-namespace`` names the namespace-defaults store
(:mod:`~lifecycle_controller.controller.namespaces`) lists and watches each named Namespace
by ``metadata.name``. Its cache keeps only annotated Namespaces, so it cannot tell "exists
without defaults" from "does not exist"; a mistyped name would otherwise pass in silence,
the controller watching an empty namespace forever. :class:`PresenceSource` sits between
that informer and the API: it passes every call through and notes, from the list answers
and the watch events, whether the Namespace is there. The store logs a change of that and
readiness shows a missing one (docs/behaviour.md#readiness).
"""

from __future__ import annotations

from collections.abc import AsyncIterator, Callable, Mapping
from typing import Any

from lifecycle_controller.controller.informer_ports import MetadataSource
from lifecycle_controller.kube import EventFilter, ResourceType

__all__ = ["PresenceSource"]


def _named(obj: object, name: str) -> bool:
    metadata = obj.get("metadata") if isinstance(obj, Mapping) else None
    return isinstance(metadata, Mapping) and metadata.get("name") == name


class PresenceSource:
    """A :class:`MetadataSource` for one named Namespace's informer that notes its existence.

    ``present`` is None until the first list answered, then whether the Namespace exists;
    ``on_change(present)`` hears each change of it. Meant for an informer that lists in
    pages (a streaming list may leave unannotated objects undecoded).
    """

    def __init__(
        self, source: MetadataSource, name: str, on_change: Callable[[bool], None]
    ) -> None:
        self._source = source
        self.name = name
        self._on_change = on_change
        self.present: bool | None = None

    def _saw(self, present: bool) -> None:
        if present != self.present:
            self.present = present
            self._on_change(present)

    async def list_metadata(
        self,
        resource: ResourceType,
        *,
        namespace: str | None = None,
        limit: int = 500,
        continue_token: str | None = None,
        resource_version: str | None = None,
        field_selector: str | None = None,
    ) -> dict[str, Any]:
        page = await self._source.list_metadata(
            resource,
            namespace=namespace,
            limit=limit,
            continue_token=continue_token,
            resource_version=resource_version,
            field_selector=field_selector,
        )
        items = page.get("items") or ()
        self._saw(any(_named(item, self.name) for item in items))
        return page

    async def watch_metadata(
        self,
        resource: ResourceType,
        *,
        namespace: str | None = None,
        resource_version: str,
        timeout_seconds: int,
        field_selector: str | None = None,
    ) -> AsyncIterator[dict[str, Any]]:
        stream = self._source.watch_metadata(
            resource,
            namespace=namespace,
            resource_version=resource_version,
            timeout_seconds=timeout_seconds,
            field_selector=field_selector,
        )
        try:
            async for event in stream:
                kind = event.get("type")
                if kind in ("ADDED", "MODIFIED", "DELETED") and _named(
                    event.get("object"), self.name
                ):
                    self._saw(kind != "DELETED")
                yield event
        finally:
            close = getattr(stream, "aclose", None)
            if close is not None:
                await close()

    def watch_list_metadata(
        self,
        resource: ResourceType,
        *,
        namespace: str | None = None,
        timeout_seconds: int,
        field_selector: str | None = None,
        decode_if: EventFilter | None = None,
    ) -> AsyncIterator[dict[str, Any]]:
        return self._source.watch_list_metadata(
            resource,
            namespace=namespace,
            timeout_seconds=timeout_seconds,
            field_selector=field_selector,
            decode_if=decode_if,
        )
