"""Fixtures of the unit layer: a fake clock, the in-memory API server, a real client to it.

Nothing here sleeps for real: time moves only through ``FakeClock.advance``. ``kube`` reaches
the fake through the in-process transport (no socket); ``loopback_api`` serves the fake over
HTTP on the loopback interface, for the few tests of the HTTP layer itself (kubeconfigs, the
real aiohttp transport).
"""

from __future__ import annotations

from collections.abc import AsyncIterator

import pytest

from lifecycle_controller.kube import KubeClient
from tests.doubles.fakeapi import FakeApiServer
from tests.doubles.fakeclock import FakeClock
from tests.realtime_guard import no_real_sleep

__all__ = ["no_real_sleep"]


@pytest.fixture
def clock() -> FakeClock:
    return FakeClock()


@pytest.fixture
async def api(clock: FakeClock) -> AsyncIterator[FakeApiServer]:
    async with FakeApiServer(now_ns=clock.now_ns) as server:
        yield server


@pytest.fixture
async def loopback_api(clock: FakeClock) -> AsyncIterator[FakeApiServer]:
    async with FakeApiServer(now_ns=clock.now_ns, over_http=True) as server:
        yield server


@pytest.fixture
async def kube(api: FakeApiServer) -> AsyncIterator[KubeClient]:
    async with api.client() as client:
        yield client
