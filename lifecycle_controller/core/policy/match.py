"""Whether a lifecycle policy matches an object, from the object's metadata alone.

A policy matches an object when every one of its filters accepts it, checked cheapest first:

1. **resource**: the object's resource key (``configmaps``, ``deployments.apps``) matches one
   of ``resources`` (Go globs, as ``--watch-resource``); a glob selects namespaced types only,
   so a cluster-scoped type (Namespaces, PersistentVolumes, Nodes...) must be named exactly,
   and CustomResourceDefinitions and the policies themselves are never selected;
2. **namespace**: a ``LifecyclePolicy`` matches only objects in its own namespace (never a
   cluster-scoped one); a ``ClusterLifecyclePolicy`` with ``namespaces`` matches an object in
   a matching namespace, a Namespace whose own name matches, and no other cluster-scoped
   object;
3. **names** (globs; none: every name) and the label **selector** (none: every object);
   then the **namespaceSelector** over the labels of the object's Namespace
   (:attr:`ObjectView.namespace_labels`): a cluster-scoped object never matches it, and an
   object whose Namespace is not known (yet) is :attr:`MatchReason.NAMESPACE_UNKNOWN`, which
   precedence turns into an unjudged policy that holds the object, as a condition error
   (checked after protection, so an object in a protected namespace is protected, never
   held); the selector never names a namespace, so a protected one stays protected whatever
   its labels;
4. **protected** (:class:`Protection`): objects in ``kube-system``, ``kube-public``,
   ``kube-node-lease``, the controller's own namespace and any ``--policy-protected-namespace``
   (and those Namespace objects) are matched only by a cluster policy whose ``namespaces``
   names that namespace literally, or by a ``LifecyclePolicy`` living there; the controller's
   own Lease, breaker ConfigMap and chart-labelled objects never;
5. **exempt**: ``lifecycle.cezary.dev/exempt`` on the object (any value but a false one, so
   a misspelt value errs on the side of leaving the object alone), or on its Namespace
   (:attr:`ObjectView.namespace_exempt`), stops every policy that is not enforced;
6. **owned**: an object with a *controller* owner reference (a Deployment's ReplicaSets, a
   Job's Pods) is matched only with ``includeOwned: true``;
7. the CEL **condition**, last because it is the dearest; an evaluation error is reported
   as :attr:`MatchReason.CONDITION_ERROR`, which precedence turns into an unjudged policy
   holding the object (never a silent "no match" that lets a lower policy act); a condition reading
   ``referencedBy`` while what uses the object is not known (the reference index has not
   synced, or may not list a referring type) is :attr:`MatchReason.REFERENCES_UNKNOWN`, a
   hold too, kept apart so that the policy's status and metrics say why.

:data:`HOLDING` are the refusals that hold the object rather than let it go.

:func:`holds` says whether an invalid policy holds an object: what it still says of its
selection (:class:`~.model.HeldScope`) is read as above, an unreadable part selecting
everything.

:func:`match` says which filter refused the object, for ``explain``; :func:`matches` is the
plain answer. :func:`since_of` is what a matching policy's ``since`` yields for the object,
read over the same view. :func:`unwatched_resources` names the entries of ``resources`` that
select no watched resource type (the policy's ``Unwatched`` condition).
"""

from __future__ import annotations

import enum
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from types import MappingProxyType
from typing import Any, Final

from lifecycle_controller.core.objects import keys
from lifecycle_controller.core.objects.pod_references import REFERENCED_KINDS
from lifecycle_controller.core.objects.resources import ResourceType
from lifecycle_controller.core.policy.condition import OwnerReference, Stopwatch, Subject
from lifecycle_controller.core.policy.field_paths import dotted, unread
from lifecycle_controller.core.policy.model import Policy, PolicyInvalid, PolicyKind, selects_key
from lifecycle_controller.core.policy.since import Since, SinceValue
from lifecycle_controller.core.text.globs import glob_match, matches_any
from lifecycle_controller.core.text.gotext import go_parse_bool

__all__ = [
    "DEFAULT_PROTECTION",
    "HOLDING",
    "REFERENCES_NOT_SYNCED",
    "SYSTEM_NAMESPACES",
    "MatchReason",
    "ObjectView",
    "PolicyMatch",
    "Protection",
    "holds",
    "is_exempt",
    "match",
    "matches",
    "matches_statically",
    "namespace_refusal",
    "selects_resource",
    "since_of",
    "unwatched_resources",
]

