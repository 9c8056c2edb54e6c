"""Lifecycle policies in the tools: which policy decides an object, asked as the controller asks.

The controller keeps an object for its policies when :meth:`PolicySet.candidate` accepts its
view (``controller/policy/store.py``), decides for it through :meth:`PolicySet.resolve` and
:func:`~lifecycle_controller.core.policy.decide.decide_with_policies` whenever a valid policy
exists (``controller/policy/decisions.py``), and on its annotations alone otherwise.
:func:`judge` takes the same three steps, with
:func:`~lifecycle_controller.core.tooling.plan.explain`
(which calls ``decide_with_policies`` for it) in place of the reconciler, so ``plan``,
``status``, ``explain`` and ``policies try`` say what the controller does. Nothing here reads
the API: the callers hand in the policies (:func:`policy_docs`), the object's metadata and its
Pod template marker.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field, replace
from typing import Any

from lifecycle_controller.core import DecisionSettings, ObjectFacts
from lifecycle_controller.core.decision.namespace_defaults import NamespaceDefaults
from lifecycle_controller.core.objects.resources import ResourceType
from lifecycle_controller.core.policy.decide import attribution
from lifecycle_controller.core.policy.field_paths import read_values
from lifecycle_controller.core.policy.in_force import (
    PolicySet,
    object_view,
    policy_from_manifest,
    reported_schedule_since,
)
from lifecycle_controller.core.policy.match import (
    DEFAULT_PROTECTION,
    MatchReason,
    ObjectView,
    Protection,
    is_exempt,
    match,
)
from lifecycle_controller.core.policy.model import Policy, PolicyInvalid, PolicyRef
from lifecycle_controller.core.policy.namespace_selection import namespace_selection
from lifecycle_controller.core.policy.precedence import InputSource, Resolution
from lifecycle_controller.core.text.timestamps import format_rfc3339_nano
from lifecycle_controller.core.tooling.plan import Explanation, GuardrailView, explain

__all__ = [
    "PolicyDocs",
    "PolicyVerdict",
    "guess_resource",
    "judge",
    "policy_docs",
    "policy_sources",
    "refusals",
]


@dataclass(frozen=True)
class PolicyDocs:
    """Parsed policies and when each valid one's generation counts from (``scheduleSince``).

    ``statuses`` keeps each policy's ``status`` as read (``policies`` prints it).
    """

    policies: PolicySet = field(default_factory=PolicySet)
    schedule_since: Mapping[PolicyRef, int] = field(default_factory=dict)
    statuses: Mapping[PolicyRef, Mapping[str, Any]] = field(default_factory=dict)
    #: Each known Namespace's labels, for a ``namespaceSelector`` (the Namespace manifests
    #: among ``plan``'s input, or the cluster's); a Namespace not in it is not known.
    namespace_labels: Mapping[str, Mapping[str, str]] = field(default_factory=dict)

    def view(
        self,
        resource: ResourceType,
        metadata: Mapping[str, Any],
        fields: Mapping[str, Any] | None = None,
    ) -> ObjectView:
        """What matching reads of the object (its ``fields`` beyond metadata as far as a
        condition reads them), its Namespace's labels included."""
        view = object_view(resource, metadata, fields)
        if view.namespace is None:
            return view
        return replace(view, namespace_labels=self.namespace_labels.get(view.namespace))

    def with_namespaces(self, manifests: Iterable[Mapping[str, Any]]) -> PolicyDocs:
        """These docs, knowing the labels of the Namespace objects among ``manifests``."""
        labels = dict(self.namespace_labels)
        for obj in manifests:
            if obj.get("kind") != "Namespace" or obj.get("apiVersion") != "v1":
                continue
            metadata = obj.get("metadata")
            metadata = metadata if isinstance(metadata, Mapping) else {}
            raw = metadata.get("labels")
            found = raw if isinstance(raw, Mapping) else {}
            labels[str(metadata.get("name", ""))] = {str(k): str(v) for k, v in found.items()}
        return replace(self, namespace_labels=labels)

    @property
    def any(self) -> bool:
        """Whether any policy (valid or not) was read: the tools then show a POLICY column."""
        return bool(self.policies.valid or self.policies.invalid)


def policy_docs(
    manifests: Iterable[Mapping[str, Any]],
    *,
    now_ns: int,
    protection: Protection = DEFAULT_PROTECTION,
) -> PolicyDocs:
    """The policies among ``manifests`` (``is_policy_manifest`` must hold for each).

    A generation whose ``status`` does not say since when it counts is taken as accepted at
    ``now_ns``: a controller that saw it now would anchor its recurring restarts there.
    """
    parsed: list[Policy | PolicyInvalid] = []
    since: dict[PolicyRef, int] = {}
    statuses: dict[PolicyRef, Mapping[str, Any]] = {}
    for manifest in manifests:
        policy = policy_from_manifest(manifest)
        parsed.append(policy)
        raw = manifest.get("status")
        status: Mapping[str, Any] = raw if isinstance(raw, Mapping) else {}
        statuses[policy.ref] = status
        known = reported_schedule_since(status, policy.generation)
        since[policy.ref] = now_ns if known is None else known
    return PolicyDocs(PolicySet.of(parsed, protection), since, statuses)


