"""What an informer reads of each object, and how it asks for it: its projection.

:class:`~lifecycle_controller.controller.watch.reflector.Informer` runs one list and watch loop for
every watch of the process; a small strategy object says what the requests ask the API
server for and what part of each answer its :class:`~.ports.Keeper` is given:

* :class:`MetadataProjection`: ``PartialObjectMetadata``, protobuf first on watches,
  streaming lists (docs/architecture.md#metadata-only): the annotated types, Namespaces,
  CRDs. The keeper is given ``metadata``.
* :class:`WholeObjects`: whole objects in JSON, paged lists only (lifecycle policies,
  followed rollouts). The keeper is given the object.

* :class:`FieldProjection`: chosen field paths (``spec.replicas``, ``status.phase``...): it
  asks as :class:`WholeObjects` does and gives the keeper the object cut down to its
  ``metadata`` and those paths (the annotated types a policy's condition reads beyond
  metadata: docs/policies.md#what-a-condition-reads).
* :class:`ReferenceFields`: asked for as whole objects; the keeper is given a Pod's or a
  workload's references only (purpose ``references``, ``referencedBy``).

Only the informer calls these: they are the one place in the controller whose calls open a
watch (``tests/machinery/test_one_informer.py`` checks it).
"""

from __future__ import annotations

from collections.abc import AsyncIterator, Awaitable, Callable, Mapping
from typing import Any, Protocol

from lifecycle_controller.controller.watch.ports import MetadataSource, ObjectSource
from lifecycle_controller.core.objects.pod_references import object_references
from lifecycle_controller.core.policy.field_paths import READ_KEY, pick
from lifecycle_controller.kube import EventFilter, ResourceType

__all__ = ["FieldProjection", "MetadataProjection", "Projection", "ReferenceFields", "WholeObjects"]


class Projection(Protocol):
    """What an informer reads of each object and how it asks for it (see the module)."""

    #: Lists may be streaming lists (a watch whose initial events are the list).
    streams: bool

    async def list_page(
        self,
        resource: ResourceType,
        *,
        namespace: str | None,
        limit: int,
        continue_token: str | None,
        resource_version: str | None,
        field_selector: str | None,
        resource_version_match: str | None = None,
    ) -> Mapping[str, Any]:
        """One page of a list; ``resource_version_match="Exact"``: as at ``resource_version``
        exactly (a namespace listed again beside a running watch)."""
        ...

    def watch(
        self,
        resource: ResourceType,
        *,
        namespace: str | None,
        resource_version: str,
        timeout_seconds: int,
        field_selector: str | None,
        decode_if: EventFilter | None,
    ) -> AsyncIterator[dict[str, Any]]:
        """A watch from ``resource_version`` with bookmarks."""
        ...

    def watch_list(
        self,
        resource: ResourceType,
        *,
        namespace: str | None,
        timeout_seconds: int,
        field_selector: str | None,
        decode_if: EventFilter | None,
        before_reading: Callable[[], Awaitable[None]] | None = None,
    ) -> AsyncIterator[dict[str, Any]]:
        """A streaming list (only when :attr:`streams`); ``before_reading`` is awaited once
        the server has answered, before its first event is read."""
        ...

    def kept(self, obj: Mapping[str, Any]) -> Mapping[str, Any] | None:
        """The part of a listed or watched object the keeper is given (None: nothing)."""
        ...


class MetadataProjection:
    """Metadata only: the keeper is given each object's ``metadata``."""

    streams = True

    def __init__(self, source: MetadataSource) -> None:
        self.source = source

    async def list_page(
        self,
        resource: ResourceType,
        *,
        namespace: str | None,
        limit: int,
        continue_token: str | None,
        resource_version: str | None,
        field_selector: str | None,
        resource_version_match: str | None = None,
    ) -> Mapping[str, Any]:
        return await self.source.list_metadata(
            resource,
            namespace=namespace,
            limit=limit,
            continue_token=continue_token,
            resource_version=resource_version,
            **_selected(field_selector),
            **_matched(resource_version_match),
        )

    def watch(
        self,
        resource: ResourceType,
        *,
        namespace: str | None,
        resource_version: str,
        timeout_seconds: int,
        field_selector: str | None,
        decode_if: EventFilter | None,
    ) -> AsyncIterator[dict[str, Any]]:
        return self.source.watch_metadata(
            resource,
            namespace=namespace,
            resource_version=resource_version,
            timeout_seconds=timeout_seconds,
            decode_if=decode_if,
            **_selected(field_selector),
        )

    def watch_list(
        self,
        resource: ResourceType,
        *,
        namespace: str | None,
        timeout_seconds: int,
        field_selector: str | None,
        decode_if: EventFilter | None,
        before_reading: Callable[[], Awaitable[None]] | None = None,
    ) -> AsyncIterator[dict[str, Any]]:
        return self.source.watch_list_metadata(
            resource,
            namespace=namespace,
            timeout_seconds=timeout_seconds,
            decode_if=decode_if,
            before_reading=before_reading,
            **_selected(field_selector),
        )

    def kept(self, obj: Mapping[str, Any]) -> Mapping[str, Any] | None:
        metadata = obj.get("metadata")
        return metadata if isinstance(metadata, Mapping) else None


