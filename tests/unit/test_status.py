"""``status`` on the fake API server: which objects get a row, and what it says."""

from __future__ import annotations

from lifecycle_controller.core import DecisionSettings
from lifecycle_controller.core.objects import keys
from lifecycle_controller.core.objects.scope import ScopeConfig
from lifecycle_controller.kube import KubeClient
from lifecycle_controller.kube.resources import CONFIGMAPS, NAMESPACES
from lifecycle_controller.tools.status import collect_status
from tests.doubles.fakeclock import FakeClock
from tests.unit.support import annotated

PAST = "2020-01-01T00:00:00Z"


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


async def test_rows_name_the_values_that_come_from_the_namespace(
    kube: KubeClient, clock: FakeClock
) -> None:
    await kube.create(NAMESPACES, None, annotated("previews", {keys.DRY_RUN: "true"}))
    await kube.create(NAMESPACES, None, annotated("held", {keys.MAINTENANCE_WINDOW: "whenever"}))
    await kube.create(CONFIGMAPS, "previews", annotated("a", {keys.DELETE_AT: PAST}))
    await kube.create(CONFIGMAPS, "held", annotated("b", {keys.DELETE_AT: PAST}))
    report = await collect_status(
        kube, scope=ScopeConfig(watch_resources=("configmaps",)), clock=clock,
        settings=DecisionSettings(),
    )  # fmt: skip
    rows = {row.name: row for row in report.rows}
    assert rows["a"].dry_run is True
    assert rows["a"].inherited == ["dry-run: true (from namespace previews)"]
    assert rows["b"].action == ""
    assert rows["b"].summary.startswith("blocked: namespace held has an invalid maintenance-window")
    assert rows["b"].problems[0].startswith("InvalidAnnotation: namespace held has an invalid")
    one = await collect_status(
        kube, scope=ScopeConfig(watch_resources=("configmaps",)), clock=clock,
        settings=DecisionSettings(), namespace="previews",
    )  # fmt: skip
    assert [row.inherited for row in one.rows] == [["dry-run: true (from namespace previews)"]]
