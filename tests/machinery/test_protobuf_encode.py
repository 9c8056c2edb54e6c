"""The local control plane's protobuf encoder: a ConfigMap (and a Pod) reads back as written.

A ConfigMap in the API server's storage encoding (``devcluster/storage_encoding.py``) is what a
protobuf watch event carries as its object, so the project's own decoder
(``kube/watch_protobuf.py``) reads it back. The etcd transactions that carry such objects are
checked beside the benchmark that sends them (``tests/integration/test_etcd_seed.py``).
"""

from __future__ import annotations

from lifecycle_controller.devcluster.storage_encoding import (
    STORAGE_MAGIC,
    ContainerRun,
    configmap_data,
    configmap_storage_bytes,
    field_bytes,
    field_varint,
    pod_spec,
    pod_status,
    pod_storage_bytes,
    varint,
)
from lifecycle_controller.kube.watch_protobuf import decode_watch_event


def _as_watch_event(stored: bytes) -> bytes:
    """A WatchEvent (type 1, object 2 as a RawExtension whose raw is 1) around ``stored``."""
    return field_bytes(1, b"ADDED") + field_bytes(2, field_bytes(1, stored))


def test_varints_are_base_128_little_endian() -> None:
    assert [varint(0), varint(1), varint(127), varint(128), varint(300)] == [
        b"\x00",
        b"\x01",
        b"\x7f",
        b"\x80\x01",
        b"\xac\x02",
    ]
    assert varint(-1) == b"\xff" * 9 + b"\x01"


def test_a_stored_configmap_reads_back_with_the_projects_decoder() -> None:
    stored = configmap_storage_bytes(
        "bench-07",
        "cm-000350",
        uid="0b3c1f0e-8d1a-4d55-9a43-2f7f6c1e0a11",
        created=1_764_000_000,
        data=configmap_data({"payload": "x" * 512}),
        labels={"app": "bench"},
        annotations={"lifecycle.cezary.dev/delete-at": "2099-01-01T00:00:00Z", "a": "b"},
    )
    assert stored.startswith(STORAGE_MAGIC)
    event = decode_watch_event(_as_watch_event(stored))
    assert event == {
        "type": "ADDED",
        "object": {
            "apiVersion": "v1",
            "kind": "ConfigMap",
            "metadata": {
                "name": "cm-000350",
                "namespace": "bench-07",
                "uid": "0b3c1f0e-8d1a-4d55-9a43-2f7f6c1e0a11",
                "creationTimestamp": "2025-11-24T16:00:00Z",
                "labels": {"app": "bench"},
                "annotations": {"a": "b", "lifecycle.cezary.dev/delete-at": "2099-01-01T00:00:00Z"},
            },
        },
    }


def test_a_stored_pod_reads_back_with_the_projects_decoder() -> None:
    uid = "7d0c2a4e-1b9f-4c3e-8a5d-6f1e2b3c4d5e"
    runs = [ContainerRun("app", "registry.invalid/app:1", 1_764_000_000, 1_764_000_600)]
    stored = pod_storage_bytes(
        "bench-01",
        "p-000010",
        uid=uid,
        created=1_764_000_000,
        spec=pod_spec([("app", "registry.invalid/app:1", {"A": "1"})]),
        status=pod_status("Failed", 1_764_000_000, runs, uid),
        labels={"app": "bench"},
    )
    assert stored.startswith(STORAGE_MAGIC)
    event = decode_watch_event(_as_watch_event(stored))
    assert event["object"]["kind"] == "Pod"
    assert event["object"]["metadata"] == {
        "name": "p-000010",
        "namespace": "bench-01",
        "uid": uid,
        "creationTimestamp": "2025-11-24T16:00:00Z",
        "labels": {"app": "bench"},
    }
    # The terminated state carries finishedAt (Time field 6 of ContainerStateTerminated).
    assert field_bytes(6, field_varint(1, 1_764_000_600) + field_varint(2, 0)) in stored