@dataclass(frozen=True)
class PolicyVerdict:
    """What the policies make of one object.

    ``decided_by``: the deciding policy (``Kind/[namespace/]name``), "" none; ``based_on``:
    its attribution as the Events carry it (``based on ...: delete-after 48h``);
    ``overlapped``: the other matching policies, best first; ``own_action``: policies
    matched but the object's own action annotations decide; ``exempt``: a policy would
    match it but ``lifecycle.cezary.dev/exempt`` keeps them all away (but enforced ones),
    and ``exempt_namespace`` names its Namespace when the exemption is the Namespace's.
    """

    decided_by: str = ""
    based_on: str = ""
    overlapped: tuple[str, ...] = ()
    own_action: bool = False
    exempt: bool = False
    exempt_namespace: str = ""
    #: The lifecycle keys a policy supplied (``lifecycle.cezary.dev/catch-up``, ...).
    from_policy: frozenset[str] = frozenset()
    inputs: Resolution | None = None
    #: ``held: LifecyclePolicy/team-a/keep is invalid`` when a hold stops every policy.
    held: str = ""
    #: The policies that would match but for the object's protection.
    protected: tuple[str, ...] = ()
    #: The other family's deciding policies (the first is ``decided_by``).
    also_decided_by: tuple[str, ...] = ()
    #: The deciding policy's ``deletionPropagation`` ("" the server's default).
    propagation: str = ""
    #: What the deciding policy's ``namespaceSelector`` made of the object's Namespace
    #: (``namespace team-a labels match env=preview``; "" none).
    namespace_selection: str = ""
    #: ``(policy, why)`` for each matching policy that leaves it alone for its own reasons
    #: (``created …, at or after its delete-at …``): the next one decides.
    left_alone: tuple[tuple[str, str], ...] = ()
    #: The deciding policy's ``since``, what it yielded and the due time it gives ("" none).
    since: str = ""

    @property
    def concerned(self) -> bool:
        """A policy decides it, is overlapped on it, holds it, leaves it alone, or is kept
        away by its exemption or protection."""
        return bool(
            self.decided_by
            or self.overlapped
            or self.exempt
            or self.held
            or self.protected
            or self.left_alone
        )


def _verdict(inputs: Resolution, candidate: bool, view: ObjectView) -> PolicyVerdict:
    policy = inputs.decided_by
    held = inputs.held
    deciders = tuple(str(ref) for ref in inputs.deciders)
    return PolicyVerdict(
        decided_by="" if policy is None else str(policy.ref),
        based_on="" if policy is None else attribution(policy),
        overlapped=tuple(str(ref) for ref in inputs.overlapped),
        own_action=inputs.annotation_driven,
        exempt=inputs.exempt and candidate,
        exempt_namespace=(
            view.namespace or ""
            if inputs.exempt
            and candidate
            and view.namespace_exempt
            and not is_exempt(view.annotations)
            else ""
        ),
        from_policy=frozenset(k for k, s in inputs.sources.items() if s is InputSource.POLICY),
        inputs=inputs,
        held="" if held is None else held.describe(),
        protected=tuple(str(ref) for ref in inputs.protected),
        also_decided_by=deciders[1:],
        propagation=(policy.deletion_propagation or "") if policy is not None else "",
        namespace_selection="" if policy is None else namespace_selection(policy, view),
        left_alone=tuple((str(spent.ref), spent.reason) for spent in inputs.left_alone),
        since=since_words(inputs),
    )


def since_words(inputs: Resolution) -> str:
    """``since timestamp(object.status.completionTime) = 2026-12-01T10:00:00Z: delete-after
    24h counts from it`` for the deciding policy's ``since`` ("" none). A tool knows nothing
    of when an object began to match: its ``matchedAt`` is the time of the run, said so."""
    for family in inputs.families:
        policy, since_ns = family.decided_by, family.since_ns
        if policy is None or policy.since is None or since_ns is None:
            continue
        source = " ".join(policy.since.source.split())
        words = f"since {source} = {format_rfc3339_nano(since_ns)}"
        if policy.since.reads_matched_at:
            words += " (matchedAt: the time of this run; the controller counts from when it "
            words += "first saw the object match)"
        return f"{words}: delete-after {policy.lifecycle.get('delete-after', '')} counts from it"
    return ""


#: Kinds whose plural is not the regular one (``kind.lower() + "s"`` and its spelling rules).
_PLURALS = {"Endpoints": "endpoints"}


def guess_resource(api_version: str, kind: str, namespaced: bool) -> ResourceType:
    """The resource type of a manifest (``plan`` has no discovery): the plural by the rules
    the API machinery uses for built-in and most custom kinds."""
    group, _, version = api_version.rpartition("/")
    lower = kind.lower()
    if kind in _PLURALS:
        plural = _PLURALS[kind]
    elif lower.endswith(("s", "x", "z", "ch", "sh")):
        plural = lower + "es"
    elif lower.endswith("y") and lower[-2:-1] not in tuple("aeiou"):
        plural = lower[:-1] + "ies"
    else:
        plural = lower + "s"
    return ResourceType(group, version, plural, kind, namespaced)


