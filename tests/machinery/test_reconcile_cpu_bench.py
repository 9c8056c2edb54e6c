"""``tests.profiling.reconcile_cpu`` keeps working: a small run deletes every object it queued."""

from __future__ import annotations

from tests.profiling.reconcile_cpu import measure


async def test_a_small_run_schedules_and_deletes_every_object() -> None:
    result = await measure(objects=30, rounds=2, profile=None)
    assert result["deleted"] == 60
    assert len(result["schedule_rounds"]) == len(result["delete_rounds"]) == 2
    assert result["schedule_us_per_object"] > 0
    assert result["delete_us_per_object"] > 0
