"""Batched rollout status reads (controller/rollout/reads.py) against the fake API server:
which requests a tick's reads become, and what each reader gets back."""

from __future__ import annotations

import asyncio

import pytest

from lifecycle_controller.controller.rollout.reads import LIST_FACTOR, RolloutReads
from lifecycle_controller.core import ObjectKey
from lifecycle_controller.kube import KubeClient, NotFound
from lifecycle_controller.kube.resources import DEPLOYMENTS
from tests.doubles.fakeapi import FakeApiServer


def key(namespace: str, name: str) -> ObjectKey:
    return ObjectKey(DEPLOYMENTS, namespace, name)


async def deployments(kube: KubeClient, namespace: str, count: int) -> list[str]:
    names = [f"web-{i:03d}" for i in range(count)]
    for name in names:
        await kube.create(DEPLOYMENTS, namespace, {"metadata": {"name": name}})
    return names


def reads_of(api: FakeApiServer) -> tuple[int, int]:
    """(lists, gets) of Deployments since the test began reading."""
    lists = [r for r in api.requests_to("GET", "/deployments") if r.path.endswith("/deployments")]
    gets = api.requests_to("GET", "/deployments/")
    return len(lists), len(gets)


async def test_a_ticks_reads_in_one_namespace_are_one_list(
    api: FakeApiServer, kube: KubeClient
) -> None:
    names = await deployments(kube, "a", 5)
    reads = RolloutReads(kube)
    got = await asyncio.gather(*(reads.read(key("a", n)) for n in names))
    assert [o["metadata"]["name"] for o in got] == names
    assert {o["kind"] for o in got} == {"Deployment"}
    assert reads_of(api) == (1, 0)
    await reads.aclose()


async def test_one_read_is_one_get(api: FakeApiServer, kube: KubeClient) -> None:
    await deployments(kube, "a", 3)
    reads = RolloutReads(kube)
    got = await reads.read(key("a", "web-001"))
    assert got["metadata"]["name"] == "web-001"
    assert reads_of(api) == (0, 1)
    await reads.aclose()


async def test_each_namespace_gets_its_own_list(api: FakeApiServer, kube: KubeClient) -> None:
    a = await deployments(kube, "a", 2)
    b = await deployments(kube, "b", 3)
    reads = RolloutReads(kube)
    got = await asyncio.gather(
        *(reads.read(key("a", n)) for n in a), *(reads.read(key("b", n)) for n in b)
    )
    assert [o["metadata"]["namespace"] for o in got] == ["a", "a", "b", "b", "b"]
    assert reads_of(api) == (2, 0)
    await reads.aclose()


async def test_a_workload_missing_from_a_whole_list_is_not_found(
    api: FakeApiServer, kube: KubeClient
) -> None:
    await deployments(kube, "a", 2)
    reads = RolloutReads(kube)
    results = await asyncio.gather(
        reads.read(key("a", "web-000")), reads.read(key("a", "gone")), return_exceptions=True
    )
    assert isinstance(results[0], dict)
    assert isinstance(results[1], NotFound)
    assert reads_of(api) == (1, 0)
    await reads.aclose()


async def test_a_namespace_larger_than_the_bound_falls_back_to_gets_until_lists_pay(
    api: FakeApiServer, kube: KubeClient
) -> None:
    names = await deployments(kube, "big", 2 * LIST_FACTOR * 2 + 5)
    wanted = names[-2:]  # beyond the first page of 2 * LIST_FACTOR objects
    reads = RolloutReads(kube)
    got = await asyncio.gather(*(reads.read(key("big", n)) for n in wanted))
    assert [o["metadata"]["name"] for o in got] == wanted
    assert reads_of(api) == (1, 2)  # one bounded page, then the two single reads
    await asyncio.gather(*(reads.read(key("big", n)) for n in wanted))
    assert reads_of(api) == (1, 4)  # 2 of 21 followed: single reads
    many = names[-6:]  # 6 of 21 followed: a list of 24 pays
    got = await asyncio.gather(*(reads.read(key("big", n)) for n in many))
    assert [o["metadata"]["name"] for o in got] == many
    assert reads_of(api) == (2, 4)
    reads.forget_namespace_sizes()
    await asyncio.gather(*(reads.read(key("big", n)) for n in wanted))
    assert reads_of(api) == (3, 6)  # measured afresh: a bounded list, then the two GETs
    await reads.aclose()


async def test_a_cancelled_reader_leaves_the_others_answered(
    api: FakeApiServer, kube: KubeClient
) -> None:
    names = await deployments(kube, "a", 3)
    reads = RolloutReads(kube)
    tasks = [asyncio.create_task(reads.read(key("a", n))) for n in names]
    await asyncio.sleep(0)
    tasks[0].cancel()
    results = await asyncio.gather(*tasks, return_exceptions=True)
    assert isinstance(results[0], asyncio.CancelledError)
    assert [r["metadata"]["name"] for r in results[1:]] == names[1:]  # type: ignore[index]
    await reads.aclose()


@pytest.mark.parametrize("status", [403, 500])
async def test_a_failed_list_is_retried_as_single_reads(
    api: FakeApiServer, kube: KubeClient, status: int
) -> None:
    names = await deployments(kube, "a", 3)
    api.fail(status, method="GET", when=lambda r: r.path.endswith("/namespaces/a/deployments"))
    reads = RolloutReads(kube)
    got = await asyncio.gather(*(reads.read(key("a", n)) for n in names))
    assert [o["metadata"]["name"] for o in got] == names
    assert reads_of(api) == (1, 3)
    await reads.aclose()
