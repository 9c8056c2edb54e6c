"""The tools' output on the rough edges: huge values, namespace dry-run, inherited values,
wrong calls, typos.

``status`` and ``explain`` run against the fake API server; ``plan`` and the usage errors
through the installed entry points.
"""

from __future__ import annotations

import json

import pytest

from lifecycle_controller.cli import main
from lifecycle_controller.core import DecisionSettings
from lifecycle_controller.core.objects import keys
from lifecycle_controller.core.objects.scope import ScopeConfig
from lifecycle_controller.core.text.shorten import TEXT_LIMIT
from lifecycle_controller.kube import KubeClient
from lifecycle_controller.kube.resources import CLUSTER_POLICIES, CONFIGMAPS, NAMESPACES, POLICIES
from lifecycle_controller.tools import kubectl_plugin
from lifecycle_controller.tools.explain import explain_object, render_report, report_data
from lifecycle_controller.tools.report import render
from lifecycle_controller.tools.status import collect_status
from tests.doubles.fakeapi import FakeApiServer
from tests.doubles.fakeclock import FakeClock
from tests.unit.support import annotated

HUGE = "9" * 100_000 + "h"
FUTURE = "2099-01-01T00:00:00Z"
SCOPE = ScopeConfig(watch_resources=("configmaps",))


def _strings(value: object) -> list[str]:
    if isinstance(value, str):
        return [value]
    if isinstance(value, dict):
        return [s for item in value.values() for s in _strings(item)]
    if isinstance(value, list):
        return [s for item in value for s in _strings(item)]
    return []


async def test_huge_values_are_cut_in_status_and_explain(
    kube: KubeClient, clock: FakeClock
) -> None:
    await kube.create(CONFIGMAPS, "team", annotated("huge", {keys.DELETE_AFTER: HUGE}))
    report = await collect_status(kube, scope=SCOPE, clock=clock, settings=DecisionSettings())
    for output in ("table", "json"):
        text = render(report.rows, output)
        assert max(len(line) for line in text.splitlines()) < 3 * TEXT_LIMIT
    explained = await explain_object(
        kube, "configmap/huge", namespace="team", scope=SCOPE,
        settings=DecisionSettings(), now_ns=clock.now_ns(),
    )  # fmt: skip
    assert max(len(line) for line in render_report(explained).splitlines()) < 3 * TEXT_LIMIT
    values = _strings(report_data(explained)) + _strings([row.problems for row in report.rows])
    assert max(len(value.encode()) for value in values) <= TEXT_LIMIT
    assert any(value.endswith("...") for value in values)


async def test_status_and_explain_agree_on_a_namespace_dry_run(
    kube: KubeClient, clock: FakeClock
) -> None:
    await kube.create(NAMESPACES, None, annotated("previews", {keys.DRY_RUN: "true"}))
    await kube.create(CONFIGMAPS, "previews", annotated("later", {keys.DELETE_AT: FUTURE}))
    report = await collect_status(kube, scope=SCOPE, clock=clock, settings=DecisionSettings())
    (row,) = report.rows
    explained = await explain_object(
        kube, "configmap/later", namespace="previews", scope=SCOPE,
        settings=DecisionSettings(), now_ns=clock.now_ns(),
    )  # fmt: skip
    assert explained.dry_run == "yes (namespace previews)"
    assert row.dry_run is True
    assert json.loads(render(report.rows, "json"))[0]["dry_run"] is True


async def test_inherited_values_are_shown_but_not_on_a_row_its_own_value_blocks(
    kube: KubeClient, clock: FakeClock
) -> None:
    defaults = {keys.DRY_RUN: "true", keys.CATCH_UP: "never"}
    await kube.create(NAMESPACES, None, annotated("previews", defaults))
    await kube.create(CONFIGMAPS, "previews", annotated("bad", {keys.DELETE_AFTER: "2x"}))
    await kube.create(CONFIGMAPS, "previews", annotated("good", {keys.DELETE_AT: FUTURE}))
    report = await collect_status(kube, scope=SCOPE, clock=clock, settings=DecisionSettings())
    rows = {row.name: row for row in report.rows}
    assert rows["bad"].problems
    assert rows["bad"].inherited == []
    assert rows["good"].inherited == [
        "catch-up: never (from namespace previews)",
        "dry-run: true (from namespace previews)",
    ]
    explained = await explain_object(
        kube, "configmap/good", namespace="previews", scope=SCOPE,
        settings=DecisionSettings(), now_ns=clock.now_ns(),
    )  # fmt: skip
    assert "Inherited:    catch-up: never (from namespace previews)" in render_report(explained)


def _exit(entry: object, *args: str) -> int:
    try:
        entry(list(args))  # type: ignore[operator]
    except SystemExit as stopped:
        return stopped.code if isinstance(stopped.code, int) else 1
    return 0


@pytest.mark.parametrize("entry", [main, kubectl_plugin.main], ids=["cli", "plugin"])
@pytest.mark.parametrize(
    "args",
    [
        ["explain", "nt-web"],
        ["explain", "configmap/"],
        ["status", "--warn-before", "soon"],
        ["status", "-n", "a", "-A"],
        ["plan", "-f", "/nonexistent/manifests"],
        ["explain", "cm/x", "--now", "tomorrow"],
    ],
)
def test_usage_errors_exit_2(
    entry: object, args: list[str], capsys: pytest.CaptureFixture[str]
) -> None:
    assert _exit(entry, *args) == 2
    assert capsys.readouterr().err.count("\n") == 1  # one line


