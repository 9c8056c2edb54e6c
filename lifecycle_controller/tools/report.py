"""Rows and output formats shared by ``plan`` (offline) and ``status`` (live cluster).

Every text a tool prints passes :func:`shortened` first: annotation values are the user's
and may be huge, so each value is cut to the bound of an Event note.
"""

from __future__ import annotations

import dataclasses
import json
from collections.abc import Sequence
from dataclasses import asdict, dataclass, field
from typing import Any, Literal, TypeVar

import yaml

from lifecycle_controller.core.text.shorten import shorten
from lifecycle_controller.core.text.timestamps import format_rfc3339_nano
from lifecycle_controller.core.tooling.plan import Explanation
from lifecycle_controller.tools.policy_view import PolicyVerdict

OutputFormat = Literal["table", "json", "yaml"]
_D = TypeVar("_D")


def _shorten_value(value: Any) -> Any:
    if isinstance(value, str):
        return shorten(value)
    if isinstance(value, list):
        return [_shorten_value(item) for item in value]
    if isinstance(value, dict):
        return {key: _shorten_value(item) for key, item in value.items()}
    if dataclasses.is_dataclass(value) and not isinstance(value, type):
        return shortened(value)
    return value


def shortened(report: _D) -> _D:
    """A copy of the dataclass ``report`` with every text in it cut (core/text/shorten.py)."""
    changes = {
        f.name: _shorten_value(getattr(report, f.name))
        for f in dataclasses.fields(report)  # type: ignore[arg-type]
    }
    return dataclasses.replace(report, **changes)  # type: ignore[type-var]


@dataclass(frozen=True)
class Row:
    """One object and what the controller would do with it."""

    api_version: str
    kind: str
    namespace: str
    name: str
    action: str
    next: str
    summary: str
    steps: list[str]
    problems: list[str]
    upcoming: list[str]
    dry_run: bool
    #: Values taken from the object's Namespace (docs/annotations.md#namespace-defaults).
    inherited: list[str] = field(default_factory=list)
    #: When the Upcoming warning is posted (``--warn-before`` or the annotation); "" none.
    warn_at: str = ""
    #: The lifecycle policy that decides (``Kind/[namespace/]name``); "" none.
    policy: str = ""
    #: Its attribution, as its Events carry it (``based on ...: delete-after 48h``).
    based_on: str = ""
    #: The other matching policies, best first (docs/policies.md#precedence).
    overlapped: list[str] = field(default_factory=list)
    #: Its own action annotations decide although policies match it.
    own_action: bool = False
    #: A policy would match it, but it is exempt (lifecycle.cezary.dev/exempt).
    exempt: bool = False
    #: The exempt Namespace, when the exemption is its Namespace's ("" none).
    exempt_namespace: str = ""
    #: What of its Namespace's an enforced policy acts regardless of.
    overrides: list[str] = field(default_factory=list)
    #: ``held: LifecyclePolicy/team-a/keep is invalid`` when a hold stops the policies.
    held: str = ""
    #: Policies that would match it but for its protection (a system namespace...).
    protected: list[str] = field(default_factory=list)
    #: The other action family's deciding policy, when two decide it.
    also_decided_by: list[str] = field(default_factory=list)
    #: The deciding policy's ``deletionPropagation`` ("" the server's default).
    propagation: str = ""
    #: What its ``namespaceSelector`` made of the Namespace ("" none).
    namespace_selection: str = ""
    #: The deciding policy's deletion ``max-delete-ttl`` refuses, why ("" none).
    refused: str = ""
    #: ``{"policy": ..., "why": ...}`` for each matching policy that leaves it alone for its
    #: own reasons (created after its ``delete-at``...): the next one decides.
    left_alone: list[dict[str, str]] = field(default_factory=list)
    #: The deciding policy's ``since``, what it yielded ("" none): docs/policies.md#since.
    since: str = ""


def row_for(
    *,
    api_version: str,
    kind: str,
    namespace: str | None,
    name: str,
    explanation: Explanation,
    verdict: PolicyVerdict | None = None,
) -> Row:
    """The row of one object, every text in it cut to the bound."""
    row = _row(api_version, kind, namespace, name, explanation)
    if verdict is not None:
        row = dataclasses.replace(
            row,
            policy=verdict.decided_by,
            based_on=verdict.based_on,
            overlapped=list(verdict.overlapped),
            own_action=verdict.own_action,
            exempt=verdict.exempt,
            exempt_namespace=verdict.exempt_namespace,
            held=verdict.held,
            protected=list(verdict.protected),
            also_decided_by=list(verdict.also_decided_by),
            propagation=verdict.propagation,
            namespace_selection=verdict.namespace_selection,
            left_alone=[{"policy": ref, "why": why} for ref, why in verdict.left_alone],
            since=verdict.since,
        )
    return shortened(row)


