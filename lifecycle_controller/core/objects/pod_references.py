"""What a Pod or a workload's Pod template uses: the references behind ``referencedBy``.

A policy condition may read ``referencedBy``: for a ConfigMap, Secret, PersistentVolumeClaim
or ServiceAccount, the objects of its namespace that use it, as ``"Kind/name"`` strings. This
module reads those uses out of one object, purely: a Pod's ``spec``, or the Pod template of a
Deployment, StatefulSet, DaemonSet, ReplicaSet or Job (``spec.template.spec``) or a CronJob
(``spec.jobTemplate.spec.template.spec``). A workload scaled to zero still uses what its
template names: deleting it would break the next scale-up.

The uses read (docs/policies.md#unused-objects keeps the same list):

* volumes: ``configMap``, ``secret``, ``persistentVolumeClaim``, the ``configMap`` and
  ``secret`` sources of a ``projected`` volume, and the Secret a storage driver is handed:
  ``csi.nodePublishSecretRef`` (the secrets-store driver's credentials among them), the
  ``secretRef`` of ``cephfs``, ``rbd``, ``iscsi``, ``flexVolume``, ``scaleIO``, ``cinder``
  and ``storageos``, and ``azureFile.secretName`` (that source names its Secret by a plain
  field, not a reference: the API's own shape is read);
* in every container, init container and ephemeral container ``env[].valueFrom``
  (``configMapKeyRef``, ``secretKeyRef``) and ``envFrom`` (``configMapRef``, ``secretRef``);
* ``imagePullSecrets``; ``serviceAccountName`` (``serviceAccount``, its deprecated alias,
  when that is absent);
* a Pod's generic ephemeral volume (``ephemeral.volumeClaimTemplate``) uses the claim the
  ephemeral volume controller names ``<pod>-<volume>``. The same volume in a workload's
  template names no claim of its own: each Pod's claim is owned by that Pod and goes with it;
* a StatefulSet's ``volumeClaimTemplates``: the StatefulSet controller names the claim of
  template ``data`` for ordinal 3 of StatefulSet ``db`` ``data-db-3``, and creates it again
  when the Pod comes back. Those claims are used by ``StatefulSet/db`` for every ordinal,
  whatever ``spec.replicas`` says: scaled to zero, drained or mid rolling update, its claims
  hold the data the next Pod of that ordinal mounts. Ordinals are unbounded (``replicas``
  and ``ordinals.start`` move them), so the StatefulSet's use is one target of its own,
  :data:`ORDINAL_CLAIMS` with the name ``data-db``, and a claim is looked up under it when
  its name is that prefix, ``-`` and a decimal ordinal as the controller writes it
  (:func:`ordinal_prefix`). A name that merely starts with the prefix (``data-db-x``,
  ``data-db-01``) is no claim of the StatefulSet. A deleted StatefulSet uses nothing: what
  becomes of its claims is its ``persistentVolumeClaimRetentionPolicy``'s business, and a
  retained claim is then unused.

Malformed input yields what is readable, never an error.

:class:`ReferenceIndex` keeps, per namespace, who uses what, and says which targets an
update changed (the controller re-evaluates the objects they name: :func:`covers`).
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import Any, Final

from lifecycle_controller.core.objects.resources import ResourceType

__all__ = [
    "ORDINAL_CLAIMS",
    "REFERENCED_KINDS",
    "REFERRING_KINDS",
    "REFERRING_TYPES",
    "ReferenceIndex",
    "Referrer",
    "Target",
    "covers",
    "index_manifests",
    "object_references",
    "ordinal_prefix",
    "pod_spec_references",
    "targets_of",
    "used_kind",
]

#: The kinds ``referencedBy`` is computed for (core group); empty for every other kind.
REFERENCED_KINDS: Final = frozenset(
    {"ConfigMap", "Secret", "PersistentVolumeClaim", "ServiceAccount"}
)
#: The kinds whose Pod spec or Pod template refers, and where the Pod spec is.
REFERRING_KINDS: Final[Mapping[str, tuple[str, ...]]] = {
    "Pod": ("spec",),
    "Deployment": ("spec", "template", "spec"),
    "StatefulSet": ("spec", "template", "spec"),
    "DaemonSet": ("spec", "template", "spec"),
    "ReplicaSet": ("spec", "template", "spec"),
    "Job": ("spec", "template", "spec"),
    "CronJob": ("spec", "jobTemplate", "spec", "template", "spec"),
}

#: The types whose objects refer (their Pod spec or Pod template), as the API serves them.
REFERRING_TYPES: Final = (
    ResourceType("", "v1", "pods", "Pod", True),
    ResourceType("apps", "v1", "deployments", "Deployment", True),
    ResourceType("apps", "v1", "statefulsets", "StatefulSet", True),
    ResourceType("apps", "v1", "daemonsets", "DaemonSet", True),
    ResourceType("apps", "v1", "replicasets", "ReplicaSet", True),
    ResourceType("batch", "v1", "jobs", "Job", True),
    ResourceType("batch", "v1", "cronjobs", "CronJob", True),
)

#: A referenced object: (kind, name) inside the referrer's namespace; or, with the kind
#: :data:`ORDINAL_CLAIMS`, every claim ``<name>-<ordinal>`` of a StatefulSet's template.
Target = tuple[str, str]
#: A referrer: (namespace, "Kind/name").
Referrer = tuple[str, str]

_CLAIM: Final = "PersistentVolumeClaim"
#: The target kind of a StatefulSet's claim template: its name is ``<template>-<set>``
#: and it names the claims ``<template>-<set>-<ordinal>`` (no API kind has a ``-``).
ORDINAL_CLAIMS: Final = "PersistentVolumeClaim-<ordinal>"

_CONTAINER_LISTS: Final = ("containers", "initContainers", "ephemeralContainers")
#: The volume sources that hand their driver a Secret by reference, and the reference's field
#: (``azureFile`` names its Secret by a plain ``secretName``: read beside these).
_DRIVER_SECRETS: Final = (
    ("csi", "nodePublishSecretRef"),
    ("cephfs", "secretRef"),
    ("rbd", "secretRef"),
    ("iscsi", "secretRef"),
    ("flexVolume", "secretRef"),
    ("scaleIO", "secretRef"),
    ("cinder", "secretRef"),
    ("storageos", "secretRef"),
)


def ordinal_prefix(name: str) -> str | None:
    """``data-db`` for ``data-db-3``: the part before ``-<ordinal>`` when ``name`` ends in a
    decimal ordinal written as the StatefulSet controller writes it (Go's ``%d`` of a
    non-negative int: ASCII digits, no sign, no leading zero but in ``0`` itself); None
    otherwise, or when nothing precedes it."""
    prefix, dash, ordinal = name.rpartition("-")
    if not (prefix and dash and ordinal.isascii() and ordinal.isdecimal()):
        return None
    if ordinal[0] == "0" and len(ordinal) > 1:
        return None
    return prefix


def targets_of(kind: str, name: str) -> tuple[Target, ...]:
    """The targets whose users use the object ``kind``/``name``: itself, and for a claim
    named like a StatefulSet's, ``<template>-<set>`` before its ordinal (every StatefulSet
    whose template and name make that prefix uses it: ``a-b`` + ``c`` as ``a`` + ``b-c``;
    a use too many keeps a claim, never loses one)."""
    if kind == _CLAIM:
        prefix = ordinal_prefix(name)
        if prefix is not None:
            return ((kind, name), (ORDINAL_CLAIMS, prefix))
    return ((kind, name),)


def used_kind(target_kind: str) -> str:
    """The kind of the objects a target of ``target_kind`` names."""
    return _CLAIM if target_kind == ORDINAL_CLAIMS else target_kind


def covers(target: Target, name: str) -> bool:
    """Whether the object ``name`` (of the target's :func:`used_kind`, in its namespace) is
    used through ``target``: the inverse of :func:`targets_of`."""
    kind, target_name = target
    if kind == ORDINAL_CLAIMS:
        return ordinal_prefix(name) == target_name
    return name == target_name


def _maps(value: object) -> Iterable[Mapping[str, Any]]:
    if isinstance(value, list):
        return (item for item in value if isinstance(item, Mapping))
    return ()


def _name(value: object, field: str = "name") -> str | None:
    if isinstance(value, Mapping):
        name = value.get(field)
        if isinstance(name, str) and name:
            return name
    return None


def _add(found: set[Target], kind: str, name: str | None) -> None:
    if name:
        found.add((kind, name))


def _volume_references(volume: Mapping[str, Any], found: set[Target]) -> None:
    _add(found, "ConfigMap", _name(volume.get("configMap")))
    _add(found, "Secret", _name(volume.get("secret"), "secretName"))
    _add(found, _CLAIM, _name(volume.get("persistentVolumeClaim"), "claimName"))
    projected = volume.get("projected")
    if isinstance(projected, Mapping):
        for source in _maps(projected.get("sources")):
            _add(found, "ConfigMap", _name(source.get("configMap")))
            _add(found, "Secret", _name(source.get("secret")))
    for source_field, reference in _DRIVER_SECRETS:
        driver = volume.get(source_field)
        if isinstance(driver, Mapping):
            _add(found, "Secret", _name(driver.get(reference)))
    _add(found, "Secret", _name(volume.get("azureFile"), "secretName"))


def _container_references(container: Mapping[str, Any], found: set[Target]) -> None:
    for env in _maps(container.get("env")):
        value_from = env.get("valueFrom")
        if isinstance(value_from, Mapping):
            _add(found, "ConfigMap", _name(value_from.get("configMapKeyRef")))
            _add(found, "Secret", _name(value_from.get("secretKeyRef")))
    for source in _maps(container.get("envFrom")):
        _add(found, "ConfigMap", _name(source.get("configMapRef")))
        _add(found, "Secret", _name(source.get("secretRef")))


def pod_spec_references(spec: object) -> frozenset[Target]:
    """The (kind, name) pairs a Pod spec uses (see the module docstring); the claims of
    generic ephemeral volumes are named after the Pod: :func:`object_references`."""
    if not isinstance(spec, Mapping):
        return frozenset()
    found: set[Target] = set()
    for volume in _maps(spec.get("volumes")):
        _volume_references(volume, found)
    for field in _CONTAINER_LISTS:
        for container in _maps(spec.get(field)):
            _container_references(container, found)
    for secret in _maps(spec.get("imagePullSecrets")):
        _add(found, "Secret", _name(secret))
    account = spec.get("serviceAccountName") or spec.get("serviceAccount")
    if isinstance(account, str):
        _add(found, "ServiceAccount", account)
    return frozenset(found)


def _ephemeral_claims(pod: str, spec: Mapping[str, Any]) -> Iterable[Target]:
    """The claims of a Pod's generic ephemeral volumes: ``<pod>-<volume>``."""
    for volume in _maps(spec.get("volumes")):
        volume_name = _name(volume)
        if volume_name and isinstance(volume.get("ephemeral"), Mapping):
            yield (_CLAIM, f"{pod}-{volume_name}")


def _claim_templates(statefulset: str, spec: Mapping[str, Any]) -> Iterable[Target]:
    """A StatefulSet's claim templates: every ``<template>-<set>-<ordinal>``."""
    for template in _maps(spec.get("volumeClaimTemplates")):
        template_name = _name(template.get("metadata"))
        if template_name:
            yield (ORDINAL_CLAIMS, f"{template_name}-{statefulset}")


def object_references(kind: str, obj: Mapping[str, Any]) -> frozenset[Target]:
    """What a Pod or workload object uses; nothing for other kinds."""
    path = REFERRING_KINDS.get(kind)
    if path is None:
        return frozenset()
    node: object = obj
    for step in path:
        if not isinstance(node, Mapping):
            return frozenset()
        node = node.get(step)
    found = pod_spec_references(node)
    name = _name(obj.get("metadata"))
    spec = obj.get("spec")
    if name is None or not isinstance(spec, Mapping):
        return found
    if kind == "Pod":
        return found.union(_ephemeral_claims(name, spec))
    if kind == "StatefulSet":
        return found.union(_claim_templates(name, spec))
    return found


class ReferenceIndex:
    """Who uses what, per namespace: ``referenced_by`` answers the condition's variable."""

    def __init__(self) -> None:
        self._uses: dict[Referrer, frozenset[Target]] = {}
        self._users: dict[tuple[str, str, str], set[str]] = {}

    def __len__(self) -> int:
        return len(self._uses)

    def put(self, namespace: str, referrer: str, targets: frozenset[Target]) -> set[Target]:
        """``referrer`` (``"Kind/name"``) in ``namespace`` now uses ``targets`` (empty: it is
        gone or uses nothing); return the targets whose users changed (a claim template's
        among them: :func:`covers` says which objects it names)."""
        key = (namespace, referrer)
        old = self._uses.get(key, frozenset())
        if targets:
            self._uses[key] = targets
        else:
            self._uses.pop(key, None)
        for kind, name in old - targets:
            users = self._users.get((namespace, kind, name))
            if users is not None:
                users.discard(referrer)
                if not users:
                    del self._users[(namespace, kind, name)]
        for kind, name in targets - old:
            self._users.setdefault((namespace, kind, name), set()).add(referrer)
        return set(old ^ targets)

    def referrers(self) -> list[Referrer]:
        """Every (namespace, referrer) kept."""
        return list(self._uses)

    def referenced_by(self, namespace: str | None, kind: str, name: str) -> tuple[str, ...]:
        """The sorted referrers of one object (empty for kinds outside
        :data:`REFERENCED_KINDS`): its own users, and a claim's StatefulSet by its template
        (:func:`targets_of`)."""
        if kind not in REFERENCED_KINDS or namespace is None:
            return ()
        users: set[str] = set()
        for target_kind, target_name in targets_of(kind, name):
            users.update(self._users.get((namespace, target_kind, target_name), ()))
        return tuple(sorted(users))


def index_manifests(objects: Iterable[Mapping[str, Any]]) -> ReferenceIndex:
    """The index of a set of manifests (``plan -f``): a manifest without a namespace is in
    ``default``, as ``kubectl apply`` would put it."""
    index = ReferenceIndex()
    for obj in objects:
        kind = obj.get("kind")
        metadata = obj.get("metadata")
        if not isinstance(kind, str) or not isinstance(metadata, Mapping):
            continue
        targets = object_references(kind, obj)
        name = metadata.get("name")
        if targets and isinstance(name, str) and name:
            index.put(str(metadata.get("namespace") or "default"), f"{kind}/{name}", targets)
    return index
