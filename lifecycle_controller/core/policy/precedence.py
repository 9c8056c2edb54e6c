"""Which policy decides for an object, per action family, and the inputs
:func:`decide_in_namespace` then takes (docs/policies.md#safety-rules).

**Per action family.** Deletion (``delete-*``) and restart (``restart-*``) are separate
families; each has its own winner, the first of its contenders in this order:

1. enforced ``ClusterLifecyclePolicy`` objects (``enforce: true``), by priority then name;
2. the object's own action annotations of that family;
3. ``LifecyclePolicy`` objects of its namespace, by priority then name;
4. the other ``ClusterLifecyclePolicy`` objects, by priority then name.

``exempt`` on the object removes layers 3 and 4. The contenders after the winner are
*overlapped*. An **unjudged policy** contends at its policy's place: an invalid policy that
would match the object (:func:`~.match.holds`), or a policy whose condition could not be
evaluated for it. One that wins holds the object in that family (fail closed): nothing acts,
no lower policy takes over.

When every family is won by the object's own annotations (or has no contender) the object is
decided on its own annotations exactly as without policies, so an object annotated with both
families is still the reference's conflict.

**Merging a policy's inputs.** The winner's ``lifecycle`` applies; the object's own
``catch-up``, ``warn-before`` and ``maintenance-window`` override it key by key (not for an
enforced policy), and **caution composes**: ``dry-run`` is true when the policy or the object
says true (then the namespace default and ``--dry-run`` can still say true).

**A policy that leaves an object alone for its own reasons is no contender for it**
(:func:`~.coverage.leaves_alone`: created after its ``delete-at``, ``restart-at`` done): the
next contender decides, and nothing of it applies (``dry-run``, ``limit``, an enforced
deadline); :attr:`Resolution.left_alone` names it, for the tools and its status.

**An enforced deletion is a deadline**: when the next contender of the deletion family is a
real one (the object's own annotations or a policy), :attr:`PolicyInputs.sooner` carries its
inputs, and the decision takes whichever deletes first.

**Anchors: a policy writes nothing onto an object to schedule it.**

* ``delete-after`` counts from the object's ``creationTimestamp`` (the pass's time for a
  manifest without one, as ``plan`` reads it), or from what the policy's ``since`` yields
  for the object (:mod:`.since`; no value: the policy leaves the object alone): the merged
  map carries the ``delete-at`` it amounts to, which the cap measures from the creation as
  well, so the deletion is never converted (no write) and a refused one stays refused.
* ``restart-every`` and ``restart-cron`` count from :func:`recurring_anchor`: the latest of
  the Pod template's ``lifecycle.cezary.dev/restartedAt`` marker, the object's creation, and
  the time the policy's current generation was first accepted. It goes in as
  ``last-restart-timestamp``, so the recurring schedule never initializes (no write).

**The contenders** (defined first, below). A contender is a valid policy that matches the
object, or an **unjudged policy** (:class:`UnjudgedPolicy`): an invalid policy that would
match it, or a policy whose condition could not be evaluated on it, or whose
namespaceSelector cannot be judged because the object's Namespace is not known yet.
Contenders are ranked by layer
(enforced cluster policies, the object's own annotations, namespaced policies, the other
cluster policies), then by ``priority`` (higher first; an unjudged policy whose priority
cannot be read comes first of its layer), then by name. the first of each family is its winner.
"""

from __future__ import annotations

import enum
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from types import MappingProxyType
from typing import Final

from lifecycle_controller.core.objects import keys
from lifecycle_controller.core.policy.contenders import (
    CLUSTER_LAYER,
    ENFORCED_LAYER,
    FAMILY_KEYS,
    NAMESPACED_LAYER,
    Family,
    UnjudgedPolicy,
    UnjudgedReason,
    best_policy,
    contender_order,
    family_of,
    precedence_order,
)
from lifecycle_controller.core.policy.coverage import LeftAlone, leaves_alone, no_since
from lifecycle_controller.core.policy.match import is_exempt
from lifecycle_controller.core.policy.model import Policy, PolicyRef
from lifecycle_controller.core.policy.since import SinceValue
from lifecycle_controller.core.text.durations import parse_duration
from lifecycle_controller.core.text.gotext import go_parse_bool
from lifecycle_controller.core.text.timestamps import format_rfc3339_nano, parse_rfc3339_or_none

