"""Action budgets: a full bucket, continuous refill, waits instead of drops."""

from __future__ import annotations

import pytest

from lifecycle_controller.machinery.budget import ActionBudget
from tests.doubles.fakeclock import FakeClock


def test_unlimited_budget_never_waits() -> None:
    budget = ActionBudget(0, clock=FakeClock())
    assert all(budget.take() == 0.0 for _ in range(10_000))


def test_full_bucket_then_waits_for_refill() -> None:
    clock = FakeClock()
    budget = ActionBudget(6, clock=clock)  # one token per 10 s
    assert [budget.take() for _ in range(6)] == [0.0] * 6
    assert budget.take() == pytest.approx(10.0)
    assert budget.take() == pytest.approx(10.0), "a refused take must not consume"


async def test_refill_is_continuous_and_capped() -> None:
    clock = FakeClock()
    budget = ActionBudget(60, clock=clock)  # one token per second
    for _ in range(60):
        budget.take()
    await clock.advance(0.5)
    assert budget.take() == pytest.approx(0.5)
    await clock.advance(0.5)
    assert budget.take() == 0.0
    await clock.advance(3600)
    assert [budget.take() for _ in range(60)] == [0.0] * 60
    assert budget.take() > 0


def test_negative_budget_is_rejected() -> None:
    with pytest.raises(ValueError, match="per_minute"):
        ActionBudget(-1, clock=FakeClock())