def judge(
    docs: PolicyDocs,
    resource: ResourceType,
    metadata: Mapping[str, Any],
    *,
    annotations: Mapping[str, str],
    facts: ObjectFacts,
    now_ns: int,
    settings: DecisionSettings,
    occurrences: int = 3,
    defaults: NamespaceDefaults | None = None,
    guardrails: GuardrailView | None = None,
    restart_marker: str | None = None,
    fields: Mapping[str, Any] | None = None,
    referenced_by: tuple[str, ...] | None = None,
) -> tuple[Explanation, PolicyVerdict]:
    """The controller's decision for one object and what its policies had to do with it.

    ``annotations``: the object's lifecycle annotations; ``metadata``: all of it (labels,
    every annotation, owner references), which matching reads; ``fields``: its other
    top-level fields, which conditions may read; ``restart_marker``: the Pod template's
    ``restartedAt`` (recurring policy restarts count from it); ``referenced_by``: what uses
    the object, when known (``referencedBy``; None: a condition reading it holds);
    ``defaults``: its Namespace's, whose ``exempt`` matching reads too.
    """
    policies = docs.policies
    view = docs.view(resource, metadata, fields) if policies.for_resource(resource) else None
    if view is not None and referenced_by is not None:
        view = replace(view, referenced_by=referenced_by)
    if view is not None and defaults is not None and defaults.exempt:
        view = replace(view, namespace_exempt=True)
    candidate = view is not None and policies.candidate(view)
    inputs = None
    if view is not None and candidate:
        inputs = policies.resolve(
            annotations,
            view,
            restart_marker=restart_marker,
            now_ns=now_ns,
            schedule_since_ns=docs.schedule_since,
        )
    explanation = explain(
        annotations=annotations,
        facts=facts,
        now_ns=now_ns,
        settings=settings,
        occurrences=occurrences,
        namespace_defaults=defaults,
        guardrails=guardrails,
        policy_inputs=inputs,
    )
    if inputs is None or view is None:
        return explanation, PolicyVerdict()
    return explanation, _verdict(inputs, candidate, view)


def condition_read(policy: Policy, view: ObjectView) -> str:
    """``condition read object.spec.replicas = 0`` (the fields beyond metadata the policy's
    condition read of the object), or "" when it reads none."""
    if policy.condition is None or not policy.condition.reads:
        return ""
    return "condition read " + ", ".join(read_values(policy.condition.reads, view.fields))


def policy_sources(verdict: PolicyVerdict) -> Mapping[str, str]:
    """For each lifecycle key the deciding policy supplied: ``policy <Kind/...>``."""
    if not verdict.decided_by:
        return {}
    return dict.fromkeys(verdict.from_policy, f"policy {verdict.decided_by}")


def refusals(
    docs: PolicyDocs,
    resource: ResourceType,
    metadata: Mapping[str, Any],
    fields: Mapping[str, Any] | None = None,
    referenced_by: tuple[str, ...] | None = None,
    namespace_exempt: bool = False,
) -> list[tuple[str, str]]:
    """``(policy, why)`` for every valid policy that may act on the type but not on this
    object (the first of core's filters that refused it, with the fields its condition read
    when that refused it; ``explain`` prints them), and every invalid one, leaving out the
    ``LifecyclePolicy`` objects of other namespaces. ``namespace_exempt``: the object's
    Namespace is exempt."""
    policies = docs.policies
    view = replace(
        docs.view(resource, metadata, fields),
        referenced_by=referenced_by,
        namespace_exempt=namespace_exempt,
    )
    out: list[tuple[str, str]] = []
    for policy in policies.for_resource(resource):
        if policy.ref.namespace not in (None, view.namespace):
            continue  # a LifecyclePolicy of another namespace never concerns it
        result = match(policy, view)
        if result.matched:
            continue
        why = str(result.reason)
        condition = policy.condition
        reads = condition is not None and condition.reads_references
        if result.reason is MatchReason.CONDITION and reads and referenced_by is not None:
            why = f"{why} (referencedBy: {', '.join(referenced_by) or 'none'})"
        if result.reason in (MatchReason.CONDITION_ERROR, MatchReason.REFERENCES_UNKNOWN) and (
            result.problem
        ):
            why = f"{why}: {result.problem}"
        elif result.reason in (MatchReason.NAMESPACE_SELECTOR, MatchReason.NAMESPACE_UNKNOWN):
            words = namespace_selection(policy, view)
            why = f"{why}: {words}" if words else why
        read = condition_read(policy, view)
        if read and result.reason in (MatchReason.CONDITION, MatchReason.CONDITION_ERROR):
            why = f"{why} ({read})"
        out.append((str(policy.ref), why))
    for invalid in policies.invalid:
        if invalid.ref.namespace not in (None, view.namespace):
            continue
        out.append((str(invalid.ref), "it is invalid and acts on nothing: " + invalid.message))
    return out
