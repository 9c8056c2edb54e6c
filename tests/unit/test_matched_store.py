"""The ``matchedAt`` store: load what the current generation kept, write what changed."""

from __future__ import annotations

import uuid
from collections.abc import Callable, Mapping
from typing import Any

from lifecycle_controller.controller.policy.matched_at import MatchedAt
from lifecycle_controller.controller.policy.matched_store import MatchedStore, record_name
from lifecycle_controller.core.objects.resources import ResourceType
from lifecycle_controller.core.policy.in_force import PolicySet
from lifecycle_controller.core.policy.matched_record import decode, encode
from lifecycle_controller.kube import KubeError, NotFound
from tests.doubles.fakeclock import FakeClock
from tests.unit.test_matched_at import KEY, T0, policy, resolve

UID = str(uuid.UUID(int=7))
S = 1_000_000_000


class Api:
    """ConfigMaps by name; ``fail`` makes every request fail."""

    def __init__(self) -> None:
        self.maps: dict[str, dict[str, Any]] = {}
        self.fail = False

    def _check(self, name: str) -> None:
        if self.fail:
            raise KubeError(503, {"reason": "ServiceUnavailable"})
        if name not in self.maps:
            raise NotFound(404, {"reason": "NotFound"})

    async def get(self, resource: ResourceType, namespace: str | None, name: str) -> dict[str, Any]:
        self._check(name)
        return self.maps[name]

    async def create(
        self, resource: ResourceType, namespace: str | None, body: Mapping[str, Any]
    ) -> dict[str, Any]:
        self.maps[body["metadata"]["name"]] = dict(body)
        return dict(body)

    async def merge_patch(
        self, resource: ResourceType, namespace: str | None, name: str, patch: Mapping[str, Any]
    ) -> dict[str, Any]:
        self._check(name)
        self.maps[name] = {**self.maps[name], **patch}
        return self.maps[name]

    async def delete(
        self, resource: ResourceType, namespace: str | None, name: str
    ) -> dict[str, Any]:
        self._check(name)
        return self.maps.pop(name)


def _setup(
    on_write: Callable[[], None] = lambda: None,
) -> tuple[Api, MatchedAt, MatchedStore, PolicySet]:
    policies = PolicySet.of([policy()])
    api, matched = Api(), MatchedAt()
    matched.sync(policies)
    store = MatchedStore(api, FakeClock(), matched, namespace="ns", lease="lc", on_write=on_write)
    return api, matched, store, policies


async def test_a_record_is_written_then_loaded_by_the_next_leader() -> None:
    told: list[None] = []
    api, matched, store, policies = _setup(lambda: told.append(None))
    ref = policies.valid[0].ref
    resolve(policies, matched, T0 + 1, uid=UID)
    assert store.pending
    await store.flush()
    assert not store.pending
    assert store.writes == 1
    name = record_name("lc", ref)
    assert decode(api.maps[name]["data"]["entries"]) == {UID: T0 + S}  # rounded up
    await store.flush()
    assert store.writes == len(told) == 1  # nothing changed: nothing written

    again = MatchedAt()
    again.sync(policies)
    await MatchedStore(api, FakeClock(), again, namespace="ns", lease="lc").load()
    assert again.of(KEY, UID) == {ref: T0 + S}


async def test_a_policy_gone_deletes_its_record_and_failures_stay_due() -> None:
    api, matched, store, policies = _setup()
    resolve(policies, matched, T0, uid=UID)
    api.fail = True
    await store.flush()
    assert store.pending
    api.fail = False
    await store.flush()
    assert len(api.maps) == 1
    matched.sync(PolicySet())
    await store.flush()
    await store.flush()
    assert api.maps == {}
    matched.sync(policies)
    store._changed(policies.valid[0].ref, removed=True)  # a record already gone
    matched.sync(PolicySet())
    await store.flush()
    assert not store.pending


async def test_what_cannot_be_trusted_is_not_loaded() -> None:
    api, matched, store, policies = _setup()
    ref = policies.valid[0].ref
    name = record_name("lc", ref)
    good = encode([(UID, T0)]).text

    def record(policy: str, generation: str, text: str) -> dict[str, Any]:
        annotations = {
            "lifecycle-controller.io/matched-at-policy": policy,
            "lifecycle-controller.io/matched-at-generation": generation,
        }
        return {"metadata": {"annotations": annotations}, "data": {"entries": text}}

    for kept in (
        record("LifecyclePolicy/x/other", "1", good),  # another policy's
        record(str(ref), "2", good),  # another generation's: replaced
        record(str(ref), "1", "%%%"),  # garbled
    ):
        api.maps[name] = kept
        await store.load()
        assert matched.of(KEY, UID) == {}
    assert store.pending
    api.fail = True
    await store.load()  # unreadable: nothing learnt
    assert matched.of(KEY, UID) == {}
