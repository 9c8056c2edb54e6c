"""``policies``: the lifecycle policies in a cluster, and ``policies try``: what one would do.

``policies`` lists both kinds with what the controller reports in their ``status``
(docs/policies.md#status): matched and overlapped objects, the next action and the
conditions that hold (``Invalid``, ``Unwatched``, ``Held``, ``Refused``...) with their
messages; a policy the controller has not reported on
yet shows its own parse (an invalid one says so).

``policies try -f`` reads policy manifests, lists the cluster's metadata (as ``status`` does,
with the tried policies in force beside the existing ones: a tried policy replaces the one of
the same kind, namespace and name) and, for every object a tried policy matches, shows what
the controller would do: the same decision path (:func:`~.policy_live.judge_live`), so
windows, catch-up, namespace caps and the guardrails the tools know of apply, and the POLICY
column names who decides when an annotation or another policy wins instead. A tried policy
whose condition reads ``referencedBy`` is matched on what uses each object, read from its
namespace's Pods and workloads as ``explain`` reads them (without it every object would be
held as unknown). It writes nothing. The totals count, per tried policy, what it decides and
what it leaves to others, and say the deletions ``max-delete-ttl`` would refuse it in the
words of its ``Refused`` condition.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import asdict, dataclass, field, replace
from typing import Any

from lifecycle_controller.controller.watch.cache import CachedObject
from lifecycle_controller.core import DecisionSettings
from lifecycle_controller.core.decision.namespace_defaults import NamespaceDefaults
from lifecycle_controller.core.objects.resources import ResourceType
from lifecycle_controller.core.objects.scope import ScopeConfig, plan_resources
from lifecycle_controller.core.policy.coverage import NO_SINCE
from lifecycle_controller.core.policy.in_force import object_view, policy_from_manifest
from lifecycle_controller.core.policy.limit import PolicyLimit
from lifecycle_controller.core.policy.match import HOLDING, MatchReason, match, matches_statically
from lifecycle_controller.core.policy.model import Policy, PolicyInvalid
from lifecycle_controller.core.policy.refused import refused_condition
from lifecycle_controller.core.text.gotext import format_go_duration
from lifecycle_controller.core.text.timestamps import parse_rfc3339
from lifecycle_controller.core.tooling.plan import GuardrailView
from lifecycle_controller.kube import KubeClient, KubeError
from lifecycle_controller.kube.discovery import fetch_discovery
from lifecycle_controller.tools.policy_live import (
    RestartMarkers,
    judge_live,
    read_fields,
    read_policies,
    with_live_namespaces,
)
from lifecycle_controller.tools.policy_view import PolicyDocs, policy_docs
from lifecycle_controller.tools.report import Row, render, row_for, shortened
from lifecycle_controller.tools.status import list_kept, namespace_defaults

__all__ = [
    "PolicyRow",
    "Totals",
    "TryReport",
    "list_policies",
    "policy_rows",
    "render_policies",
    "render_try",
    "totals_line",
    "try_policies",
]


# --------------------------------------------------------------------------- policies


@dataclass(frozen=True)
class PolicyRow:
    """One policy as ``policies`` prints it."""

    kind: str
    namespace: str
    name: str
    action: str
    matched: int | None
    overlapped: int | None
    next_action: str
    #: The conditions that hold (``Ready``, ``Invalid``, ``Unwatched``), or ``Ready=False``.
    conditions: list[str]
    #: The conditions' messages worth reading (every problem of an invalid one).
    detail: str
    #: Whether the report is about the policy's current generation.
    reported: bool
    status: Mapping[str, Any] = field(default_factory=dict)


def action_summary(policy: Policy) -> str:
    """``delete-after 48h`` and its modifiers (``dry-run true``, ...), as the spec says."""
    parts = [f"{key} {value}" for key, value in policy.lifecycle.items()]
    action = [p for p in parts if p.split()[0] == _action_key(policy)]
    return ", ".join(action + [p for p in parts if p not in action])


#: The actions that cover only what existed before their time.
_ONE_OFF = frozenset({"delete-at", "restart-at"})
#: Every object a recurring restart decides falls due at once, each occurrence.
_RECURRING = frozenset({"restart-cron", "restart-every"})


def limit_spread(restarts: int, limit: PolicyLimit) -> str:
    """How long after each occurrence the last of ``restarts`` workloads goes under
    ``limit`` (``3h0m0s``), "" when they all go at once."""
    turns = -(-restarts // limit.actions) - 1  # the windows after the first
    return format_go_duration(turns * limit.window_ns) if turns > 0 else ""


def _action_key(policy: Policy) -> str:
    return next(k for k in policy.lifecycle if k.startswith(("delete-", "restart-")))


def _next(status: Mapping[str, Any]) -> str:
    raw = status.get("nextAction")
    if not isinstance(raw, Mapping):
        return "-"
    where = "/".join(str(p) for p in (raw.get("namespace"), raw.get("name")) if p)
    return f"{raw.get('at', '')} {raw.get('action', '')} {raw.get('kind', '')}/{where}"


def _conditions(status: Mapping[str, Any]) -> tuple[list[str], list[str]]:
    held: list[str] = []
    messages: list[str] = []
    for condition in status.get("conditions") or ():
        if not isinstance(condition, Mapping):
            continue
        kind, state = str(condition.get("type", "")), condition.get("status")
        if state == "True":
            held.append(kind)
            if kind != "Ready" and condition.get("message"):
                messages.append(f"{kind}: {condition['message']}")
        elif kind == "Ready":
            held.append("Ready=False")
    return held, messages


def _row(parsed: Policy | PolicyInvalid, status: Mapping[str, Any]) -> PolicyRow:
    reported = status.get("observedGeneration") == parsed.generation
    held, messages = _conditions(status) if reported else ([], [])
    if isinstance(parsed, PolicyInvalid):
        action = "-"
        if not reported:  # the controller has not said so yet: its own parse does
            held, messages = ["Invalid"], [f"Invalid: {parsed.message}"]
    else:
        action = action_summary(parsed)
    if not reported:
        messages.append("not reported by the controller for this generation yet")

    def count(name: str) -> int | None:
        value = status.get(name)
        return value if reported and isinstance(value, int) else None

    return PolicyRow(
        kind=str(parsed.ref.kind),
        namespace=parsed.ref.namespace or "",
        name=parsed.ref.name,
        action=action,
        matched=count("matched"),
        overlapped=count("overlapped"),
        next_action=_next(status) if reported else "-",
        conditions=held,
        detail="; ".join(messages),
        reported=reported,
        status=dict(status),
    )


def policy_rows(docs: PolicyDocs, namespace: str | None = None) -> list[PolicyRow]:
    """A row per policy (cluster ones, and the namespaced ones of ``namespace`` if given)."""
    everything: list[Policy | PolicyInvalid] = [*docs.policies.valid, *docs.policies.invalid]
    rows = [
        shortened(_row(parsed, docs.statuses.get(parsed.ref, {})))
        for parsed in everything
        if namespace is None or parsed.ref.namespace in (None, namespace)
    ]
    return sorted(rows, key=lambda r: (r.kind != "ClusterLifecyclePolicy", r.namespace, r.name))


async def list_policies(kube: KubeClient, *, now_ns: int, namespace: str | None) -> list[PolicyRow]:
    """The policies in the cluster; raises ``ValueError`` with the reason if unreadable."""
    read = await read_policies(kube, now_ns=now_ns)
    if read.problem is not None:
        raise ValueError(f"lifecycle policies cannot be read: {read.problem}")
    return policy_rows(read.docs, namespace)


def _table(lines: Sequence[tuple[str, ...]]) -> str:
    widths = [max(len(line[i]) for line in lines) for i in range(len(lines[0]) - 1)]
    out = []
    for line in lines:
        cells = [cell.ljust(width) for cell, width in zip(line, widths, strict=False)]
        out.append("  ".join([*cells, line[-1]]).rstrip())
    return "\n".join(out)


def render_policies(rows: Sequence[PolicyRow], output: str) -> str:
    """The rows as a table, or JSON/YAML."""
    if output != "table":
        return _dump([asdict(row) for row in rows], output)
    if not rows:
        return "No lifecycle policies."
    header = ("KIND", "NAMESPACE", "NAME", "ACTION", "MATCHED", "OVERLAPPED", "NEXT ACTION")
    lines: list[tuple[str, ...]] = [(*header, "CONDITIONS", "DETAIL")]
    for row in rows:
        lines.append(
            (
                row.kind,
                row.namespace or "-",
                row.name,
                row.action,
                "-" if row.matched is None else str(row.matched),
                "-" if row.overlapped is None else str(row.overlapped),
                row.next_action,
                ",".join(row.conditions) or "-",
                row.detail,
            )
        )
    return _table(lines)


def _dump(data: Any, output: str) -> str:
    import json

    import yaml

    if output == "json":
        return json.dumps(data, indent=2)
    return yaml.safe_dump(data, sort_keys=False).rstrip()


# --------------------------------------------------------------------------- try


@dataclass
class Totals:
    """What one tried policy would do (``policies try``'s totals)."""

    matched: int = 0
    decides: int = 0
    deletions: int = 0
    restarts: int = 0
    due_now: int = 0
    dry_run: int = 0
    problems: int = 0
    own_annotations: int = 0
    other_policy: int = 0
    exempt: int = 0
    #: Left alone because their Namespace is exempt.
    exempt_namespace: int = 0
    owned: int = 0
    #: Held: its condition failed on them, or an invalid policy holds them (nothing acts).
    held: int = 0
    #: It would match them but for their protection (a system namespace...).
    protected: int = 0
    #: It matches them but leaves them alone for its own reasons (created after its
    #: ``delete-at``, ``restart-at`` done): the next contender decides.
    spent: int = 0
    #: Its one-off action (``delete-at 2026-12-01T00:00:00Z``); "": a relative one.
    one_off: str = ""
    #: It matches them, but its ``since`` has no value for them: left alone, listed apart.
    no_since: list[str] = field(default_factory=list)
    #: Its limit (``spec.limit`` or ``--policy-default-limit``), ``ACTIONS/WINDOW``; "": none.
    limit: str = ""
    #: The actions due now that its limit would hold at first (they go as the window frees).
    limit_holds: int = 0
    #: A recurring restart whose every occurrence restarts more workloads than its limit lets
    #: go in one window: how long after the occurrence the last of them goes (a fleet spread
    #: over hours; "": it fits).
    limit_spread: str = ""
    #: The objects it decides whose deletion ``max-delete-ttl`` refuses, by cause.
    refused: dict[str, int] = field(default_factory=dict)


@dataclass
class TryReport:
    """The objects the tried policies match, and the totals per tried policy."""

    policies: list[str]
    rows: list[Row] = field(default_factory=list)
    totals: dict[str, Totals] = field(default_factory=dict)
    unreadable: list[str] = field(default_factory=list)


def _combined(
    tried: Sequence[Mapping[str, Any]], live: Iterable[Mapping[str, Any]], now_ns: int
) -> PolicyDocs:
    """The live policies with the tried ones in force (a tried one replaces its namesake);
    a tried generation counts as accepted now."""
    refs = {policy_from_manifest(m).ref for m in tried}
    kept = [m for m in live if policy_from_manifest(m).ref not in refs]
    fresh = [{k: v for k, v in m.items() if k != "status"} for m in tried]
    return policy_docs([*kept, *fresh], now_ns=now_ns)


def _count(totals: Totals, row: Row, ref: str, now_ns: int) -> None:
    """Count one object a tried policy (``ref``) matches."""
    totals.matched += 1
    if row.problems:
        totals.problems += 1
    if row.held and row.policy != ref:
        totals.held += 1
        return
    left = [spent["why"] for spent in row.left_alone if spent["policy"] == ref]
    if left and left[0].startswith(NO_SINCE):
        name = f"{row.namespace}/{row.name}" if row.namespace else row.name
        totals.no_since.append(f"{row.kind} {name}: {left[0].removeprefix(NO_SINCE + ': ')}")
        return
    if left:
        totals.spent += 1
        return
    if row.policy != ref and ref not in row.also_decided_by:
        if row.own_action:
            totals.own_annotations += 1
        else:
            totals.other_policy += 1
        return
    totals.decides += 1
    if row.refused and row.policy == ref:
        totals.refused[row.refused] = totals.refused.get(row.refused, 0) + 1
    if row.dry_run:
        totals.dry_run += 1
    if row.action == "delete":
        totals.deletions += 1
    elif row.action == "restart":
        totals.restarts += 1
    if row.action and row.next and parse_rfc3339(row.next) <= now_ns:
        totals.due_now += 1


@dataclass(frozen=True)
class _Pass:
    """What every object of one ``try`` is judged with."""

    kube: KubeClient
    docs: PolicyDocs
    scope: ScopeConfig
    settings: DecisionSettings
    now_ns: int
    guardrails: GuardrailView | None
    defaults: Mapping[str, NamespaceDefaults]
    markers: RestartMarkers = field(default_factory=RestartMarkers)


async def _try_one(
    run: _Pass,
    resource: ResourceType,
    metadata: Mapping[str, Any],
    mine: Sequence[Policy],
    report: TryReport,
    fields: Mapping[str, Any] | None = None,
) -> None:
    """Judge one object a tried policy may match (``fields``: what the conditions read of it
    beyond metadata); add its row and count it."""
    obj = CachedObject.from_metadata(metadata)
    if not run.scope.allows_object(resource, obj.namespace, obj.name):
        return  # the controller never sees it
    defaults = run.defaults.get(obj.namespace) if obj.namespace else None
    view = run.docs.view(resource, metadata, fields)
    if defaults is not None and defaults.exempt:
        view = replace(view, namespace_exempt=True)
    if any(p.condition is not None and p.condition.reads_references for p in mine):
        # What uses it, read as the controller's index has it (None: unreadable, held).
        found = await run.markers.referenced_by(run.kube, resource, metadata)
        view = replace(view, referenced_by=found)
    protection = run.docs.policies.protection
    results = {str(p.ref): match(p, view, protection) for p in mine}
    matched = [ref for ref, result in results.items() if result.matched]
    failing = [  # a condition error, an unknown Namespace's labels or users: held
        ref for ref, result in results.items() if result.reason in HOLDING
    ]
    for ref, result in results.items():
        if result.reason is MatchReason.EXEMPT:
            report.totals[ref].exempt += 1
        elif result.reason is MatchReason.NAMESPACE_EXEMPT:
            report.totals[ref].exempt_namespace += 1
        elif result.reason is MatchReason.OWNED:
            report.totals[ref].owned += 1
        elif result.reason is MatchReason.PROTECTED:
            report.totals[ref].protected += 1
    for ref in failing:
        report.totals[ref].held += 1
    if not matched and not failing:
        return
    explanation, verdict = await judge_live(
        run.kube,
        run.markers,
        run.docs,
        resource,
        metadata,
        now_ns=run.now_ns,
        settings=run.settings,
        defaults=defaults,
        guardrails=run.guardrails,
        fields=fields,
    )
    row = row_for(
        api_version=resource.api_version,
        kind=resource.kind,
        namespace=obj.namespace,
        name=obj.name,
        explanation=explanation,
        verdict=verdict,
    )
    report.rows.append(row)
    for ref in matched:
        _count(report.totals[ref], row, ref, run.now_ns)


async def _defaults(
    kube: KubeClient, namespace: str | None, report: TryReport
) -> Mapping[str, NamespaceDefaults]:
    try:
        return await namespace_defaults(kube, namespace)
    except KubeError as error:
        report.unreadable.append(f"namespaces (namespace defaults are not shown): {error}")
        return {}


def _keeper(resource: ResourceType, mine: Sequence[Policy]) -> Callable[[Mapping[str, Any]], bool]:
    """Keep what a tried policy could match on resource, scope, names and labels."""

    def keep(metadata: Mapping[str, Any]) -> bool:
        view = object_view(resource, metadata)
        return any(matches_statically(p, view) for p in mine)

    return keep


async def _list_selected(
    kube: KubeClient, resource: ResourceType, namespace: str | None, mine: Sequence[Policy]
) -> list[Mapping[str, Any]]:
    """What the tried policies could match of ``resource``. When each has a label selector,
    the API server selects (one list per distinct selector, an object once): only the
    matching objects cross the wire (docs/policies.md#what-a-policy-costs)."""
    keep = _keeper(resource, mine)
    queries = {p.selector.query() for p in mine if p.selector is not None}
    if "" in queries or any(p.selector is None for p in mine):
        return await list_kept(kube, resource, namespace, keep)
    found: dict[str, Mapping[str, Any]] = {}
    for query in sorted(queries):
        for metadata in await list_kept(kube, resource, namespace, keep, label_selector=query):
            found.setdefault(str(metadata.get("uid", "")), metadata)
    return list(found.values())


async def try_policies(
    kube: KubeClient,
    manifests: Sequence[Mapping[str, Any]],
    *,
    scope: ScopeConfig,
    settings: DecisionSettings,
    now_ns: int,
    guardrails: GuardrailView | None = None,
    default_limit: PolicyLimit | None = None,
) -> TryReport:
    """See the module docstring; ``manifests`` are the tried policies (all valid);
    ``default_limit`` is the limit of one that sets none."""
    tried = [p for p in map(policy_from_manifest, manifests) if isinstance(p, Policy)]
    refs = {p.ref for p in tried}
    report = TryReport(policies=[str(ref) for ref in sorted(refs)])
    report.totals = {str(ref): Totals() for ref in sorted(refs)}
    read = await read_policies(kube, now_ns=now_ns)
    if read.problem is not None:
        report.unreadable.append(f"lifecycle policies (judged without them): {read.problem}")
    docs = await with_live_namespaces(kube, _combined(manifests, read.manifests, now_ns))
    namespaces = {ref.namespace for ref in refs}
    # Only one namespace to read when every tried policy is a LifecyclePolicy of it.
    where = next(iter(namespaces)) if len(namespaces) == 1 else None
    run = _Pass(
        kube, docs, scope, settings, now_ns, guardrails, await _defaults(kube, where, report)
    )
    snapshot = await fetch_discovery(kube)
    for resource in plan_resources(snapshot.resources, scope).watched:
        mine = [p for p in docs.policies.for_resource(resource) if p.ref in refs]
        if not mine or (where is not None and not resource.namespaced):
            continue
        try:
            objects = await _list_selected(kube, resource, where, mine)
            fields = await read_fields(kube, resource, where, docs.policies.reads(resource))
        except KubeError as error:
            report.unreadable.append(f"{resource.key}: {error}")
            continue
        for metadata in objects:
            found = None if fields is None else fields.get(str(metadata.get("uid", "")), {})
            await _try_one(run, resource, metadata, mine, report, found)
    for policy in tried:
        limit = policy.limit if policy.limit is not None else default_limit
        totals = report.totals[str(policy.ref)]
        key = _action_key(policy)
        if key in _ONE_OFF:
            totals.one_off = f"{key} {policy.lifecycle[key]}"
        if limit is not None:
            totals.limit = str(limit)
            totals.limit_holds = max(0, totals.due_now - limit.actions)
            if key in _RECURRING:
                totals.limit_spread = limit_spread(totals.restarts, limit)
    report.rows.sort(key=lambda row: (row.next or "~", row.kind, row.namespace, row.name))
    return report


def _plural(count: int, word: str) -> str:
    return f"{count} {word}" if count == 1 else f"{count} {word}s"


def totals_line(ref: str, totals: Totals) -> str:
    """One policy's totals, in words."""
    parts = [
        f"decides {totals.decides} ({_plural(totals.deletions, 'deletion')}, "
        f"{_plural(totals.restarts, 'restart')}; {totals.due_now} due now, "
        f"{totals.dry_run} dry-run)"
    ]
    if totals.own_annotations:
        parts.append(f"{totals.own_annotations} decided by their own annotations")
    if totals.other_policy:
        parts.append(f"{totals.other_policy} decided by another policy")
    if totals.problems:
        parts.append(_plural(totals.problems, "problem"))
    if totals.held:
        parts.append(f"{totals.held} held (its condition failed on them, or an invalid policy)")
    refused, _, causes = refused_condition(totals.refused)
    if refused:
        parts.append(f"max-delete-ttl refuses {causes}")
    if totals.limit_holds:
        parts.append(
            f"would act on {totals.due_now} objects now; limit {totals.limit} holds "
            f"{totals.limit_holds} (they go as its window frees up)"
        )
    elif totals.limit:
        parts.append(f"limit {totals.limit}")
    if totals.limit_spread:
        parts.append(
            f"each occurrence restarts {totals.restarts} workloads; limit {totals.limit} "
            f"spreads them over {totals.limit_spread} after it (set spec.limit to change it)"
        )
    left = []
    if totals.exempt:
        left.append(f"{totals.exempt} exempt")
    if totals.exempt_namespace:
        left.append(f"{totals.exempt_namespace} in an exempt namespace")
    if totals.owned:
        left.append(f"{totals.owned} owned")
    if totals.protected:
        left.append(f"{totals.protected} protected")
    if totals.spent:
        since = "created" if totals.one_off.startswith("delete-") else "created or restarted"
        left.append(f"{totals.spent} {since} at or after its {totals.one_off}")
    if totals.no_since:
        left.append(f"{len(totals.no_since)} whose since has no value")
    line = f"{ref}: matches {_plural(totals.matched, 'object')}: " + "; ".join(parts)
    line += f"; left alone: {', '.join(left)}" if left else ""
    for unanchored in totals.no_since:
        line += f"\n  {NO_SINCE} for {unanchored}"
    return line


def render_try(report: TryReport, output: str) -> str:
    """The rows and the totals (nothing has been written)."""
    if output != "table":
        data = {
            "policies": report.policies,
            "objects": [asdict(row) for row in report.rows],
            "totals": {ref: asdict(totals) for ref, totals in report.totals.items()},
        }
        return _dump(data, output)
    table = render(report.rows, "table", policies=True) if report.rows else "No objects matched."
    lines = [table, ""]
    lines += [totals_line(ref, totals) for ref, totals in report.totals.items()]
    lines.append("Nothing was written: the policies are not applied.")
    return "\n".join(lines)
