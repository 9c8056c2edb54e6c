"""Deciding for one object with policies: the merged inputs in, a decision that writes nothing
a policy may not write, and names the policy, out.

The controller's reconciler and the tools (``plan``, ``explain``, ``policies try``) call
:func:`decide_with_policies`, so they agree. For an object no policy decides it is exactly
:func:`~lifecycle_controller.core.namespace_defaults.decide_in_namespace` on the object's own
annotations. For a policy-driven decision (docs/policies.md#what-a-policy-writes):

* **No annotation writes.** A policy is declared in Git beside the objects it covers, so it
  never writes their annotations: a restart's patch keeps only the Pod template marker
  (``lifecycle.cezary.dev/restartedAt``), and the acknowledgement a skipped occurrence would
  write becomes a guarded no-op patch whose acknowledged instant the controller keeps in
  memory (:attr:`PolicyDecision.acknowledged`). A ``never`` observation record is not
  persisted on the object either (the in-memory ledger still has it).
* **Events name the policy.** Each Event's message ends with
  ``(based on ClusterLifecyclePolicy/preview-namespaces: delete-after 48h)``; the texts of
  annotation-driven Events are unchanged.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from lifecycle_controller.core import keys
from lifecycle_controller.core.catchup import LedgerView
from lifecycle_controller.core.decision import (
    Decision,
    DecisionSettings,
    Delete,
    ObjectFacts,
    Patch,
    Wait,
)
from lifecycle_controller.core.events import Event
from lifecycle_controller.core.namespace_defaults import NamespaceDefaults, decide_in_namespace
from lifecycle_controller.core.policy_model import Policy
from lifecycle_controller.core.policy_precedence import PolicyInputs

__all__ = ["PolicyDecision", "attribution", "decide_with_policies"]


@dataclass(frozen=True, slots=True)
class PolicyDecision:
    """The decision, the inputs it was made on, and for a policy's skipped occurrence the
    ``last-restart-timestamp`` it acknowledged (kept in memory, never written)."""

    decision: Decision
    inputs: PolicyInputs
    acknowledged: str | None = None


def attribution(policy: Policy) -> str:
    """``based on ClusterLifecyclePolicy/name: delete-after 48h`` (the action key and value)."""
    actions = [
        f"{key} {value}"
        for key, value in policy.lifecycle.items()
        if keys.PREFIX + key in keys.ACTION_KEYS
    ]
    action = actions[0] if actions else ""
    return f"based on {policy.ref}: {action}" if action else f"based on {policy.ref}"


def _named(events: tuple[Event, ...], suffix: str) -> tuple[Event, ...]:
    return tuple(dataclasses.replace(e, message=f"{e.message} ({suffix})") for e in events)


def _without_annotations(body: Mapping[str, Any]) -> tuple[dict[str, Any], str | None]:
    """The patch without its top-level annotation changes, and the acknowledged anchor."""
    patch = {key: value for key, value in body.items() if key != "metadata"}
    metadata = dict(body.get("metadata") or {})
    annotations = metadata.pop("annotations", None) or {}
    acknowledged = annotations.get(keys.LAST_RESTART_TIMESTAMP)
    if metadata:
        patch["metadata"] = metadata
    return patch, acknowledged if isinstance(acknowledged, str) else None


def _attributed(decision: Decision, policy: Policy) -> tuple[Decision, str | None]:
    suffix = attribution(policy)
    changes: dict[str, Any] = {"events": _named(decision.events, suffix), "policy": str(policy.ref)}
    acknowledged: str | None = None
    if isinstance(decision, (Patch, Delete)):
        changes["on_success"] = dataclasses.replace(
            decision.on_success, events=_named(decision.on_success.events, suffix)
        )
        failure = decision.failure
        if failure is not None:
            prefix = failure.message_prefix.removesuffix(": ")
            changes["failure"] = dataclasses.replace(
                failure, message_prefix=f"{prefix} ({suffix}): "
            )
    if isinstance(decision, Patch):
        changes["body"], acknowledged = _without_annotations(decision.body)
    elif isinstance(decision, Wait):
        changes["record"] = None
    if decision.log:
        changes["log"] = f"{decision.log} ({suffix})"
    return dataclasses.replace(decision, **changes), acknowledged


def decide_with_policies(
    *,
    inputs: PolicyInputs,
    facts: ObjectFacts,
    now_ns: int,
    settings: DecisionSettings,
    ledger: LedgerView,
    defaults: NamespaceDefaults | None,
) -> PolicyDecision:
    """Decide on ``inputs`` (from :meth:`~.policy_set.PolicySet.resolve`); see the module."""
    decision = decide_in_namespace(
        annotations=inputs.annotations,
        facts=facts,
        now_ns=now_ns,
        settings=settings,
        ledger=ledger,
        defaults=defaults,
    )
    policy = inputs.decided_by
    if policy is None:
        return PolicyDecision(decision, inputs)
    attributed, acknowledged = _attributed(decision, policy)
    return PolicyDecision(attributed, inputs, acknowledged)