def test_plan_reports_an_unknown_key_with_the_nearest_known_one(
    tmp_path: object, capsys: pytest.CaptureFixture[str]
) -> None:
    manifest = {
        "apiVersion": "v1",
        "kind": "ConfigMap",
        "metadata": {"name": "typo", "annotations": {keys.PREFIX + "delete-afer": "1h"}},
    }
    path = f"{tmp_path}/typo.json"
    with open(path, "w", encoding="utf-8") as file:
        json.dump(manifest, file)
    assert _exit(main, "plan", "-f", path, "-o", "json") == 1
    (row,) = json.loads(capsys.readouterr().out)
    assert row["problems"] == [
        "UnknownAnnotation: lifecycle.cezary.dev/delete-afer is not a key the controller "
        "reads; did you mean delete-after?"
    ]


async def test_explain_describes_every_key_it_reads(kube: KubeClient, clock: FakeClock) -> None:
    await kube.create(
        NAMESPACES,
        None,
        annotated("previews", {keys.MAX_DELETE_TTL: "30d", keys.WARN_BEFORE: "1h"}),
    )
    own = {
        keys.DELETE_AT: FUTURE,
        keys.MAINTENANCE_WINDOW: "Sat-Sun 00:00-24:00 UTC",
        keys.WARN_BEFORE: "15m",
        keys.OBSERVED: "2099-01-01T00:00:00Z;v1-0123456789abcdef",
    }
    await kube.create(CONFIGMAPS, "previews", annotated("windowed", own))
    for target, namespace in (("configmap/windowed", "previews"), ("namespace/previews", None)):
        report = await explain_object(
            kube, target, namespace=namespace, scope=ScopeConfig(),
            settings=DecisionSettings(), now_ns=clock.now_ns(),
        )  # fmt: skip
        meanings = {line["key"]: line["meaning"] for line in report.annotations}
        assert meanings
        assert not [key for key, text in meanings.items() if "ignored" in text], meanings
    assert (
        meanings["max-delete-ttl"]
        == "delete TTLs longer than 720h0m0s are refused in this namespace"
    )


async def test_without_the_policy_crds_explain_and_status_say_nothing_of_policies(
    kube: KubeClient, clock: FakeClock
) -> None:
    await kube.create(CONFIGMAPS, "team", annotated("own", {keys.DELETE_AT: FUTURE}))
    explained = await explain_object(
        kube, "configmap/own", namespace="team", scope=SCOPE,
        settings=DecisionSettings(), now_ns=clock.now_ns(),
    )  # fmt: skip
    assert explained.policies is None
    assert explained.action == "delete"
    assert "Polic" not in render_report(explained)
    report = await collect_status(kube, scope=SCOPE, clock=clock, settings=DecisionSettings())
    assert [row.name for row in report.rows] == ["own"]
    assert report.unreadable == []
    assert not report.policies
    assert "POLICY" not in render(report.rows, "table", policies=report.policies)


async def test_policies_that_cannot_be_read_are_named_and_the_object_still_explained(
    api: FakeApiServer, kube: KubeClient, clock: FakeClock
) -> None:
    api.serve(CLUSTER_POLICIES)
    api.serve(POLICIES)
    await kube.create(CONFIGMAPS, "team", annotated("own", {keys.DELETE_AT: FUTURE}))
    api.fail(403, method="GET", path=CLUSTER_POLICIES.collection_path(), times=2)
    explained = await explain_object(
        kube, "configmap/own", namespace="team", scope=SCOPE,
        settings=DecisionSettings(), now_ns=clock.now_ns(),
    )  # fmt: skip
    assert explained.action == "delete"
    assert explained.policies is not None
    assert explained.policies.unreadable is not None
    assert explained.policies.unreadable.startswith("clusterlifecyclepolicies.lifecycle.cezary.dev")
    assert "Policies:     not read (" in render_report(explained)
    report = await collect_status(kube, scope=SCOPE, clock=clock, settings=DecisionSettings())
    assert [row.name for row in report.rows] == ["own"]
    assert any(line.startswith("lifecycle policies") for line in report.unreadable)


async def test_explain_names_a_policy_as_the_source_of_its_catch_up_and_dry_run(
    api: FakeApiServer, kube: KubeClient, clock: FakeClock
) -> None:
    api.serve(CLUSTER_POLICIES)
    api.serve(POLICIES)
    policy = {
        "apiVersion": "lifecycle.cezary.dev/v1alpha1",
        "kind": "ClusterLifecyclePolicy",
        "metadata": {"name": "sweep"},
        "spec": {
            "resources": ["configmaps"],
            "lifecycle": {"delete-after": "1h", "catch-up": "10m", "dry-run": "true"},
        },
    }
    await kube.create(CLUSTER_POLICIES, None, policy)
    await kube.create(CONFIGMAPS, "team", annotated("plain", {}))
    explained = await explain_object(
        kube, "configmap/plain", namespace="team", scope=SCOPE,
        settings=DecisionSettings(), now_ns=clock.now_ns(),
    )  # fmt: skip
    assert explained.policies is not None
    assert explained.policies.decided_by == "ClusterLifecyclePolicy/sweep"
    assert explained.catch_up.startswith("10m (policy ClusterLifecyclePolicy/sweep); ")
    assert explained.dry_run == "yes (policy ClusterLifecyclePolicy/sweep)"
    assert explained.action == "delete"
    report = await collect_status(kube, scope=SCOPE, clock=clock, settings=DecisionSettings())
    (row,) = report.rows
    assert (row.name, row.policy, row.dry_run) == ("plain", "ClusterLifecyclePolicy/sweep", True)
