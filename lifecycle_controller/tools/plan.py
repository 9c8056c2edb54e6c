"""``lifecycle-controller plan``: what the controller would do with manifests, offline.

Reads YAML or JSON manifests (several documents per file, ``kind: List`` too) from files,
folders (recursively: every ``.yaml``, ``.yml`` and ``.json`` file) or stdin and explains each
object that carries lifecycle annotations, at ``--now`` or the current time, with the next
occurrences of recurring schedules (so the DST policy is visible before anything is applied).
As a linter, :func:`has_problems` tells whether any object would get a Warning.
"""

from __future__ import annotations

import dataclasses
import sys
from collections.abc import Iterable, Iterator, Mapping, Sequence
from pathlib import Path
from typing import Any

import yaml

from lifecycle_controller.core import ObjectFacts, ObjectKey, keys
from lifecycle_controller.core.copies import controller_owner
from lifecycle_controller.core.namespace_defaults import parse_namespace_defaults
from lifecycle_controller.core.plan import explain
from lifecycle_controller.core.timestamps import TimestampError, parse_rfc3339
from lifecycle_controller.core.unknown_keys import describe_unknown
from lifecycle_controller.core.unknown_keys import unknown_keys as find_unknown_keys
from lifecycle_controller.tools.options import ControllerView
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
    group, _, version = api_version.rpartition("/")
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
        key=ObjectKey.for_kind(
            group=group,
            version=version,
            kind=kind,
            namespace=namespace,
            name=name,
        ),
        uid=str(metadata.get("uid") or f"plan:{namespace or ''}/{name}"),
        resource_version=str(metadata.get("resourceVersion", "")),
        creation_ns=creation_ns,
        terminating=bool(metadata.get("deletionTimestamp")),
        has_pod_template=isinstance(spec, Mapping) and isinstance(spec.get("template"), Mapping),
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


def plan_rows(
    objects: Iterable[Mapping[str, Any]],
    *,
    now_ns: int,
    controller: ControllerView,
    occurrences: int = 3,
) -> list[Row]:
    """One row per object that carries at least one lifecycle annotation.

    An object the controller's scope leaves out says so instead of a decision; an unknown
    lifecycle key is a problem (the linter's typo check).
    """
    settings = controller.decision
    objects = list(objects)
    # docs/annotations.md#namespace-defaults: the Namespace manifests in the input.
    namespaces = [
        (str((obj.get("metadata") or {}).get("name", "")), lifecycle_annotations(obj))
        for obj in objects
        if obj.get("kind") == "Namespace" and obj.get("apiVersion") == "v1"
    ]
    defaults = {name: parse_namespace_defaults(name, found) for name, found in namespaces}
    rows = []
    for obj in objects:
        annotations = lifecycle_annotations(obj)
        if not annotations:
            continue
        facts = facts_for(obj)
        explanation = explain(
            annotations=annotations,
            facts=facts,
            now_ns=now_ns,
            settings=settings,
            occurrences=occurrences,
            namespace_defaults=defaults.get(facts.namespace) if facts.namespace else None,
            guardrails=controller.guardrails,
        )
        resource = facts.key.resource
        if not (
            controller.scope.is_resource_allowed(resource.key)
            and controller.scope.allows_object(resource, facts.namespace, facts.name)
        ):
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
            )
        )
    return rows
