"""Test helpers for core: fixed instants, object facts, and a tiny simulated API server.

``World`` plays the part of the reconciler around decide(): it keeps one object's
annotations and Pod-template annotations, applies ledger operations and merge patches the
way the real caller must, and can make a write fail or "lose the response" after
committing it. Time is always passed in, never read.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping
from typing import Any

from lifecycle_controller.core import (
    Decision,
    DecisionSettings,
    Delete,
    Event,
    Ledger,
    ObjectFacts,
    ObjectKey,
    Patch,
    decide,
    parse_rfc3339,
)
from lifecycle_controller.core.objects import keys

SECOND = 1_000_000_000
MINUTE = 60 * SECOND
HOUR = 60 * MINUTE
DAY = 24 * HOUR


def ts(value: str) -> int:
    """An RFC 3339 literal as nanoseconds (the parser is tested on its own)."""
    return parse_rfc3339(value)


NOW = ts("2026-10-05T03:00:00Z")

DEPLOYMENT = ObjectFacts(
    key=ObjectKey.for_kind(
        group="apps",
        version="v1",
        kind="Deployment",
        namespace="team-a",
        name="web",
    ),
    uid="uid-1",
    resource_version="100",
    creation_ns=ts("2026-10-05T02:00:00Z"),
    has_pod_template=True,
)
CONFIGMAP = ObjectFacts(
    key=ObjectKey.for_kind(
        group="",
        version="v1",
        kind="ConfigMap",
        namespace="team-a",
        name="cfg",
    ),
    uid="uid-cm",
    resource_version="7",
    creation_ns=ts("2026-10-05T02:00:00Z"),
)
NAMESPACE = ObjectFacts(
    key=ObjectKey.for_kind(
        group="",
        version="v1",
        kind="Namespace",
        namespace=None,
        name="scratch",
    ),
    uid="uid-ns",
    resource_version="9",
    creation_ns=ts("2026-10-05T02:00:00Z"),
)


def rekey(
    facts: ObjectFacts,
    *,
    group: str | None = None,
    version: str | None = None,
    kind: str | None = None,
    name: str | None = None,
) -> ObjectKey:
    """``facts.key`` with some of group, version, kind and name changed."""
    resource = facts.key.resource
    return ObjectKey.for_kind(
        group=resource.group if group is None else group,
        version=resource.version if version is None else version,
        kind=resource.kind if kind is None else kind,
        namespace=facts.key.namespace,
        name=facts.key.name if name is None else name,
    )


def run(
    annotations: Mapping[str, str],
    *,
    now: int = NOW,
    facts: ObjectFacts = DEPLOYMENT,
    settings: DecisionSettings | None = None,
    ledger: Ledger | None = None,
) -> Decision:
    """One decide() call with defaults."""
    return decide(
        annotations=annotations,
        facts=facts,
        now_ns=now,
        settings=settings or DecisionSettings(),
        ledger=ledger or Ledger(),
    )


def merge_annotations(annotations: Mapping[str, str], patch: Mapping[str, Any]) -> dict[str, str]:
    """Apply the top-level annotation part of a merge patch."""
    result = dict(annotations)
    changes = patch.get("metadata", {}).get("annotations", {})
    for key, value in changes.items():
        if value is None:
            result.pop(key, None)
        else:
            result[key] = value
    return result


def reasons(events: tuple[Event, ...] | list[Event]) -> list[str]:
    return [event.reason for event in events]


class World:
    """One object, the API server's view of it, and one controller process (its ledger)."""

    def __init__(
        self,
        annotations: Mapping[str, str],
        *,
        facts: ObjectFacts = DEPLOYMENT,
        settings: DecisionSettings | None = None,
        ledger: Ledger | None = None,
    ) -> None:
        self.annotations = dict(annotations)
        self.template: dict[str, str] = {}
        self.facts = facts
        self.settings = settings or DecisionSettings()
        self.ledger = ledger if ledger is not None else Ledger()
        self.deleted = False
        self.writes = 0
        self.events: list[Event] = []

    def restart_process(self) -> None:
        """A controller restart or failover: the ledger is lost."""
        self.ledger = Ledger()

    def reconcile(self, now: int, *, fail: str | None = None, lose: bool = False) -> Decision:
        """Decide and carry out the decision.

        ``fail``: the write fails with that error text (nothing committed).
        ``lose``: the write commits but the response is lost (treated as a failure).
        """
        assert not self.deleted, "object is gone"
        facts = dataclasses.replace(self.facts, restart_marker=self.template.get(keys.RESTARTED_AT))
        decision = decide(
            annotations=self.annotations,
            facts=facts,
            now_ns=now,
            settings=self.settings,
            ledger=self.ledger,
        )
        key = facts.key
        self.ledger.apply(key, decision.ledger_ops)
        self.events.extend(decision.events)
        if not isinstance(decision, Patch | Delete):
            return decision
        self.writes += 1
        if fail is None or lose:
            self._commit(decision)
        if fail is not None or lose:
            if decision.failure is not None:
                self.events.append(decision.failure.event(fail or "lost response"))
            return decision
        self.ledger.apply(key, decision.on_success.ledger_ops)
        self.events.extend(decision.on_success.events)
        return decision

    def _commit(self, decision: Patch | Delete) -> None:
        self.facts = dataclasses.replace(
            self.facts, resource_version=str(int(self.facts.resource_version) + 1)
        )
        if isinstance(decision, Delete):
            self.deleted = True
            return
        self.annotations = merge_annotations(self.annotations, decision.body)
        template = decision.body.get("spec", {}).get("template", {}).get("metadata", {})
        self.template.update(template.get("annotations", {}))
