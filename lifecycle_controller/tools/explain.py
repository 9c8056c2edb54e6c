"""``explain KIND/NAME``: everything the controller knows and would do about one object, live.

For one object it reads the metadata and the Events about it (and, only when a policy's
condition reads them, the fields that condition reads: docs/policies.md#what-a-condition-reads),
then
shows: each lifecycle annotation with its parsed meaning, the decision and its reason, the
due time (absolute and relative), the catch-up policy and what it means if the controller is
down at the due time, dry-run, whether a controller started with the given flags would even
watch the object, the latest Events, and, when nothing happened, why.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping, Sequence
from dataclasses import asdict, dataclass, field
from typing import Any

from lifecycle_controller.controller.watch.cache import CachedObject
from lifecycle_controller.core import DecisionSettings
from lifecycle_controller.core.decision.namespace_defaults import NamespaceDefaults
from lifecycle_controller.core.objects import keys
from lifecycle_controller.core.objects.copies import is_annotation_copy
from lifecycle_controller.core.objects.relevance import has_action
from lifecycle_controller.core.objects.resources import ResourceType
from lifecycle_controller.core.objects.scope import REQUIRED_VERBS, DiscoveredResource, ScopeConfig
from lifecycle_controller.core.policy.enforcement import defaults_for
from lifecycle_controller.core.policy.field_paths import fields_of, pick
from lifecycle_controller.core.text.gotext import format_go_duration
from lifecycle_controller.core.text.timestamps import (
    TimestampError,
    format_rfc3339_nano,
    format_rfc3339_seconds,
    parse_rfc3339,
)
from lifecycle_controller.core.tooling.describe import (
    catch_up_meaning,
    describe_annotations,
    relative,
)
from lifecycle_controller.core.tooling.plan import Explanation, GuardrailView, dry_run_state
from lifecycle_controller.kube import EVENTS, KubeClient, KubeError, NotFound
from lifecycle_controller.kube.discovery import fetch_discovery
from lifecycle_controller.tools.explain_policies import (
    PolicyReport,
    policy_lines,
    policy_report,
    why_no_policy,
)
from lifecycle_controller.tools.policy_live import RestartMarkers, judge_live, read_policies
from lifecycle_controller.tools.policy_view import PolicyDocs, policy_sources
from lifecycle_controller.tools.report import shortened
from lifecycle_controller.tools.status import namespace_defaults

__all__ = [
    "ExplainError",
    "ObjectReport",
    "explain_object",
    "render_report",
    "report_data",
    "resolve_resource",
    "split_target",
]

EVENT_LIMIT = 10


class ExplainError(Exception):
    """The object cannot be explained (unknown kind, not found, unreadable); one line."""


@dataclass
class ObjectReport:
    """What ``explain`` prints, as data (``-o json|yaml`` prints it as is)."""

    kind: str
    api_version: str
    namespace: str | None
    name: str
    uid: str
    annotations: list[dict[str, str]]
    decision: str
    action: str | None
    due: str | None
    due_relative: str | None
    upcoming: list[str]
    steps: list[str]
    problems: list[str]
    catch_up: str
    dry_run: str
    watched: bool
    scope: str
    events: list[dict[str, str]] = field(default_factory=list)
    why_nothing_happened: str | None = None
    #: Values taken from the object's Namespace (docs/annotations.md#namespace-defaults).
    inherited: list[str] = field(default_factory=list)
    #: What of its Namespace's an enforced policy acts regardless of.
    overrides: list[str] = field(default_factory=list)
    #: When the Upcoming warning is posted (``--warn-before`` or the annotation), if ever.
    warning: str | None = None
    #: The lifecycle policies' part (docs/policies.md); None when the cluster has none.
    policies: PolicyReport | None = None


def split_target(target: str) -> tuple[str, str]:
    """``(kind, name)`` of ``KIND/NAME``; ExplainError for any other form (a usage error)."""
    kind_name, slash, name = target.partition("/")
    if not slash or not kind_name or not name:
        raise ExplainError(f"expected KIND/NAME (e.g. deployment/web), got {target!r}")
    return kind_name, name


def resolve_resource(resources: Sequence[DiscoveredResource], name: str) -> ResourceType:
    """The resource type ``name`` means: a kind, plural or singular, optionally ``.group``.

    Matching ignores case, as kubectl does; an ambiguous name lists the candidates.
    """
    wanted = name.lower()
    candidates = []
    for resource in resources:
        if resource.is_subresource:
            continue
        kind, plural, group = resource.kind.lower(), resource.resource, resource.group
        names = {kind, plural, f"{kind}.{group}", f"{plural}.{group}", *resource.short_names}
        if wanted in names:
            candidates.append(resource)
    if not candidates:
        raise ExplainError(f"the server doesn't have a resource type {name!r}")
    core_first = sorted(candidates, key=lambda r: (r.group != "", r.group != "apps", r.key))
    exact = [r for r in core_first if wanted in (f"{r.kind.lower()}.{r.group}", r.key)]
    chosen = exact or core_first
    groups = {r.group for r in chosen}
    if len(groups) > 1 and chosen[0].group not in ("", "apps"):
        keys_ = ", ".join(sorted(r.key for r in chosen))
        raise ExplainError(f"{name!r} is ambiguous: say which of {keys_}")
    return chosen[0].watched()


def _scope(
    resource: ResourceType,
    verbs: frozenset[str],
    obj: CachedObject,
    scope: ScopeConfig,
    settings: DecisionSettings,
) -> tuple[bool, str]:
    """Whether a controller with these flags watches and acts on the object, and why."""
    if not verbs.issuperset(REQUIRED_VERBS):
        needed = ", ".join(sorted(REQUIRED_VERBS))
        return False, f"{resource.key} does not serve all of {needed}, so it is never watched"
    if not scope.is_resource_allowed(resource.key):
        return False, f"{resource.key} is not in the resource watch list (or is ignored)"
    if not scope.allows_object(resource, obj.namespace, obj.name):
        where = obj.namespace or obj.name
        return False, f"namespace {where!r} is outside the namespace watch list (or is ignored)"
    if not settings.act_on_annotation_copies and is_annotation_copy(resource, obj.controller_owner):
        owner = obj.controller_owner[1] if obj.controller_owner else "owner"
        return False, f"its annotations are copies made by its {owner} (ignored by default)"
    return True, f"{resource.key} is watched" + (
        f" in namespace {obj.namespace}" if obj.namespace else ""
    )


def _catch_up(
    annotations: Mapping[str, str],
    action: str | None,
    settings: DecisionSettings,
    defaults: NamespaceDefaults | None = None,
    sources: Mapping[str, str] | None = None,
) -> str:
    """The catch-up line; ``sources`` names a policy for the keys it supplied."""
    value = annotations.get(keys.CATCH_UP)
    if value is not None:
        source = (sources or {}).get(keys.CATCH_UP, "annotation")
    elif defaults is not None and keys.CATCH_UP in defaults.values:
        value = defaults.values[keys.CATCH_UP]
        source = f"default of namespace {defaults.namespace}"
    else:
        policy = settings.restart_catch_up if action == "restart" else settings.delete_catch_up
        value = policy.mode.value if policy.window_ns == 0 else format_go_duration(policy.window_ns)
        source = f"default of --{action or 'delete'}-catch-up"
    try:
        meaning = catch_up_meaning(value)
    except ValueError as error:
        return f"{value} ({source}): invalid: {error}"
    return f"{value} ({source}); if the controller is down at the due time, {meaning}"


def _dry_run(
    annotations: Mapping[str, str],
    settings: DecisionSettings,
    defaults: NamespaceDefaults | None = None,
    sources: Mapping[str, str] | None = None,
) -> str:
    """The dry-run line, from the same state as the decision's (and ``status``'s) flag."""
    state = dry_run_state(annotations, settings, defaults)
    if state.source == "annotation" and keys.DRY_RUN in (sources or {}):
        state = dataclasses.replace(state, source=(sources or {})[keys.DRY_RUN])
    if state.value is None:
        where = "" if state.source == "annotation" else f" ({state.source})"
        return f"invalid value {state.text!r}{where}: nothing is done until it is fixed"
    if state.source == "default":
        return "no"
    if state.value:
        return f"yes ({state.source})"
    return f"no ({state.source} says false)"


def _why_nothing(
    annotations: Mapping[str, str],
    explanation: Explanation,
    watched: bool,
    scope: str,
    obj: CachedObject,
    policies: PolicyReport | None = None,
) -> str | None:
    """Why nothing will happen (None: something will); ``annotations`` are the inputs the
    decision took (a deciding policy's merged in)."""
    if not watched:
        return f"this controller would not look at it: {scope}"
    if obj.deletion_timestamp is not None:
        return "the object is being deleted; the controller leaves it alone"
    if not has_action(annotations):
        return "it has no action annotation (delete-* or restart-*)" + why_no_policy(policies)
    if explanation.refused and policies is not None and policies.decided_by:
        return f"max-delete-ttl refuses {policies.decided_by}'s deletion: {explanation.refused}"
    if explanation.problems:
        return "a problem blocks it: " + explanation.problems[0]
    if explanation.dry_run:
        return "dry-run: the controller only records what it would do, as Events"
    if explanation.action is None:
        return explanation.summary
    return None


def _second(stamp: str) -> str:
    """An Event time to the second (Events mix MicroTime and plain timestamps)."""
    try:
        return format_rfc3339_seconds(parse_rfc3339(stamp))
    except TimestampError:
        return stamp


async def _read_fields(
    kube: KubeClient,
    docs: PolicyDocs,
    resource: ResourceType,
    namespace: str | None,
    name: str,
) -> dict[str, Any] | None:
    """The fields beyond metadata that the policies' conditions for ``resource`` read (the
    whole object is read only then, as the controller's informers do)."""
    reads = docs.policies.reads(resource)
    if not reads:
        return None
    return pick(fields_of(await kube.get(resource, namespace, name)), reads)


async def _events(kube: KubeClient, namespace: str, name: str, uid: str) -> list[dict[str, str]]:
    listing = await kube.request(
        "GET",
        EVENTS.collection_path(namespace),
        query=[("fieldSelector", f"regarding.name={name}")],
    )
    found = []
    for item in listing.get("items") or ():
        regarding = item.get("regarding") or {}
        if uid and regarding.get("uid") not in (None, "", uid):
            continue
        series = item.get("series") or {}
        when = (
            series.get("lastObservedTime")
            or item.get("eventTime")
            or item.get("deprecatedLastTimestamp")
            or item.get("deprecatedFirstTimestamp")
            or (item.get("metadata") or {}).get("creationTimestamp")
            or ""
        )
        found.append(
            {
                "time": _second(str(when)),
                "type": str(item.get("type", "")),
                "reason": str(item.get("reason", "")),
                "note": str(item.get("note", "")),
                "count": str(series.get("count", 1)),
                "by": str(item.get("reportingController", "")),
            }
        )
    found.sort(key=lambda event: event["time"])
    return found[-EVENT_LIMIT:]


async def explain_object(
    kube: KubeClient,
    target: str,
    *,
    namespace: str | None,
    scope: ScopeConfig,
    settings: DecisionSettings,
    now_ns: int,
    occurrences: int = 3,
    guardrails: GuardrailView | None = None,
) -> ObjectReport:
    """Read one object (``KIND/NAME``) and explain it; raises ExplainError."""
    kind_name, name = split_target(target)
    try:
        discovered = (await fetch_discovery(kube)).resources
        resource = resolve_resource(discovered, kind_name)
        verbs = next((r.verbs for r in discovered if r.watched() == resource), frozenset[str]())
        where = (namespace or kube.default_namespace) if resource.namespaced else None
        try:
            response = await kube.get_metadata(resource, where, name)
        except NotFound:
            place = f" in namespace {where}" if where else ""
            raise ExplainError(f'{resource.key} "{name}" not found{place}') from None
        metadata = response.get("metadata") or {}
        obj = CachedObject.from_metadata(metadata)
        events = await _events(kube, where or "default", name, obj.uid)
        defaults = await _namespace_defaults(kube, where)
        watched, scope_text = _scope(resource, verbs, obj, scope, settings)
        read = await read_policies(kube, now_ns=now_ns)
        docs = read.docs if watched else PolicyDocs()  # an unwatched object: no policy sees it
        fields = await _read_fields(kube, docs, resource, where, name)
        markers = RestartMarkers()
        explanation, verdict = await judge_live(
            kube,
            markers,
            docs,
            resource,
            metadata,
            now_ns=now_ns,
            settings=settings,
            occurrences=occurrences,
            defaults=defaults,
            guardrails=guardrails,
            fields=fields,
        )
        referenced_by = (
            await markers.referenced_by(kube, resource, metadata)
            if docs.policies.reads_references()
            else None
        )
    except KubeError as error:
        raise ExplainError(str(error)) from error
    annotations = dict(obj.annotations)
    inputs = annotations if verdict.inputs is None else dict(verdict.inputs.annotations)
    taken = defaults if verdict.inputs is None else defaults_for(verdict.inputs.primary, defaults)
    sources = policy_sources(verdict)
    policies = policy_report(
        docs,
        verdict,
        resource,
        metadata,
        unreadable=read.problem,
        fields=fields,
        referenced_by=referenced_by,
        namespace_exempt=defaults is not None and defaults.exempt,
        refused=explanation.refused,
    )
    due = explanation.due_ns
    report = ObjectReport(
        kind=resource.kind,
        api_version=resource.api_version,
        namespace=where,
        name=name,
        uid=obj.uid,
        annotations=[
            {"key": key.removeprefix(keys.PREFIX), "value": value, "meaning": meaning}
            for key, value, meaning in describe_annotations(
                annotations,
                now_ns=now_ns,
                local_zone=settings.local_zone,
                namespace=(resource.group, resource.kind) == ("", "Namespace"),
            )
        ],
        decision=explanation.summary,
        action=explanation.action,
        due=None if due is None else format_rfc3339_nano(due),
        due_relative=None if due is None else relative(due, now_ns),
        upcoming=[format_rfc3339_nano(instant) for instant in explanation.upcoming],
        steps=list(explanation.steps),
        problems=list(explanation.problems),
        catch_up=_catch_up(inputs, explanation.action, settings, taken, sources),
        dry_run=_dry_run(inputs, settings, taken, sources),
        watched=watched,
        scope=scope_text,
        events=events,
        why_nothing_happened=_why_nothing(inputs, explanation, watched, scope_text, obj, policies),
        inherited=list(explanation.inherited),
        overrides=list(explanation.overrides),
        warning=_warning(explanation, now_ns),
        policies=policies,
    )
    return shortened(report)


def _warning(explanation: Explanation, now_ns: int) -> str | None:
    warn_at, due = explanation.warn_at_ns, explanation.due_ns
    if warn_at is None or due is None:
        return None
    reason = "UpcomingDeletion" if explanation.action == "delete" else "UpcomingRestart"
    lead = format_go_duration(due - warn_at)
    return (
        f"{reason} at {format_rfc3339_nano(warn_at)} ({relative(warn_at, now_ns)}, {lead} before)"
    )


async def _namespace_defaults(kube: KubeClient, namespace: str | None) -> NamespaceDefaults | None:
    """The defaults of the object's Namespace; None when it has none or cannot be read."""
    if namespace is None:
        return None
    try:
        return (await namespace_defaults(kube, namespace)).get(namespace)
    except KubeError:
        return None  # not readable by this user: explain the object without them


def _field(label: str, value: str) -> str:
    return f"{label + ':':<14}{value}"


def render_report(report: ObjectReport) -> str:
    """The report as text for people, in the spirit of ``kubectl describe``."""
    where = f"{report.namespace}/{report.name}" if report.namespace else report.name
    lines = [
        _field("Object", f"{report.kind} {where} ({report.api_version}, uid {report.uid})"),
        _field("Watched", ("yes: " if report.watched else "no: ") + report.scope),
        "Annotations:",
    ]
    if report.annotations:
        width = max(len(a["key"]) for a in report.annotations)
        value_width = min(max(len(a["value"]) for a in report.annotations), 30)
        for line in report.annotations:
            lines.append(
                f"  {line['key']:<{width}}  {line['value']:<{value_width}}  {line['meaning']}"
            )
    else:
        lines.append("  (no lifecycle annotations)")
    lines.extend(policy_lines(report.policies))
    lines.append(_field("Decision", report.decision))
    for step in report.steps:
        lines.append(_field("  first", step))
    if report.due is not None:
        lines.append(_field("Due", f"{report.due} ({report.due_relative})"))
    following = report.upcoming[1:] if report.upcoming[:1] == [report.due] else report.upcoming
    for instant in following:
        lines.append(_field("  then", instant))
    if report.warning is not None:
        lines.append(_field("Warning", report.warning))
    lines.append(_field("Catch-up", report.catch_up))
    lines.append(_field("Dry-run", report.dry_run))
    for inherited in report.inherited:
        lines.append(_field("Inherited", inherited))
    for override in report.overrides:
        lines.append(_field("Enforced", override.removeprefix("enforced: ")))
    for problem in report.problems:
        lines.append(_field("Problem", problem))
    if report.why_nothing_happened:
        lines.append(_field("Why nothing", report.why_nothing_happened))
    lines.append(f"Events (last {EVENT_LIMIT}):" if report.events else "Events:       none")
    for event in report.events:
        count = f" x{event['count']}" if event["count"] not in ("", "1") else ""
        lines.append(
            f"  {event['time']}  {event['type']:<7}  {event['reason']}{count}: {event['note']}"
        )
    return "\n".join(lines)


def report_data(report: ObjectReport) -> dict[str, Any]:
    """The report for ``-o json|yaml``."""
    return asdict(report)
