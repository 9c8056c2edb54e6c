"""What an enforced policy takes from the object's Namespace (docs/policies.md#safety-rules).

An enforced ``ClusterLifecyclePolicy`` is the administrator's rule, a deadline against every
lower layer. Three namespace defaults would weaken it: ``catch-up`` (``never`` skips a
deletion overdue at first sight), ``maintenance-window`` (a far window delays it) and
``max-delete-ttl`` (a cap shorter than the policy's TTL refuses it for good), and an invalid
value of any of them blocks it until the Namespace is fixed. So the family an enforced policy
decides is decided without them (:func:`enforced_defaults`): the flags' values apply
instead. ``dry-run`` stays, as caution composes (an invalid one still blocks: acting without
knowing whether it is a rehearsal would be worse than waiting), and so does ``warn-before``
(it only announces). The Namespace's ``exempt`` does not stop an enforced policy either
(:func:`~lifecycle_controller.core.policy.match.match`).

The next contender under an enforced deletion (the object's own annotation, a lower policy)
is not enforced: it still obeys the Namespace.

:func:`overrides` names what the enforcement left out, for ``plan``, ``explain`` and
``policies try``.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Final

from lifecycle_controller.core.decision.namespace_defaults import (
    NamespaceDefaults,
    NamespaceSource,
    ignoring,
    resolve_inputs,
)
from lifecycle_controller.core.decision.outcomes import Action, DecisionSettings
from lifecycle_controller.core.objects import keys
from lifecycle_controller.core.policy.precedence import PolicyInputs

__all__ = ["ENFORCED_OVERRIDES", "Override", "defaults_for", "enforced_defaults", "overrides"]

#: The namespace defaults an enforced policy's family is decided without.
ENFORCED_OVERRIDES: Final = (keys.CATCH_UP, keys.MAINTENANCE_WINDOW, keys.MAX_DELETE_TTL)


def enforced_defaults(defaults: NamespaceDefaults | None) -> NamespaceDefaults | None:
    """The Namespace's defaults as an enforced policy's family takes them."""
    return None if defaults is None else ignoring(defaults, ENFORCED_OVERRIDES)


def _enforced(inputs: PolicyInputs) -> bool:
    return inputs.decided_by is not None and inputs.decided_by.enforce


def defaults_for(
    inputs: PolicyInputs, defaults: NamespaceDefaults | None
) -> NamespaceDefaults | None:
    """The Namespace's defaults as the family of ``inputs`` is decided with them."""
    return enforced_defaults(defaults) if _enforced(inputs) else defaults


@dataclass(frozen=True, slots=True)
class Override:
    """One thing of the Namespace's an enforced policy acts regardless of."""

    namespace: str
    #: The short key (``catch-up``, ``exempt``...).
    key: str
    value: str
    invalid: bool = False

    def describe(self) -> str:
        """``overrides namespace team-a's catch-up never`` and the like."""
        if self.key == keys.EXEMPT.removeprefix(keys.PREFIX):
            return f"acts although namespace {self.namespace} is exempt"
        what = f"invalid {self.key} {self.value!r}" if self.invalid else f"{self.key} {self.value}"
        return f"overrides namespace {self.namespace}'s {what}"


def overrides(
    inputs: PolicyInputs, defaults: NamespaceDefaults | None, settings: DecisionSettings
) -> tuple[Override, ...]:
    """What of the Namespace's the enforced policy deciding ``inputs`` acts regardless of:
    each of :data:`ENFORCED_OVERRIDES` the family would have taken from the Namespace (valid,
    or invalid and so blocking), and the Namespace's exemption. Empty when no enforced policy
    decides the family."""
    policy = inputs.decided_by
    if policy is None or not policy.enforce or defaults is None:
        return ()
    relevant = [
        key
        for key in ENFORCED_OVERRIDES
        if key != keys.MAX_DELETE_TTL or policy.action is Action.DELETE
    ]
    sources = resolve_inputs(inputs.annotations, defaults, settings).sources
    found = [
        Override(defaults.namespace, key.removeprefix(keys.PREFIX), defaults.values[key])
        for key in relevant
        if sources.get(key) is NamespaceSource.NAMESPACE and key in defaults.values
    ]
    own = {key for key in inputs.annotations if key != keys.MAX_DELETE_TTL}
    found += [
        Override(defaults.namespace, p.key.removeprefix(keys.PREFIX), p.value, invalid=True)
        for p in defaults.problems
        if p.key in relevant and p.key not in own and policy.action in p.blocks
    ]
    if defaults.exempt:
        found.append(Override(defaults.namespace, "exempt", defaults.values[keys.EXEMPT]))
    return tuple(found)
