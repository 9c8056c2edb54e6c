"""``explain``'s part about lifecycle policies: who decides, who was overlapped, who left it alone.

Built from the policies read from the cluster and the verdict of
:func:`~lifecycle_controller.tools.policy_view.judge`; the reasons a policy leaves an object
alone are core's match reasons (:class:`~lifecycle_controller.core.policy.match.MatchReason`),
so they name the very filter the controller stops at.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from lifecycle_controller.core.objects.resources import ResourceType
from lifecycle_controller.core.policy.in_force import object_view
from lifecycle_controller.tools.policy_view import (
    PolicyDocs,
    PolicyVerdict,
    condition_read,
    refusals,
)

__all__ = ["PolicyReport", "policy_lines", "policy_report", "why_no_policy"]


@dataclass
class PolicyReport:
    """What ``explain`` says of the policies (``-o json|yaml``: the ``policies`` field)."""

    decided_by: str | None
    based_on: str | None
    overlapped: list[str]
    exempt: bool
    own_action: bool
    #: The exempt Namespace, when the exemption is its Namespace's ("" none).
    exempt_namespace: str = ""
    #: ``{"policy": ..., "why": ...}`` for each policy that may act on the type but not on it.
    not_matched: list[dict[str, str]] = field(default_factory=list)
    #: Why the policies could not be read (the object is then judged without them).
    unreadable: str | None = None
    #: ``held: LifecyclePolicy/team-a/keep is invalid`` when a hold stops the policies.
    held: str | None = None
    #: Policies that would match it but for its protection.
    protected: list[str] = field(default_factory=list)
    #: The other action family's deciding policy, when two decide it.
    also_decided_by: list[str] = field(default_factory=list)
    #: The deciding policy's ``deletionPropagation`` (None: the server's default).
    propagation: str | None = None
    #: What its ``namespaceSelector`` made of the Namespace (None: it has none).
    namespace_selection: str | None = None
    #: ``condition read object.spec.replicas = 0``: the fields beyond metadata the deciding
    #: policy's condition read (None when it reads none).
    condition_read: str | None = None
    #: Why ``max-delete-ttl`` refuses the deciding policy's deletion (the words of its
    #: ``Refused`` condition; None: it does not).
    refused: str | None = None
    #: ``{"policy": ..., "why": ...}`` for each matching policy that leaves it alone for its
    #: own reasons (created after its ``delete-at``...): the next one decides.
    left_alone: list[dict[str, str]] = field(default_factory=list)
    #: The deciding policy's ``since``, its value and what the deletion counts from (None:
    #: it has none; docs/policies.md#since).
    since: str | None = None


def policy_report(
    docs: PolicyDocs,
    verdict: PolicyVerdict,
    resource: ResourceType,
    metadata: Mapping[str, Any],
    *,
    unreadable: str | None = None,
    fields: Mapping[str, Any] | None = None,
    referenced_by: tuple[str, ...] | None = None,
    namespace_exempt: bool = False,
    refused: str = "",
) -> PolicyReport | None:
    """The report, or None when no policy exists at all (nothing is said about policies);
    ``namespace_exempt``: the object's Namespace is exempt."""
    if not docs.any and unreadable is None:
        return None
    return PolicyReport(
        decided_by=verdict.decided_by or None,
        based_on=verdict.based_on or None,
        overlapped=list(verdict.overlapped),
        exempt=verdict.exempt,
        own_action=verdict.own_action,
        exempt_namespace=verdict.exempt_namespace,
        not_matched=[
            {"policy": policy, "why": why}
            for policy, why in refusals(
                docs, resource, metadata, fields, referenced_by, namespace_exempt
            )
        ],
        unreadable=unreadable,
        held=verdict.held or None,
        protected=list(verdict.protected),
        also_decided_by=list(verdict.also_decided_by),
        propagation=verdict.propagation or None,
        namespace_selection=verdict.namespace_selection or None,
        condition_read=_deciding_read(docs, verdict, resource, metadata, fields) or None,
        refused=refused or None,
        left_alone=[{"policy": ref, "why": why} for ref, why in verdict.left_alone],
        since=verdict.since or None,
    )


def _deciding_read(
    docs: PolicyDocs,
    verdict: PolicyVerdict,
    resource: ResourceType,
    metadata: Mapping[str, Any],
    fields: Mapping[str, Any] | None,
) -> str:
    deciding = [p for p in docs.policies.valid if str(p.ref) == verdict.decided_by]
    if not deciding:
        return ""
    return condition_read(deciding[0], object_view(resource, metadata, fields))


def _field(label: str, value: str) -> str:
    return f"{label + ':':<14}{value}"


def policy_lines(report: PolicyReport | None) -> list[str]:
    """The report's lines in ``explain``'s text (none without policies)."""
    if report is None:
        return []
    if report.unreadable is not None:
        return [_field("Policies", f"not read ({report.unreadable}); judged without them")]
    if report.decided_by:
        lines = [_field("Policy", f"{report.decided_by} decides ({report.based_on})")]
        if report.namespace_selection:
            lines.append(_field("Namespace", f"{report.namespace_selection} (namespaceSelector)"))
        if report.condition_read:
            lines.append(_field("Condition", report.condition_read))
        if report.since:
            lines.append(_field("Since", report.since))
        if report.propagation:
            lines.append(_field("Propagation", f"{report.propagation} (its deletionPropagation)"))
        if report.refused:
            lines.append(_field("Refused", f"{report.refused}: it deletes nothing here"))
        lines += [
            _field("Policy", f"{ref} decides its other action family")
            for ref in report.also_decided_by
        ]
    elif report.held:
        lines = [_field("Policy", f"none acts: {report.held}")]
    elif report.exempt and report.exempt_namespace:
        lines = [_field("Policy", f"left alone: namespace {report.exempt_namespace} is exempt")]
    elif report.exempt:
        lines = [_field("Policy", "none: it is exempt (lifecycle.cezary.dev/exempt)")]
    elif report.own_action:
        lines = [_field("Policy", "none: its own action annotations decide")]
    elif report.left_alone:
        lines = [_field("Policy", "none decides: the policies that match leave it alone")]
    else:
        lines = [_field("Policy", "none matches it")]
    for ref in report.overlapped:
        lines.append(_field("Overlapped", f"{ref} (matches too, but does not decide)"))
    for spent in report.left_alone:
        lines.append(
            _field("Left alone", f"by {spent['policy']}: {spent['why']} (the next one decides)")
        )
    for refused in report.not_matched:
        lines.append(_field("Not matched", f"{refused['policy']}: {refused['why']}"))
    for ref in report.protected:
        lines.append(_field("Protected", f"{ref} would match, but the object is protected"))
    return lines


def why_no_policy(report: PolicyReport | None) -> str:
    """Words for "why nothing" about the policies ("" when none concern the object)."""
    if report is None or report.decided_by:
        return ""
    if report.held:
        return f"; {report.held}"
    if report.exempt and report.exempt_namespace:
        return (
            f"; namespace {report.exempt_namespace} is exempt from every lifecycle policy "
            "not enforced"
        )
    if report.exempt:
        return "; it is exempt from every lifecycle policy"
    if report.left_alone:
        first = report.left_alone[0]
        return f"; left alone by {first['policy']}: {first['why']}"
    if report.not_matched:
        first = report.not_matched[0]
        return f"; no lifecycle policy matches it ({first['policy']}: {first['why']})"
    return ""