__all__ = [
    "CLUSTER_LAYER",
    "ENFORCED_LAYER",
    "FAMILY_KEYS",
    "NAMESPACED_LAYER",
    "Family",
    "InputSource",
    "PolicyInputs",
    "Resolution",
    "UnjudgedPolicy",
    "UnjudgedReason",
    "best_policy",
    "contender_order",
    "family_of",
    "precedence_order",
    "recurring_anchor",
    "resolve_policies",
]


_REPLACED: Final = frozenset(
    {
        *keys.ACTION_KEYS,
        keys.CRON_TIMEZONE,
        keys.REFERENCE_POINT,
        keys.LAST_RESTART_TIMESTAMP,
        keys.MANAGED_BY,
    }
)
#: The object's modifiers a (not enforced) policy lets it override, key by key.
_OVERRIDDEN: Final = frozenset(keys.MODIFIER_KEYS) - {keys.DRY_RUN}


class InputSource(enum.StrEnum):
    """Where a lifecycle key of the merged inputs came from."""

    OBJECT = "object"
    POLICY = "policy"


@dataclass(frozen=True, slots=True)
class PolicyInputs:
    """One family's merged inputs, who decided, who was overlapped (best first).

    ``family`` None: no policy decides any family and ``annotations`` are the object's own,
    unchanged. ``held``: an unjudged policy won the family (nothing acts). ``sooner``: under
    an enforced deletion, the next contender's inputs (the decision takes whichever deletes first).
    """

    annotations: Mapping[str, str]
    decided_by: Policy | None = None
    overlapped: tuple[PolicyRef, ...] = ()
    #: For each lifecycle key in ``annotations`` set by the object or the policy.
    sources: Mapping[str, InputSource] = field(default_factory=lambda: MappingProxyType({}))
    exempt: bool = False
    family: Family | None = None
    held: UnjudgedPolicy | None = None
    sooner: PolicyInputs | None = None
    #: Policies that would match but for protection (docs/policies.md).
    protected: tuple[PolicyRef, ...] = ()
    #: What the deciding policy's ``since`` yielded: its ``delete-after`` counts from it, and
    #: ``max-delete-ttl`` measures the deletion from it (its TTL is then the policy's
    #: ``delete-after``, whatever the object's age); None: the policy has no ``since``.
    since_ns: int | None = None

    @property
    def annotation_driven(self) -> bool:
        """Policies matched, but the object's own action annotations replaced them all."""
        return self.decided_by is None and self.held is None and bool(self.overlapped)

    @property
    def own(self) -> bool:
        """The object's own annotations decide this family."""
        return self.decided_by is None and self.held is None


