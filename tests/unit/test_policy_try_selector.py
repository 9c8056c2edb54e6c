"""``policies try`` lets the API server select by label when every tried policy has a selector
(docs/policies.md#what-a-policy-costs), and reads everything when one has none."""

from __future__ import annotations

from typing import Any

from lifecycle_controller.core.policy.in_force import POLICY_API_VERSION, policy_from_manifest
from lifecycle_controller.core.policy.model import Policy
from lifecycle_controller.kube.resources import CONFIGMAPS
from lifecycle_controller.tools.policies import _list_selected


class RecordingLister:
    """The one call ``_list_selected`` makes, answered from a fixed set of objects."""

    def __init__(self, objects: list[dict[str, Any]]) -> None:
        self.objects = objects
        self.selectors: list[str | None] = []

    async def list_metadata(self, resource: Any, **query: Any) -> dict[str, Any]:
        selector = query.get("label_selector")
        self.selectors.append(selector)
        wanted = dict(part.split("=", 1) for part in selector.split(",")) if selector else {}
        items = [
            {"metadata": o}
            for o in self.objects
            if all(o.get("labels", {}).get(k) == v for k, v in wanted.items())
        ]
        return {"items": items, "metadata": {}}


def _policy(name: str, **spec: Any) -> Policy:
    doc = {
        "apiVersion": POLICY_API_VERSION,
        "kind": "LifecyclePolicy",
        "metadata": {"name": name, "namespace": "team", "generation": 1},
        "spec": {"resources": ["configmaps"], "lifecycle": {"delete-after": "1h"}, **spec},
    }
    policy = policy_from_manifest(doc)
    assert isinstance(policy, Policy), policy
    return policy


def _object(name: str, **labels: str) -> dict[str, Any]:
    return {"name": name, "namespace": "team", "uid": f"uid-{name}", "labels": labels}


OBJECTS = [_object("a", tier="cache"), _object("b", tier="web"), _object("c", tier="cache")]


async def test_every_policy_with_a_selector_lists_by_label_each_object_once() -> None:
    lister = RecordingLister(OBJECTS)
    mine = [
        _policy("cache", selector={"matchLabels": {"tier": "cache"}}),
        _policy("cache-too", selector={"matchLabels": {"tier": "cache"}}, priority=3),
        _policy("web", selector={"matchLabels": {"tier": "web"}}),
    ]
    found = await _list_selected(lister, CONFIGMAPS, "team", mine)  # type: ignore[arg-type]
    assert sorted(lister.selectors, key=str) == ["tier=cache", "tier=web"]
    assert sorted(m["name"] for m in found) == ["a", "b", "c"]


async def test_a_policy_without_a_selector_reads_every_object() -> None:
    lister = RecordingLister(OBJECTS)
    mine = [_policy("cache", selector={"matchLabels": {"tier": "cache"}}), _policy("all")]
    found = await _list_selected(lister, CONFIGMAPS, "team", mine)  # type: ignore[arg-type]
    assert lister.selectors == [None]
    assert sorted(m["name"] for m in found) == ["a", "b", "c"]
