"""What a condition may read of ``object``: only what the controller keeps, never Secret data.

A condition is evaluated over what the controller's cache holds of an object, not over the
object itself, so every path it reads must be one the cache holds as the API serves it;
otherwise a ``has()`` would answer for a field the controller never fetched
(``!has(object.metadata.finalizers)`` true for an object with finalizers). The paths a
condition reads are known from its parsed expression
(:attr:`~lifecycle_controller.core.policy.condition_cost.CostModel.reads`), so a path the
controller cannot give is refused when the policy is compiled, naming it, rather than
answered wrongly on every object:

* ``object.metadata``: the cache keeps :data:`KEPT_METADATA` of every object, and nothing else
  of its metadata (``finalizers``, ``deletionTimestamp``, ``generation``, ``uid``... are not
  kept: keeping them would grow every cached object for the few conditions that read them).
  Another metadata field, or ``object.metadata`` as a whole map, is refused.
* ``object.kind`` and ``object.apiVersion`` (:data:`TYPE_FIELDS`) are the same for every
  object of a resource type, so they are given from the type, never read from the object: a
  list's items lack them while a watch's objects carry them, and they need no projection.
* Any other path (``object.spec.replicas``) is projected: the cache keeps it for the types
  the policy selects (:func:`projected`).
* The whole object (``object`` alone, ``object[k]``, ``size(object)``) is refused: no
  projection keeps "everything", and a condition that needs every field can name them.

Secret data is the one thing the controller never receives: over ``secrets`` every list and
watch is metadata-only. A Secret's own fields beyond metadata (:data:`SECRET_FIELDS`:
``data``, ``stringData``, ``type``, ``immutable``) can only be fetched by listing whole
Secrets, data included (the API server has no projection of one field), so a policy whose
``resources`` could select ``secrets`` (exactly, or by a glob such as ``*``) may not read them
(:func:`secret_refusal`, applied where a policy's resources and condition are both known).
A path a Secret does not have at all (``object.spec.replicas`` in a ``*`` policy) is allowed:
for a Secret it is absent, which is the truth, and answering it needs no field of the Secret,
so its informers stay metadata-only.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from typing import Final

from lifecycle_controller.core.policy.field_paths import dotted

__all__ = [
    "KEPT_METADATA",
    "SECRETS",
    "SECRET_DATA",
    "SECRET_FIELDS",
    "TYPE_FIELDS",
    "projected",
    "secret_refusal",
    "unkept_refusal",
]

#: The metadata fields every cached object keeps, as a condition sees them.
KEPT_METADATA: Final = (
    "name",
    "namespace",
    "labels",
    "annotations",
    "creationTimestamp",
    "ownerReferences",
)
#: Given from the object's resource type, the same for every object of it.
TYPE_FIELDS: Final = ("apiVersion", "kind")
#: The resource key of core Secrets.
SECRETS: Final = "secrets"
#: A Secret's data fields (``stringData`` is write-only: the server never returns it).
SECRET_DATA: Final = ("data", "stringData")
#: Every top-level field a Secret has beyond ``metadata`` and the type fields: reading any
#: of them would need the whole Secret.
SECRET_FIELDS: Final = (*SECRET_DATA, "type", "immutable")

_KEPT_WORDS: Final = (
    "a condition may read object.metadata."
    + ", ".join(KEPT_METADATA[:-1])
    + f" and {KEPT_METADATA[-1]}"
)


def _listed(names: Sequence[str]) -> str:
    return names[0] if len(names) == 1 else ", ".join(names[:-1]) + f" and {names[-1]}"


def projected(reads: Iterable[tuple[str, ...]]) -> frozenset[tuple[str, ...]]:
    """The paths of ``reads`` the cache must keep: those outside metadata and the type fields
    (``()``: the whole object, which :func:`unkept_refusal` refuses)."""
    return frozenset(
        path
        for path in reads
        if path[:1] != ("metadata",) and not (path and path[0] in TYPE_FIELDS)
    )


def unkept_refusal(reads: Iterable[tuple[str, ...]]) -> str | None:
    """Why a condition reading ``reads`` is refused (the paths it reads that the controller
    does not keep), in words the user can act on; None: every path is kept."""
    paths = set(reads)
    problems: list[str] = []
    if () in paths:
        problems.append(
            "reads the whole object (object alone, object[key] or size(object)), which the "
            "controller does not keep; name the fields it needs, such as object.spec.replicas"
        )
    if ("metadata",) in paths:
        problems.append(
            "reads object.metadata as a whole, which the controller does not keep; name its "
            f"fields, such as object.metadata.labels: {_KEPT_WORDS}"
        )
    unkept = sorted(
        {dotted(path[:2]) for path in paths if path[:1] == ("metadata",) and len(path) > 1}
        - {dotted(("metadata", kept)) for kept in KEPT_METADATA}
    )
    if unkept:
        problems.append(
            f"reads {_listed(unkept)}, which the controller does not keep; {_KEPT_WORDS}"
        )
    return "; ".join(problems) or None


def secret_refusal(reads: Iterable[tuple[str, ...]], selecting: Sequence[str]) -> str | None:
    """Why a condition reading ``reads`` is refused for a policy whose ``selecting`` entries
    (``spec.resources[0] "*"``) select Secrets; None: it reads no field of a Secret beyond
    its metadata (a path Secrets do not have, such as ``spec``, is absent on every one)."""
    beyond = sorted(path for path in projected(reads) if not path or path[0] in SECRET_FIELDS)
    if not selecting or not beyond:
        return None
    names = _listed([dotted(path) for path in beyond])
    data = any(path[:1] in {(field,) for field in SECRET_DATA} for path in beyond)
    verb = "selects" if len(selecting) == 1 else "select"
    why = (
        "a condition never reads Secret data"
        if data
        else "reading a Secret's fields beyond metadata would list every Secret whole, data "
        "included, which the controller never does"
    )
    return (
        f"reads {names}, and {_listed(list(selecting))} {verb} secrets: {why}; leave secrets "
        "out of spec.resources, or match Secrets on their metadata (names, labels, "
        "annotations) alone"
    )
