"""``status`` on the fake API server: which objects get a row, and what it says."""

from __future__ import annotations

from lifecycle_controller.core import DecisionSettings, keys
from lifecycle_controller.core.scope import ScopeConfig
from lifecycle_controller.kube import KubeClient
from lifecycle_controller.kube.resources import CONFIGMAPS
from lifecycle_controller.testing.fakeclock import FakeClock
from lifecycle_controller.tools.status import collect_status
from tests.unit.support import annotated


async def test_rows_for_actions_and_problems_only(kube: KubeClient, clock: FakeClock) -> None:
    objects = {
        "later": {keys.DELETE_AT: "2026-01-02T00:00:00Z"},
        "broken": {keys.DELETE_AFTER: "2x"},
        "bookkeeping": {keys.MANAGED_BY: "lifecycle-controller"},  # nothing to act on
        "modifier": {keys.CATCH_UP: "15m"},  # a modifier without an action
    }
    for name, values in objects.items():
        await kube.create(CONFIGMAPS, "team-a", annotated(name, values))
    await kube.create(CONFIGMAPS, "team-b", annotated("elsewhere", objects["later"]))
    report = await collect_status(
        kube,
        scope=ScopeConfig(watch_resources=("configmaps",)),
        clock=clock,
        settings=DecisionSettings(),
        namespace="team-a",
    )
    rows = {row.name: row for row in report.rows}
    assert sorted(rows) == ["broken", "later"]
    assert rows["later"].next == "2026-01-02T00:00:00Z"
    assert rows["broken"].problems[0].startswith("InvalidAnnotation: ")
    assert report.unreadable == []
    everywhere = await collect_status(
        kube, scope=ScopeConfig(), clock=clock, settings=DecisionSettings(), namespace=None
    )
    assert {row.name for row in everywhere.rows} == {"broken", "later", "elsewhere"}
