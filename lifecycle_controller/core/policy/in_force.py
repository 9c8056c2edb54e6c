"""The policies in force, as one immutable snapshot that answers "which decide this object?".

The controller builds a :class:`PolicySet` from the policy objects its informers see, the
tools (``plan -f``, ``policies try``) from manifests; both then ask it the same questions, so
that what a tool predicts is what the controller does:

* :meth:`PolicySet.candidate`: could any policy match this object, judged on what is cheap
  to see (resource, scope, names, label selector)? The informers keep the metadata of such
  objects; an object that is no candidate and has no lifecycle annotation is dropped while
  listing, as before policies existed.
* :meth:`PolicySet.matching`: the contenders for the object, best first: the valid policies
  that match (every filter, the CEL condition included) and the unjudged ones (an invalid
  policy that would match it, a policy whose condition failed on it).
* :meth:`PolicySet.resolve`: every action family's inputs for the decision
  (:func:`~lifecycle_controller.core.policy.precedence.resolve_policies`).

The set carries the :class:`~.match.Protection` in force (the controller's own
namespace and objects, the system namespaces), so every question is asked with it, and the
:data:`~.condition.Stopwatch` that times each condition's evaluation (none: untimed).

:func:`policy_from_manifest` reads one ``ClusterLifecyclePolicy``/``LifecyclePolicy`` object
(an API object or a YAML document) into a :class:`~.model.Policy` or a
:class:`~.model.PolicyInvalid`; it never raises.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, field, replace
from types import MappingProxyType
from typing import Any, Final

from lifecycle_controller.core.decision.outcomes import Action
from lifecycle_controller.core.objects import keys
from lifecycle_controller.core.objects.resources import ResourceType
from lifecycle_controller.core.policy.condition import OwnerReference, Stopwatch
from lifecycle_controller.core.policy.condition_reads import SECRETS
from lifecycle_controller.core.policy.match import (
    DEFAULT_PROTECTION,
    MatchReason,
    ObjectView,
    Protection,
    holds,
    is_exempt,
    match,
    matches_statically,
    selects_resource,
    since_of,
)
from lifecycle_controller.core.policy.model import (
    Policy,
    PolicyInvalid,
    PolicyKind,
    PolicyRef,
    parse_policy,
)
from lifecycle_controller.core.policy.precedence import (
    Resolution,
    UnjudgedPolicy,
    UnjudgedReason,
    contender_order,
    resolve_policies,
)
from lifecycle_controller.core.policy.reach import Reach
from lifecycle_controller.core.policy.since import SinceValue
from lifecycle_controller.core.text.timestamps import TimestampError, parse_rfc3339

__all__ = [
    "POLICY_API_VERSION",
    "Matched",
    "NameTest",
    "PolicySet",
    "is_policy_manifest",
    "never_kept",
    "object_view",
    "policy_from_manifest",
    "reported_schedule_since",
]

#: Whether an unannotated object of a type, by its namespace (None: cluster-scoped) and name,
#: may be kept for a policy (:meth:`PolicySet.name_test`).
NameTest = Callable[[str | None, str], bool]


def never_kept(namespace: str | None, name: str) -> bool:
    """The name test of a type no policy selects: no object of it is kept for a policy."""
    return False


#: ``apiVersion`` of both policy kinds.
POLICY_API_VERSION: Final = "lifecycle.cezary.dev/v1alpha1"
_KINDS: Final = {kind.value: kind for kind in PolicyKind}


def is_policy_manifest(doc: Mapping[str, Any]) -> bool:
    """A document of one of the two policy kinds (any version of the group)."""
    api_version = str(doc.get("apiVersion", ""))
    return api_version.split("/")[0] == "lifecycle.cezary.dev" and doc.get("kind") in _KINDS


def policy_from_manifest(doc: Mapping[str, Any]) -> Policy | PolicyInvalid:
    """One policy object (``is_policy_manifest`` must hold) as a model; never raises."""
    kind = _KINDS[str(doc["kind"])]
    metadata = doc.get("metadata")
    metadata = metadata if isinstance(metadata, Mapping) else {}
    name = str(metadata.get("name") or "")
    namespace = metadata.get("namespace") or None
    generation = metadata.get("generation")
    generation = generation if isinstance(generation, int) else 0
    if str(doc.get("apiVersion")) != POLICY_API_VERSION:
        ref = PolicyRef(kind, namespace if kind is PolicyKind.NAMESPACED else None, name)
        problem = f"apiVersion: {doc.get('apiVersion')} is not served; use {POLICY_API_VERSION}"
        return PolicyInvalid(ref, generation, (problem,))
    uid = str(metadata.get("uid") or "")
    return parse_policy(kind, namespace, name, generation, doc.get("spec"), uid=uid)


def _creation_ns(value: object) -> int | None:
    if not isinstance(value, str) or not value:
        return None
    try:
        return parse_rfc3339(value)
    except TimestampError:
        return None


def _owner_references(raw: object) -> tuple[OwnerReference, ...]:
    if not isinstance(raw, list):
        return ()
    return tuple(
        OwnerReference(
            api_version=str(ref.get("apiVersion", "")),
            kind=str(ref.get("kind", "")),
            name=str(ref.get("name", "")),
            uid=str(ref.get("uid", "")),
            controller=ref.get("controller") is True,
        )
        for ref in raw
        if isinstance(ref, Mapping)
    )


def _strings(raw: object) -> dict[str, str]:
    if not raw or not isinstance(raw, (dict, Mapping)):  # dict first: no ABC check
        return {}
    return {str(k): str(v) for k, v in raw.items()}


_NO_FIELDS: Final[Mapping[str, Any]] = MappingProxyType({})


def object_view(
    resource: ResourceType,
    metadata: Mapping[str, Any],
    fields: Mapping[str, Any] | None = None,
    *,
    read: frozenset[tuple[str, ...]] | None = None,
) -> ObjectView:
    """What matching reads of an object, from its ``metadata`` (an API object's or a
    manifest's) and, for conditions, its other top-level ``fields`` as far as they are kept;
    ``read``: the paths they were read with (None: the whole object, as a manifest is)."""
    return ObjectView(
        resource=resource,
        namespace=(metadata.get("namespace") or None) if resource.namespaced else None,
        name=str(metadata.get("name", "")),
        labels=_strings(metadata.get("labels")),
        annotations=_strings(metadata.get("annotations")),
        creation_ns=_creation_ns(metadata.get("creationTimestamp")),
        owner_references=_owner_references(metadata.get("ownerReferences")),
        fields=fields if fields else _NO_FIELDS,  # shared, never mutated (FieldInterner)
        fields_read=read,
    )


@dataclass(frozen=True, slots=True)
class PolicySet:
    """Valid and invalid policies of one moment; cheap to ask per object."""

    valid: tuple[Policy, ...] = ()
    invalid: tuple[PolicyInvalid, ...] = ()
    protection: Protection = DEFAULT_PROTECTION
    #: Times each condition's evaluation, so that one over the time budget marks it.
    stopwatch: Stopwatch | None = field(default=None, compare=False)
    _by_resource: dict[str, tuple[Policy, ...]] = field(
        default_factory=dict, init=False, repr=False, compare=False
    )
    _by_label: list[bool] = field(default_factory=list, init=False, repr=False, compare=False)
    _references: list[bool] = field(default_factory=list, init=False, repr=False, compare=False)
    _reach: dict[str, Reach] = field(default_factory=dict, init=False, repr=False, compare=False)
    _reads: dict[str, frozenset[tuple[str, ...]]] = field(
        default_factory=dict, init=False, repr=False, compare=False
    )
    _every: dict[str, bool] = field(default_factory=dict, init=False, repr=False, compare=False)
    _name_tests: dict[str, NameTest | None] = field(
        default_factory=dict, init=False, repr=False, compare=False
    )

    @classmethod
    def of(
        cls,
        policies: Iterable[Policy | PolicyInvalid],
        protection: Protection = DEFAULT_PROTECTION,
        stopwatch: Stopwatch | None = None,
    ) -> PolicySet:
        """Split parsed policies into the valid and the invalid ones (name order)."""
        parsed = sorted(policies, key=lambda p: (p.ref.kind, p.ref.namespace or "", p.ref.name))
        return cls(
            valid=tuple(p for p in parsed if isinstance(p, Policy)),
            invalid=tuple(p for p in parsed if isinstance(p, PolicyInvalid)),
            protection=protection,
            stopwatch=stopwatch,
        )

    def __bool__(self) -> bool:
        return bool(self.valid or self.invalid)

    def for_resource(self, resource: ResourceType) -> tuple[Policy, ...]:
        """The valid policies that may act on this type (memoised per type)."""
        found = self._by_resource.get(resource.key)
        if found is None:
            # A restart policy whose globs also select kinds that cannot restart leaves them
            # alone, silently: "*.apps" means the Deployments, StatefulSets and DaemonSets.
            found = tuple(
                p
                for p in self.valid
                if selects_resource(p.resources, resource)
                and (p.action is not Action.RESTART or resource.restartable)
            )
            self._by_resource[resource.key] = found
        return found

    def selects_namespaces_by_label(self) -> bool:
        """Some policy (valid or invalid) has a namespaceSelector: a Namespace's labels
        matter to its objects."""
        if not self._by_label:  # memoised: asked once per object decided
            self._by_label.append(
                any(p.namespace_selector is not None for p in self.valid)
                or any(p.scope.namespace_selector is not None for p in self.invalid)
            )
        return self._by_label[0]

    def _reach_of(self, resource: ResourceType) -> Reach:
        """:meth:`for_resource` indexed by namespace and name (built once per type)."""
        found = self._reach.get(resource.key)
        if found is None:
            found = self._reach[resource.key] = Reach.of(self.for_resource(resource))
        return found

    def for_object(self, resource: ResourceType, namespace: str | None) -> tuple[Policy, ...]:
        """:meth:`for_resource` less the policies that can never match an object in
        ``namespace``: a ``LifecyclePolicy`` of another namespace, a
        ``ClusterLifecyclePolicy`` whose ``namespaces`` are all literal names and not this
        one (:class:`~lifecycle_controller.core.policy.reach.Reach`). Asking per object then
        costs the policies that may concern its namespace, not every policy of the cluster."""
        return self._reach_of(resource).in_namespace(namespace)

    def _named(self, view: ObjectView) -> tuple[Policy, ...]:
        """:meth:`for_object` less the policies whose ``names`` are all literal names other
        than the object's (the listing's hot path asks this for every object), in the same
        order."""
        return self._reach_of(view.resource).named(view.namespace, view.name)

    def reads_references(self) -> bool:
        """A valid policy's condition reads ``referencedBy`` (the reference index is needed);
        memoised: asked once per object decided."""
        if not self._references:
            self._references.append(any(p.reads_references for p in self.valid))
        return self._references[0]

    def resource_patterns(self) -> tuple[str, ...]:
        """Every ``resources`` entry of a valid policy (the types the informers must keep)."""
        return tuple(sorted({pattern for p in self.valid for pattern in p.resources}))

    def reads(self, resource: ResourceType) -> frozenset[tuple[str, ...]]:
        """The paths outside ``metadata`` the conditions of the policies for ``resource``
        read (empty: its informers stay metadata-only). Never any for Secrets: a valid
        policy's condition reads only their metadata (:mod:`.condition_reads`), and should
        one not, the object is held unread rather than every Secret listed whole."""
        if resource.key == SECRETS:
            return frozenset()
        found = self._reads.get(resource.key)
        if found is None:  # memoised: asked for every object listed
            found = self._reads[resource.key] = frozenset(
                path for policy in self.for_resource(resource) for path in policy.reads
            )
        return found

    def candidate(self, view: ObjectView) -> bool:
        """Whether a policy could match, on resource, scope, names and selector alone (a
        protected object too: it is kept, so that what protection refuses is counted), or an
        invalid policy holds it."""
        policies = self._named(view)
        return any(matches_statically(p, view) for p in policies) or any(
            holds(p, view, self.protection) for p in self.invalid
        )

    def may_keep(self, resource: ResourceType, namespace: str | None, name: str) -> bool:
        """Whether :meth:`candidate` may hold for an object of ``resource`` so named (None:
        cluster-scoped), before anything else of it is read: some policy of the type may
        reach that namespace and name, or an invalid policy may hold it. Never False for a
        candidate, so an object refused here can be dropped without being decoded."""
        test = self.name_test(resource)
        return True if test is None else test(namespace, name)

    def name_test(self, resource: ResourceType) -> NameTest | None:
        """:meth:`may_keep` for one type as a test of (namespace, name), built once per type
        (the listing asks it for every frame); None when :meth:`may_keep_every` (a name tells
        nothing)."""
        try:
            return self._name_tests[resource.key]
        except KeyError:
            pass
        reach = self._reach_of(resource)
        test: NameTest | None
        if not reach.policies:
            test = never_kept
        elif self.may_keep_every(resource):  # an invalid policy, or one reaching every name
            test = None
        else:
            test = reach.reaches
        self._name_tests[resource.key] = test
        return test

    def may_keep_every(self, resource: ResourceType) -> bool:
        """Whether :meth:`may_keep` holds for every object of ``resource`` (a policy of the
        type reaches every namespace and name, or an invalid policy exists): nothing is told
        by an object's name, so a frame need not be read for it (memoised per type)."""
        found = self._every.get(resource.key)
        if found is None:
            reach = self._reach_of(resource)
            found = bool(reach.policies) and (bool(self.invalid) or reach.everything)
            self._every[resource.key] = found
        return found

    def matching(self, view: ObjectView) -> list[Policy | UnjudgedPolicy]:
        """The contenders for the object (see the module docstring), best first."""
        found: list[Policy | UnjudgedPolicy] = []
        for policy in self._named(view):
            result = match(policy, view, self.protection, self.stopwatch)
            if result.matched:
                found.append(policy)
            elif result.reason is MatchReason.CONDITION_ERROR:
                found.append(UnjudgedPolicy.condition_error(policy, result.problem or ""))
            elif result.reason is MatchReason.NAMESPACE_UNKNOWN:
                found.append(
                    UnjudgedPolicy.condition_error(
                        policy, result.reason.value, UnjudgedReason.NAMESPACE_UNKNOWN
                    )
                )
            elif result.reason is MatchReason.REFERENCES_UNKNOWN:
                found.append(
                    UnjudgedPolicy.condition_error(
                        policy, result.problem or "", UnjudgedReason.REFERENCES_UNKNOWN
                    )
                )
        found.extend(
            UnjudgedPolicy.invalid(p) for p in self.invalid if holds(p, view, self.protection)
        )
        return sorted(found, key=contender_order)

    def protected_from(self, view: ObjectView) -> tuple[PolicyRef, ...]:
        """The policies that would match the object but for its protection."""
        return tuple(
            p.ref
            for p in self._named(view)
            if match(p, view, self.protection, self.stopwatch).reason is MatchReason.PROTECTED
            and match(p, view, _UNPROTECTED, self.stopwatch).matched
        )

    def exempted_from(self, view: ObjectView) -> tuple[PolicyRef, ...]:
        """The policies that would match the object but for ``exempt`` on it or on its
        Namespace (none unless one of them is exempt: the common object costs nothing)."""
        if not (view.namespace_exempt or is_exempt(view.annotations)):
            return ()
        bare = replace(
            view,
            annotations={k: v for k, v in view.annotations.items() if k != keys.EXEMPT},
            namespace_exempt=False,
        )
        return tuple(
            p.ref
            for p in self._named(view)
            if match(p, view, self.protection, self.stopwatch).reason in _EXEMPTIONS
            and match(p, bare, self.protection, self.stopwatch).matched
        )

    def matched(self, view: ObjectView) -> Matched:
        """What every policy says of the object (its conditions evaluated once)."""
        return Matched(
            tuple(self.matching(view)), self.protected_from(view), self.exempted_from(view)
        )

    def resolve(
        self,
        annotations: Mapping[str, str],
        view: ObjectView,
        *,
        restart_marker: str | None,
        now_ns: int,
        schedule_since_ns: Mapping[PolicyRef, int] | None = None,
        matched_at: Mapping[PolicyRef, int] | None = None,
        matched: Matched | None = None,
    ) -> Resolution:
        """The decision's inputs for an object whose lifecycle annotations are ``annotations``
        (``matched``: what :meth:`matched` found for ``view``, when it was asked already).

        ``matched_at``: when the object began to match each policy whose ``since`` reads
        ``matchedAt``, as the controller saw it; a policy it matches that has no entry
        begins now (:attr:`Resolution.matched_at` says what was used, for the controller to
        keep)."""
        found = self.matched(view) if matched is None else matched
        contenders, sinces, began = _anchored(
            list(found.contenders), view, matched_at or {}, now_ns
        )
        resolution = resolve_policies(
            annotations,
            contenders,
            creation_ns=view.creation_ns,
            restart_marker=restart_marker,
            now_ns=now_ns,
            schedule_since_ns=schedule_since_ns,
            protected=found.protected,
            namespace_exempt=view.namespace_exempt,
            sinces=sinces,
        )
        if sinces or began:
            resolution = replace(
                resolution,
                sinces=MappingProxyType(sinces),
                matched_at=MappingProxyType(began),
            )
        return replace(resolution, exempted=found.exempted) if found.exempted else resolution


