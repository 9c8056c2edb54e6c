"""What ``plan -f`` and ``explain`` say of an enforced policy against its Namespace, and of
an exempt Namespace (docs/policies.md#safety-rules), from the Namespace manifests among
``plan``'s input."""

from __future__ import annotations

from typing import Any

import pytest

from lifecycle_controller.config.build import build_settings
from lifecycle_controller.core.objects import keys
from lifecycle_controller.tools.explain_policies import PolicyReport, policy_lines, why_no_policy
from lifecycle_controller.tools.options import controller_view
from lifecycle_controller.tools.plan import plan_report
from lifecycle_controller.tools.policies import Totals, totals_line
from lifecycle_controller.tools.report import Row, render

NOW_NS = 1_800_000_000 * 10**9
CREATED = "2020-01-01T00:00:00Z"  # long overdue under every policy here


def namespace(name: str, **annotations: str) -> dict[str, Any]:
    return {
        "apiVersion": "v1",
        "kind": "Namespace",
        "metadata": {"name": name, "annotations": annotations},
    }


def configmap(name: str, where: str) -> dict[str, Any]:
    return {
        "apiVersion": "v1",
        "kind": "ConfigMap",
        "metadata": {"name": name, "namespace": where, "creationTimestamp": CREATED},
    }


def policy(name: str, *, enforce: bool, names: list[str]) -> dict[str, Any]:
    return {
        "apiVersion": "lifecycle.cezary.dev/v1alpha1",
        "kind": "ClusterLifecyclePolicy",
        "metadata": {"name": name},
        "spec": {
            "resources": ["configmaps"],
            "names": names,
            "enforce": enforce,
            "lifecycle": {"delete-after": "1h"},
        },
    }


def plan(*manifests: dict[str, Any]) -> dict[str, Row]:
    view = controller_view(build_settings({"watch_resource": ("configmaps",)}))
    report = plan_report(list(manifests), now_ns=NOW_NS, controller=view)
    return {row.name: row for row in report.rows if row.kind == "ConfigMap"}


@pytest.mark.parametrize(
    ("default", "value", "plain_summary"),
    [
        (keys.CATCH_UP, "never", "skipping delete"),
        (keys.MAX_DELETE_TTL, "30m", "DeleteTTLExceeded"),
        (keys.CATCH_UP, "sometimes", "blocked"),
    ],
)
def test_plan_says_what_the_enforced_policy_overrides(
    default: str, value: str, plain_summary: str
) -> None:
    rows = plan(
        namespace("team-a", **{default: value}),
        policy("deadline", enforce=True, names=["enf"]),
        policy("plain", enforce=False, names=["plain"]),
        configmap("enf", "team-a"),
        configmap("plain", "team-a"),
    )
    enforced, plain = rows["enf"], rows["plain"]
    assert enforced.summary == "delete now"
    short = default.removeprefix(keys.PREFIX)
    said = f"{value!r}" if value == "sometimes" else value
    invalid = "invalid " if value == "sometimes" else ""
    assert enforced.overrides == [f"enforced: overrides namespace team-a's {invalid}{short} {said}"]
    table = render([enforced], "table", policies=True)
    assert f"enforced: overrides namespace team-a's {invalid}{short}" in table
    assert plain.overrides == []
    assert plain.action != "delete" or plain.summary != "delete now"
    assert plain_summary in " ".join([plain.summary, *plain.problems])


def test_plan_says_an_exempt_namespace_left_its_objects_alone() -> None:
    rows = plan(
        namespace("team-a", **{keys.EXEMPT: "true"}),
        policy("deadline", enforce=True, names=["enf"]),
        policy("plain", enforce=False, names=["plain", "enf"]),
        configmap("enf", "team-a"),
        configmap("plain", "team-a"),
    )
    plain = rows["plain"]
    assert (plain.policy, plain.exempt, plain.exempt_namespace) == ("", True, "team-a")
    assert "left alone: namespace team-a is exempt" in render([plain], "table", policies=True)
    enforced = rows["enf"]
    assert enforced.policy == "ClusterLifecyclePolicy/deadline"
    assert enforced.summary == "delete now"
    detail = render([enforced], "table", policies=True)
    assert "enforced: acts although namespace team-a is exempt" in detail
    assert "left alone" not in detail


def test_explain_says_an_exempt_namespace_left_it_alone() -> None:
    base: dict[str, Any] = {
        "decided_by": None,
        "based_on": None,
        "overlapped": [],
        "own_action": False,
        "exempt": True,
    }
    report = PolicyReport(**base, exempt_namespace="team-a")
    assert policy_lines(report)[0].endswith("left alone: namespace team-a is exempt")
    assert "namespace team-a is exempt" in why_no_policy(report)
    own = PolicyReport(**base)
    assert policy_lines(own)[0].endswith("none: it is exempt (lifecycle.cezary.dev/exempt)")


def test_try_counts_the_objects_of_exempt_namespaces() -> None:
    line = totals_line("ClusterLifecyclePolicy/plain", Totals(exempt=1, exempt_namespace=2))
    assert line.endswith("left alone: 1 exempt, 2 in an exempt namespace")
