"""Which policy decides for an object, and the inputs :func:`decide_in_namespace` then takes.

Precedence, per object: its own annotations > the best matching ``LifecyclePolicy`` in its
namespace > the best matching ``ClusterLifecyclePolicy`` > namespace defaults > flags.

* **One decider.** "Best" is the highest ``priority``, ties broken by name. A namespaced
  policy beats every cluster policy whatever their priorities. The winner's ``lifecycle``
  applies as a whole; the other matching policies are *overlapped* (``status.overlapped``
  and ``explain`` name them), and none of their keys leaks into the result.
* **Actions replace, modifiers override.** If the object carries an action annotation of
  its own (``delete-*``, ``restart-*``, non-empty) it is driven by its annotations alone:
  no policy decides and every matching one is overlapped. Otherwise the winner's action
  applies, and the object's own ``dry-run``, ``catch-up``, ``warn-before`` and
  ``maintenance-window`` override the policy's, key by key. The rest of the object's
  lifecycle keys (``cron-timezone``, ``reference-point``, ``last-restart-timestamp``, a stray
  ``managed-by``) belong to annotation-driven actions and are left out.
* **Namespace defaults and flags** come after: the merged map is given to
  :func:`~lifecycle_controller.core.namespace_defaults.decide_in_namespace` as the object's
  annotations, so a key the policy sets counts as the object's there and wins over the
  namespace's default, which wins over the flag. The namespace and flag caps on deletions
  (``max-delete-ttl``) apply unchanged.
* An object no policy matches gets its own annotations back, the very same mapping, so
  nothing changes for it.

**Anchors: a policy writes nothing onto an object to schedule it.**

* ``delete-after`` counts from the object's ``creationTimestamp`` (the pass's time for a
  manifest without one, as ``plan`` reads it): the merged map carries the ``delete-at`` it
  amounts to, which the cap measures from the creation as well, so the deletion is never
  converted (no write) and a refused one stays refused.
* ``restart-every`` and ``restart-cron`` count from :func:`recurring_anchor`: the latest of
  the Pod template's ``lifecycle.cezary.dev/restartedAt`` marker (which every restart
  writes, and which GitOps tools do not manage because it lives in the template the
  controller owns), the object's creation, and the time the policy's current generation was
  first accepted (kept in the policy's status by the controller, so a new or edited policy
  does not "catch up" occurrences from before it existed). It goes in as
  ``last-restart-timestamp``, so the recurring schedule never initializes (no write).
* ``restart-at`` is done for an object whose marker, or creation, is not before it.
"""

from __future__ import annotations

import enum
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from types import MappingProxyType
from typing import Final

from lifecycle_controller.core import keys
from lifecycle_controller.core.durations import parse_duration
from lifecycle_controller.core.policy_match import is_exempt
from lifecycle_controller.core.policy_model import Policy, PolicyKind, PolicyRef
from lifecycle_controller.core.timestamps import (
    TimestampError,
    format_rfc3339_nano,
    parse_rfc3339,
)

__all__ = [
    "InputSource",
    "PolicyInputs",
    "best_policy",
    "precedence_order",
    "recurring_anchor",
    "resolve_policies",
]

#: The object's own keys a deciding policy leaves out (they belong to annotation actions).
_REPLACED: Final = frozenset(
    {
        *keys.ACTION_KEYS,
        keys.CRON_TIMEZONE,
        keys.REFERENCE_POINT,
        keys.LAST_RESTART_TIMESTAMP,
        keys.MANAGED_BY,
    }
)


class InputSource(enum.StrEnum):
    """Where a lifecycle key of the merged inputs came from."""

    OBJECT = "object"
    POLICY = "policy"


@dataclass(frozen=True, slots=True)
class PolicyInputs:
    """The merged inputs, who decided, and who was overlapped (best first)."""

    annotations: Mapping[str, str]
    decided_by: Policy | None = None
    overlapped: tuple[PolicyRef, ...] = ()
    #: For each lifecycle key in ``annotations`` set by the object or the policy.
    sources: Mapping[str, InputSource] = field(default_factory=lambda: MappingProxyType({}))
    exempt: bool = False

    @property
    def annotation_driven(self) -> bool:
        """Policies matched, but the object's own action annotations replaced them all."""
        return self.decided_by is None and bool(self.overlapped)


def precedence_order(policy: Policy) -> tuple[int, int, str]:
    """Sort key, best first: namespaced before cluster policies, then priority and name."""
    layer = 0 if policy.kind is PolicyKind.NAMESPACED else 1
    priority, name = policy.rank()
    return (layer, priority, name)