@dataclass(frozen=True, slots=True)
class Matched:
    """What the policies say of one object before precedence: its contenders (best first),
    the policies its protection or an exemption keeps away. Precedence
    (:func:`~.precedence.resolve_policies`) then needs the workload's restart marker when
    a restart policy contends (:attr:`restarts`)."""

    contenders: tuple[Policy | UnjudgedPolicy, ...]
    protected: tuple[PolicyRef, ...] = ()
    exempted: tuple[PolicyRef, ...] = ()

    @property
    def restarts(self) -> bool:
        """A policy that restarts contends (a recurring one counts from the marker, a
        ``restart-at`` one is done with a workload the marker says it restarted)."""
        policies = (c.policy if isinstance(c, UnjudgedPolicy) else c for c in self.contenders)
        return any(p is not None and p.action is Action.RESTART for p in policies)


def _anchored(
    contenders: list[Policy | UnjudgedPolicy],
    view: ObjectView,
    matched_at: Mapping[PolicyRef, int],
    now_ns: int,
) -> tuple[list[Policy | UnjudgedPolicy], dict[PolicyRef, SinceValue], dict[PolicyRef, int]]:
    """The contenders with each matching policy's ``since`` evaluated (an evaluation error
    leaves the policy unjudged), what each yielded, and when the object began to match
    the policies whose ``since`` reads ``matchedAt`` (no entry: now)."""
    sinces: dict[PolicyRef, SinceValue] = {}
    began: dict[PolicyRef, int] = {}
    anchored: list[Policy | UnjudgedPolicy] = []
    for contender in contenders:
        if not isinstance(contender, Policy) or contender.since is None:
            anchored.append(contender)
            continue
        ref = contender.ref
        start = None
        if contender.since.reads_matched_at:
            start = began[ref] = matched_at.get(ref, now_ns)
        value = since_of(contender.since, view, start)
        if value.problem is not None:
            anchored.append(
                UnjudgedPolicy.condition_error(contender, value.problem, UnjudgedReason.SINCE_ERROR)
            )
        else:
            sinces[ref] = value
            anchored.append(contender)
    return anchored, sinces, began


#: Matching without protection (to tell what protection refused).
_UNPROTECTED: Final = Protection(namespaces=frozenset())
#: The refusals of an exemption, the object's own or its Namespace's.
_EXEMPTIONS: Final = frozenset({MatchReason.EXEMPT, MatchReason.NAMESPACE_EXEMPT})


def reported_schedule_since(status: Mapping[str, Any], generation: int) -> int | None:
    """A policy's ``status.scheduleSince`` (ns) when the status is about ``generation``.

    The controller writes it when it first accepts a generation; reading it back lets a new
    leader, and the tools, anchor recurring schedules where the old leader did
    (docs/policies.md#how-a-policy-is-anchored). None when absent, stale or unreadable.
    """
    if status.get("observedGeneration") != generation:
        return None
    value = status.get("scheduleSince")
    if not isinstance(value, str):
        return None
    try:
        return parse_rfc3339(value)
    except TimestampError:
        return None