def _row(
    api_version: str, kind: str, namespace: str | None, name: str, explanation: Explanation
) -> Row:
    return Row(
        api_version=api_version,
        kind=kind,
        namespace=namespace or "",
        name=name,
        action=explanation.action or "",
        next=format_rfc3339_nano(explanation.due_ns) if explanation.due_ns is not None else "",
        summary=explanation.summary,
        steps=list(explanation.steps),
        problems=list(explanation.problems),
        upcoming=[format_rfc3339_nano(instant) for instant in explanation.upcoming],
        dry_run=explanation.dry_run,
        inherited=list(explanation.inherited),
        warn_at=format_rfc3339_nano(explanation.warn_at_ns) if explanation.warn_at_ns else "",
        overrides=list(explanation.overrides),
        refused=explanation.refused,
    )


def _policy_words(row: Row, shown: str = "") -> str:
    """What a row's DETAIL says of the policies that match it ("" nothing), leaving out a hold
    that ``shown`` (the decision's own text) says already: a held object's decision is the
    hold itself."""
    words = []
    if row.since:
        words.append(row.since)
    if row.namespace_selection:
        words.append(row.namespace_selection)
    if row.propagation:
        words.append(f"deletes with propagation {row.propagation}")
    if row.held and row.held not in shown:
        words.append(row.held)
    if row.also_decided_by:
        words.append("its other action family: " + ", ".join(row.also_decided_by))
    if row.overrides:
        words.extend(row.overrides)
    if row.exempt and not row.policy and row.exempt_namespace:
        words.append(f"left alone: namespace {row.exempt_namespace} is exempt")
    elif row.exempt and not row.policy:
        words.append("left alone by policies (exempt)")
    elif row.own_action and row.overlapped:
        words.append("its own action annotations win over " + ", ".join(row.overlapped))
    elif row.overlapped:
        words.append("overlapped: " + ", ".join(row.overlapped))
    if row.protected:
        words.append("protected from " + ", ".join(row.protected))
    words += [f"left alone by {spent['policy']}: {spent['why']}" for spent in row.left_alone]
    return "; ".join(words)


def _table(rows: Sequence[Row], policies: bool) -> str:
    header: tuple[str, ...] = ("KIND", "NAMESPACE", "NAME", "ACTION", "NEXT (UTC)", "DETAIL")
    if policies:
        header = (*header[:-1], "POLICY", "DETAIL")
    lines: list[tuple[str, ...]] = [header]
    for row in rows:
        detail = row.summary
        if row.problems:
            detail = "; ".join(row.problems)
        if row.dry_run:
            detail = f"[dry-run] {detail}"
        if row.warn_at and row.warn_at not in detail:  # the decision may name it already
            detail = f"{detail}; warning at {row.warn_at}"
        if row.inherited:
            detail = f"{detail} ({', '.join(row.inherited)})"
        if row.based_on and row.based_on not in detail:  # a wait's text names it already
            detail = f"{detail} ({row.based_on})"
        if words := _policy_words(row, detail):
            detail = f"{detail}; {words}"
        cells = [row.kind, row.namespace or "-", row.name, row.action or "-", row.next or "-"]
        if policies:
            cells.append(row.policy or "-")
        lines.append((*cells, detail))
        # ``upcoming`` starts with ``next`` when that is the next recurring occurrence; when
        # ``next`` is a due occurrence (restart now), every upcoming one follows it.
        following = row.upcoming[1:] if row.upcoming[:1] == [row.next] else row.upcoming
        extra = ("",) * (len(header) - 6)  # the POLICY cell
        for instant in following:
            lines.append(("", "", "", "", instant, *extra, "(following occurrence)"))
    widths = [max(len(line[i]) for line in lines) for i in range(len(header) - 1)]
    out = []
    for line in lines:
        cells = [cell.ljust(width) for cell, width in zip(line, widths, strict=False)]
        out.append("  ".join([*cells, line[-1]]).rstrip())
    return "\n".join(out)


def render(rows: Sequence[Row], output: OutputFormat, *, policies: bool = False) -> str:
    """The rows as a table (for people) or as JSON/YAML lists (for tools).

    ``policies``: lifecycle policies were read, so the table has a POLICY column (the
    deciding policy, or ``-``).
    """
    if output == "table":
        return _table(rows, policies) if rows else "No objects with lifecycle annotations."
    data = [asdict(row) for row in rows]
    if output == "json":
        return json.dumps(data, indent=2)
    return yaml.safe_dump(data, sort_keys=False).rstrip()
