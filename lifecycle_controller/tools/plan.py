"""``lifecycle-controller plan``: what the controller would do with manifests, offline.

Reads YAML or JSON manifests (several documents per file, ``kind: List`` too) from files,
folders (recursively: every ``.yaml``, ``.yml`` and ``.json`` file) or stdin and explains each
object that carries lifecycle annotations, at ``--now`` or the current time, with the next
occurrences of recurring schedules (so the DST policy is visible before anything is applied).
As a linter, :func:`has_problems` tells whether any object would get a Warning.

Lifecycle policies among the manifests (docs/policies.md) are applied to the other objects as
the controller applies them (:func:`~lifecycle_controller.tools.policy_view.judge`): an object
a policy decides or overlaps gets a row even without annotations, and an invalid policy is a
row with its problems (the linter's exit status 1).
"""

from __future__ import annotations

import dataclasses
import sys
from collections.abc import Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import yaml

from lifecycle_controller.core import ObjectFacts, ObjectKey
from lifecycle_controller.core.decision.events import INVALID_POLICY
from lifecycle_controller.core.decision.namespace_defaults import parse_namespace_defaults
from lifecycle_controller.core.objects import keys
from lifecycle_controller.core.objects.copies import controller_owner
from lifecycle_controller.core.objects.pod_references import index_manifests
from lifecycle_controller.core.objects.rollout import restart_marker_of
from lifecycle_controller.core.objects.unknown_keys import describe_unknown
from lifecycle_controller.core.objects.unknown_keys import unknown_keys as find_unknown_keys
from lifecycle_controller.core.policy.field_paths import fields_of
from lifecycle_controller.core.policy.in_force import POLICY_API_VERSION, is_policy_manifest
from lifecycle_controller.core.text.timestamps import TimestampError, parse_rfc3339
from lifecycle_controller.core.tooling.plan import Explanation
from lifecycle_controller.tools.options import ControllerView
from lifecycle_controller.tools.policy_view import PolicyDocs, guess_resource, judge, policy_docs
from lifecycle_controller.tools.report import Row, row_for


class ManifestError(ValueError):
    """A document that is not a Kubernetes object; the message names the source."""


def _objects(document: Any, source: str) -> Iterator[Mapping[str, Any]]:
    if document is None:
        return
    if not isinstance(document, Mapping) or "kind" not in document:
        raise ManifestError(f"{source}: not a Kubernetes object (no kind)")
    if str(document["kind"]).endswith("List") and isinstance(document.get("items"), list):
        for item in document["items"]:
            yield from _objects(item, source)
        return
    yield document


MANIFEST_SUFFIXES = (".yaml", ".yml", ".json")


def read_sources(paths: Sequence[str]) -> list[tuple[str, str]]:
    """``(name, text)`` of every manifest named: ``-`` is stdin, a folder is read recursively.

    Files in a folder are taken in path order, and only those ending in ``.yaml``, ``.yml``
    or ``.json``, as ``kubectl apply -R -f`` does.
    """
    texts: list[tuple[str, str]] = []
    for given in paths:
        if given == "-":
            texts.append(("<stdin>", sys.stdin.read()))
            continue
        path = Path(given)
        if path.is_dir():
            files = sorted(
                p for p in path.rglob("*") if p.is_file() and p.suffix in MANIFEST_SUFFIXES
            )
        elif path.is_file():
            files = [path]
        else:
            raise ManifestError(f"{given}: no such file or folder")
        for file in files:
            try:
                texts.append((str(file), file.read_text(encoding="utf-8")))
            except (OSError, UnicodeDecodeError) as error:
                raise ManifestError(f"{file}: {error}") from error
    return texts


def has_problems(rows: Iterable[Row]) -> bool:
    """True when any object would get a Warning (the linter's exit status 1)."""
    return any(row.problems for row in rows)


def load_manifests(texts: Iterable[tuple[str, str]]) -> list[Mapping[str, Any]]:
    """Every object in ``(source name, text)`` pairs, in order."""
    objects: list[Mapping[str, Any]] = []
    for source, text in texts:
        try:
            documents = list(yaml.safe_load_all(text))
        except yaml.YAMLError as error:
            raise ManifestError(f"{source}: {error}") from error
        for document in documents:
            objects.extend(_objects(document, source))
    return objects


def facts_for(obj: Mapping[str, Any]) -> ObjectFacts:
    """Object facts from a manifest (a missing UID or creation time means "new")."""
    api_version = str(obj.get("apiVersion", "v1"))
    kind = str(obj.get("kind", ""))
    metadata = obj.get("metadata") or {}
    spec = obj.get("spec") if isinstance(obj.get("spec"), Mapping) else {}
    try:
        creation_ns: int | None = parse_rfc3339(str(metadata.get("creationTimestamp", "")))
    except TimestampError:
        creation_ns = None
    name = str(metadata.get("name", ""))
    namespace = metadata.get("namespace") or None
    return ObjectFacts(
        key=ObjectKey(guess_resource(api_version, kind, namespace is not None), namespace, name),
        uid=str(metadata.get("uid") or f"plan:{namespace or ''}/{name}"),
        resource_version=str(metadata.get("resourceVersion", "")),
        creation_ns=creation_ns,
        terminating=bool(metadata.get("deletionTimestamp")),
        has_pod_template=isinstance(spec, Mapping) and isinstance(spec.get("template"), Mapping),
        restart_marker=restart_marker_of(obj, keys.RESTARTED_AT),
        controller_owner=controller_owner(metadata),
    )