#: Namespaces no policy reaches unless it names them literally.
SYSTEM_NAMESPACES: Final = frozenset({"kube-system", "kube-public", "kube-node-lease"})
#: Resource types no policy ever selects, by resource key or API group.
_NEVER_KEYS: Final = frozenset({"customresourcedefinitions.apiextensions.k8s.io"})
_NEVER_GROUPS: Final = frozenset({"lifecycle.cezary.dev"})
#: The label the chart puts on the controller's own objects.
_OWN_LABEL: Final = ("app.kubernetes.io/component", "controller-manager")

_EMPTY: Mapping[str, str] = MappingProxyType({})


class MatchReason(enum.StrEnum):
    """Why a policy does or does not match an object (``explain`` prints it)."""

    MATCHED = "matched"
    RESOURCE = "its resource is not one the policy names"
    NAMESPACE = "its namespace is outside the policy's"
    NAME = "its name matches none of the policy's names"
    SELECTOR = "its labels do not match the policy's selector"
    NAMESPACE_SELECTOR = "its namespace's labels do not match the policy's namespaceSelector"
    NAMESPACE_UNKNOWN = "its namespace's labels are not known yet"
    EXEMPT = "it is exempt (lifecycle.cezary.dev/exempt)"
    NAMESPACE_EXEMPT = "its namespace is exempt (lifecycle.cezary.dev/exempt on the Namespace)"
    PROTECTED = "it is protected from policies"
    OWNED = "it has a controller owner and the policy does not include owned objects"
    CONDITION = "the policy's condition is false for it"
    CONDITION_ERROR = "the policy's condition could not be evaluated for it"
    REFERENCES_UNKNOWN = "what uses it (referencedBy) is not known yet"


#: The refusals that hold the object: nothing below the policy acts on it in its family.
HOLDING: Final = frozenset(
    {MatchReason.CONDITION_ERROR, MatchReason.NAMESPACE_UNKNOWN, MatchReason.REFERENCES_UNKNOWN}
)


#: Why ``referencedBy`` is not known for an object, by default.
REFERENCES_NOT_SYNCED: Final = "references not synced yet"


def _referenced_by(view: ObjectView) -> tuple[str, ...] | None:
    if view.resource.group != "" or view.resource.kind not in REFERENCED_KINDS:
        return ()
    return view.referenced_by


@dataclass(frozen=True, slots=True, kw_only=True)
class ObjectView:
    """The metadata of one object that matching reads."""

    resource: ResourceType
    namespace: str | None
    name: str
    labels: Mapping[str, str] = field(default_factory=lambda: _EMPTY)
    annotations: Mapping[str, str] = field(default_factory=lambda: _EMPTY)
    creation_ns: int | None = None
    owner_references: tuple[OwnerReference, ...] = ()
    #: The labels of the object's Namespace; None: not known (not read, or not synced yet).
    namespace_labels: Mapping[str, str] | None = None
    #: Its Namespace carries ``lifecycle.cezary.dev/exempt`` (docs/annotations.md).
    namespace_exempt: bool = False
    #: The object's top-level fields other than metadata, as far as a condition reads them
    #: (docs/policies.md#what-a-condition-reads); empty when none does.
    fields: Mapping[str, Any] = field(default_factory=lambda: _EMPTY)
    #: The paths ``fields`` were read with; None: the whole object (a manifest, a write's
    #: answer); empty: metadata only. A condition reading beyond them holds the object.
    fields_read: frozenset[tuple[str, ...]] | None = None
    #: What uses the object (``referencedBy``), when known; None: not known, and
    #: ``references_missing`` says why (a condition reading it then holds the object).
    referenced_by: tuple[str, ...] | None = None
    references_missing: str = REFERENCES_NOT_SYNCED

    @property
    def is_namespace(self) -> bool:
        """A core Namespace (a custom kind of that name is not one)."""
        return self.resource.group == "" and self.resource.kind == "Namespace"

    @property
    def has_controller(self) -> bool:
        return any(ref.controller for ref in self.owner_references)


