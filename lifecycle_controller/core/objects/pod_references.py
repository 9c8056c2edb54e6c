"""What a Pod or a workload's Pod template uses: the references behind ``referencedBy``.

A policy condition may read ``referencedBy``: for a ConfigMap, Secret, PersistentVolumeClaim
or ServiceAccount, the objects of its namespace that use it, as ``"Kind/name"`` strings. This
module reads those uses out of one object, purely: a Pod's ``spec``, or the Pod template of a
Deployment, StatefulSet, DaemonSet, ReplicaSet or Job (``spec.template.spec``) or a CronJob
(``spec.jobTemplate.spec.template.spec``). A workload scaled to zero still uses what its
template names: deleting it would break the next scale-up.

The uses read: volumes (``configMap``, ``secret``, ``persistentVolumeClaim``, and the
``configMap`` and ``secret`` sources of a ``projected`` volume), and in every container,
init container and ephemeral container ``env[].valueFrom`` (``configMapKeyRef``,
``secretKeyRef``) and ``envFrom`` (``configMapRef``, ``secretRef``); ``imagePullSecrets``;
``serviceAccountName`` (``serviceAccount``, its deprecated alias, when that is absent).
Malformed input yields what is readable, never an error.

:class:`ReferenceIndex` keeps, per namespace, who uses what, and says which referenced
objects an update changed (the controller re-evaluates those).
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import Any, Final

from lifecycle_controller.core.objects.resources import ResourceType

__all__ = [
    "REFERENCED_KINDS",
    "REFERRING_KINDS",
    "REFERRING_TYPES",
    "ReferenceIndex",
    "Referrer",
    "Target",
    "index_manifests",
    "object_references",
    "pod_spec_references",
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

#: A referenced object: (kind, name) inside the referrer's namespace.
Target = tuple[str, str]
#: A referrer: (namespace, "Kind/name").
Referrer = tuple[str, str]

_CONTAINER_LISTS: Final = ("containers", "initContainers", "ephemeralContainers")


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
    _add(found, "PersistentVolumeClaim", _name(volume.get("persistentVolumeClaim"), "claimName"))
    projected = volume.get("projected")
    if isinstance(projected, Mapping):
        for source in _maps(projected.get("sources")):
            _add(found, "ConfigMap", _name(source.get("configMap")))
            _add(found, "Secret", _name(source.get("secret")))


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
    """The (kind, name) pairs a Pod spec uses (see the module docstring)."""
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
    return pod_spec_references(node)


class ReferenceIndex:
    """Who uses what, per namespace: ``referenced_by`` answers the condition's variable."""

    def __init__(self) -> None:
        self._uses: dict[Referrer, frozenset[Target]] = {}
        self._users: dict[tuple[str, str, str], set[str]] = {}

    def __len__(self) -> int:
        return len(self._uses)

    def put(self, namespace: str, referrer: str, targets: frozenset[Target]) -> set[Target]:
        """``referrer`` (``"Kind/name"``) in ``namespace`` now uses ``targets`` (empty: it is
        gone or uses nothing); return the targets whose users changed."""
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
        :data:`REFERENCED_KINDS`)."""
        if kind not in REFERENCED_KINDS or namespace is None:
            return ()
        return tuple(sorted(self._users.get((namespace, kind, name), ())))


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
