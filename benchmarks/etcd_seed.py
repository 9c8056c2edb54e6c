"""Seeding ConfigMaps straight into etcd, for the million-object benchmark.

Creating a million ConfigMaps through the API takes about 45 minutes on the 2-core
development machine (each create is admitted, validated, encoded and audited one by one);
written into etcd as the API server itself stores them they take a few minutes. Each object
goes to ``/registry/configmaps/<namespace>/<name>`` in the API server's storage encoding
(:mod:`lifecycle_controller.devcluster.storage_encoding`), through etcd's HTTP/JSON gateway
(``POST /v3/kv/txn``,
``per_txn`` puts per transaction, several transactions in flight). The API server's watch
cache sees every put on its etcd watch, as it would see another API server's writes, and
serves the objects with etcd's revisions as their resourceVersions. :func:`verify_seeded`
checks that it does. Namespaces, Secrets and Deployments still go through the API (they are
few, and kube-controller-manager must see the Deployments created). :func:`seed_pairs` puts
objects of any kind already encoded (the ``since`` benchmark's Pods, whose status the API would
only take through a second write per Pod).
"""

from __future__ import annotations

import asyncio
import base64
import json
import time
import uuid
from collections.abc import Iterable, Iterator
from typing import Any

import aiohttp

from lifecycle_controller.devcluster.storage_encoding import configmap_data, configmap_storage_bytes
from lifecycle_controller.kube import KubeClient, ResourceType

__all__ = [
    "batches",
    "etcd_db_bytes",
    "seed_configmaps",
    "seed_pairs",
    "served_count",
    "transactions",
    "verify_seeded",
]

#: Puts per transaction: etcd refuses more than its ``--max-txn-ops`` (128 by default; the
#: benchmark's control plane raises it to 1,000).
PER_TXN = 500
#: Transactions in flight: etcd applies them one by one, the encoding here overlaps them.
IN_FLIGHT = 4
REGISTRY = "/registry/configmaps"

Seeded = tuple[str, str, dict[str, str]]
"""One ConfigMap to write: namespace, name and annotations."""


def _b64(raw: bytes) -> str:
    return base64.b64encode(raw).decode()


def batches(pairs: Iterable[tuple[bytes, bytes]], per_txn: int) -> Iterator[bytes]:
    """The JSON bodies of transactions putting each (key, value) of ``pairs``, ``per_txn``
    puts each."""
    puts: list[str] = []
    for key, value in pairs:
        puts.append(f'{{"requestPut":{{"key":"{_b64(key)}","value":"{_b64(value)}"}}}}')
        if len(puts) == per_txn:
            yield ('{"success":[' + ",".join(puts) + "]}").encode()
            puts = []
    if puts:
        yield ('{"success":[' + ",".join(puts) + "]}").encode()


def _configmap_pairs(
    objects: Iterable[Seeded], payload: dict[str, str]
) -> Iterator[tuple[bytes, bytes]]:
    data = configmap_data(payload)
    created = int(time.time())
    for namespace, name, annotated in objects:
        value = configmap_storage_bytes(
            namespace,
            name,
            uid=str(uuid.uuid4()),
            created=created,
            data=data,
            annotations=annotated,
        )
        yield f"{REGISTRY}/{namespace}/{name}".encode(), value


def transactions(
    objects: Iterable[Seeded], payload: dict[str, str], per_txn: int
) -> Iterator[bytes]:
    """The transactions' JSON bodies, ``per_txn`` puts each."""
    return batches(_configmap_pairs(objects, payload), per_txn)


async def seed_configmaps(
    etcd_url: str,
    objects: Iterable[Seeded],
    *,
    payload: dict[str, str],
    per_txn: int = PER_TXN,
    in_flight: int = IN_FLIGHT,
) -> int:
    """Write every ConfigMap of ``objects`` (each with ``payload`` as its data) into etcd;
    the number of transactions. Raises RuntimeError when etcd refuses one."""
    return await seed_pairs(etcd_url, _configmap_pairs(objects, payload), per_txn, in_flight)


async def seed_pairs(
    etcd_url: str,
    pairs: Iterable[tuple[bytes, bytes]],
    per_txn: int = PER_TXN,
    in_flight: int = IN_FLIGHT,
) -> int:
    """Put every (registry key, stored object) of ``pairs`` into etcd (any kind: Pods from
    :func:`~lifecycle_controller.devcluster.storage_encoding.pod_storage_bytes`); the number
    of transactions. Raises RuntimeError when etcd refuses one."""
    bodies = batches(pairs, per_txn)
    sent = 0

    async def worker(session: aiohttp.ClientSession) -> None:
        nonlocal sent
        for body in bodies:  # one shared iterator: each batch goes once
            async with session.post(f"{etcd_url}/v3/kv/txn", data=body) as response:
                answer = await response.read()
                if response.status != 200 or not json.loads(answer).get("succeeded"):
                    raise RuntimeError(f"etcd txn: {response.status} {answer[:300]!r}")
            sent += 1

    timeout = aiohttp.ClientTimeout(total=None, sock_read=120)
    async with aiohttp.ClientSession(timeout=timeout) as session:
        await asyncio.gather(*(worker(session) for _ in range(in_flight)))
    return sent


async def etcd_db_bytes(etcd_url: str) -> int:
    """etcd's database size in bytes (``/v3/maintenance/status``: ``dbSize``)."""
    async with (
        aiohttp.ClientSession() as session,
        session.post(f"{etcd_url}/v3/maintenance/status", data=b"{}") as response,
    ):
        status: dict[str, Any] = await response.json(content_type=None)
    return int(status["dbSize"])


async def served_count(kube: KubeClient, resource: ResourceType) -> int:
    """How many objects of ``resource`` the API server serves: a ``limit=1`` list's
    ``remainingItemCount`` + 1."""
    listing = await kube.list_metadata(resource, limit=1)
    return int(listing["metadata"].get("remainingItemCount", 0)) + len(listing["items"])


async def verify_seeded(
    kube: KubeClient,
    configmaps: ResourceType,
    expected: int,
    annotated: Seeded,
    *,
    limit: float = 300.0,
) -> float:
    """Wait until the API server serves ``expected`` ConfigMaps (:func:`served_count`) and
    ``annotated`` with its annotations; the seconds waited. Raises RuntimeError when it does
    not within ``limit`` seconds."""
    started = time.perf_counter()
    count = -1
    while time.perf_counter() - started < limit:
        count = await served_count(kube, configmaps)
        if count == expected:
            break
        await asyncio.sleep(1.0)
    else:
        raise RuntimeError(f"the API server serves {count} ConfigMaps, not {expected}")
    namespace, name, annotations = annotated
    served = await kube.get_metadata(configmaps, namespace, name)
    if (served["metadata"].get("annotations") or {}) != annotations:
        raise RuntimeError(f"{namespace}/{name} is served as {served['metadata']}")
    return time.perf_counter() - started