@dataclass(frozen=True, slots=True)
class Resolution:
    """Every family's inputs for one object (one entry, ``family`` None, when no policy
    decides or holds any family), and the matching policies that leave it alone."""

    families: tuple[PolicyInputs, ...]
    #: Policies that would match but for ``exempt`` on the object or its Namespace.
    exempted: tuple[PolicyRef, ...] = ()
    #: The policies passed over because they leave the object alone (best first): they
    #: neither decide, nor hold, nor are overlapped.
    left_alone: tuple[LeftAlone, ...] = ()
    #: For each policy that matches the object and whose ``since`` reads ``matchedAt``: when
    #: the object began to match it (what the controller keeps, :mod:`.since`).
    matched_at: Mapping[PolicyRef, int] = field(default_factory=lambda: MappingProxyType({}))
    #: What each matching policy's ``since`` yielded (the tools show it).
    sinces: Mapping[PolicyRef, SinceValue] = field(default_factory=lambda: MappingProxyType({}))

    @property
    def primary(self) -> PolicyInputs:
        """The inputs the tools describe first: a policy's, else an unjudged one's, else the own."""
        for inputs in self.families:
            if inputs.decided_by is not None:
                return inputs
        for inputs in self.families:
            if inputs.held is not None:
                return inputs
        return self.families[0]

    @property
    def annotations(self) -> Mapping[str, str]:
        return self.primary.annotations

    @property
    def decided_by(self) -> Policy | None:
        return self.primary.decided_by

    @property
    def sources(self) -> Mapping[str, InputSource]:
        return self.primary.sources

    @property
    def exempt(self) -> bool:
        return self.primary.exempt

    @property
    def held(self) -> UnjudgedPolicy | None:
        return self.primary.held

    @property
    def protected(self) -> tuple[PolicyRef, ...]:
        return self.primary.protected

    @property
    def deciders(self) -> tuple[PolicyRef, ...]:
        """Every policy that decides a family for the object (under an enforced deletion,
        the next contender too: the deletion is the sooner of the two)."""
        found = []
        for inputs in self.families:
            if inputs.decided_by is not None:
                found.append(inputs.decided_by.ref)
            if inputs.sooner is not None and inputs.sooner.decided_by is not None:
                found.append(inputs.sooner.decided_by.ref)
        return tuple(found)

    @property
    def holds(self) -> tuple[UnjudgedPolicy, ...]:
        return tuple(i.held for i in self.families if i.held is not None)

    @property
    def overlapped(self) -> tuple[PolicyRef, ...]:
        """Policies matched that decide no family (best first, once each)."""
        deciders = set(self.deciders) | {h.ref for h in self.holds}
        seen: dict[PolicyRef, None] = {}
        for inputs in self.families:
            for ref in inputs.overlapped:
                if ref not in deciders:
                    seen.setdefault(ref, None)
        return tuple(seen)

    @property
    def annotation_driven(self) -> bool:
        return not self.deciders and not self.holds and bool(self.overlapped)


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
        for instant in (parse_rfc3339_or_none(restart_marker), creation_ns, schedule_since_ns)
        if instant is not None
    ]
    return max(known, default=now_ns)


def _own_family(annotations: Mapping[str, str], family: Family) -> bool:
    return any(annotations.get(key) for key in FAMILY_KEYS[family])


def _compose_dry_run(
    merged: dict[str, str], sources: dict[str, InputSource], policy: Policy, own: str | None
) -> None:
    """Caution composes: true when the policy or the object says true; an object's value Go
    cannot read stays, so the decision reports it; otherwise the key is left out, so the
    namespace default and ``--dry-run`` still apply."""
    merged.pop(keys.DRY_RUN, None)
    sources.pop(keys.DRY_RUN, None)
    said = policy.lifecycle.get("dry-run")
    if said is not None and go_parse_bool(said) is True:
        merged[keys.DRY_RUN], sources[keys.DRY_RUN] = "true", InputSource.POLICY
    elif own is not None and go_parse_bool(own) is None:
        merged[keys.DRY_RUN], sources[keys.DRY_RUN] = own, InputSource.OBJECT
    elif own is not None and go_parse_bool(own) is True:
        merged[keys.DRY_RUN], sources[keys.DRY_RUN] = "true", InputSource.OBJECT