@dataclass(frozen=True, slots=True)
class Protection:
    """What no policy may reach unless it names it: see the module docstring.

    ``own_namespace`` is the controller's (its Lease's); ``lease`` and ``breaker`` the names
    of its Lease and breaker ConfigMap there. The tools, which have no controller, use the
    system namespaces alone.
    """

    namespaces: frozenset[str] = SYSTEM_NAMESPACES
    own_namespace: str | None = None
    lease: str | None = None
    breaker: str | None = None

    def protected_namespace(self, namespace: str) -> bool:
        return namespace in self.namespaces or namespace == self.own_namespace

    def own_object(self, view: ObjectView) -> bool:
        """The controller's own Lease, breaker ConfigMap or chart-labelled objects."""
        if self.own_namespace is None or view.namespace != self.own_namespace:
            return False
        key = view.resource.key
        if key == "leases.coordination.k8s.io" and view.name == self.lease:
            return True
        if key == "configmaps" and view.name == self.breaker:
            return True
        return view.labels.get(_OWN_LABEL[0]) == _OWN_LABEL[1]

    def refuses(self, policy: Policy | PolicyInvalid, view: ObjectView) -> bool:
        """Whether the object is protected from this policy."""
        if self.own_object(view):
            return True
        namespace = view.namespace if view.namespace is not None else None
        if namespace is None and view.is_namespace:
            namespace = view.name
        if namespace is None or not self.protected_namespace(namespace):
            return False
        if policy.ref.kind is PolicyKind.NAMESPACED:
            return policy.ref.namespace != namespace
        named = policy.namespaces if isinstance(policy, Policy) else policy.scope.namespaces
        return namespace not in (named or ())


DEFAULT_PROTECTION: Final = Protection()


def selects_resource(patterns: tuple[str, ...], resource: ResourceType) -> bool:
    """``resources`` select the type: an exact name, or a glob over a namespaced type; never
    CustomResourceDefinitions or the policies themselves."""
    if resource.key in _NEVER_KEYS or resource.group in _NEVER_GROUPS:
        return False
    return any(
        selects_key(pattern, resource.key, namespaced=resource.namespaced) for pattern in patterns
    )


@dataclass(frozen=True, slots=True)
class PolicyMatch:
    """The answer, the first filter that refused the object, and a condition's problem."""

    matched: bool
    reason: MatchReason
    problem: str | None = None


def is_exempt(annotations: Mapping[str, str]) -> bool:
    """Whether the object opts out of every policy (present and not a false boolean)."""
    value = annotations.get(keys.EXEMPT)
    return value is not None and go_parse_bool(value) is not False


def _in_scope(policy: Policy, view: ObjectView) -> bool:
    if policy.kind is PolicyKind.NAMESPACED:
        return view.namespace is not None and view.namespace == policy.ref.namespace
    if not policy.namespaces:
        return True
    if view.namespace is not None:
        return matches_any(policy.namespaces, view.namespace)
    return view.is_namespace and matches_any(policy.namespaces, view.name)


def _refused(reason: MatchReason, problem: str | None = None) -> PolicyMatch:
    return PolicyMatch(False, reason, problem)


def _static_refusal(policy: Policy, view: ObjectView) -> MatchReason | None:
    """Filters 1 to 3, which read only what the informers can judge while listing."""
    if not selects_resource(policy.resources, view.resource):
        return MatchReason.RESOURCE
    if not _in_scope(policy, view):
        return MatchReason.NAMESPACE
    if policy.names and not matches_any(policy.names, view.name):
        return MatchReason.NAME
    if policy.selector is not None and not policy.selector.matches(view.labels):
        return MatchReason.SELECTOR
    if policy.namespace_selector is not None and view.namespace is None:
        return MatchReason.NAMESPACE_SELECTOR
    return None


def namespace_refusal(policy: Policy, view: ObjectView) -> MatchReason | None:
    """The namespaceSelector over the labels of the object's Namespace (not a static
    filter: a Namespace's labels change while its objects stay the same)."""
    if policy.namespace_selector is None:
        return None
    if view.namespace_labels is None:
        return MatchReason.NAMESPACE_UNKNOWN
    if not policy.namespace_selector.matches(view.namespace_labels):
        return MatchReason.NAMESPACE_SELECTOR
    return None


def static_filters(policy: Policy) -> tuple[object, ...]:
    """What :func:`matches_statically` reads of ``policy``: equal for two generations when
    the objects the informers keep for it are the same (only its action, condition, owned
    rule or priority changed)."""
    return (
        policy.ref,
        policy.resources,
        policy.namespaces,
        policy.names,
        policy.selector,
        policy.namespace_selector is not None,
    )


def matches_statically(policy: Policy, view: ObjectView) -> bool:
    """Resource, scope, names and selector accept the object (whether to keep it cached)."""
    return _static_refusal(policy, view) is None


