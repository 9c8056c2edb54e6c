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
"""

from __future__ import annotations

from collections.abc import Mapping

__all__ = ["STORAGE_MAGIC", "configmap_storage_bytes", "field_bytes", "field_varint", "varint"]

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
        + field_bytes(8, field_varint(1, created) + field_varint(2, 0))
        + _map(11, labels)
        + _map(12, annotations)
    )


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
    raw = field_bytes(1, meta) + data
    type_meta = field_bytes(1, b"v1") + field_bytes(2, b"ConfigMap")
    return STORAGE_MAGIC + field_bytes(1, type_meta) + field_bytes(2, raw)


def configmap_data(data: Mapping[str, str]) -> bytes:
    """A ConfigMap's ``data`` (field 2), encoded once and shared by many objects."""
    return _map(2, data)
