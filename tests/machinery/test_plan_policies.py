"""`lifecycle-controller plan -f` with lifecycle policies among the manifests (docs/policies.md).

Each case is a set of manifests at a fixed ``--now``: which policy decides each object, what
it overlapped, and what the controller would do, read from ``-o json`` and from the table.
"""

from __future__ import annotations

import json
from typing import Any

import pytest
import yaml
from click.testing import CliRunner

from lifecycle_controller.cli import cli
from tests.integration.policy_tools import cluster_policy

NOW = "2026-11-30T12:00:00Z"
CREATED = "2026-11-30T00:00:00Z"
P = "lifecycle.cezary.dev/"


def policy(name: str, namespace: str, **spec: Any) -> dict[str, Any]:
    return {
        "apiVersion": "lifecycle.cezary.dev/v1alpha1",
        "kind": "LifecyclePolicy",
        "metadata": {"name": name, "namespace": namespace},
        "spec": spec,
    }


def configmap(
    name: str,
    namespace: str = "pr-1",
    *,
    labels: dict[str, str] | None = None,
    annotations: dict[str, str] | None = None,
    owners: list[dict[str, Any]] | None = None,
) -> dict[str, Any]:
    metadata: dict[str, Any] = {"name": name, "namespace": namespace, "creationTimestamp": CREATED}
    if labels:
        metadata["labels"] = labels
    if annotations:
        metadata["annotations"] = annotations
    if owners:
        metadata["ownerReferences"] = owners
    return {"apiVersion": "v1", "kind": "ConfigMap", "metadata": metadata}


def deployment(name: str, *, marker: str | None = None) -> dict[str, Any]:
    template: dict[str, Any] = {"metadata": {}}
    if marker:
        template["metadata"]["annotations"] = {P + "restartedAt": marker}
    return {
        "apiVersion": "apps/v1",
        "kind": "Deployment",
        "metadata": {"name": name, "namespace": "pr-1", "creationTimestamp": CREATED},
        "spec": {"template": template},
    }


def plan(docs: list[dict[str, Any]], *args: str) -> tuple[int, list[dict[str, Any]], str]:
    """Exit status, the JSON rows and the table of ``plan -f -`` over ``docs``."""
    text = yaml.safe_dump_all(docs)
    runner = CliRunner()
    as_json = runner.invoke(cli, ["plan", "-f", "-", "--now", NOW, "-o", "json", *args], input=text)
    table = runner.invoke(cli, ["plan", "-f", "-", "--now", NOW, *args], input=text)
    assert as_json.exit_code == table.exit_code, table.output
    return as_json.exit_code, json.loads(as_json.stdout), table.stdout


PREVIEWS = cluster_policy(
    "previews", resources=["configmaps"], namespaces=["pr-*"], lifecycle={"delete-after": "48h"}
)
OWNER = {"apiVersion": "v1", "kind": "Pod", "name": "p", "uid": "u", "controller": True}

NIGHTLY = cluster_policy("nightly", resources=["*.apps"], lifecycle={"restart-every": "24h"})
Expected = dict[str, tuple[str, str, str, list[str]]]

