"""Fixtures for the machinery tests: a fake clock and a leaked-task check."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator

import pytest

from tests.doubles.fakeclock import FakeClock
from tests.realtime_guard import no_real_sleep

__all__ = ["no_real_sleep"]


@pytest.fixture
def clock() -> FakeClock:
    """A fresh fake clock, frozen until the test advances it."""
    return FakeClock()


@pytest.fixture
async def no_leaked_tasks() -> AsyncIterator[None]:
    """Fail the test if it leaves asyncio tasks running behind it."""
    before = asyncio.all_tasks()
    yield
    for _ in range(5):
        await asyncio.sleep(0)
    current = asyncio.current_task()
    leaked = {t for t in asyncio.all_tasks() - before if t is not current and not t.done()}
    for task in leaked:
        task.cancel()
    assert not leaked, f"leaked tasks: {leaked}"