def best_policy(policies: Iterable[Policy]) -> Policy | None:
    """The deciding one of several matching policies (namespaced first, then rank)."""
    return min(policies, key=precedence_order, default=None)


def _instant(value: str | None) -> int | None:
    if not value:
        return None
    try:
        return parse_rfc3339(value)
    except TimestampError:
        return None  # not a marker we wrote; the other anchors stand


def recurring_anchor(
    *,
    restart_marker: str | None,
    creation_ns: int | None,
    schedule_since_ns: int | None,
    now_ns: int,
) -> int:
    """The ``last-restart-timestamp`` a policy's recurring restart counts from.

    The latest of the known instants among the template marker (ignored when it is not an
    RFC 3339 time), the object's creation and the policy generation's acceptance; the pass's
    time when none is known.
    """
    known = [
        instant
        for instant in (_instant(restart_marker), creation_ns, schedule_since_ns)
        if instant is not None
    ]
    return max(known, default=now_ns)


def _own_action(annotations: Mapping[str, str]) -> bool:
    return any(annotations.get(key) for key in keys.ACTION_KEYS)


def _merge(
    annotations: Mapping[str, str],
    policy: Policy,
    *,
    creation_ns: int | None,
    restart_marker: str | None,
    schedule_since_ns: int | None,
    now_ns: int,
) -> tuple[dict[str, str], dict[str, InputSource]]:
    merged = {key: value for key, value in annotations.items() if key not in _REPLACED}
    sources: dict[str, InputSource] = {
        key: InputSource.OBJECT for key in keys.MODIFIER_KEYS if key in merged
    }
    for key, value in policy.annotations.items():
        if key in keys.MODIFIER_KEYS and key in merged:
            continue  # the object's own modifier wins, key by key
        merged[key] = value
        sources[key] = InputSource.POLICY
    if keys.DELETE_AFTER in merged:
        start = now_ns if creation_ns is None else creation_ns
        due = start + parse_duration(merged[keys.DELETE_AFTER])  # validated by parse_policy
        merged[keys.DELETE_AT] = format_rfc3339_nano(due)
        sources[keys.DELETE_AT] = InputSource.POLICY
        del merged[keys.DELETE_AFTER], sources[keys.DELETE_AFTER]
    if keys.RESTART_AT in merged:
        done = max(
            (i for i in (_instant(restart_marker), creation_ns) if i is not None), default=None
        )
        if done is not None and done >= parse_rfc3339(merged[keys.RESTART_AT]):
            del merged[keys.RESTART_AT], sources[keys.RESTART_AT]
    if keys.RESTART_EVERY in merged or keys.RESTART_CRON in merged:
        anchor = recurring_anchor(
            restart_marker=restart_marker,
            creation_ns=creation_ns,
            schedule_since_ns=schedule_since_ns,
            now_ns=now_ns,
        )
        merged[keys.LAST_RESTART_TIMESTAMP] = format_rfc3339_nano(anchor)
        sources[keys.LAST_RESTART_TIMESTAMP] = InputSource.POLICY
    return merged, sources


def resolve_policies(
    annotations: Mapping[str, str],
    matched: Iterable[Policy],
    *,
    creation_ns: int | None,
    restart_marker: str | None,
    now_ns: int,
    schedule_since_ns: Mapping[PolicyRef, int] | None = None,
) -> PolicyInputs:
    """The inputs for one object from its annotations and the policies that match it.

    ``matched`` are the valid policies :func:`~.policy_match.matches` accepted (so none if the
    object is exempt). ``schedule_since_ns`` maps a policy to when its current generation was
    first accepted (see the module docstring); a missing entry is unknown.
    """
    candidates = sorted(matched, key=precedence_order)
    exempt = is_exempt(annotations)
    winner = candidates[0] if candidates and not _own_action(annotations) else None
    if winner is None:
        return PolicyInputs(annotations, overlapped=tuple(p.ref for p in candidates), exempt=exempt)
    merged, sources = _merge(
        annotations,
        winner,
        creation_ns=creation_ns,
        restart_marker=restart_marker,
        schedule_since_ns=(schedule_since_ns or {}).get(winner.ref),
        now_ns=now_ns,
    )
    return PolicyInputs(
        MappingProxyType(merged),
        decided_by=winner,
        overlapped=tuple(p.ref for p in candidates[1:]),
        sources=MappingProxyType(sources),
        exempt=exempt,
    )
