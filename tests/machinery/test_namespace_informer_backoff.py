"""The Namespace-defaults informer backs off while the API server is unreachable.

On the fake clock, over a simulated minute of connection errors: the namespace store's
informer follows the shared backoff curve (0.8 s doubling to 30 s, with jitter) instead of
retrying about once a second, and logs the outage once when it starts and once when it ends,
at warning, rather than a line per attempt (docs/reliability.md#namespace-informers).
"""

from __future__ import annotations

import asyncio
import random
from collections.abc import Mapping, Sequence
from typing import Any

from structlog.testing import capture_logs

from lifecycle_controller.controller.namespace.defaults import NamespaceDefaultsStore
from lifecycle_controller.kube import TransportError
from lifecycle_controller.machinery.tasks import cancel_and_wait
from tests.doubles.fakeclock import FakeClock
from tests.machinery.test_informers import SETTINGS, FakeSource, page


def failing_store(clock: FakeClock) -> tuple[FakeSource, NamespaceDefaultsStore]:
    """A store whose API server answers one list, then refuses every connection."""
    source = FakeSource()
    source.lists.extend([page("10"), *[TransportError("connection refused")] * 1000])
    source.watches.extend([TransportError("connection reset")] * 1000)
    store = NamespaceDefaultsStore(
        source=source, clock=clock, settings=SETTINGS, rng=random.Random(7)
    )
    return source, store


def attempts(source: FakeSource) -> int:
    return len(source.list_calls) + len(source.watch_calls)


def informer_lines(logs: Sequence[Mapping[str, Any]]) -> list[tuple[str, str]]:
    """(level, event) of the lines at info or above about Namespaces."""
    return [
        (line["log_level"], line["event"])
        for line in logs
        if "namespaces" in str(line.get("resource"))
        if line["log_level"] in ("info", "warning", "error")
    ]


async def test_a_minute_of_connection_errors_costs_a_few_attempts_and_two_lines(
    clock: FakeClock,
) -> None:
    source, store = failing_store(clock)
    with capture_logs() as logs:
        task = asyncio.create_task(store.run())
        await clock.settle()
        assert store.synced()
        before = attempts(source)
        for _ in range(600):  # one simulated minute, in steps of 0.1 s
            await clock.advance(0.1)
        during = attempts(source) - before
        assert store.disconnected() == ["namespaces"]
        # 0.8 s doubling with up to 100 % jitter: at most 7 attempts fit in a minute
        # (about 50 with the once-a-second retry of the ordinary informers).
        assert 4 <= during <= 7, during
        outage_lines = informer_lines(logs)
        assert [level for level, _ in outage_lines] == ["warning"], outage_lines

        source.lists.clear()  # the API server answers again
        source.watches.clear()
        for _ in range(700):
            await clock.advance(0.1)
            if not store.disconnected():
                break
        assert store.disconnected() == []
        lines = informer_lines(logs)
        await cancel_and_wait(task)
    assert [level for level, _ in lines] == ["warning", "warning"], lines
    assert lines[1][1] == "api server answers again"


async def test_another_informer_finding_the_server_back_ends_the_wait_at_once(
    clock: FakeClock,
) -> None:
    source, store = failing_store(clock)
    task = asyncio.create_task(store.run())
    await clock.settle()
    for _ in range(600):  # a simulated minute: the curve is at its 30 s cap by now
        await clock.advance(0.1)
    assert store.disconnected() == ["namespaces"]
    source.lists.clear()  # the API server answers again
    source.watches.clear()
    await clock.advance(0.1)
    assert store.disconnected() == ["namespaces"], "still inside its long wait"
    store.retry_now()  # an object informer got an answer
    await clock.settle()
    assert store.disconnected() == []
    await cancel_and_wait(task)


async def test_a_wake_up_while_connected_does_not_skip_a_later_wait(clock: FakeClock) -> None:
    source, store = failing_store(clock)
    task = asyncio.create_task(store.run())
    await clock.settle()
    store.retry_now()  # before any failure: nothing to cut short, and nothing is remembered
    for _ in range(600):
        await clock.advance(0.1)
    # The same budget as above: a stray wake-up did not turn into a quick retry loop.
    assert len(source.list_calls) + len(source.watch_calls) <= 8
    await cancel_and_wait(task)