class WholeObjects:
    """Whole objects (JSON): the keeper is given the object. Lists are paged consistent
    reads; no field selector."""

    streams = False

    def __init__(self, source: ObjectSource) -> None:
        self.source = source

    async def list_page(
        self,
        resource: ResourceType,
        *,
        namespace: str | None,
        limit: int,
        continue_token: str | None,
        resource_version: str | None,
        field_selector: str | None,
        resource_version_match: str | None = None,
    ) -> Mapping[str, Any]:
        _no_selector(field_selector)
        extra: dict[str, Any] = {}
        if namespace is not None:
            extra["namespace"] = namespace
        if continue_token:
            extra["continue_token"] = continue_token
        if resource_version_match and not continue_token:
            extra["resource_version"] = resource_version
            extra["resource_version_match"] = resource_version_match
        return await self.source.list_objects(resource, limit=limit, **extra)

    def watch(
        self,
        resource: ResourceType,
        *,
        namespace: str | None,
        resource_version: str,
        timeout_seconds: int,
        field_selector: str | None,
        decode_if: EventFilter | None,
    ) -> AsyncIterator[dict[str, Any]]:
        _no_selector(field_selector)
        extra: dict[str, Any] = {}
        if namespace is not None:
            extra["namespace"] = namespace
        if decode_if is not None:
            extra["decode_if"] = decode_if
        return self.source.watch_objects(
            resource, resource_version=resource_version, timeout_seconds=timeout_seconds, **extra
        )

    def watch_list(
        self,
        resource: ResourceType,
        *,
        namespace: str | None,
        timeout_seconds: int,
        field_selector: str | None,
        decode_if: EventFilter | None,
        before_reading: Callable[[], Awaitable[None]] | None = None,
    ) -> AsyncIterator[dict[str, Any]]:
        raise NotImplementedError("whole objects are listed in pages")

    def kept(self, obj: Mapping[str, Any]) -> Mapping[str, Any] | None:
        return obj if isinstance(obj.get("metadata"), Mapping) else None


class FieldProjection(WholeObjects):
    """Whole objects asked for, ``metadata`` and the chosen ``paths`` kept: the keeper is
    given ``{"metadata": ..., <path>: ...}`` (a path ``()`` keeps the whole object) and,
    under ``READ_KEY``, the paths it was read with: a condition reading a path these do not
    cover holds the object until the type is listed again with it."""

    def __init__(self, source: ObjectSource, paths: frozenset[tuple[str, ...]]) -> None:
        super().__init__(source)
        self.paths = paths

    def kept(self, obj: Mapping[str, Any]) -> Mapping[str, Any] | None:
        if not isinstance(obj.get("metadata"), Mapping):
            return None
        return {**pick(obj, self.paths), "metadata": obj["metadata"], READ_KEY: self.paths}


def _selected(field_selector: str | None) -> dict[str, str]:
    """A field selector is sent only when set (``metadata.name=<name>``: RBAC by name)."""
    return {"field_selector": field_selector} if field_selector else {}


def _matched(resource_version_match: str | None) -> dict[str, str]:
    """``resourceVersionMatch`` is sent only when set (the informers' own lists never set it)."""
    return {"resource_version_match": resource_version_match} if resource_version_match else {}


def _no_selector(field_selector: str | None) -> None:
    if field_selector:
        raise ValueError("whole-object informers take no field selector")


class ReferenceFields(WholeObjects):
    """A Pod's or a workload's references only: asked for as whole objects, the keeper is
    given ``metadata`` (namespace, name) and ``references``, the (kind, name) pairs its Pod
    spec or template uses (:mod:`lifecycle_controller.core.objects.pod_references`); the rest of the
    object is dropped as soon as it is read."""

    def __init__(self, source: ObjectSource, kind: str) -> None:
        super().__init__(source)
        self.kind = kind

    def kept(self, obj: Mapping[str, Any]) -> Mapping[str, Any] | None:
        metadata = obj.get("metadata")
        if not isinstance(metadata, Mapping):
            return None
        return {
            "metadata": {
                "namespace": metadata.get("namespace"),
                "name": metadata.get("name"),
            },
            "references": object_references(self.kind, obj),
        }