def lifecycle_annotations(obj: Mapping[str, Any]) -> dict[str, str]:
    metadata = obj.get("metadata") or {}
    annotations = metadata.get("annotations") or {}
    return {str(k): str(v) for k, v in annotations.items() if str(k).startswith(keys.PREFIX)}


def unknown_key_problems(annotations: Iterable[str]) -> list[str]:
    """A problem line for each ``lifecycle.cezary.dev/`` key the controller does not read,
    with the nearest known key when one is close (a typo)."""
    return [
        f"UnknownAnnotation: {describe_unknown(key, near)}"
        for key, near in find_unknown_keys(annotations)
    ]


@dataclass(frozen=True)
class PlanReport:
    """The rows, and whether any lifecycle policy was among the manifests."""

    rows: list[Row]
    policies: bool = False


def invalid_policy_rows(docs: PolicyDocs) -> list[Row]:
    """A row per invalid policy: it acts on nothing, and each problem is named."""
    return [
        row_for(
            api_version=POLICY_API_VERSION,
            kind=str(invalid.ref.kind),
            namespace=invalid.ref.namespace,
            name=invalid.ref.name,
            explanation=Explanation(
                action=None,
                due_ns=None,
                summary="invalid: the policy acts on nothing until it is fixed",
                problems=tuple(f"{INVALID_POLICY}: {problem}" for problem in invalid.problems),
            ),
        )
        for invalid in docs.policies.invalid
    ]


def plan_rows(
    objects: Iterable[Mapping[str, Any]],
    *,
    now_ns: int,
    controller: ControllerView,
    occurrences: int = 3,
) -> list[Row]:
    """The rows of :func:`plan_report`."""
    return plan_report(objects, now_ns=now_ns, controller=controller, occurrences=occurrences).rows


def plan_report(
    objects: Iterable[Mapping[str, Any]],
    *,
    now_ns: int,
    controller: ControllerView,
    occurrences: int = 3,
) -> PlanReport:
    """One row per object that carries at least one lifecycle annotation or that a policy
    among ``objects`` decides or overlaps, and one per invalid policy.

    An object the controller's scope leaves out says so instead of a decision (policies
    never see it); an unknown lifecycle key is a problem (the linter's typo check).
    """
    settings = controller.decision
    everything = list(objects)
    docs = policy_docs(
        [o for o in everything if is_policy_manifest(o)],
        now_ns=now_ns,
        protection=controller.protection,
    ).with_namespaces(everything)  # their labels, for a namespaceSelector
    objects = [o for o in everything if not is_policy_manifest(o)]
    # docs/annotations.md#namespace-defaults: the Namespace manifests in the input.
    namespaces = [
        (str((obj.get("metadata") or {}).get("name", "")), lifecycle_annotations(obj))
        for obj in objects
        if obj.get("kind") == "Namespace" and obj.get("apiVersion") == "v1"
    ]
    defaults = {name: parse_namespace_defaults(name, found) for name, found in namespaces}
    rows = invalid_policy_rows(docs)
    references = index_manifests(objects) if docs.policies.reads_references() else None
    for obj in objects:
        annotations = lifecycle_annotations(obj)
        facts = facts_for(obj)
        resource = facts.key.resource
        watched = controller.scope.is_resource_allowed(
            resource.key
        ) and controller.scope.allows_object(resource, facts.namespace, facts.name)
        if not annotations and not (watched and docs.policies):
            continue
        explanation, verdict = judge(
            docs if watched else PolicyDocs(),
            resource,
            obj.get("metadata") or {},
            annotations=annotations,
            facts=facts,
            now_ns=now_ns,
            settings=settings,
            occurrences=occurrences,
            defaults=defaults.get(facts.namespace) if facts.namespace else None,
            guardrails=controller.guardrails,
            restart_marker=facts.restart_marker,
            fields=fields_of(obj),  # conditions read the manifest's whole object
            referenced_by=None
            if references is None
            else references.referenced_by(facts.namespace or "default", resource.kind, facts.name),
        )
        if not annotations and not verdict.concerned:
            continue
        if not watched:
            explanation = dataclasses.replace(
                explanation,
                action=None,
                due_ns=None,
                upcoming=(),
                warn_at_ns=None,
                summary="not watched: outside the namespace or resource watch list",
            )
        problems = unknown_key_problems(annotations)
        if problems:
            explanation = dataclasses.replace(
                explanation, problems=(*explanation.problems, *problems)
            )
        rows.append(
            row_for(
                api_version=str(obj.get("apiVersion", "")),
                kind=facts.kind,
                namespace=facts.namespace,
                name=facts.name,
                explanation=explanation,
                verdict=verdict,
            )
        )
    return PlanReport(rows, docs.any)
