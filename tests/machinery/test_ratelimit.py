"""Rate limiters, ported from client-go ``default_rate_limiters_test.go``."""

from __future__ import annotations

from collections.abc import Hashable

import pytest
from hypothesis import given
from hypothesis import strategies as st

from lifecycle_controller.machinery.ratelimit import (
    BucketRateLimiter,
    ItemExponentialFailureRateLimiter,
    MaxOfRateLimiter,
    RateLimiter,
    default_controller_rate_limiter,
)
from tests.doubles.fakeclock import FakeClock

MS = 0.001


class TestItemExponentialFailure:
    def test_default_sequence_doubles_from_5ms_and_caps_at_1000s(self) -> None:
        limiter = ItemExponentialFailureRateLimiter()
        delays = [limiter.when("k") for _ in range(22)]
        expected = [0.005 * 2**i for i in range(18)] + [1000.0] * 4
        assert delays == pytest.approx(expected)
        assert delays[:4] == pytest.approx([0.005, 0.010, 0.020, 0.040])
        assert delays[17] == pytest.approx(655.36)  # 18th failure
        assert delays[18] == 1000.0  # 19th failure
        assert limiter.num_requeues("k") == 22

    def test_client_go_sequence_per_item_and_forget(self) -> None:
        limiter = ItemExponentialFailureRateLimiter(1 * MS, 1.0)
        assert [limiter.when("one") for _ in range(5)] == pytest.approx(
            [1 * MS, 2 * MS, 4 * MS, 8 * MS, 16 * MS]
        )
        assert limiter.num_requeues("one") == 5
        assert [limiter.when("two") for _ in range(2)] == pytest.approx([1 * MS, 2 * MS])
        assert limiter.num_requeues("two") == 2
        limiter.forget("one")
        assert limiter.num_requeues("one") == 0
        assert limiter.when("one") == pytest.approx(1 * MS)
        assert limiter.num_requeues("two") == 2

    def test_overflow_returns_the_cap(self) -> None:
        hour = 3600.0
        limiter = ItemExponentialFailureRateLimiter(1 * MS, 1000 * hour)
        for _ in range(5):
            limiter.when("one")
        assert limiter.when("one") == pytest.approx(32 * MS)
        for _ in range(1000):
            limiter.when("overflow1")
        assert limiter.when("overflow1") == 1000 * hour

        limiter = ItemExponentialFailureRateLimiter(60.0, 1000 * hour)
        for _ in range(2):
            limiter.when("two")
        assert limiter.when("two") == pytest.approx(240.0)
        for _ in range(1000):
            limiter.when("overflow2")
        assert limiter.when("overflow2") == 1000 * hour

    def test_forget_unknown_item_is_harmless(self) -> None:
        ItemExponentialFailureRateLimiter().forget("never-seen")

    @pytest.mark.parametrize(("base", "cap"), [(0, 1), (-1, 1), (1, 0.5), (float("nan"), 1)])
    def test_rejects_bad_configuration(self, base: float, cap: float) -> None:
        with pytest.raises(ValueError, match="delay"):
            ItemExponentialFailureRateLimiter(base, cap)

    @given(st.integers(min_value=1, max_value=300))
    def test_delays_never_decrease_and_never_exceed_the_cap(self, calls: int) -> None:
        limiter = ItemExponentialFailureRateLimiter()
        delays = [limiter.when("k") for _ in range(calls)]
        assert delays == sorted(delays)
        assert all(0.005 <= d <= 1000.0 for d in delays)


class TestBucket:
    def test_burst_of_100_then_one_token_every_100ms(self, clock: FakeClock) -> None:
        limiter = BucketRateLimiter(clock)
        assert [limiter.when(i) for i in range(100)] == [0.0] * 100
        assert [limiter.when(i) for i in range(100, 105)] == pytest.approx(
            [0.1, 0.2, 0.3, 0.4, 0.5]
        )

    async def test_refills_with_monotonic_time(self, clock: FakeClock) -> None:
        limiter = BucketRateLimiter(clock)
        for i in range(100):
            limiter.when(i)
        await clock.advance(0.5)
        assert [limiter.when(i) for i in range(5)] == [0.0] * 5
        assert limiter.when("next") == pytest.approx(0.1)

    async def test_reservations_are_paid_back_before_new_tokens(self, clock: FakeClock) -> None:
        limiter = BucketRateLimiter(clock)
        for i in range(110):  # 10 tokens reserved beyond the burst: debt of 1 s
            limiter.when(i)
        await clock.advance(0.5)
        assert limiter.when("x") == pytest.approx(0.6)

    async def test_never_holds_more_than_the_burst(self, clock: FakeClock) -> None:
        limiter = BucketRateLimiter(clock, qps=10, burst=100)
        await clock.advance(1000)
        assert [limiter.when(i) for i in range(100)] == [0.0] * 100
        assert limiter.when("101st") == pytest.approx(0.1)

    def test_is_not_per_item(self, clock: FakeClock) -> None:
        limiter = BucketRateLimiter(clock, qps=1, burst=1)
        assert limiter.when("a") == 0.0
        assert limiter.when("a") == pytest.approx(1.0)
        limiter.forget("a")
        assert limiter.num_requeues("a") == 0
        assert limiter.when("b") == pytest.approx(2.0)

    @pytest.mark.parametrize(("qps", "burst"), [(0, 1), (-1, 1), (float("inf"), 1), (1, 0)])
    def test_rejects_bad_configuration(self, clock: FakeClock, qps: float, burst: int) -> None:
        with pytest.raises(ValueError, match=r"qps|burst"):
            BucketRateLimiter(clock, qps=qps, burst=burst)