def match(
    policy: Policy,
    view: ObjectView,
    protection: Protection = DEFAULT_PROTECTION,
    stopwatch: Stopwatch | None = None,
) -> PolicyMatch:
    """Check the filters in the module's order; never raises. An enforced policy is not
    stopped by ``exempt``, on the object or on its Namespace. ``stopwatch`` times the
    condition's evaluation (:meth:`~.condition.Condition.evaluate`)."""
    refusal = _static_refusal(policy, view)
    if refusal is not None:
        return _refused(refusal)
    if protection.refuses(policy, view):
        return _refused(MatchReason.PROTECTED)
    refusal = namespace_refusal(policy, view)  # after protection: a protected one is not held
    if refusal is not None:
        return _refused(refusal)
    if not policy.enforce and is_exempt(view.annotations):
        return _refused(MatchReason.EXEMPT)
    if not policy.enforce and view.namespace_exempt:
        return _refused(MatchReason.NAMESPACE_EXEMPT)
    if view.has_controller and not policy.include_owned:
        return _refused(MatchReason.OWNED)
    if policy.condition is not None:
        referenced_by = _referenced_by(view) if policy.condition.reads_references else ()
        if referenced_by is None:
            return _refused(MatchReason.REFERENCES_UNKNOWN, view.references_missing)
        missing = _not_read_yet(policy.condition.reads, view)
        if missing is not None:
            return _refused(MatchReason.CONDITION_ERROR, missing)
        result = policy.condition.evaluate(_subject(view, referenced_by), stopwatch=stopwatch)
        if result.problem is not None:
            return _refused(MatchReason.CONDITION_ERROR, result.problem)
        if not result.matched:
            return _refused(MatchReason.CONDITION)
    return PolicyMatch(True, MatchReason.MATCHED)


def since_of(since: Since, view: ObjectView, matched_at_ns: int | None) -> SinceValue:
    """What a matching policy's ``since`` yields for the object (:mod:`.since`);
    ``matched_at_ns``: when the object began to match it. Read over what the cache keeps, as
    the condition is: a field not read yet, or what uses the object not known, is a problem
    (the object is held)."""
    referenced_by = _referenced_by(view) if since.reads_references else ()
    if referenced_by is None:
        return SinceValue(problem=f"since reads referencedBy: {view.references_missing}")
    missing = _not_read_yet(since.reads, view)
    if missing is not None:
        return SinceValue(problem=missing)
    return since.evaluate(_subject(view, referenced_by), matched_at_ns=matched_at_ns)


def _not_read_yet(reads: frozenset[tuple[str, ...]], view: ObjectView) -> str | None:
    """The problem when an expression reads fields the cache has not read for the object
    yet: it is listed again with them, and until then an absent field would not be absent."""
    missing = unread(reads, view.fields_read)
    if not missing:
        return None
    names = ", ".join(dotted(path) for path in missing)
    return f"{names} not read yet (listing again)"


def _subject(view: ObjectView, referenced_by: tuple[str, ...]) -> Subject:
    """The object as a condition or a ``since`` reads it."""
    return Subject(
        kind=view.resource.kind,
        api_version=view.resource.api_version,
        name=view.name,
        namespace=view.namespace,
        labels=view.labels,
        annotations=view.annotations,
        creation_ns=view.creation_ns,
        owner_references=view.owner_references,
        fields=view.fields,
        referenced_by=referenced_by,
    )


def matches(policy: Policy, view: ObjectView, protection: Protection = DEFAULT_PROTECTION) -> bool:
    """Whether ``policy`` matches the object."""
    return match(policy, view, protection).matched


def holds(
    invalid: PolicyInvalid, view: ObjectView, protection: Protection = DEFAULT_PROTECTION
) -> bool:
    """Whether an invalid policy holds the object: it would match on what is readable."""
    scope = invalid.scope
    if scope.resources is not None and not selects_resource(scope.resources, view.resource):
        return False
    if view.resource.key in _NEVER_KEYS or view.resource.group in _NEVER_GROUPS:
        return False
    if invalid.ref.kind is PolicyKind.NAMESPACED:
        if view.namespace is None or view.namespace != invalid.ref.namespace:
            return False
    elif scope.namespaces:
        if view.namespace is not None:
            if not matches_any(scope.namespaces, view.namespace):
                return False
        elif not (view.is_namespace and matches_any(scope.namespaces, view.name)):
            return False
    if scope.names and not matches_any(scope.names, view.name):
        return False
    if scope.selector is not None and not scope.selector.matches(view.labels):
        return False
    if scope.namespace_selector is not None:
        if view.namespace is None:
            return False
        labels = view.namespace_labels
        if labels is not None and not scope.namespace_selector.matches(labels):
            return False  # an unknown Namespace: held, as it may match
    if protection.refuses(invalid, view):
        return False
    return scope.enforce or not (is_exempt(view.annotations) or view.namespace_exempt)


def unwatched_resources(policy: Policy, watched_keys: Iterable[str]) -> tuple[str, ...]:
    """The entries of ``policy.resources`` that match none of the watched resource keys."""
    watched = tuple(watched_keys)
    return tuple(
        pattern
        for pattern in policy.resources
        if not any(glob_match(pattern, key) for key in watched)
    )