# (case, manifests, extra flags, expected rows: name -> (action, next, policy, overlapped))
CASES: list[tuple[str, list[dict[str, Any]], list[str], Expected]] = [
    (
        "a cluster policy decides an unannotated object, from its creation",
        [PREVIEWS, configmap("plain"), configmap("elsewhere", "team-a")],
        [],
        {"plain": ("delete", "2026-12-02T00:00:00Z", "ClusterLifecyclePolicy/previews", [])},
    ),
    (
        "a LifecyclePolicy beats every cluster policy, whatever its priority",
        [
            {**PREVIEWS, "spec": {**PREVIEWS["spec"], "priority": 100}},
            policy("short", "pr-1", resources=["configmaps"], lifecycle={"delete-after": "1h"}),
            configmap("plain"),
        ],
        [],
        {
            "plain": (
                "delete",
                "2026-11-30T01:00:00Z",
                "LifecyclePolicy/pr-1/short",
                ["ClusterLifecyclePolicy/previews"],
            )
        },
    ),
    (
        "among cluster policies the higher priority decides, then the name",
        [
            PREVIEWS,
            cluster_policy("a-tie", resources=["configmaps"], lifecycle={"delete-after": "2h"}),
            cluster_policy(
                "urgent", resources=["configmaps"], priority=5, lifecycle={"delete-after": "3h"}
            ),
            configmap("plain"),
        ],
        [],
        {
            "plain": (
                "delete",
                "2026-11-30T03:00:00Z",
                "ClusterLifecyclePolicy/urgent",
                ["ClusterLifecyclePolicy/a-tie", "ClusterLifecyclePolicy/previews"],
            )
        },
    ),
    (
        "an object's own action annotation wins; the policy is overlapped",
        [PREVIEWS, configmap("own", annotations={P + "delete-at": "2026-12-24T00:00:00Z"})],
        [],
        {"own": ("delete", "2026-12-24T00:00:00Z", "", ["ClusterLifecyclePolicy/previews"])},
    ),
    (
        "exempt, owned and unselected objects are left alone",
        [
            PREVIEWS,
            cluster_policy(
                "cache",
                resources=["configmaps"],
                selector={"matchLabels": {"tier": "cache"}},
                condition='object.metadata.name != "skipped"',
                lifecycle={"delete-after": "1h"},
            ),
            configmap("keep", annotations={P + "exempt": "true"}),
            configmap("owned", "team-a", labels={"tier": "cache"}, owners=[OWNER]),
            configmap("skipped", "team-a", labels={"tier": "cache"}),
            configmap("web", "team-a", labels={"tier": "web"}),
        ],
        [],
        {"keep": ("", "", "", [])},
    ),
    (
        "includeOwned takes owned objects in",
        [
            cluster_policy(
                "owned",
                resources=["configmaps"],
                includeOwned=True,
                lifecycle={"delete-at": "2026-12-01T00:00:00Z"},
            ),
            configmap("child", owners=[OWNER]),
        ],
        [],
        {"child": ("delete", "2026-12-01T00:00:00Z", "ClusterLifecyclePolicy/owned", [])},
    ),
    (
        "a restart policy counts from the latest of the template marker, the creation and "
        "when its generation was accepted (its status' scheduleSince)",
        [
            {
                **NIGHTLY,
                "status": {"observedGeneration": 0, "scheduleSince": "2026-11-29T00:00:00Z"},
            },
            deployment("api"),
            deployment("restarted", marker="2026-11-30T06:00:00Z"),
            {
                "apiVersion": "apps/v1",
                "kind": "ReplicaSet",
                "metadata": {"name": "loose", "namespace": "pr-1"},
            },
        ],
        [],
        {
            "api": ("restart", "2026-12-01T00:00:00Z", "ClusterLifecyclePolicy/nightly", []),
            "restarted": ("restart", "2026-12-01T06:00:00Z", "ClusterLifecyclePolicy/nightly", []),
        },
    ),
    (
        "a policy manifest without that status counts as accepted now",
        [NIGHTLY, deployment("api")],
        [],
        {"api": ("restart", "2026-12-01T12:00:00Z", "ClusterLifecyclePolicy/nightly", [])},
    ),
    (
        "objects outside the controller's namespaces are never judged",
        [PREVIEWS, configmap("plain"), configmap("other", "pr-2")],
        ["--watch-namespace", "pr-1"],
        {"plain": ("delete", "2026-12-02T00:00:00Z", "ClusterLifecyclePolicy/previews", [])},
    ),
]


@pytest.mark.parametrize(
    ("manifests", "args", "expected"), [c[1:] for c in CASES], ids=[c[0] for c in CASES]
)
def test_which_policy_decides_each_object(
    manifests: list[dict[str, Any]], args: list[str], expected: Expected
) -> None:
    status, rows, _ = plan(manifests, *args)
    assert status == 0
    got = {r["name"]: (r["action"], r["next"], r["policy"], r["overlapped"]) for r in rows}
    assert got == expected


def test_the_table_names_the_policy_and_what_it_overlapped() -> None:
    _, rows, table = plan(
        [
            PREVIEWS,
            policy("short", "pr-1", resources=["configmaps"], lifecycle={"delete-after": "1h"}),
            configmap("plain"),
            configmap("keep", annotations={P + "exempt": "true"}),
        ]
    )
    header, *lines = table.splitlines()
    assert header.split() == [
        "KIND", "NAMESPACE", "NAME", "ACTION", "NEXT", "(UTC)", "POLICY", "DETAIL",
    ]  # fmt: skip
    (plain,) = [line for line in lines if " plain " in line]
    assert plain.split()[5] == "LifecyclePolicy/pr-1/short"
    assert "(based on LifecyclePolicy/pr-1/short: delete-after 1h)" in plain
    assert plain.endswith("; overlapped: ClusterLifecyclePolicy/previews")
    (keep,) = [line for line in lines if " keep " in line]
    assert keep.split()[5] == "-"
    assert keep.endswith("left alone by policies (exempt)")
    by_name = {r["name"]: r for r in rows}
    assert by_name["keep"]["exempt"] is True
    assert by_name["plain"]["based_on"] == "based on LifecyclePolicy/pr-1/short: delete-after 1h"


def test_without_policies_the_table_has_no_policy_column() -> None:
    _, _, table = plan([configmap("own", annotations={P + "delete-after": "1h"})])
    assert "POLICY" not in table.splitlines()[0]