class _FastSlow:
    """client-go's ItemFastSlowRateLimiter, enough to port TestMaxOfRateLimiter."""

    def __init__(self, fast: float, slow: float, max_fast: int) -> None:
        self._fast, self._slow, self._max_fast = fast, slow, max_fast
        self._attempts: dict[Hashable, int] = {}

    def when(self, item: Hashable) -> float:
        self._attempts[item] = self._attempts.get(item, 0) + 1
        return self._fast if self._attempts[item] <= self._max_fast else self._slow

    def forget(self, item: Hashable) -> None:
        self._attempts.pop(item, None)

    def num_requeues(self, item: Hashable) -> int:
        return self._attempts.get(item, 0)


class _Spy:
    def __init__(self, delay: float, requeues: int) -> None:
        self.delay, self.requeues = delay, requeues
        self.when_calls: list[Hashable] = []
        self.forgotten: list[Hashable] = []

    def when(self, item: Hashable) -> float:
        self.when_calls.append(item)
        return self.delay

    def forget(self, item: Hashable) -> None:
        self.forgotten.append(item)

    def num_requeues(self, item: Hashable) -> int:
        return self.requeues


class TestMaxOf:
    def test_client_go_max_of(self) -> None:
        limiter = MaxOfRateLimiter(
            _FastSlow(5 * MS, 3.0, 3), ItemExponentialFailureRateLimiter(1 * MS, 1.0)
        )
        assert [limiter.when("one") for _ in range(5)] == pytest.approx(
            [5 * MS, 5 * MS, 5 * MS, 3.0, 3.0]
        )
        assert limiter.num_requeues("one") == 5
        assert [limiter.when("two") for _ in range(2)] == pytest.approx([5 * MS, 5 * MS])
        assert limiter.num_requeues("two") == 2
        limiter.forget("one")
        assert limiter.num_requeues("one") == 0
        assert limiter.when("one") == pytest.approx(5 * MS)

    def test_calls_every_limiter_and_delegates(self) -> None:
        a, b, c = _Spy(0.5, 1), _Spy(2.0, 7), _Spy(0.0, 3)
        limiter = MaxOfRateLimiter(a, b, c)
        assert limiter.when("k") == 2.0
        assert a.when_calls == b.when_calls == c.when_calls == ["k"]
        assert limiter.num_requeues("k") == 7
        limiter.forget("k")
        assert a.forgotten == b.forgotten == c.forgotten == ["k"]

    def test_needs_a_limiter(self) -> None:
        with pytest.raises(ValueError, match="at least one"):
            MaxOfRateLimiter()

    def test_limiters_satisfy_the_protocol(self, clock: FakeClock) -> None:
        for limiter in (
            ItemExponentialFailureRateLimiter(),
            BucketRateLimiter(clock),
            MaxOfRateLimiter(_Spy(0, 0)),
        ):
            assert isinstance(limiter, RateLimiter)


class TestDefaultControllerRateLimiter:
    def test_exponential_wins_for_one_item(self, clock: FakeClock) -> None:
        limiter = default_controller_rate_limiter(clock)
        assert [limiter.when("k") for _ in range(4)] == pytest.approx([0.005, 0.01, 0.02, 0.04])
        assert limiter.num_requeues("k") == 4
        limiter.forget("k")
        assert limiter.num_requeues("k") == 0

    def test_bucket_wins_when_many_items_fail_at_once(self, clock: FakeClock) -> None:
        limiter = default_controller_rate_limiter(clock)
        assert [limiter.when(i) for i in range(100)] == pytest.approx([0.005] * 100)
        assert [limiter.when(i) for i in range(100, 103)] == pytest.approx([0.1, 0.2, 0.3])
