"""Churn against the real API server: events of objects the cache keeps nothing of are dropped
undecoded (protobuf watches), while what the cache holds is still followed.

The informer watches one namespace's ConfigMaps through a source that records which events
reached the decoder. Label patches on an unannotated ConfigMap must never be decoded, yet the
informer's resourceVersion follows them; an annotated ConfigMap that loses its annotation is
seen leaving the cache, and after that its events are dropped too.
"""

from __future__ import annotations

from collections.abc import AsyncIterator
from dataclasses import dataclass, field
from typing import Any

import pytest

from lifecycle_controller.controller.watch.cache import MetadataCache
from lifecycle_controller.core.objects.resources import ObjectKey
from lifecycle_controller.kube import EventFilter, KubeClient, ResourceType
from tests.integration.keys import DELETE_AFTER
from tests.integration.support import CONFIGMAPS, configmap
from tests.integration.test_informers import (
    FAST,
    PAGED,
    Recorder,
    make_informer,
    running,
    wait_until,
)

pytestmark = pytest.mark.integration


@dataclass
class DecodedNames:
    """Passes every call to the real client; remembers the names of the decoded events."""

    kube: KubeClient
    decoded: list[str] = field(default_factory=list)

    async def list_metadata(self, resource: ResourceType, **kwargs: Any) -> dict[str, Any]:
        return await self.kube.list_metadata(resource, **kwargs)

    def watch_metadata(
        self, resource: ResourceType, **kwargs: Any
    ) -> AsyncIterator[dict[str, Any]]:
        return self._names(self.kube.watch_metadata(resource, **kwargs))

    def watch_list_metadata(
        self, resource: ResourceType, *, decode_if: EventFilter | None = None, **kwargs: Any
    ) -> AsyncIterator[dict[str, Any]]:
        return self._names(self.kube.watch_list_metadata(resource, decode_if=decode_if, **kwargs))

    async def _names(self, events: AsyncIterator[dict[str, Any]]) -> AsyncIterator[dict[str, Any]]:
        async for event in events:
            if event.get("type") != "BOOKMARK":
                self.decoded.append(str(event["object"]["metadata"].get("name", "")))
            yield event


@pytest.mark.parametrize("streaming", [True, False], ids=["streaming-list", "paged-list"])
async def test_churn_of_unkept_objects_is_not_decoded_but_followed(
    kube: KubeClient, namespace: str, streaming: bool
) -> None:
    await kube.create(CONFIGMAPS, namespace, configmap("kept", **{DELETE_AFTER: "1h"}))
    await kube.create(CONFIGMAPS, namespace, configmap("plain"))
    source = DecodedNames(kube)
    cache, recorder = MetadataCache(), Recorder()
    settings = FAST if streaming else PAGED
    informer = make_informer(
        source, CONFIGMAPS, namespace, cache=cache, recorder=recorder, settings=settings
    )
    async with running(informer) as inf:
        await wait_until(lambda: inf.synced, "the first list")
        last = ""
        for i in range(5):
            patched = await kube.merge_patch(
                CONFIGMAPS, namespace, "plain", {"metadata": {"labels": {"churn": str(i)}}}
            )
            last = patched["metadata"]["resourceVersion"]
        await wait_until(lambda: inf.resource_version == last, "the churn's last version")
        assert "plain" not in source.decoded

        await kube.merge_patch(
            CONFIGMAPS, namespace, "kept", {"metadata": {"annotations": {DELETE_AFTER: None}}}
        )
        await wait_until(lambda: len(recorder.of("kept")) == 2, "the annotation removed")
        assert recorder.of("kept")[1] == ("update", {DELETE_AFTER: "1h"}, {})
        assert cache.get(ObjectKey(CONFIGMAPS, namespace, "kept")) is None
        decoded_kept = source.decoded.count("kept")

        patched = await kube.merge_patch(
            CONFIGMAPS, namespace, "kept", {"metadata": {"labels": {"churn": "after"}}}
        )
        version = patched["metadata"]["resourceVersion"]
        await wait_until(lambda: inf.resource_version == version, "the last version")
        assert source.decoded.count("kept") == decoded_kept  # no longer held: dropped
        assert "plain" not in source.decoded