def _merge(
    annotations: Mapping[str, str],
    policy: Policy,
    *,
    creation_ns: int | None,
    restart_marker: str | None,
    schedule_since_ns: int | None,
    now_ns: int,
    since_ns: int | None = None,
) -> tuple[dict[str, str], dict[str, InputSource]]:
    """The merged map and its sources (the policy covers the object: :func:`leaves_alone`);
    ``since_ns``: what the policy's ``since`` yielded (its ``delete-after`` counts from it)."""
    if policy.enforce:
        merged: dict[str, str] = {}  # the administrator's rule: the object's keys do not count
    else:
        merged = {key: value for key, value in annotations.items() if key not in _REPLACED}
    sources: dict[str, InputSource] = {
        key: InputSource.OBJECT for key in _OVERRIDDEN if key in merged
    }
    for key, value in policy.annotations.items():
        if key in _OVERRIDDEN and key in merged:
            continue  # the object's own modifier wins, key by key
        merged[key] = value
        sources[key] = InputSource.POLICY
    _compose_dry_run(
        merged, sources, policy, None if policy.enforce else annotations.get(keys.DRY_RUN)
    )
    if keys.DELETE_AFTER in merged:
        start = now_ns if creation_ns is None else creation_ns
        if policy.since is not None and since_ns is not None:
            start = since_ns
        due = start + parse_duration(merged[keys.DELETE_AFTER])  # validated by parse_policy
        merged[keys.DELETE_AT] = format_rfc3339_nano(due)
        sources[keys.DELETE_AT] = InputSource.POLICY
        del merged[keys.DELETE_AFTER], sources[keys.DELETE_AFTER]
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


@dataclass(frozen=True, slots=True)
class _Own:
    """The object's own annotations as a contender."""


_OWN_CONTENDER: Final = _Own()


def _family_inputs(
    family: Family,
    annotations: Mapping[str, str],
    contenders: Sequence[Policy | UnjudgedPolicy | _Own],
    *,
    exempt: bool,
    protected: tuple[PolicyRef, ...],
    creation_ns: int | None,
    restart_marker: str | None,
    schedule_since_ns: Mapping[PolicyRef, int],
    now_ns: int,
    sinces: Mapping[PolicyRef, SinceValue],
) -> PolicyInputs | None:
    if not contenders:
        return None
    winner, rest = contenders[0], contenders[1:]
    overlapped = tuple(c.ref for c in rest if not isinstance(c, _Own))
    if isinstance(winner, _Own):
        return PolicyInputs(
            annotations, overlapped=overlapped, exempt=exempt, family=family, protected=protected
        )
    if isinstance(winner, UnjudgedPolicy):
        return PolicyInputs(
            MappingProxyType({}),
            overlapped=overlapped,
            exempt=exempt,
            family=family,
            held=winner,
            protected=protected,
        )
    merged, sources = _merge(
        annotations,
        winner,
        creation_ns=creation_ns,
        restart_marker=restart_marker,
        schedule_since_ns=schedule_since_ns.get(winner.ref),
        now_ns=now_ns,
        since_ns=_since_ns(sinces, winner.ref),
    )
    sooner = None
    if winner.enforce and family is Family.DELETE:
        below = [c for c in rest if not isinstance(c, UnjudgedPolicy)]
        if below:
            sooner = _family_inputs(
                family,
                annotations,
                below,
                exempt=exempt,
                protected=protected,
                creation_ns=creation_ns,
                restart_marker=restart_marker,
                schedule_since_ns=schedule_since_ns,
                now_ns=now_ns,
                sinces=sinces,
            )
    return PolicyInputs(
        MappingProxyType(merged),
        decided_by=winner,
        overlapped=overlapped,
        sources=MappingProxyType(sources),
        exempt=exempt,
        family=family,
        sooner=sooner,
        protected=protected,
        since_ns=_since_ns(sinces, winner.ref) if winner.since is not None else None,
    )


def _in_family(contender: Policy | UnjudgedPolicy, family: Family) -> bool:
    if isinstance(contender, UnjudgedPolicy):
        return family in contender.families
    return family_of(contender.action) is family


def _since_ns(sinces: Mapping[PolicyRef, SinceValue], ref: PolicyRef) -> int | None:
    value = sinces.get(ref)
    return None if value is None else value.instant_ns


