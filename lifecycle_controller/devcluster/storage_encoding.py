"""A tiny protobuf encoder: a ConfigMap in the API server's own storage encoding.

It belongs to the local control plane because it writes what the API server itself would have
stored: the million-object benchmark writes its ConfigMaps straight into etcd
(:mod:`benchmarks.etcd_seed`), as the API server would have stored them: the bytes ``k8s\\0``
and a ``runtime.Unknown`` (``typeMeta`` (1) with ``apiVersion`` (1) and ``kind`` (2); ``raw``
(2), the protobuf ``v1.ConfigMap``). Only what the benchmark's objects hold is encoded:
``metadata`` (1: name 1, namespace 3, uid 5, creationTimestamp 8 as ``Time`` {seconds 1,
nanos 2}, labels 11 and annotations 12 as map entries {key 1, value 2}) and ``data`` (2, map
entries). The project's decoder (:mod:`lifecycle_controller.kube.watch_protobuf`) reads it
back in the unit test, and the protobuf watch tests build their frames with it.

Pods too, for the benchmark of a policy's ``since`` over Pods' status
(:func:`pod_storage_bytes`): ``v1.Pod`` holds ``metadata`` (1), ``spec`` (2) and ``status``
(3); of a ``PodSpec`` only ``containers`` (2: ``Container`` name 1, image 2, env 7 as
``EnvVar`` {name 1, value 2}); of a ``PodStatus`` ``phase`` (1), ``startTime`` (7) and
``containerStatuses`` (8: ``ContainerStatus`` name 1, state 2, ready 4, restartCount 5, image
6, imageID 7, containerID 8; a ``ContainerState`` is running 2 {startedAt 1} or terminated 3
{exitCode 1, reason 3, startedAt 5, finishedAt 6, containerID 7}).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass

__all__ = [
    "STORAGE_MAGIC",
    "ContainerRun",
    "configmap_storage_bytes",
    "field_bytes",
    "field_varint",
    "pod_spec",
    "pod_status",
    "pod_storage_bytes",
    "varint",
]

#: What the API server puts before every protobuf object it stores or sends.
STORAGE_MAGIC = b"k8s\x00"


def varint(value: int) -> bytes:
    """``value`` as a base-128 varint (a negative one as its 64-bit two's complement)."""
    value &= (1 << 64) - 1
    out = bytearray()
    while value >= 0x80:
        out.append((value & 0x7F) | 0x80)
        value >>= 7
    out.append(value)
    return bytes(out)


def field_varint(number: int, value: int) -> bytes:
    """Field ``number`` with wire type 0 (a varint)."""
    return varint(number << 3) + varint(value)


def field_bytes(number: int, payload: bytes) -> bytes:
    """Field ``number`` with wire type 2 (length-delimited)."""
    return varint(number << 3 | 2) + varint(len(payload)) + payload


def _map(number: int, entries: Mapping[str, str]) -> bytes:
    """A ``map<string, string>``: one entry message per key, in key order (as Go writes)."""
    return b"".join(
        field_bytes(number, field_bytes(1, key.encode()) + field_bytes(2, entries[key].encode()))
        for key in sorted(entries)
    )


def _time(number: int, seconds: int) -> bytes:
    """Field ``number``, a ``Time`` {seconds 1, nanos 2} of epoch ``seconds``."""
    return field_bytes(number, field_varint(1, seconds) + field_varint(2, 0))


def _object_meta(
    namespace: str,
    name: str,
    uid: str,
    created: int,
    labels: Mapping[str, str],
    annotations: Mapping[str, str],
) -> bytes:
    return (
        field_bytes(1, name.encode())
        + field_bytes(3, namespace.encode())
        + field_bytes(5, uid.encode())
        + _time(8, created)
        + _map(11, labels)
        + _map(12, annotations)
    )


def _stored(kind: bytes, raw: bytes) -> bytes:
    """``raw`` (an encoded ``v1`` object of ``kind``) wrapped as etcd holds it."""
    type_meta = field_bytes(1, b"v1") + field_bytes(2, kind)
    return STORAGE_MAGIC + field_bytes(1, type_meta) + field_bytes(2, raw)


def configmap_storage_bytes(
    namespace: str,
    name: str,
    *,
    uid: str,
    created: int,
    data: bytes,
    labels: Mapping[str, str] | None = None,
    annotations: Mapping[str, str] | None = None,
) -> bytes:
    """A ConfigMap as etcd holds it. ``created`` is the creation time in epoch seconds;
    ``data`` is the encoded ``data`` field (:func:`configmap_data`, built once for many)."""
    meta = _object_meta(namespace, name, uid, created, labels or {}, annotations or {})
    return _stored(b"ConfigMap", field_bytes(1, meta) + data)


def configmap_data(data: Mapping[str, str]) -> bytes:
    """A ConfigMap's ``data`` (field 2), encoded once and shared by many objects."""
    return _map(2, data)


@dataclass(frozen=True)
class ContainerRun:
    """One container's status: running since ``started``, or terminated at ``finished``
    (epoch seconds) with ``exit_code``."""

    name: str
    image: str
    started: int
    finished: int | None = None
    exit_code: int = 1


def pod_spec(containers: Sequence[tuple[str, str, Mapping[str, str]]]) -> bytes:
    """A Pod's ``spec`` (field 2) with these containers (name, image, env), encoded once and
    shared by many Pods."""
    encoded = b"".join(
        field_bytes(
            2,
            field_bytes(1, name.encode())
            + field_bytes(2, image.encode())
            + _map(7, env),  # an EnvVar is a {name 1, value 2} message, like a map entry
        )
        for name, image, env in containers
    )
    return field_bytes(2, encoded)


def _container_status(run: ContainerRun, container_id: str) -> bytes:
    if run.finished is None:
        state = field_bytes(2, _time(1, run.started))
    else:
        state = field_bytes(
            3,
            field_varint(1, run.exit_code)
            + field_bytes(3, b"Error")
            + _time(5, run.started)
            + _time(6, run.finished)
            + field_bytes(7, container_id.encode()),
        )
    return (
        field_bytes(1, run.name.encode())
        + field_bytes(2, state)
        + field_varint(4, int(run.finished is None))
        + field_varint(5, 0)
        + field_bytes(6, run.image.encode())
        + field_bytes(7, f"{run.image}@sha256:{'0' * 64}".encode())
        + field_bytes(8, container_id.encode())
    )


def pod_status(phase: str, started: int, runs: Sequence[ContainerRun], uid: str) -> bytes:
    """A Pod's ``status`` (field 3): ``phase``, its start and one status per container."""
    statuses = b"".join(
        field_bytes(8, _container_status(run, f"containerd://{uid}-{index}"))
        for index, run in enumerate(runs)
    )
    return field_bytes(3, field_bytes(1, phase.encode()) + _time(7, started) + statuses)


def pod_storage_bytes(
    namespace: str,
    name: str,
    *,
    uid: str,
    created: int,
    spec: bytes,
    status: bytes,
    labels: Mapping[str, str] | None = None,
) -> bytes:
    """A Pod as etcd holds it: ``spec`` from :func:`pod_spec`, ``status`` from
    :func:`pod_status`."""
    meta = _object_meta(namespace, name, uid, created, labels or {}, {})
    return _stored(b"Pod", field_bytes(1, meta) + spec + status)
