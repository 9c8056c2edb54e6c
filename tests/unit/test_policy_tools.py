"""``policies`` and ``policies try`` on the in-memory API server: the totals, the rows of
policies the controller has or has not reported on, and the trial's time (``now_ns``)."""

from __future__ import annotations

from typing import Any

import pytest

from lifecycle_controller.core import DecisionSettings
from lifecycle_controller.core.objects.scope import ScopeConfig
from lifecycle_controller.core.schedule.windows import parse_windows
from lifecycle_controller.kube import KubeClient
from lifecycle_controller.kube.resources import CLUSTER_POLICIES, CONFIGMAPS, POLICIES
from lifecycle_controller.tools.policies import (
    Totals,
    list_policies,
    render_policies,
    render_try,
    try_policies,
)
from lifecycle_controller.tools.status import collect_status
from tests.doubles.fakeapi import FakeApiServer
from tests.doubles.fakeclock import FakeClock
from tests.unit.support import annotated

SCOPE = ScopeConfig(watch_resources=("configmaps",))
HOUR_NS = 3600 * 10**9


def cluster_policy(name: str, **spec: Any) -> dict[str, Any]:
    return {
        "apiVersion": "lifecycle.cezary.dev/v1alpha1",
        "kind": "ClusterLifecyclePolicy",
        "metadata": {"name": name},
        "spec": {"resources": ["configmaps"], **spec},
    }


@pytest.fixture
def policies_served(api: FakeApiServer) -> None:
    api.serve(CLUSTER_POLICIES)
    api.serve(POLICIES)


@pytest.mark.usefixtures("policies_served")
@pytest.mark.parametrize(
    ("lifecycle", "later_ns", "settings", "expected"),
    [
        ({"delete-after": "1h"}, 0, DecisionSettings(), Totals(1, 1, deletions=1)),
        ({"delete-after": "1h"}, 2 * HOUR_NS, DecisionSettings(), Totals(1, 1, 1, due_now=1)),
        (
            {"delete-after": "1h", "dry-run": "true"},
            2 * HOUR_NS,
            DecisionSettings(),
            Totals(1, 1, 1, due_now=1, dry_run=1),
        ),
        (  # a closed maintenance window moves the due deletion to its opening (a Thursday)
            {"delete-after": "1h"},
            2 * HOUR_NS,
            DecisionSettings(maintenance_windows=parse_windows("Mon-Mon 00:00-00:01 UTC")),
            Totals(1, 1, 1),
        ),
    ],
    ids=["later", "due", "dry-run", "window"],
)
async def test_try_totals_at_the_trial_time(
    kube: KubeClient,
    clock: FakeClock,
    lifecycle: dict[str, str],
    later_ns: int,
    settings: DecisionSettings,
    expected: Totals,
) -> None:
    await kube.create(CONFIGMAPS, "team", annotated("plain", {}))
    report = await try_policies(
        kube,
        [cluster_policy("sweep", lifecycle=lifecycle)],
        scope=SCOPE,
        settings=settings,
        now_ns=clock.now_ns() + later_ns,
    )
    assert report.totals == {"ClusterLifecyclePolicy/sweep": expected}
    assert [row.name for row in report.rows] == ["plain"]
    text = render_try(report, "table")
    assert text.endswith("Nothing was written: the policies are not applied.")


@pytest.mark.usefixtures("policies_served")
async def test_policies_without_a_report_show_their_own_reading(
    kube: KubeClient, clock: FakeClock
) -> None:
    await kube.create(
        CLUSTER_POLICIES, None, cluster_policy("good", lifecycle={"delete-after": "1h"})
    )
    await kube.create(
        CLUSTER_POLICIES, None, cluster_policy("bad", lifecycle={"delete-afer": "1h"})
    )
    rows = {row.name: row for row in await list_policies(kube, now_ns=0, namespace=None)}
    assert rows["good"].conditions == []
    assert rows["good"].matched is None
    assert rows["good"].detail == "not reported by the controller for this generation yet"
    assert rows["bad"].conditions == ["Invalid"]
    assert (
        "spec.lifecycle.delete-afer: unknown key; did you mean delete-after?" in rows["bad"].detail
    )
    table = render_policies(list(rows.values()), "table")
    assert table.splitlines()[0].split()[:4] == ["KIND", "NAMESPACE", "NAME", "ACTION"]


async def test_policies_without_the_crds_lists_none(kube: KubeClient) -> None:
    assert await list_policies(kube, now_ns=0, namespace=None) == []
    assert render_policies([], "table") == "No lifecycle policies."


@pytest.mark.usefixtures("policies_served")
async def test_try_judges_a_condition_over_the_objects_data(
    kube: KubeClient, clock: FakeClock
) -> None:
    """A condition reading ``object.data`` sees the live object's data, not an error."""
    scratch = annotated("scratch", {})
    scratch["data"] = {"mode": "scratch"}
    await kube.create(CONFIGMAPS, "team", scratch)
    kept = annotated("kept", {})
    kept["data"] = {"other": "x"}
    await kube.create(CONFIGMAPS, "team", kept)
    condition = 'has(object.data.mode) && object.data.mode == "scratch"'
    report = await try_policies(
        kube,
        [cluster_policy("by-mode", condition=condition, lifecycle={"delete-after": "1h"})],
        scope=SCOPE,
        settings=DecisionSettings(),
        now_ns=clock.now_ns(),
    )
    assert [row.name for row in report.rows] == ["scratch"]
    assert report.totals["ClusterLifecyclePolicy/by-mode"].held == 0


@pytest.mark.usefixtures("policies_served")
async def test_status_judges_a_condition_over_the_objects_data(
    kube: KubeClient, clock: FakeClock
) -> None:
    """``status`` reads the fields a policy's condition reads, as the controller keeps them."""
    scratch = annotated("scratch", {})
    scratch["data"] = {"mode": "scratch"}
    await kube.create(CONFIGMAPS, "team", scratch)
    kept = annotated("kept", {})
    kept["data"] = {"mode": "keep"}
    await kube.create(CONFIGMAPS, "team", kept)
    condition = 'has(object.data.mode) && object.data.mode == "scratch"'
    policy = cluster_policy("by-mode", condition=condition, lifecycle={"delete-after": "1h"})
    await kube.create(CLUSTER_POLICIES, None, policy)
    report = await collect_status(kube, scope=SCOPE, clock=clock, settings=DecisionSettings())
    assert [row.name for row in report.rows] == ["scratch"]
    assert all(not row.problems for row in report.rows)
