"""A policy restart's skipped occurrence is remembered in the cache, not beside it.

Caught: :class:`PolicyDecisions` kept each acknowledged occurrence in a dictionary of its own,
keyed by UID and never pruned (both callers of ``gone()`` passed no UID), so it grew with
every workload a restart policy ever saw. The acknowledgement now lives in the workload's
restart fact in the cache (bounded there, written through ``write_back``), and a template
read or a restart does not erase it.
"""

from __future__ import annotations

from typing import Any, cast

from lifecycle_controller.controller.cache import (
    CachedObject,
    MetadataCache,
    RestartFact,
    object_facts,
)
from lifecycle_controller.controller.policy_decisions import PolicyDecisions
from lifecycle_controller.controller.policy_store import PolicyStore
from lifecycle_controller.controller.writes import ObjectWriter
from lifecycle_controller.core import Decision, DecisionSettings, Ledger, ObjectKey, Patch
from lifecycle_controller.core.policy_set import PolicySet, object_view, policy_from_manifest
from lifecycle_controller.core.timestamps import format_rfc3339_nano, parse_rfc3339
from lifecycle_controller.kube.resources import DEPLOYMENTS

NOW = parse_rfc3339("2026-12-02T10:00:00Z")
DAY = 86_400 * 10**9
NIGHTLY = {
    "apiVersion": "lifecycle.cezary.dev/v1alpha1",
    "kind": "ClusterLifecyclePolicy",
    "metadata": {"name": "nightly", "generation": 1},
    "spec": {
        "resources": ["deployments.apps"],
        "lifecycle": {"restart-every": "24h", "catch-up": "never"},
    },
}


class _Store:
    """The two things PolicyDecisions asks of the policy store."""

    def __init__(self) -> None:
        self.current = PolicySet.of([policy_from_manifest(NIGHTLY)])

    def schedule_since(self) -> dict[Any, int]:
        return {}


def _workload(i: int) -> tuple[ObjectKey, CachedObject]:
    metadata = {
        "name": f"web-{i}",
        "namespace": "team-a",
        "uid": f"uid-{i}",
        "resourceVersion": "1",
        "creationTimestamp": format_rfc3339_nano(NOW - 10 * DAY),
    }
    obj = CachedObject.from_metadata(metadata, view=object_view(DEPLOYMENTS, metadata))
    return ObjectKey(DEPLOYMENTS, "team-a", f"web-{i}"), obj


def _decisions(cache: MetadataCache) -> PolicyDecisions:
    return PolicyDecisions(cast(PolicyStore, _Store()), cache, cast(ObjectWriter, None))


def _first(decisions: PolicyDecisions, key: ObjectKey, obj: CachedObject) -> Decision:
    decision, *_ = decisions.decide(
        key,
        obj,
        facts=object_facts(DEPLOYMENTS, obj),
        now_ns=NOW,
        settings=DecisionSettings(),
        ledger=Ledger(),
        defaults=None,
    )
    return decision


def _decide(decisions: PolicyDecisions, key: ObjectKey, obj: CachedObject) -> Patch:
    decision = _first(decisions, key, obj)
    assert isinstance(decision, Patch), decision  # the skip's guarded no-op patch
    return decision


def test_the_acknowledgement_lives_in_the_cache_and_nothing_stays_beside_it() -> None:
    cache = MetadataCache()
    decisions = _decisions(cache)
    for i in range(200):
        key, obj = _workload(i)
        cache.put(key, obj)
        _decide(decisions, key, obj)
        fact = cache.restart_fact(obj.uid)
        assert fact is not None
        assert fact.acknowledged_ns is not None
        assert not fact.marker_read  # the template was never read: a guard still reads it
        decisions.gone(key)
    per_object = {
        name: len(value) for name, value in vars(decisions).items() if isinstance(value, dict)
    }
    assert per_object == {"tallies": 0}, per_object


def test_a_template_read_keeps_the_acknowledgement_and_the_next_pass_does_not_skip_again() -> None:
    cache = MetadataCache()
    decisions = _decisions(cache)
    key, obj = _workload(1)
    cache.put(key, obj)
    _decide(decisions, key, obj)
    acknowledged = cache.restart_fact(obj.uid)
    assert acknowledged is not None
    cache.write_back(key, obj, decided_on=obj, restart=RestartFact(None))  # a template read
    fact = cache.restart_fact(obj.uid)
    assert fact is not None
    assert fact.marker_read
    assert fact.acknowledged_ns == acknowledged.acknowledged_ns
    assert not isinstance(_first(decisions, key, obj), Patch)  # waits for the next one
