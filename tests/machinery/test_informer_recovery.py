"""How an informer comes back after the API server was unreachable (issue 8, fix (c)).

On a fake clock: the backoff starts over after every successful request, the delay after a
connection error stays under about 2 s however long the outage was, a second connection
failure in a row relists, and the informer reports itself disconnected (readiness) from its
second consecutive failure until the next success.
"""

from __future__ import annotations

import random

import pytest

from lifecycle_controller.controller.watch.informers import InformerSet
from lifecycle_controller.kube import ServerError, TransportError
from lifecycle_controller.machinery.backoff import Backoff
from tests.doubles.fakeclock import FakeClock
from tests.machinery.test_informers import (
    CONFIGMAPS,
    SETTINGS,
    Harness,
    bookmark,
    page,
    run_until_parked,
    stop,
)


@pytest.fixture
def h(clock: FakeClock) -> Harness:
    return Harness(clock)


def test_a_capped_delay_stays_low_while_the_curve_still_climbs(clock: FakeClock) -> None:
    backoff = Backoff(clock, initial=0.8, maximum=30, jitter=0.0)
    assert [backoff.next_delay(cap=0.5) for _ in range(6)] == [0.5] * 6
    assert backoff.next_delay() == 30  # the uncapped curve went on climbing meanwhile
    backoff.reset()
    assert backoff.next_delay() == 0.8


def test_jitter_applies_on_top_of_the_cap(clock: FakeClock) -> None:
    backoff = Backoff(clock, initial=0.8, maximum=30, jitter=1.0, rng=random.Random(3))
    delays = [backoff.next_delay(cap=0.8) for _ in range(50)]
    assert all(0.8 <= delay < 1.6 for delay in delays)


async def test_a_long_outage_is_retried_about_once_a_second_and_ends_with_a_list(
    h: Harness,
) -> None:
    outage = 40
    h.source.lists.extend([page("10"), *[TransportError("refused")] * outage, page("50")])
    h.source.watches.extend([TransportError("reset"), TransportError("refused")])
    informer = h.informer()
    task = await run_until_parked(h, informer)
    assert informer.synced
    waited = 0.0
    while len(h.source.list_calls) < outage + 2:
        await h.clock.advance(0.1)
        waited += 0.1
        assert waited < 2.0 * (outage + 2), "retries too slow: the outage never ends"
    # No delay of the outage exceeded 1.6 s (0.8 s cap + 100 % jitter) ...
    assert waited <= 1.6 * (outage + 2) + 0.2
    # ... and none was a hot loop: at least the 0.8 s base each time.
    assert waited >= 0.8 * (outage + 1)
    await h.clock.settle()
    assert [c["rv"] for c in h.source.watch_calls][-1] == "50"
    assert not informer.disconnected
    assert informer.failures == 0
    await stop(task)


async def test_disconnected_from_the_second_failure_until_the_next_success(h: Harness) -> None:
    h.source.lists.extend([page("10"), ServerError(503, {"message": "down"}), page("20")])
    h.source.watches.extend([TransportError("reset"), TransportError("refused"), [bookmark("21")]])
    informer = h.informer()
    task = await run_until_parked(h, informer)
    states = []
    for _ in range(100):
        states.append((informer.failures, informer.disconnected))
        await h.clock.advance(0.1)
    assert (1, False) in states  # one broken stream is not an outage
    assert (2, True) in states
    assert states[-1] == (0, False)  # the relist succeeded
    assert [c["rv"] for c in h.source.list_calls] == ["0", None, None]
    await stop(task)


async def test_the_informer_set_names_the_disconnected_informers(clock: FakeClock) -> None:
    h = Harness(clock)
    h.source.lists.extend([page("10"), *[TransportError("refused")] * 10])
    h.source.watches.extend([TransportError("reset"), TransportError("refused")])
    informers = InformerSet(
        source=h.source,
        cache=h.cache,
        on_object_change=h.recorder,
        clock=clock,
        namespaces=["ns"],
        settings=SETTINGS,
        rng=random.Random(1),
    )
    await informers.ensure([CONFIGMAPS])
    await clock.settle()
    assert informers.disconnected() == []
    await clock.advance(3.3)
    assert informers.disconnected() == [f"{CONFIGMAPS} in ns"]
    await informers.aclose()
    assert informers.disconnected() == []