def test_modifiers_namespace_caps_and_dry_run_apply_to_a_policy() -> None:
    namespace = {
        "apiVersion": "v1",
        "kind": "Namespace",
        "metadata": {"name": "pr-1", "annotations": {P + "max-delete-ttl": "24h"}},
    }
    status, rows, _ = plan(
        [
            PREVIEWS,
            namespace,
            configmap("capped"),
            configmap("dry", "pr-2", annotations={P + "dry-run": "true"}),
        ]
    )
    assert status == 1  # a policy deletion over the namespace's cap is a problem too
    by_name = {r["name"]: r for r in rows}
    assert by_name["capped"]["policy"] == "ClusterLifecyclePolicy/previews"
    assert by_name["capped"]["problems"][0].startswith("DeleteTTLExceeded: ")
    assert by_name["dry"]["dry_run"] is True
    assert by_name["dry"]["policy"] == "ClusterLifecyclePolicy/previews"


def test_an_invalid_policy_is_a_problem_with_its_exact_problems() -> None:
    broken = cluster_policy(
        "broken",
        resources=["configmaps"],
        lifecycle={"delete-after": "2x", "restart-every": "1h"},
    )
    wrong_version = {**PREVIEWS, "apiVersion": "lifecycle.cezary.dev/v1"}
    status, rows, table = plan([broken, wrong_version, configmap("plain")])
    assert status == 1
    by_name = {r["name"]: r for r in rows}
    assert by_name["broken"]["kind"] == "ClusterLifecyclePolicy"
    assert by_name["broken"]["problems"] == [
        'InvalidLifecyclePolicy: spec.lifecycle.delete-after: invalid duration format: "2x"',
        "InvalidLifecyclePolicy: spec.lifecycle: sets delete-after and restart-every; "
        "a policy sets exactly one action",
    ]
    assert by_name["previews"]["problems"] == [
        "InvalidLifecyclePolicy: apiVersion: lifecycle.cezary.dev/v1 is not served; "
        "use lifecycle.cezary.dev/v1alpha1"
    ]
    assert "plain" not in by_name  # an invalid policy acts on nothing
    assert "InvalidLifecyclePolicy: spec.lifecycle.delete-after" in table


def test_a_held_object_says_its_hold_once() -> None:
    """The hold is the decision's own text (the summary) and a policy word: DETAIL says it
    once."""
    failing = policy(
        "by-team",
        "pr-1",
        resources=["configmaps"],
        condition='object.metadata.labels.team == "x"',  # no labels: an error, which holds
        lifecycle={"delete-after": "1h"},
    )
    _, rows, table = plan([failing, configmap("unlabelled")])
    (row,) = rows
    hold = "held: the condition of LifecyclePolicy/pr-1/by-team could not be evaluated"
    assert row["held"].startswith(hold)
    (line,) = [line for line in table.splitlines() if " unlabelled " in line]
    assert line.count(hold) == 1, line


def test_a_spent_delete_at_policy_leaves_newer_objects_to_the_next_one() -> None:
    """The sprint's delete-at passed before the object was created: it is no contender for
    it, so the cluster policy decides, and the table says who left it alone and why."""
    sprint = policy(
        "sprint", "pr-1", resources=["configmaps"], lifecycle={"delete-at": "2026-11-29T00:00:00Z"}
    )
    why = f"created {CREATED}, at or after its delete-at 2026-11-29T00:00:00Z"
    _, rows, table = plan([sprint, PREVIEWS, configmap("new"), configmap("alone", "other")])
    by_name = {r["name"]: r for r in rows}
    new = by_name["new"]
    assert (new["action"], new["next"]) == ("delete", "2026-12-02T00:00:00Z")
    assert (new["policy"], new["overlapped"]) == ("ClusterLifecyclePolicy/previews", [])
    assert new["left_alone"] == [{"policy": "LifecyclePolicy/pr-1/sprint", "why": why}]
    (line,) = [line for line in table.splitlines() if " new " in line]
    assert line.endswith(f"; left alone by LifecyclePolicy/pr-1/sprint: {why}")
    assert "alone" not in by_name  # another namespace: the LifecyclePolicy never matches it


def test_an_object_only_spent_policies_match_is_shown_left_alone() -> None:
    sprint = policy(
        "sprint", "pr-1", resources=["configmaps"], lifecycle={"delete-at": "2026-11-29T00:00:00Z"}
    )
    _, rows, table = plan([sprint, configmap("new")])
    (row,) = rows
    assert (row["action"], row["policy"], row["overlapped"]) == ("", "", [])
    (line,) = [line for line in table.splitlines() if " new " in line]
    assert line.split()[5] == "-"
    assert "; left alone by LifecyclePolicy/pr-1/sprint: created" in line
