"""The million-object benchmark's seeding and floor, on a small scale: ConfigMaps written
straight into etcd are served by the API server, and the streaming-list floor counts them.

A control plane of its own (etcd's transaction limit raised, no kube-controller-manager), so
the shared one never holds the benchmark's objects. See benchmarks/README.md.
"""

from __future__ import annotations

import base64
import json

import pytest

from benchmarks.cluster import ETCD_MAX_TXN_OPS, populate
from benchmarks.cluster_floors import stream_floor
from benchmarks.cluster_objects import CONFIGMAPS
from benchmarks.etcd_seed import etcd_db_bytes, served_count, transactions
from lifecycle_controller.devcluster import ControlPlane
from lifecycle_controller.devcluster.storage_encoding import field_bytes
from lifecycle_controller.kube import KubeClient
from lifecycle_controller.kube.watch_protobuf import decode_watch_event

pytestmark = pytest.mark.integration


@pytest.mark.timeout(240)
async def test_seeded_configmaps_are_served_and_stream_listed() -> None:
    with ControlPlane(
        controller_manager=False, log=lambda line: None, etcd_max_txn_ops=ETCD_MAX_TXN_OPS
    ) as plane:
        async with await KubeClient.connect(str(plane.admin_kubeconfig)) as kube:
            before = await served_count(kube, CONFIGMAPS)
            timings: dict[str, float] = {}
            await populate(kube, 1234, plane.etcd_url, timings)  # checks what is served
            assert set(timings) == {"seed_s", "seed_verify_s"}
            assert await served_count(kube, CONFIGMAPS) == before + 1234
            served = await kube.get_metadata(CONFIGMAPS, "bench-00", "cm-000050")
            assert served["metadata"]["annotations"] == {
                "lifecycle.cezary.dev/delete-at": "2099-01-01T00:00:00Z"
            }
            assert int(served["metadata"]["resourceVersion"]) > 0
            assert (
                "annotations"
                not in (await kube.get_metadata(CONFIGMAPS, "bench-01", "cm-000051"))["metadata"]
            )
            floor = await stream_floor(plane.admin_kubeconfig)
        assert floor["objects"] == {
            "/api/v1/configmaps": before + 1234,
            "/api/v1/secrets": 200,
            "/apis/apps/v1/deployments": 500,
        }
        assert 0 < floor["seconds"] < floor["process_s"]
        assert await etcd_db_bytes(plane.etcd_url) > 1234 * 512
        assert plane.pid("etcd") > 0


def _as_watch_event(stored: bytes) -> bytes:
    """A WatchEvent (type 1, object 2 as a RawExtension whose raw is 1) around ``stored``."""
    return field_bytes(1, b"ADDED") + field_bytes(2, field_bytes(1, stored))


def test_the_etcd_transactions_put_each_object_under_its_registry_key() -> None:
    objects = [(f"ns-{i % 2}", f"cm-{i:06d}", {"k": "v"} if i == 0 else {}) for i in range(5)]
    bodies = [json.loads(body) for body in transactions(objects, {"payload": "x"}, per_txn=2)]
    puts = [op["requestPut"] for body in bodies for op in body["success"]]
    assert [len(body["success"]) for body in bodies] == [2, 2, 1]
    assert [base64.b64decode(put["key"]).decode() for put in puts] == [
        f"/registry/configmaps/ns-{i % 2}/cm-{i:06d}" for i in range(5)
    ]
    first = decode_watch_event(_as_watch_event(base64.b64decode(puts[0]["value"])))
    assert first["object"]["metadata"]["annotations"] == {"k": "v"}
    assert (
        "annotations"
        not in decode_watch_event(_as_watch_event(base64.b64decode(puts[1]["value"])))["object"][
            "metadata"
        ]
    )
