"""The tools and ``since`` (docs/policies.md#since): ``plan -f`` computes it over the
manifests (``matchedAt`` is the run's ``--now``, said so), ``policies try`` lists the objects
whose ``since`` has no value apart, and ``explain``'s policy lines show the expression, its
value and what the deletion counts from."""

from __future__ import annotations

from typing import Any

import pytest

from lifecycle_controller.config.build import build_settings
from lifecycle_controller.core import DecisionSettings
from lifecycle_controller.core.objects.scope import ScopeConfig
from lifecycle_controller.core.text.timestamps import format_rfc3339_nano
from lifecycle_controller.kube import KubeClient
from lifecycle_controller.kube.resources import CLUSTER_POLICIES, CONFIGMAPS, POLICIES
from lifecycle_controller.tools.explain_policies import PolicyReport, policy_lines
from lifecycle_controller.tools.options import controller_view
from lifecycle_controller.tools.plan import plan_report
from lifecycle_controller.tools.policies import render_try, try_policies
from tests.doubles.fakeapi import FakeApiServer
from tests.doubles.fakeclock import FakeClock
from tests.unit.support import annotated

NOW_NS = 1_800_000_000 * 10**9
HOUR_NS = 3600 * 10**9
DEPLOYED = "example.com/deployed-at"


def policy(since: str, **spec: Any) -> dict[str, Any]:
    return {
        "apiVersion": "lifecycle.cezary.dev/v1alpha1",
        "kind": "ClusterLifecyclePolicy",
        "metadata": {"name": "after-deploy"},
        "spec": {
            "resources": ["configmaps"],
            "since": since,
            "lifecycle": {"delete-after": "1h"},
            **spec,
        },
    }


def configmap(name: str, **annotations: str) -> dict[str, Any]:
    metadata = {"name": name, "namespace": "team-a", "annotations": annotations}
    return {"apiVersion": "v1", "kind": "ConfigMap", "metadata": metadata}


def plan(*manifests: dict[str, Any]) -> dict[str, Any]:
    view = controller_view(build_settings({"watch_resource": ("configmaps",)}))
    report = plan_report(list(manifests), now_ns=NOW_NS, controller=view)
    return {row.name: row for row in report.rows if row.kind == "ConfigMap"}


def test_plan_counts_from_the_field_and_leaves_an_object_without_it_alone() -> None:
    deployed = format_rfc3339_nano(NOW_NS - 30 * 60 * 10**9)
    rows = plan(
        policy(f'timestamp(object.metadata.annotations["{DEPLOYED}"])'),
        configmap("deployed", **{DEPLOYED: deployed}),
        configmap("never"),
    )
    assert rows["deployed"].next == format_rfc3339_nano(NOW_NS + 30 * 60 * 10**9)
    assert rows["deployed"].since.startswith(
        f'since timestamp(object.metadata.annotations["{DEPLOYED}"]) = {deployed}: '
        "delete-after 1h counts from it"
    )
    assert rows["never"].policy == ""
    assert rows["never"].left_alone == [
        {
            "policy": "ClusterLifecyclePolicy/after-deploy",
            "why": f"its since has no value: a field since reads is absent (no key '{DEPLOYED}')",
        }
    ]


def test_plan_counts_matched_at_from_the_run_and_says_so() -> None:
    rows = plan(policy("matchedAt"), configmap("any"))
    assert rows["any"].next == format_rfc3339_nano(NOW_NS + HOUR_NS)
    assert "(matchedAt: the time of this run" in rows["any"].since


@pytest.fixture
def policies_served(api: FakeApiServer) -> None:
    api.serve(CLUSTER_POLICIES)
    api.serve(POLICIES)


@pytest.mark.usefixtures("policies_served")
async def test_try_lists_the_objects_whose_since_has_no_value_apart(
    kube: KubeClient, clock: FakeClock
) -> None:
    await kube.create(CONFIGMAPS, "team", annotated("deployed", {DEPLOYED: "2020-01-01T00:00:00Z"}))
    await kube.create(CONFIGMAPS, "team", annotated("never", {}))
    report = await try_policies(
        kube,
        [policy(f'timestamp(object.metadata.annotations["{DEPLOYED}"])')],
        scope=ScopeConfig(watch_resources=("configmaps",)),
        settings=DecisionSettings(),
        now_ns=clock.now_ns(),
    )
    totals = report.totals["ClusterLifecyclePolicy/after-deploy"]
    assert (totals.matched, totals.decides, totals.due_now, totals.spent) == (2, 1, 1, 0)
    assert totals.no_since == [
        f"ConfigMap team/never: a field since reads is absent (no key '{DEPLOYED}')"
    ]
    text = render_try(report, "table")
    assert "left alone: 1 whose since has no value" in text
    assert (
        "  its since has no value for ConfigMap team/never: a field since reads is absent" in text
    )


def test_explain_shows_the_since_line() -> None:
    report = PolicyReport(
        decided_by="ClusterLifecyclePolicy/after-deploy",
        based_on="based on ClusterLifecyclePolicy/after-deploy: delete-after 1h",
        overlapped=[],
        exempt=False,
        own_action=False,
        since="since matchedAt = 2027-01-15T08:00:00Z: delete-after 1h counts from it",
    )
    assert (
        "Since:        since matchedAt = 2027-01-15T08:00:00Z: delete-after 1h counts from it"
        in policy_lines(report)
    )