def _contending(
    ranked: Sequence[Policy | UnjudgedPolicy],
    creation_ns: int | None,
    restart_marker: str | None,
    sinces: Mapping[PolicyRef, SinceValue],
) -> tuple[list[Policy | UnjudgedPolicy], list[LeftAlone]]:
    """The contenders (order kept), and those passed over as they leave the object alone (a
    valid policy unjudged too; an invalid one cannot be read, so it holds; a valid policy
    whose ``since`` has no value for the object)."""
    contending: list[Policy | UnjudgedPolicy] = []
    passed_over: list[LeftAlone] = []
    for contender in ranked:
        policy = contender.policy if isinstance(contender, UnjudgedPolicy) else contender
        why = None if policy is None else leaves_alone(policy, creation_ns, restart_marker)
        since = sinces.get(contender.ref) if isinstance(contender, Policy) else None
        if why is not None:
            passed_over.append(LeftAlone(contender.ref, why))
        elif since is not None and since.instant_ns is None and since.problem is None:
            passed_over.append(no_since(contender.ref, since.missing or "no value"))
        else:
            contending.append(contender)
    return contending, passed_over


def resolve_policies(
    annotations: Mapping[str, str],
    matched: Iterable[Policy | UnjudgedPolicy],
    *,
    creation_ns: int | None,
    restart_marker: str | None,
    now_ns: int,
    schedule_since_ns: Mapping[PolicyRef, int] | None = None,
    protected: Iterable[PolicyRef] = (),
    namespace_exempt: bool = False,
    sinces: Mapping[PolicyRef, SinceValue] | None = None,
) -> Resolution:
    """Every family's inputs from the object's annotations and its contenders.

    ``matched``: the valid policies :func:`~.match.match` accepted (exempt and
    protection already applied) and the unjudged policies (invalid ones that would match, policies
    whose condition failed on the object). ``schedule_since_ns`` maps a policy to when its
    current generation was first accepted (see the module docstring); a missing entry is
    unknown. ``protected``: the policies that would match but for protection (reported).
    ``namespace_exempt``: the object's Namespace is exempt (as if the object were).
    ``sinces``: what the ``since`` of each matching policy that has one yielded (a value the
    policy's ``delete-after`` counts from; no value: the policy leaves the object alone).
    A policy that leaves the object alone is passed over (:attr:`Resolution.left_alone`).
    """
    given_sinces = sinces or {}
    exempt = is_exempt(annotations) or namespace_exempt
    shielded = tuple(protected)
    families: list[PolicyInputs] = []
    left_alone: list[LeftAlone] = []
    all_contenders = list(matched)
    for family in Family:
        ranked = sorted(
            (
                c
                for c in all_contenders
                if _in_family(c, family)
                and not (exempt and contender_order(c)[0] >= NAMESPACED_LAYER)
            ),
            key=contender_order,
        )
        ranked, passed_over = _contending(ranked, creation_ns, restart_marker, given_sinces)
        left_alone.extend(passed_over)
        contenders: list[Policy | UnjudgedPolicy | _Own] = list(ranked)
        if _own_family(annotations, family):
            place = sum(1 for c in ranked if contender_order(c)[0] == ENFORCED_LAYER)
            contenders.insert(place, _OWN_CONTENDER)
        inputs = _family_inputs(
            family,
            annotations,
            contenders,
            exempt=exempt,
            protected=shielded,
            creation_ns=creation_ns,
            restart_marker=restart_marker,
            schedule_since_ns=schedule_since_ns or {},
            now_ns=now_ns,
            sinces=given_sinces,
        )
        if inputs is not None:
            families.append(inputs)
    if all(inputs.own for inputs in families):
        overlapped: dict[PolicyRef, None] = {}
        for inputs in families:
            overlapped.update(dict.fromkeys(inputs.overlapped))
        return Resolution(
            (
                PolicyInputs(
                    annotations,
                    overlapped=tuple(overlapped),
                    exempt=exempt,
                    protected=shielded,
                ),
            ),
            left_alone=tuple(left_alone),
        )
    return Resolution(tuple(families), left_alone=tuple(left_alone))
